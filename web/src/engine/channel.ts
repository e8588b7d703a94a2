// Items pushed by one side (token events), pulled with for await by the other; ends once, with
// or without an error. An abort ends it at once: items not yet pulled are dropped, so a consumer
// that aborts sees the error on its very next read, however far ahead the producer got.

export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private error: unknown = null;

  push(item: T): void {
    if (this.ended) return;
    this.items.push(item);
    this.wake?.();
  }

  end(error: unknown = null): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    this.wake?.();
  }

  /** End now with ``error``, dropping what the consumer has not pulled yet. */
  abort(error: unknown): void {
    if (this.ended) return;
    this.items.length = 0;
    this.end(error);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length) {
        yield this.items.shift() as T;
      } else if (this.ended) {
        if (this.error) throw this.error;
        return;
      } else {
        await new Promise<void>((resolve) => { this.wake = resolve; });
        this.wake = null;
      }
    }
  }
}
