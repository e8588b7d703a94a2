// Sentences of the reply -> the voice's runtime worker, one at a time in order, each sentence's
// audio queued on the player the moment it arrives. The model keeps writing meanwhile (its own
// worker), so speech overlaps generation. cancel() drops the queue, stops the running sentence
// and silences playback (barge-in).

import type { RuntimeClient, SpeakRequest } from '../client';
import type { ReplyPlayer } from './playback';
import { speakable } from './sentences';

export interface SpokenSentence {
  text: string;
  audioSeconds: number;
  computeSeconds: number;
}

export class SpeechQueue {
  /** The voice's controls for every sentence (e.g. a Kokoro voice name). */
  controls: SpeakRequest['controls'] = {};
  /** When the first sentence of the reply starts playing (performance.now() ms). */
  onFirstAudio: (at: number) => void = () => {};
  onSentence: (sentence: SpokenSentence) => void = () => {};
  onError: (error: unknown) => void = () => {};
  private queue: string[] = [];
  private running: Promise<void> | null = null;
  private generation = 0;
  private heardFirst = false;
  private audioSeconds = 0;

  constructor(private readonly client: RuntimeClient, private readonly player: ReplyPlayer) {}

  /** A new reply: forget the last one's queue and counters. */
  begin(): void {
    this.generation++;
    this.queue = [];
    this.heardFirst = false;
    this.audioSeconds = 0;
    this.player.begin();
  }

  /** Seconds of audio the voice made for this reply. */
  get madeSeconds(): number {
    return this.audioSeconds;
  }

  /** Speak ``sentence`` after the ones already queued. */
  add(sentence: string): void {
    const text = speakable(sentence);
    if (!/[\p{L}\p{N}]/u.test(text)) return; // nothing a voice can say
    this.queue.push(text);
    this.kick();
  }

  /** Start the pump unless one runs; one left over from a cancelled reply hands over when it ends. */
  private kick(): void {
    if (this.running) return;
    this.running = this.pump(this.generation).finally(() => {
      this.running = null;
      if (this.queue.length) this.kick();
    });
  }

  /** Resolves when every queued sentence has been made (playback may still be running). */
  async drained(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Barge-in: drop what is queued, stop the sentence being made, silence playback. */
  async cancel(): Promise<void> {
    this.generation++;
    this.queue = [];
    this.player.stop();
    if (this.running) {
      await this.client.cancel().catch(() => undefined);
      await this.running;
    }
  }

  private async pump(generation: number): Promise<void> {
    while (this.queue.length && generation === this.generation) {
      const text = this.queue.shift() as string;
      try {
        const { result } = await this.client.speak({
          text,
          controls: this.controls,
          onAudio: (samples, sampleRate) => {
            if (generation !== this.generation) return; // cancelled meanwhile
            const at = this.player.enqueue(samples, sampleRate);
            this.audioSeconds += samples.length / sampleRate;
            if (!this.heardFirst) {
              this.heardFirst = true;
              this.onFirstAudio(at);
            }
          },
        });
        if (generation === this.generation && result.finish_reason === 'done') {
          this.onSentence({ text, audioSeconds: result.audio_seconds, computeSeconds: result.compute_seconds });
        }
      } catch (error) {
        if (generation === this.generation) {
          this.queue = [];
          this.onError(error);
        }
        return;
      }
    }
  }
}
