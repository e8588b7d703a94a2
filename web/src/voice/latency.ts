// One turn's timeline, from the end of the user's speech to the first sound of the reply.
// Times are performance.now() milliseconds; the figures are measured from `speechEnd`, which
// is when the user actually stopped talking (the VAD reports it a little later, once enough
// silence has followed: that wait is the `vad` stage).
//
// Two views of the same turn: the milestones (`Stage`: each reached once, in this order, the
// user-felt chain) and the work (`Span`: what ran from when to when, overlapped where the data
// allowed it: the chat model's prefill runs while the user is still speaking, the voice starts
// on the first clause while the model writes the rest).

export type Stage = 'vad' | 'transcript' | 'first_token' | 'first_audio';
export const STAGES: Stage[] = ['vad', 'transcript', 'first_token', 'first_audio'];

export const STAGE_LABEL: Record<Stage, string> = {
  vad: 'end of speech detected',
  transcript: 'transcript',
  first_token: 'first reply token',
  first_audio: 'first audio',
};

/** The work of a turn, in the order it starts. */
export type Span = 'speech' | 'prefill' | 'vad' | 'transcript' | 'first_token' | 'first_clause' | 'voice' | 'reply';
export const SPANS: Span[] = ['speech', 'prefill', 'vad', 'transcript', 'first_token', 'first_clause', 'voice', 'reply'];

export const SPAN_LABEL: Record<Span, string> = {
  speech: 'you speak',
  prefill: 'chat model reads the conversation so far',
  vad: 'silence until end of speech is decided',
  transcript: 'speech recognition',
  first_token: 'chat model reads your question, first token',
  first_clause: 'first clause written',
  voice: 'voice makes the first clause, playback starts',
  reply: 'chat model writes the rest',
};

/** [start, end] in ms since the end of speech (negative: before it); end null while running. */
export type SpanMs = [number, number | null];

export class TurnTimeline {
  /** When the user stopped talking. */
  readonly speechEnd: number;
  private readonly marks = new Map<Stage, number>();
  private readonly spans = new Map<Span, [number, number | null]>();

  constructor(speechEnd: number) {
    this.speechEnd = speechEnd;
  }

  /** Record a stage once (later calls keep the first time). */
  mark(stage: Stage, at = performance.now()): void {
    if (!this.marks.has(stage)) this.marks.set(stage, at);
  }

  has(stage: Stage): boolean {
    return this.marks.has(stage);
  }

  /** When ``stage`` was reached (performance.now() ms), if it was. */
  at(stage: Stage): number | undefined {
    return this.marks.get(stage);
  }

  /** A span began (once: later calls keep the first start). */
  begin(span: Span, at = performance.now()): void {
    if (!this.spans.has(span)) this.spans.set(span, [at, null]);
  }

  /** A span ended (the first end counts); one never begun begins at ``at`` too. */
  end(span: Span, at = performance.now()): void {
    const s = this.spans.get(span);
    if (!s) this.spans.set(span, [at, at]);
    else if (s[1] === null) s[1] = at;
  }

  /** A whole span known from elsewhere (the prefill, started before this timeline was). */
  span(span: Span, start: number, end: number | null): void {
    this.spans.set(span, [start, end]);
  }

  /** Milliseconds from the end of speech to each stage reached so far (cumulative). */
  sinceSpeechEnd(): Partial<Record<Stage, number>> {
    const out: Partial<Record<Stage, number>> = {};
    for (const stage of STAGES) {
      const at = this.marks.get(stage);
      if (at !== undefined) out[stage] = Math.max(0, Math.round(at - this.speechEnd));
    }
    return out;
  }

  /** Milliseconds each stage took after the one before it. */
  perStage(): Partial<Record<Stage, number>> {
    const out: Partial<Record<Stage, number>> = {};
    let previous = this.speechEnd;
    for (const stage of STAGES) {
      const at = this.marks.get(stage);
      if (at === undefined) break;
      out[stage] = Math.max(0, Math.round(at - previous));
      previous = at;
    }
    return out;
  }

  /** Each span's [start, end] in ms since the end of speech, in SPANS order. */
  spansMs(): Partial<Record<Span, SpanMs>> {
    const out: Partial<Record<Span, SpanMs>> = {};
    for (const span of SPANS) {
      const s = this.spans.get(span);
      if (s) out[span] = [Math.round(s[0] - this.speechEnd), s[1] === null ? null : Math.round(s[1] - this.speechEnd)];
    }
    return out;
  }
}
