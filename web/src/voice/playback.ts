// The reply's audio: sentences scheduled back to back on one AudioContext as they arrive.
// Keeps count of what was really heard (a barge-in cuts a sentence short) and says when each
// sentence starts in performance.now() time, for the latency figures. hold() pauses it where it
// is (speech over the reply that may be only a cough) and release() goes on from there.

const LEAD_S = 0.05; // so the first buffer is not clipped while the context wakes up

export class ReplyPlayer {
  private ctx: AudioContext | null = null;
  private live = new Map<AudioBufferSourceNode, { at: number; duration: number }>();
  private nextAt = 0;
  private played = 0; // seconds heard in this reply, sentences that ended or were cut
  private late = 0; // seconds of silence in this reply: audio that came after the last had ended
  private holding = false;
  /** Playback started (true) or ran dry / was stopped (false). */
  onChange: (playing: boolean) => void = () => {};

  /** Something is being heard: scheduled and not held. */
  get playing(): boolean {
    return this.live.size > 0 && !this.holding;
  }

  /** Paused by hold(): what is scheduled (and what is added meanwhile) waits for release(). */
  get held(): boolean {
    return this.holding;
  }

  /** Pause now, keeping the place: the context's clock stops (suspend), so every sentence
   * scheduled on it, the one sounding included, goes on from the same sample on release().
   * Returns whether something was being heard. stop() and begin() keep the hold. */
  hold(): boolean {
    if (this.holding) return false;
    const wasPlaying = this.playing;
    this.holding = true;
    if (this.ctx) void this.ctx.suspend().catch(() => undefined);
    if (wasPlaying) this.onChange(false);
    return wasPlaying;
  }

  /** End the hold: what was held plays on from where it stopped. */
  release(): void {
    if (!this.holding) return;
    this.holding = false;
    if (this.ctx) void this.ctx.resume().catch(() => undefined);
    this.onChange(this.playing);
  }

  /** Create or wake the AudioContext; call it in a click handler (autoplay rules). */
  prepare(): void {
    this.ctx ??= new AudioContext();
    if (this.ctx.state === 'suspended') void this.ctx.resume().catch(() => undefined);
  }

  /** Start a new reply: nothing scheduled, nothing heard. */
  begin(): void {
    this.stop();
    this.played = 0;
    this.late = 0;
  }

  /** Seconds of silence this reply's audio left between its pieces: each piece that arrived
   * after the one before had finished playing (the voice fell behind) adds its lateness. A held
   * reply adds none (the context's clock stops). */
  get gapSeconds(): number {
    return this.late;
  }

  /** Schedule one sentence after the last; returns when it starts (performance.now() ms). */
  enqueue(samples: Float32Array, sampleRate: number): number {
    this.prepare();
    const ctx = this.ctx as AudioContext;
    const buffer = ctx.createBuffer(1, Math.max(1, samples.length), sampleRate);
    buffer.copyToChannel(samples as Float32Array<ArrayBuffer>, 0);
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    const at = Math.max(this.nextAt, ctx.currentTime + LEAD_S);
    if (this.nextAt > 0) this.late += at - this.nextAt;
    source.start(at);
    this.nextAt = at + buffer.duration;
    const wasPlaying = this.playing;
    this.live.set(source, { at, duration: buffer.duration });
    source.onended = () => {
      const entry = this.live.get(source);
      if (!entry) return;
      this.played += entry.duration;
      this.live.delete(source);
      if (!this.playing) this.onChange(false);
    };
    if (!wasPlaying && this.playing) this.onChange(true);
    return performance.now() + (at - ctx.currentTime) * 1000;
  }

  /** Silence everything now (barge-in); what was heard of the cut sentence still counts. */
  stop(): void {
    const ctx = this.ctx;
    const wasPlaying = this.playing;
    for (const [source, { at, duration }] of this.live) {
      source.onended = null;
      if (ctx) this.played += Math.min(duration, Math.max(0, ctx.currentTime - at));
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

  /** Seconds of this reply heard so far (sentences still playing count up to now). */
  heardSeconds(): number {
    let heard = this.played;
    const now = this.ctx?.currentTime ?? 0;
    for (const { at, duration } of this.live.values()) heard += Math.min(duration, Math.max(0, now - at));
    return heard;
  }
}
