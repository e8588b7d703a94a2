// Microphone audio that reaches this worker straight from the capture worklet (a MessagePort
// the page handed over: web/src/audio/mic.ts), so no audio is processed on the page's thread.
// Each 16 kHz chunk is handed to ``onChunk`` in order, one at a time (the VAD runs on them),
// and the last minute is kept so an utterance's samples can be cut out by sample index.

import type { ChunkMessage } from '../web/src/audio/capture-protocol';

export class AudioTap {
  private port: MessagePort | null = null;
  private readonly ring: Float32Array;
  /** Samples received since the capture began (the index one past the newest). */
  private end = 0;
  private chain: Promise<void> = Promise.resolve();
  private failed: unknown = null;

  /** ``seconds`` of audio at ``rate`` are kept for slice(). */
  constructor(readonly rate = 16000, seconds = 60) {
    this.ring = new Float32Array(rate * seconds);
  }

  /** The stream position: samples received so far. */
  get position(): number {
    return this.end;
  }

  /** Listen on ``port``; each chunk is stored, then given to ``onChunk`` (awaited in order).
   * A failing onChunk stops the tap and goes to ``onError``. */
  attach(
    port: MessagePort, onChunk: (samples: Float32Array, at: number) => Promise<void> | void,
    onError: (error: unknown) => void,
  ): void {
    this.detach();
    this.port = port;
    this.failed = null;
    this.end = 0; // a new port is a new capture: its chunks count from 0 again
    port.onmessage = (event: MessageEvent<ChunkMessage>) => {
      const { samples, at } = event.data;
      if (event.data.type !== 'chunk' || !(samples instanceof Float32Array)) return;
      this.store(samples, at);
      this.chain = this.chain.then(async () => {
        if (this.failed === null && this.port === port) await onChunk(samples, at);
      }).catch((error: unknown) => {
        if (this.port !== port) return;
        this.failed = error;
        this.detach();
        onError(error);
      });
    };
    port.start();
  }

  /** The error that stopped the tap, if one did. */
  get error(): unknown {
    return this.failed;
  }

  /** Stop listening (chunks already queued are dropped). */
  detach(): void {
    if (!this.port) return;
    this.port.onmessage = null;
    this.port.close();
    this.port = null;
  }

  /** Resolves once every chunk received so far has been through onChunk. */
  settled(): Promise<void> {
    return this.chain;
  }

  /** Samples [from, to) of the stream, clamped to what is still kept. */
  slice(from: number, to: number): Float32Array {
    const start = Math.max(from, this.end - this.ring.length, 0);
    const stop = Math.min(to, this.end);
    const out = new Float32Array(Math.max(0, stop - start));
    for (let i = 0; i < out.length; i++) out[i] = this.ring[(start + i) % this.ring.length];
    return out;
  }

  private store(samples: Float32Array, at: number): void {
    // a gap (chunks lost) is filled with silence, so indexes stay the capture's own
    for (let i = Math.max(this.end, at - this.ring.length); i < at; i++) this.ring[i % this.ring.length] = 0;
    const n = this.ring.length;
    for (let i = 0; i < samples.length; i++) this.ring[(at + i) % n] = samples[i];
    this.end = Math.max(this.end, at + samples.length);
  }
}
