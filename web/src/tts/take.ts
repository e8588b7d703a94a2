// The audio of one speech: its sentences' samples in order, kept for the picture and replay.

export class Take {
  readonly chunks: Float32Array[] = [];
  sampleRate = 0;
  length = 0;

  add(samples: Float32Array, sampleRate: number): void {
    if (!this.sampleRate) this.sampleRate = sampleRate;
    this.chunks.push(samples);
    this.length += samples.length;
  }

  clear(): void {
    this.chunks.length = 0;
    this.sampleRate = 0;
    this.length = 0;
  }

  get seconds(): number {
    return this.sampleRate ? this.length / this.sampleRate : 0;
  }

  /** Sample offsets where each sentence after the first begins. */
  boundaries(): number[] {
    const out: number[] = [];
    let at = 0;
    for (const chunk of this.chunks.slice(0, -1)) out.push((at += chunk.length));
    return out;
  }
}
