// Web Audio playback: sentences are scheduled back to back as they arrive, so the first one
// plays while the next is still being computed.

interface Segment {
  source: AudioBufferSourceNode;
  /** AudioContext time the segment starts, and where it sits in the take (seconds). */
  at: number;
  offset: number;
  duration: number;
}

// a little lead so the first buffer is not clipped while the context wakes up
const LEAD_S = 0.05;

export class Player {
  private ctx: AudioContext | null = null;
  private segments: Segment[] = [];
  private live = new Set<AudioBufferSourceNode>();
  private nextAt = 0;
  private queued = 0; // seconds of the take scheduled so far
  /** Called whenever playback starts or runs out. */
  onChange: (playing: boolean) => void = () => {};
  /** Called when the browser will not play (no audio device, blocked context). */
  onError: (error: unknown) => void = () => {};

  get playing(): boolean {
    return this.live.size > 0;
  }

  /** Create or wake the AudioContext. Call it from the click handler: browsers only let a
   * user gesture start audio. False when Web Audio is unavailable. */
  prepare(): boolean {
    try {
      this.ctx ??= new AudioContext();
      if (this.ctx.state === 'suspended') this.ctx.resume().catch((e: unknown) => this.onError(e));
      return true;
    } catch (error) {
      this.onError(error);
      return false;
    }
  }

  /** Forget what was scheduled and start a new take at offset 0. */
  begin(): void {
    this.stop();
    this.segments = [];
    this.queued = 0;
    this.nextAt = 0;
  }

  /** Schedule one sentence right after the previous one (or now, if playback ran dry);
   * returns the seconds until it is heard, or null when nothing was scheduled. */
  enqueue(samples: Float32Array, sampleRate: number): number | null {
    const ctx = this.ctx;
    if (!ctx || samples.length === 0) return null;
    try {
      const buffer = ctx.createBuffer(1, samples.length, sampleRate);
      // posted samples own a plain ArrayBuffer (never shared memory)
      buffer.copyToChannel(samples as Float32Array<ArrayBuffer>, 0);
      const source = ctx.createBufferSource();
      source.buffer = buffer;
      source.connect(ctx.destination);
      const at = Math.max(this.nextAt, ctx.currentTime + LEAD_S);
      source.start(at);
      const segment: Segment = { source, at, offset: this.queued, duration: buffer.duration };
      this.segments.push(segment);
      this.nextAt = at + buffer.duration;
      this.queued += buffer.duration;
      const wasPlaying = this.playing;
      this.live.add(source);
      source.onended = () => {
        this.live.delete(source);
        if (!this.playing) this.onChange(false);
      };
      if (!wasPlaying) this.onChange(true);
      return at - ctx.currentTime;
    } catch (error) {
      this.onError(error);
      return null;
    }
  }

  /** Silence everything scheduled; a later enqueue starts again from now. */
  stop(): void {
    const wasPlaying = this.playing;
    for (const source of this.live) {
      source.onended = null;
      try {
        source.stop();
      } catch {
        // never started: nothing to stop
      }
    }
    this.live.clear();
    this.nextAt = 0;
    if (wasPlaying) this.onChange(false);
  }

  /** Seconds into the take being heard now, or null when nothing plays. */
  position(): number | null {
    if (!this.ctx || !this.playing) return null;
    const now = this.ctx.currentTime;
    let heard = 0;
    for (const s of this.segments) {
      if (now < s.at) break;
      heard = s.offset + Math.min(now - s.at, s.duration);
    }
    return heard;
  }
}
