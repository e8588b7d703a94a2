// Microphone -> VAD worker, with the page only relaying a port: a MessageChannel whose one end
// goes to the capture worklet and the other to the runtime worker running the VAD bundle
// (engine.audio.listen, onnxpipe's extra).
// The worker keeps the recent audio, so a detected utterance (or a push-to-talk span) comes
// back as samples, ready for the recogniser.

import type { Engine } from '../engine/engine';
import type { Listening } from '../engine/listen';
import type { Microphone } from '../audio/mic';
import { CAPTURE_RATE } from '../audio/capture-protocol';

export interface SpeechEnd {
  /** The utterance, 16 kHz mono, with the VAD's padding. */
  samples: Float32Array;
  /** Segment bounds in seconds of the capture stream. */
  start: number;
  end: number;
  /** How long ago the speech ended when the event reached the page (the VAD's wait for
   * silence, plus the trip): the turn's latency is measured from the real end. */
  lagMs: number;
  /** How long the speech itself lasted (ms, the padding taken off). */
  speechMs: number;
}

export interface SpeechStart {
  /** How long ago the speech began when the event reached the page (min_speech_ms of speech,
   * plus the trip): a barge-in is measured from the real start. */
  lagMs: number;
}

export interface VadHandlers {
  speechStart: (start: SpeechStart) => void;
  /** The speech has been silent for LISTEN_PAUSE_MS: if it does not resume, its end comes with
   * these samples and bounds (the recogniser can start now). */
  speechPaused: (pause: SpeechEnd) => void;
  speechEnd: (end: SpeechEnd) => void;
  failed: (error: unknown) => void;
}

/** Silence (ms) that ends an utterance: every turn waits this long before anything else can
 * start, so it is short; a longer pause mid-question is joined again by the controller
 * (CONTINUE_MS). Measured by bench/voice_hangover.py: docs/voice.md, "End of speech". Padding
 * keeps the word edges for the recogniser. Speech is reported after 96 ms of it (three 32 ms
 * chunks), so that speaking over a reply holds it within 200 ms; the controller drops what is
 * shorter than its MIN_SPEECH_MS (250 ms), the rule the VAD applied itself before (docs/voice.md,
 * "Barge-in"). */
export const LISTEN_CONTROLS = { min_silence_ms: 400, speech_pad_ms: 200, min_speech_ms: 96 };
/** A silence this long is reported as a pause (the earliest the worker allows: the padding, so
 * the utterance's samples are already those its end will carry): the transcript starts there,
 * while the hangover runs on (docs/voice.md, "What waits for what"). */
export const LISTEN_PAUSE_MS = LISTEN_CONTROLS.speech_pad_ms;

export class VadLink {
  private listening: Listening | null = null;

  /** ``model()``: the VAD bundle's URL (loaded before start()). */
  constructor(private readonly engine: Engine, private readonly model: () => string | null) {}

  /** Connect ``mic`` to the VAD worker and report speech through ``handlers``. */
  async start(mic: Microphone, handlers: VadHandlers): Promise<void> {
    if (this.listening) return;
    const model = this.model();
    if (!model) throw new Error('the voice-activity model is not loaded');
    const channel = new MessageChannel();
    const padS = LISTEN_CONTROLS.speech_pad_ms / 1000;
    // the worker listens on port2 before the worklet is told to post into port1
    const listening = await this.engine.audio.listen({ model, port: channel.port2, controls: LISTEN_CONTROLS, pause_ms: LISTEN_PAUSE_MS });
    this.listening = listening;
    void (async () => {
      try {
        for await (const event of listening) {
          if (event.type === 'input_audio_buffer.speech_started') {
            // the segment's start is padded: the speech itself began a padding later
            const { start, position } = event.onnxpipe;
            handlers.speechStart({ lagMs: Math.max(0, (position / CAPTURE_RATE - (start + padS)) * 1000) });
          } else if (event.onnxpipe.samples) {
            // the speech itself ended a padding's length before the segment's end
            const { start, end, position, samples } = event.onnxpipe;
            const endedAt = Math.max(start, end - padS);
            const lagMs = Math.max(0, (position / CAPTURE_RATE - endedAt) * 1000);
            const speechMs = Math.max(0, (endedAt - start - padS) * 1000);
            const heard = { samples, start, end, lagMs, speechMs };
            if (event.type === 'onnxpipe.speech_paused') handlers.speechPaused(heard);
            else handlers.speechEnd(heard);
          }
        }
      } catch (error) {
        if (this.listening !== listening) return;   // stopped meanwhile
        this.listening = null;
        handlers.failed(error);
      }
    })();
    mic.connect(channel.port1);
  }

  /** The capture position now (push to talk: where the utterance starts). */
  async mark(): Promise<number> {
    if (!this.listening) throw new Error('not listening');
    return (await this.listening.clip()).position;
  }

  /** Samples from ``from`` up to now (push to talk: the button came up). */
  async take(from: number): Promise<Float32Array> {
    if (!this.listening) throw new Error('not listening');
    return (await this.listening.clip(from)).samples ?? new Float32Array(0);
  }

  /** The stream's samples from ``fromS`` to ``toS`` seconds: an utterance the VAD cut in two,
   * joined again (the worker keeps the last 60 s). */
  async between(fromS: number, toS: number): Promise<Float32Array> {
    const samples = await this.take(Math.floor(fromS * CAPTURE_RATE));
    return samples.subarray(0, Math.max(0, Math.round((toS - fromS) * CAPTURE_RATE)));
  }

  stop(): void {
    const listening = this.listening;
    if (!listening) return;
    this.listening = null;
    void listening.close().catch(() => undefined);
  }
}
