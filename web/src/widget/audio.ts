// Plays sentences back to back as they arrive (Web Audio), so speech starts after the first
// sentence instead of after the whole text.

export class SentencePlayer {
  private context: AudioContext | null = null;
  private endsAt = 0;
  private readonly sources = new Set<AudioBufferSourceNode>();

  /** Call from a click (or any time: a page without a user gesture may keep audio suspended). */
  start(): void {
    this.context ??= new AudioContext();
    void this.context.resume().catch(() => {});
    this.endsAt = 0;
  }

  enqueue(samples: Float32Array, sampleRate: number): void {
    const ctx = this.context;
    if (!ctx || samples.length === 0) return;
    const buffer = ctx.createBuffer(1, samples.length, sampleRate);
    buffer.copyToChannel(samples as Float32Array<ArrayBuffer>, 0);
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    const at = Math.max(ctx.currentTime + 0.05, this.endsAt);
    source.start(at);
    this.endsAt = at + buffer.duration;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
  }

  stop(): void {
    for (const s of this.sources) s.stop();
    this.sources.clear();
    this.endsAt = 0;
  }

  close(): void {
    this.stop();
    void this.context?.close().catch(() => {});
    this.context = null;
  }
}
