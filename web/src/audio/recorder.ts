// Record from the microphone into one 16 kHz buffer: the capture worklet's chunks arrive on a
// MessagePort in the page (the transcribe page has no live consumer to send them to).

import type { ChunkMessage } from './capture-protocol';
import { Microphone } from './mic';

export class Recorder {
  readonly mic = new Microphone();
  private chunks: Float32Array[] = [];
  private port: MessagePort | null = null;

  get recording(): boolean {
    return this.port !== null;
  }

  async start(): Promise<void> {
    if (this.port) return;
    this.chunks = [];
    await this.mic.start();
    const channel = new MessageChannel();
    channel.port2.onmessage = (event: MessageEvent<ChunkMessage>) => {
      if (event.data.type === 'chunk') this.chunks.push(event.data.samples);
    };
    this.mic.connect(channel.port1);
    this.port = channel.port2;
  }

  /** Stop and return everything recorded (16 kHz mono). */
  stop(): Float32Array {
    this.mic.stop();
    this.port?.close();
    this.port = null;
    const out = new Float32Array(this.chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.length;
    }
    this.chunks = [];
    return out;
  }
}
