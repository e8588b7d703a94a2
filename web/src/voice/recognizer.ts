// The voice page's speech recogniser: utterances to text on its worker, one at a time, and the
// transcription begun at a pause that the utterance's end takes over (docs/voice.md,
// "Transcript from the pause").

import { wavBytes } from '../audio/wav';
import { CAPTURE_RATE } from '../audio/capture-protocol';
import type { Engine } from '../engine/engine';
import type { TurnTimeline } from './latency';
import { Lane } from './lane';
import type { SpeechEnd } from './vad-link';

/** A transcription begun at a pause, on the samples the utterance's end will carry if the
 * speech does not resume: that end takes it over (the same samples: the same text). */
export interface EarlyTranscript {
  start: number;
  end: number;
  abort: AbortController;
  text: Promise<string>;
  /** when the recogniser began on it (null: still queued) */
  began: number | null;
  /** the turn's timeline, once a turn took it over */
  timeline: TurnTimeline | null;
}

export class Recognizer {
  private readonly lane = new Lane();
  /** The transcription begun at the last pause, until the end takes it over or it is stale. */
  private early: EarlyTranscript | null = null;

  /** ``model()``: the Whisper bundle's URL (null: not loaded). */
  constructor(private readonly engine: Engine, private readonly model: () => string | null) {}

  /** ``samples`` (16 kHz) to text, after what was given before; ``onBegin`` when it starts on them. */
  transcribe(samples: Float32Array, signal: AbortSignal, onBegin: (at: number) => void): Promise<string> {
    const model = this.model();
    if (!model) return Promise.reject(new Error('the speech recogniser is not loaded'));
    const file = new Blob([wavBytes(samples, CAPTURE_RATE)], { type: 'audio/wav' });
    return this.lane.run(() => {
      if (signal.aborted) throw new DOMException('the utterance went on', 'AbortError');
      onBegin(performance.now());
      return this.engine.audio.transcriptions.create({ model, file }, { signal });
    }).then((result) => result.text.trim());
  }

  /** Begin on a paused utterance's samples; an earlier pause's transcription is stale. */
  startEarly(pause: SpeechEnd): void {
    this.dropEarly();
    if (!this.model()) return;
    const abort = new AbortController();
    const early: EarlyTranscript = { start: pause.start, end: pause.end, abort, text: Promise.resolve(''), began: null, timeline: null };
    early.text = this.transcribe(pause.samples, abort.signal, (at) => {
      early.began = at;
      early.timeline?.begin('transcript', at);
    });
    early.text.catch(() => undefined); // its turn (if one takes it over) reports the error
    this.early = early;
  }

  /** The transcription begun at the pause whose bounds are ``end``'s (any other is stale). */
  takeEarly(end: SpeechEnd): EarlyTranscript | null {
    const early = this.early;
    this.early = null;
    if (early && early.start === end.start && early.end === end.end) return early;
    early?.abort.abort();
    return null;
  }

  /** Drop the transcription begun at the last pause (the speech went on, or the page stopped). */
  dropEarly(): void {
    this.early?.abort.abort();
    this.early = null;
  }

  /** Resolves once the transcriptions given so far have ended. */
  idle(): Promise<void> {
    return this.lane.idle();
  }
}
