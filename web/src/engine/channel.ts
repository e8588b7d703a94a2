// Items pushed by one side (token events), pulled with for await by the other; ends once, with
// or without an error.

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
