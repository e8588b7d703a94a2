// One worker's calls, one after another.

/** Runs calls on one worker one after another: a new turn's request waits for the stopped one. */
export class Lane {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }

  /** Resolves once the calls given so far have ended (their callers heard of it first). */
  async idle(): Promise<void> {
    await this.tail;
  }
}
