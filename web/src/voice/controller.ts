// The voice chat's behaviour: load the four models, open the microphone, and run turns:
// speech -> transcript -> streamed reply -> sentences spoken while the rest is written.
// Speech during a reply interrupts it (barge-in). The UI pieces only render.

import type { ChatMessage } from '../protocol';
import type { ErrorBanner } from '../ui/error-banner';
import { describeError } from '../ui/format';
import { CAPTURE_RATE } from '../audio/capture-protocol';
import { Microphone, MicError } from '../audio/mic';
import { checkMicrophone } from '../audio/mic-check';
import { promptFor, type Conversation, type ReplyView } from './conversation';
import type { VoiceControls } from './controls';
import { TurnTimeline } from './latency';
import { LatencyView } from './latency-view';
import type { LevelMeter } from './level-meter';
import { ModelLoadError, type ModelSet } from './models';
import { ReplyPlayer } from './playback';
import { SentenceSplitter } from './sentences';
import { SpeechQueue } from './speech-queue';
import type { TurnRecord, VoiceState } from './state';
import type { StatusLine } from './status';
import { INTERRUPTIBLE, TurnMachine } from './turn';
import { Lane } from './lane';
import { Recognizer, type EarlyTranscript } from './recognizer';
import { LISTEN_CONTROLS, VadLink, type SpeechEnd, type SpeechStart } from './vad-link';
import { VoiceChoice } from './voice-choice';
import {
  CONFIRM_SLACK_MS, CONTINUE_MS, FIRST_CLAUSE_MIN_CHARS, FIRST_PIECE_MAX_CHARS, MIN_SPEECH_MS, MIN_SPEECH_S, REPLY_PARAMS,
} from './tuning';

export interface VoiceView {
  root: HTMLElement;
  controls: VoiceControls;
  models: ModelSet;
  meter: LevelMeter;
  conversation: Conversation;
  latency: LatencyView;
  status: StatusLine;
  error: ErrorBanner;
}

export class VoiceController {
  private readonly mic = new Microphone();
  private readonly player = new ReplyPlayer();
  private readonly turnMachine = new TurnMachine();
  private readonly vad: VadLink;
  private readonly speech: SpeechQueue;
  private readonly recognizer: Recognizer;
  private readonly llmLane = new Lane();
  private readonly voice: VoiceChoice;
  // no system prompt: SmolLM2's own (from its chat template) gave the most direct answers
  private messages: ChatMessage[] = [];
  /** The turn being answered: its record and view, until it is done or interrupted. */
  private current: { turn: number; record: TurnRecord; timeline: TurnTimeline; view: ReplyView | null; heard: HTMLElement | null } | null = null;
  /** Speech heard over the assistant's turn, too short yet to count (MIN_SPEECH_MS): the reply
   * is held meanwhile; ``heldMs``: from the speech's start to the hold, if something was heard. */
  private tentative: { startedAt: number; heldMs: number | null; timer: ReturnType<typeof setTimeout> } | null = null;
  /** When the speech being heard began (performance.now() ms). */
  private speechStartAt = 0;
  /** The last utterance handed to a turn: where it began in the stream (s), when it ended
   * (performance.now() ms), how many VAD cuts it joined, and its turn. */
  private utterance: { startS: number; endedAt: number; joined: number; turn: number } | null = null;
  /** Set when speech resumed soon enough to continue ``utterance`` (see CONTINUE_MS). */
  private joining: { startS: number; joined: number } | null = null;
  /** The chat model's prefill of the conversation so far, started as the user began speaking. */
  private prefilling: { turn: number; start: number; end: number | null; error: string | null } | null = null;
  /** Turns dropped because their utterance went on: their question is not history. */
  private readonly dropped = new Set<number>();
  /** Aborts the transcription running (its utterance went on). */
  private transcribing: AbortController | null = null;
  /** The turn whose reply the chat model is writing (null: none). */
  private generatingTurn: number | null = null;
  private pttFrom: Promise<number> | null = null;
  /** Aborts the reply being written (barge-in, Stop). */
  private writing: AbortController | null = null;

  constructor(readonly state: VoiceState, private readonly view: VoiceView) {
    const { slots } = view.models;
    const { engine } = view.models;
    this.vad = new VadLink(engine, () => slots.vad.model);
    this.recognizer = new Recognizer(engine, () => slots.asr.model);
    this.speech = new SpeechQueue(engine, () => slots.voice.model, this.player);
    this.voice = new VoiceChoice(view.controls, view.models);
    this.mic.onLevel = (rms) => view.meter.update(rms);
    this.mic.onLost = (error) => {
      this.fail('microphone', error, error.advice('press Start'));
      void this.stop();
    };
    this.turnMachine.onChange = (phase) => {
      this.state.phase = phase;
      view.root.dataset.phase = phase;
      view.status.set(phase);
      this.showPrompt();
    };
    this.player.onChange = (playing) => {
      this.state.playing = playing;
      view.root.dataset.playing = String(playing);
      if (!playing) this.maybeFinishTurn();
    };
    this.speech.onFirstAudio = (at) => {
      const current = this.current;
      if (!current || !this.turnMachine.live(current.turn)) return;
      current.timeline.mark('first_audio', at);
      current.timeline.end('voice', at);
      this.showLatency();
      this.turnMachine.to('speaking');
    };
    this.speech.onSentence = (sentence) => this.current?.record.sentences.push(sentence.text);
    this.speech.onError = (error) => this.fail('speak', error);
  }

  /** Start: check the microphone, load what is missing, open the microphone, listen. Called
   * from the click. */
  async start(): Promise<void> {
    if (this.state.running || this.state.loading) return;
    this.player.prepare(); // inside the click: browsers only let a gesture start audio
    this.view.error.clear();
    this.state.lastError = null;
    this.setLoading(true);
    try {
      const voice = this.voice.picked;
      if (!voice) throw new Error('no voice bundle to load');
      // nothing is downloaded (hundreds of MB) for a page that cannot hear
      this.view.status.say('Checking the microphone…');
      const problem = await checkMicrophone();
      if (problem) throw problem;
      this.view.status.say('Loading the models…');
      await this.view.models.loadAll(voice.url);
      this.voice.loadedAs(voice);
      this.voice.sync();
      await this.mic.start();
      this.state.micRate = this.mic.deviceRate;
      await this.vad.start(this.mic, {
        speechStart: (start) => this.onSpeechStart(start),
        speechPaused: (pause) => this.onSpeechPaused(pause),
        speechEnd: (end) => this.onSpeechEnd(end),
        failed: (error) => {
          // the VAD's worker stopped listening: the page would be deaf, so it stops
          this.fail('listen', error);
          void this.stop();
        },
      });
      this.state.running = true;
      this.turnMachine.to('listening');
    } catch (error) {
      this.mic.stop();
      if (error instanceof MicError) this.fail('microphone', error, error.advice('press Start'));
      else if (error instanceof ModelLoadError) this.fail('load', error, error.shown);
      else this.fail('start', error);
      this.view.status.say(`Not started: ${notStartedBecause(error)}.`);
    } finally {
      this.setLoading(false);
    }
  }

  /** Close the microphone and stop whatever is running. */
  async stop(): Promise<void> {
    if (!this.state.running) return;
    this.clearTentative();
    this.recognizer.dropEarly();
    await this.interrupt('interrupted');
    this.player.release();
    this.vad.stop();
    this.mic.stop();
    this.view.meter.reset();
    this.state.running = false;
    this.turnMachine.to('off');
    this.setLoading(false);
  }

  /** Resolves once the recogniser and the chat model have ended what they were given: after
   * Stop, a stopped turn's transcription or reply still ends in its worker (tests wait on it). */
  async settled(): Promise<void> {
    await Promise.all([this.recognizer.idle(), this.llmLane.idle()]);
  }

  /** Push to talk: the button went down. */
  talkDown(): void {
    if (!this.state.running || this.view.controls.mode !== 'push-to-talk') return;
    void this.interrupt('interrupted');
    if (!this.turnMachine.to('hearing')) return;
    this.pttFrom = this.vad.mark();
    this.speechStartAt = performance.now();
    this.prefill();
  }

  /** Push to talk: the button came up; what was said in between is the utterance. */
  async talkUp(): Promise<void> {
    const from = this.pttFrom;
    this.pttFrom = null;
    if (!from || this.turnMachine.phase !== 'hearing') return;
    const speechEnd = performance.now();
    try {
      const samples = await this.vad.take(await from);
      const timeline = new TurnTimeline(speechEnd);
      timeline.mark('vad', speechEnd); // the button said so: nothing to wait for
      timeline.span('vad', speechEnd, speechEnd);
      timeline.span('speech', this.speechStartAt, speechEnd);
      await this.runTurn(samples, timeline);
    } catch (error) {
      this.fail('listen', error);
    }
  }

  /** Hands-free or push to talk was picked: the empty conversation says how to ask. */
  modeChanged(): void {
    this.showPrompt();
  }

  /** The voice picker changed: the next Start (or now, if running) loads that voice. */
  async voiceChanged(): Promise<void> {
    const bundle = this.voice.picked;
    if (bundle && this.voice.changed && this.state.running) {
      await this.interrupt('interrupted');
      try {
        await this.speech.drained();
        await this.view.models.slots.voice.load(bundle.url);
        this.voice.loadedAs(bundle);
      } catch (error) {
        this.fail('load', error);
      }
    }
    this.voice.sync();
  }

  // ---- VAD events (hands-free)

  private onSpeechStart(start: SpeechStart): void {
    if (this.view.controls.mode !== 'hands-free') return;
    const startedAt = performance.now() - start.lagMs;
    if (!INTERRUPTIBLE.has(this.turnMachine.phase)) {
      this.speechBegan(startedAt, null);
      return;
    }
    // over the assistant's turn the VAD reports speech after LISTEN_CONTROLS.min_speech_ms:
    // the reply is held (paused where it is) at once, and it is taken for speech, ending the
    // turn, only once it has lasted MIN_SPEECH_MS; shorter (a cough, a click, the reply's own
    // echo), the reply goes on from where it was held
    const heard = this.view.controls.bargeInEnabled && this.player.hold();
    const heldMs = heard ? Math.round(performance.now() - startedAt) : null;
    this.clearTentative();
    const wait = MIN_SPEECH_MS - LISTEN_CONTROLS.min_speech_ms + LISTEN_CONTROLS.min_silence_ms + CONFIRM_SLACK_MS;
    const tentative = {
      startedAt, heldMs,
      timer: setTimeout(() => {
        if (this.tentative !== tentative) return;
        this.tentative = null;
        this.speechBegan(startedAt, heldMs); // no end came: it lasted
      }, wait),
    };
    this.tentative = tentative;
  }

  private clearTentative(): void {
    if (this.tentative) clearTimeout(this.tentative.timer);
    this.tentative = null;
  }

  /** Speech that began at ``startedAt`` lasted (or came outside the assistant's turn): it
   * continues the question, interrupts the reply (barge-in) or starts a new question. */
  private speechBegan(startedAt: number, heldMs: number | null): void {
    const phase = this.turnMachine.phase;
    const last = this.utterance;
    const current = this.current;
    // speech that began before any of the reply was heard cannot be a reaction to it
    const firstAudio = current?.timeline.at('first_audio');
    if (last && current && last.turn === current.turn && INTERRUPTIBLE.has(phase)
        && startedAt - last.endedAt <= CONTINUE_MS && (firstAudio === undefined || startedAt <= firstAudio)) {
      // a pause, not the end: the question goes on, and is answered whole
      this.dropTurn();
      this.player.release();
      this.joining = { startS: last.startS, joined: last.joined + 1 };
      if (this.turnMachine.to('hearing') && this.prefilling?.turn === current.turn) this.prefilling.turn = this.turnMachine.turn;
      return;
    }
    if (INTERRUPTIBLE.has(phase)) {
      if (!this.view.controls.bargeInEnabled) {
        this.player.release(); // barge-in was switched off meanwhile: nothing interrupts
        return;
      }
      const heard = heldMs !== null || this.player.playing;
      void this.interrupt('interrupted'); // playback stops before this returns
      // the reply was silent from the hold on: that is when the user heard it stop
      if (current && heard) current.record.bargeInMs = heldMs ?? Math.round(performance.now() - startedAt);
    }
    this.player.release(); // nothing is left of a stopped reply; the next one plays
    this.joining = null;
    if (this.turnMachine.to('hearing')) {
      this.speechStartAt = startedAt;
      this.prefill();
    }
  }

  /** The speech has been silent for LISTEN_PAUSE_MS: transcribe what its end will carry now,
   * while the hangover runs on. Not over the assistant's turn nor for a question joined after a
   * pause (its end is transcribed from where its first part began). */
  private onSpeechPaused(pause: SpeechEnd): void {
    if (this.view.controls.mode !== 'hands-free' || this.turnMachine.phase !== 'hearing') return;
    if (this.tentative || this.joining || pause.speechMs < MIN_SPEECH_MS) {
      this.recognizer.dropEarly(); // the speech went on after the last pause: what was begun then is stale
      return;
    }
    this.recognizer.startEarly(pause);
  }

  private onSpeechEnd(end: SpeechEnd): void {
    if (this.view.controls.mode !== 'hands-free') return;
    const tentative = this.tentative;
    if (tentative) {
      this.clearTentative();
      if (end.speechMs < MIN_SPEECH_MS) {
        this.player.release(); // a cough: the reply goes on where it was held
        this.state.heldNoises++;
        return;
      }
      this.speechBegan(tentative.startedAt, tentative.heldMs);
    }
    if (this.turnMachine.phase !== 'hearing') return;
    if (end.speechMs < MIN_SPEECH_MS && !this.joining) {
      this.turnMachine.to('listening'); // too short to be a question (a cough, a click)
      return;
    }
    // the VAD decides after some silence: the user stopped talking `lagMs` before this event
    const speechEnd = performance.now() - end.lagMs;
    const timeline = new TurnTimeline(speechEnd);
    const decided = performance.now();
    timeline.mark('vad', decided);
    timeline.span('vad', speechEnd, decided);
    timeline.span('speech', this.speechStartAt, speechEnd);
    const joining = this.joining;
    this.joining = null;
    const startS = joining?.startS ?? end.start;
    const joined = joining?.joined ?? 0;
    this.utterance = { startS, endedAt: speechEnd, joined, turn: this.turnMachine.turn };
    const early = this.recognizer.takeEarly(end);
    if (!joining) {
      void this.runTurn(end.samples, timeline, joined, early);
      return;
    }
    // the utterance from where its first part began (the worker keeps the recent audio)
    void this.vad.between(startS, end.end).then(
      (samples) => this.runTurn(samples, timeline, joined),
      (error: unknown) => this.fail('listen', error));
  }

  /** While the user speaks, the chat model reads the conversation so far (its system prompt,
   * the earlier turns, the opening of the user's turn) into its state: the engine keeps the
   * state between calls and runs only what the next call's prompt adds, so after the
   * transcript only the question itself is left to read. */
  private prefill(): void {
    const llm = this.view.models.slots.llm.model;
    if (!llm) return;
    const p = { turn: this.turnMachine.turn, start: performance.now(), end: null as number | null, error: null as string | null };
    this.prefilling = p;
    void this.llmLane.run(async () => {
      if (this.prefilling !== p) return; // a newer utterance has its own
      p.start = performance.now();
      // the history is read when the worker is free, as the reply's call reads it
      await this.view.models.engine.chat.completions.create({
        model: llm, messages: [...this.messages, { role: 'user', content: '' }], max_completion_tokens: 1, temperature: 0,
      });
      p.end = performance.now();
    }).catch((error: unknown) => {
      // only time is lost: the reply's own call reads everything and reports its own errors
      p.error = error instanceof Error ? error.message : String(error);
    });
  }

  /** The turn begun on an utterance that turned out to go on: stop its work, take its
   * transcript and reply off the page, keep nothing of it in the history. */
  private dropTurn(): void {
    const current = this.current;
    if (!current) return;
    this.current = null;
    this.dropped.add(current.turn);
    this.transcribing?.abort();
    if (this.generatingTurn !== null) this.writing?.abort();
    void this.speech.cancel();
    current.heard?.remove();
    current.view?.root.remove();
    this.state.joinedPauses++;
  }

  // ---- one turn

  private async runTurn(samples: Float32Array, timeline: TurnTimeline, joined = 0, early: EarlyTranscript | null = null): Promise<void> {
    const turn = this.turnMachine.turn;
    const record: TurnRecord = {
      mode: this.view.controls.mode, transcript: '', reply: '', replyAudioSeconds: 0, madeAudioSeconds: 0, replyGapSeconds: 0, sentences: [],
      latencyMs: {}, stageMs: {}, spansMs: {}, finish: 'done', speechSeconds: samples.length / CAPTURE_RATE, replyDoneMs: null,
      voice: { bundle: this.view.models.info('voice')?.bundle ?? null, controls: {} },
      joined, earlyTranscript: early !== null, bargeInMs: null, promptTokens: null, cachedTokens: null, prefillError: null,
    };
    if (record.speechSeconds < MIN_SPEECH_S) {
      early?.abort.abort();
      this.turnMachine.to('listening');
      return;
    }
    if (!this.turnMachine.to('transcribing')) return;
    this.current = { turn, record, timeline, view: null, heard: null };
    const current = this.current;
    const { engine, slots } = this.view.models;
    let text: string;
    const transcribing = early?.abort ?? new AbortController();
    this.transcribing = transcribing;
    try {
      if (early) {
        // begun at the pause: its span starts there, before the end was decided
        early.timeline = timeline;
        if (early.began !== null) timeline.begin('transcript', early.began);
        text = await early.text;
      } else {
        text = await this.recognizer.transcribe(samples, transcribing.signal, (at) => timeline.begin('transcript', at));
      }
    } catch (error) {
      return this.endTurn(turn, 'failed', error);
    } finally {
      if (this.transcribing === transcribing) this.transcribing = null;
    }
    if (!this.turnMachine.live(turn)) return;
    const transcribed = performance.now();
    timeline.mark('transcript', transcribed);
    timeline.end('transcript', transcribed);
    record.transcript = text;
    this.showLatency();
    if (!/[\p{L}\p{N}]/u.test(text)) return this.endTurn(turn, 'empty');
    current.heard = this.view.conversation.heard(text);
    const reply = this.view.conversation.reply();
    current.view = reply;
    this.turnMachine.to('thinking');
    this.speech.controls = record.voice.controls = this.voice.requestControls();
    this.speech.begin();
    // a long first sentence is spoken from its first clause break, or a word past
    // FIRST_PIECE_MAX_CHARS without one: the first sound comes sooner
    const splitter = new SentenceSplitter({
      firstMaxChars: FIRST_PIECE_MAX_CHARS, firstClauseMinChars: FIRST_CLAUSE_MIN_CHARS, firstWordCutChars: FIRST_PIECE_MAX_CHARS,
    });
    const speak = (sentence: string) => {
      if (!timeline.has('first_audio')) {
        const at = performance.now();
        timeline.end('first_clause', at);
        timeline.begin('voice', at);
      }
      this.speech.add(sentence);
    };
    this.setGenerating(turn);
    const abort = new AbortController();
    this.writing = abort;
    let written = '';
    try {
      // the history is read when the worker is free: an interrupted turn has added its pair by then
      await this.llmLane.run(async () => {
        const llm = slots.llm.model;
        if (!llm) throw new Error('the chat model is not loaded');
        let ended = false;
        timeline.begin('first_token');
        try {
          const stream = await engine.chat.completions.create({
            ...REPLY_PARAMS, model: llm, stream: true, stream_options: { include_usage: true },
            messages: [...this.messages, { role: 'user', content: text }],
          }, { signal: abort.signal });
          for await (const chunk of stream) {
            if (chunk.usage) {
              record.promptTokens = chunk.usage.prompt_tokens;
              record.cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
            }
            const token = chunk.choices[0]?.delta.content;
            if (!token) continue;
            written += token;
            if (!this.turnMachine.live(turn)) continue;
            if (!timeline.has('first_token')) {
              const at = performance.now();
              timeline.mark('first_token', at);
              timeline.end('first_token', at);
              timeline.begin('first_clause', at);
              timeline.begin('reply', at);
              this.showLatency();
            }
            record.reply += token;
            reply.append(token);
            for (const sentence of splitter.push(token)) speak(sentence);
          }
          ended = true;
        } finally {
          // what was written (cut short by a barge-in, maybe) is what the next turn must carry;
          // not a question that went on after a pause (its whole is the next turn's)
          if ((ended || abort.signal.aborted) && !this.dropped.has(turn)) {
            this.messages.push({ role: 'user', content: text }, { role: 'assistant', content: written });
          }
          this.dropped.delete(turn);
        }
      });
      if (!this.turnMachine.live(turn)) return;
      record.reply = written;
      record.replyDoneMs = Math.round(performance.now() - timeline.speechEnd);
      timeline.end('reply');
      for (const sentence of splitter.flush()) speak(sentence);
    } catch (error) {
      if (this.turnMachine.live(turn) && !abort.signal.aborted) this.endTurn(turn, 'failed', error);
      return;
    } finally {
      if (this.writing === abort) this.writing = null;
      if (this.generatingTurn === turn) this.setGenerating(null);
    }
    await this.speech.drained();
    if (!this.turnMachine.live(turn)) return;
    record.madeAudioSeconds = this.speech.madeSeconds;
    record.replyGapSeconds = this.player.gapSeconds;
    // nothing was ever spoken (empty reply): the turn is over now
    if (!this.player.playing) this.maybeFinishTurn();
  }

  /** A reply finishes when it was written, spoken and heard to the end. */
  private maybeFinishTurn(): void {
    const current = this.current;
    if (!current || !this.turnMachine.live(current.turn) || this.generatingTurn !== null || this.player.playing || this.player.held) return;
    if (!['thinking', 'speaking'].includes(this.turnMachine.phase)) return;
    // a sentence may still be on its way from the voice's worker
    void this.speech.drained().then(() => {
      if (this.current === current && !this.player.playing && !this.player.held && this.generatingTurn === null) this.endTurn(current.turn, 'done');
    });
  }

  /** Stop the running reply (barge-in, Stop, push-to-talk): playback, speech and writing. */
  private async interrupt(finish: TurnRecord['finish']): Promise<void> {
    const current = this.current;
    const stops: Promise<unknown>[] = [this.speech.cancel()];
    if (this.generatingTurn !== null) this.writing?.abort();
    if (current) this.endTurn(current.turn, finish);
    await Promise.all(stops);
  }

  private endTurn(turn: number, finish: TurnRecord['finish'], error?: unknown): void {
    const current = this.current;
    if (!current || current.turn !== turn) return;
    this.current = null;
    const { record, timeline, view } = current;
    record.finish = finish;
    record.replyAudioSeconds = this.player.heardSeconds();
    record.madeAudioSeconds = this.speech.madeSeconds;
    this.syncPrefill(current);
    record.latencyMs = timeline.sinceSpeechEnd();
    record.stageMs = timeline.perStage();
    record.spansMs = timeline.spansMs();
    this.state.turns.push(record);
    view?.finish(record.reply, finish === 'interrupted' ? 'interrupted' : finish === 'failed' ? 'failed' : undefined);
    view?.setLatency(LatencyView.summary(timeline));
    this.view.latency.show(timeline);
    if (error !== undefined) this.fail('turn', error);
    if (this.turnMachine.phase !== 'hearing' && this.turnMachine.phase !== 'off') this.turnMachine.to('listening');
  }

  private showLatency(): void {
    if (!this.current) return;
    this.syncPrefill(this.current);
    this.view.latency.show(this.current.timeline);
  }

  /** The prefill ran for this turn's utterance: its span on the turn's timeline. */
  private syncPrefill(current: { turn: number; timeline: TurnTimeline; record: TurnRecord }): void {
    const p = this.prefilling;
    if (!p || p.turn !== current.turn) return;
    current.timeline.span('prefill', p.start, p.end);
    current.record.prefillError = p.error;
  }

  private setGenerating(turn: number | null): void {
    this.generatingTurn = turn;
    this.state.generating = turn !== null;
  }

  private setLoading(loading: boolean): void {
    this.state.loading = loading;
    this.view.root.dataset.loading = String(loading);
    this.view.controls.setRunning(this.state.running, loading);
    this.showPrompt();
  }

  /** The empty conversation's line follows the page: what to do now to ask something. */
  private showPrompt(): void {
    const failed = this.state.lastError !== null && !this.state.running;
    this.view.conversation.prompt(promptFor(this.turnMachine.phase, this.view.controls.mode, this.state.loading, failed));
  }

  private fail(during: string, error: unknown, shown = describeError(error)): void {
    this.state.lastError = { ...shown, during };
    this.view.error.show(shown, `Voice chat (${during}) failed`);
    this.showPrompt();
  }
}

/** Why Start did not get to listening, in a few words for the status line. */
function notStartedBecause(error: unknown): string {
  if (error instanceof MicError) return error.problem;
  if (error instanceof ModelLoadError) return `a model did not load (${error.label.toLowerCase()})`;
  return 'see the message above';
}
