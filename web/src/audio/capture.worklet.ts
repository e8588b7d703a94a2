// The microphone's AudioWorkletProcessor: mixes the input to mono, resamples it to 16 kHz with
// a band-limited filter (resample.ts), cuts it into fixed chunks and posts each one on a
// MessagePort the page handed over (in the voice page, a port whose other end lives in the
// VAD's runtime worker: the audio never passes through the page's main thread). The level
// (RMS of each chunk) goes to the node's own port, for the meter.
//
// Loaded by mic.ts through `?worker&url`, so Vite bundles it (with resample.ts) as one module.

import { Resampler } from './resample';
import type { CaptureOptions, ChunkMessage, LevelMessage, WorkletCommand } from './capture-protocol';

// The AudioWorkletGlobalScope, which TypeScript's DOM lib does not describe.
declare const sampleRate: number;
declare class AudioWorkletProcessor {
  readonly port: MessagePort;
  constructor(options?: { processorOptions?: unknown });
}
declare function registerProcessor(name: string, ctor: new (options: { processorOptions?: unknown }) => AudioWorkletProcessor): void;

class CaptureProcessor extends AudioWorkletProcessor {
  private readonly resampler: Resampler;
  private readonly chunkSize: number;
  private readonly mono = new Float32Array(128);
  private out: Float32Array;
  private chunk: Float32Array;
  private filled = 0;
  /** 16 kHz samples posted so far: every chunk says where it starts in the stream. */
  private position = 0;
  private data: MessagePort | null = null;
  private running = true;

  constructor(options: { processorOptions?: unknown }) {
    super(options);
    const opts = options.processorOptions as CaptureOptions;
    this.resampler = new Resampler(sampleRate, opts.rate);
    this.chunkSize = opts.chunk;
    this.chunk = new Float32Array(this.chunkSize);
    this.out = new Float32Array(this.resampler.maxOutput(128));
    this.port.onmessage = (event: MessageEvent<WorkletCommand>) => this.command(event.data);
  }

  private command(message: WorkletCommand): void {
    if (message.type === 'connect') {
      this.data?.close();
      this.data = message.port;
    } else if (message.type === 'stop') {
      this.running = false;
      this.data?.close();
      this.data = null;
    }
  }

  process(inputs: Float32Array[][]): boolean {
    const channels = inputs[0];
    if (!this.running) return false;
    if (!channels || channels.length === 0) return true; // no input connected yet
    const frames = channels[0].length;
    if (this.mono.length < frames) return true; // render quanta are 128 frames
    const mono = this.mono.subarray(0, frames);
    mono.set(channels[0]);
    for (let c = 1; c < channels.length; c++) {
      const ch = channels[c];
      for (let i = 0; i < frames; i++) mono[i] += ch[i];
    }
    if (channels.length > 1) for (let i = 0; i < frames; i++) mono[i] /= channels.length;
    if (this.out.length < this.resampler.maxOutput(frames)) this.out = new Float32Array(this.resampler.maxOutput(frames));
    const n = this.resampler.process(mono, this.out);
    for (let i = 0; i < n; i++) {
      this.chunk[this.filled++] = this.out[i];
      if (this.filled === this.chunkSize) this.flush();
    }
    return true;
  }

  /** Post the full chunk (its buffer is transferred: a fresh one takes its place) and its level. */
  private flush(): void {
    const chunk = this.chunk;
    let sum = 0;
    for (let i = 0; i < chunk.length; i++) sum += chunk[i] * chunk[i];
    const level: LevelMessage = { type: 'level', rms: Math.sqrt(sum / chunk.length), at: this.position };
    this.port.postMessage(level);
    if (this.data) {
      const message: ChunkMessage = { type: 'chunk', samples: chunk, at: this.position };
      this.data.postMessage(message, [chunk.buffer]);
      this.chunk = new Float32Array(this.chunkSize);
    }
    this.position += this.chunkSize;
    this.filled = 0;
  }
}

registerProcessor('onnxpipe-capture', CaptureProcessor);
