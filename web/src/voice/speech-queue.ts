// Sentences of the reply -> the voice's runtime worker, one at a time in order, each sentence's
// audio queued on the player the moment it arrives. The model keeps writing meanwhile (its own
// worker), so speech overlaps generation. cancel() drops the queue, stops the running sentence
// and silences playback (barge-in).

import type { ControlValue } from '../protocol';
import type { Engine } from '../engine/engine';
import type { ReplyPlayer } from './playback';
import { speakable } from './sentences';

export interface SpokenSentence {
  text: string;
  audioSeconds: number;
  computeSeconds: number;
}

export class SpeechQueue {
  /** The voice's controls for every sentence (e.g. a Kokoro voice name). */
  controls: Record<string, ControlValue> = {};
  /** When the first sentence of the reply starts playing (performance.now() ms). */
  onFirstAudio: (at: number) => void = () => {};
  onSentence: (sentence: SpokenSentence) => void = () => {};
  onError: (error: unknown) => void = () => {};
  private queue: string[] = [];
  private running: Promise<void> | null = null;
  private generation = 0;
  private heardFirst = false;
  private audioSeconds = 0;
  /** Aborts the sentence being made (barge-in). */
  private abort: AbortController | null = null;

  /** ``model()``: the voice's URL (the voice picker swaps it). */
  constructor(private readonly engine: Engine, private readonly model: () => string | null, private readonly player: ReplyPlayer) {}

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
      this.abort?.abort();
      await this.running;
    }
  }

  private async pump(generation: number): Promise<void> {
    while (this.queue.length && generation === this.generation) {
      const text = this.queue.shift() as string;
      const abort = new AbortController();
      this.abort = abort;
      try {
        const model = this.model();
        if (!model) throw new Error('the voice is not loaded');
        const events = await this.engine.audio.speech.create({ model, input: text, controls: this.controls, stream_format: 'sse' }, { signal: abort.signal });
        for await (const event of events) {
          if (event.type === 'speech.audio.delta') {
            if (generation !== this.generation) continue; // cancelled meanwhile
            const { samples, sample_rate: sampleRate } = event.onnxpipe;
            const at = this.player.enqueue(samples, sampleRate);
            this.audioSeconds += samples.length / sampleRate;
            if (!this.heardFirst) {
              this.heardFirst = true;
              this.onFirstAudio(at);
            }
          } else if (generation === this.generation && event.onnxpipe.result.finish_reason === 'done') {
            const { result } = event.onnxpipe;
            this.onSentence({ text, audioSeconds: result.audio_seconds, computeSeconds: result.compute_seconds });
          }
        }
      } catch (error) {
        if (generation === this.generation && !abort.signal.aborted) {
          this.queue = [];
          this.onError(error);
        }
        return;
      } finally {
        if (this.abort === abort) this.abort = null;
      }
    }
  }
}
