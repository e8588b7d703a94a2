// Microphone -> VAD worker, with the page only relaying a port: a MessageChannel whose one end
// goes to the capture worklet and the other to the runtime worker running the VAD bundle.
// The worker keeps the recent audio, so a detected utterance (or a push-to-talk span) comes
// back as samples, ready for the recogniser.

import type { RuntimeClient } from '../client';
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
}

export interface VadHandlers {
  speechStart: () => void;
  speechEnd: (end: SpeechEnd) => void;
  failed: (error: unknown) => void;
}

/** Silence (ms) that ends an utterance: long enough for a pause between words, short enough
 * that the reply does not keep the user waiting. Padding keeps the word edges for the recogniser. */
export const LISTEN_CONTROLS = { min_silence_ms: 500, speech_pad_ms: 200, min_speech_ms: 250 };

export class VadLink {
  private listening = false;

  constructor(private readonly client: RuntimeClient) {}

  /** Connect ``mic`` to the VAD worker and report speech through ``handlers``. */
  async start(mic: Microphone, handlers: VadHandlers): Promise<void> {
    if (this.listening) return;
    const channel = new MessageChannel();
    const padS = LISTEN_CONTROLS.speech_pad_ms / 1000;
    // the worker listens on port2 before the worklet is told to post into port1
    await this.client.listen(channel.port2, (event) => {
      if (event.type === 'speech_start') {
        handlers.speechStart();
      } else if (event.samples && event.end !== null) {
        // the speech itself ended a padding's length before the segment's end
        const endedAt = Math.max(event.start, event.end - padS);
        const lagMs = Math.max(0, (event.position / CAPTURE_RATE - endedAt) * 1000);
        handlers.speechEnd({ samples: event.samples, start: event.start, end: event.end, lagMs });
      }
    }, (error) => {
      this.listening = false;
      handlers.failed(error);
    }, LISTEN_CONTROLS);
    this.listening = true;
    mic.connect(channel.port1);
  }

  /** The capture position now (push to talk: where the utterance starts). */
  async mark(): Promise<number> {
    return (await this.client.audioClip()).position;
  }

  /** Samples from ``from`` up to now (push to talk: the button came up). */
  async take(from: number): Promise<Float32Array> {
    return (await this.client.audioClip(from)).samples ?? new Float32Array(0);
  }

  stop(): void {
    if (!this.listening) return;
    this.listening = false;
    void this.client.stopListening().catch(() => undefined);
  }
}
