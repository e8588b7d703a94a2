// One turn's timeline, from the end of the user's speech to the first sound of the reply.
// Times are performance.now() milliseconds; the figures are measured from `speechEnd`, which
// is when the user actually stopped talking (the VAD reports it a little later, once enough
// silence has followed: that wait is the `vad` stage).

export type Stage = 'vad' | 'transcript' | 'first_token' | 'first_audio';
export const STAGES: Stage[] = ['vad', 'transcript', 'first_token', 'first_audio'];

export const STAGE_LABEL: Record<Stage, string> = {
  vad: 'end of speech detected',
  transcript: 'transcript',
  first_token: 'first reply token',
  first_audio: 'first audio',
};

export class TurnTimeline {
  /** When the user stopped talking. */
  readonly speechEnd: number;
  private readonly marks = new Map<Stage, number>();

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
}
