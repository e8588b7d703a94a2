// Notices that a runtime worker died, for its supervisor (supervisor.ts), which then replaces it.
// A terminated or crashed worker sends nothing, so two watches besides its own 'error' events:
// - a Web Lock the worker takes at start and holds while it lives: the browser releases it when
//   the worker ends however it ends (terminate(), a crash), and the page's request for the same
//   lock is granted at that moment, busy or idle;
// - where there are no Web Locks (a frame without storage access), and against a worker that
//   hangs: a ping while nothing is in flight, answered at once by a live worker. While a request
//   runs the worker may not take messages for a long time (a long prefill, a session opening),
//   so no ping is judged then; instead a request that hears nothing from the worker (no event,
//   no answer) for ``busySilenceMs`` means the worker hung in the middle of it.

import type { Channel } from './transport';

/** Ping this often while nothing is in flight ... */
export const PING_EVERY_MS = 2000;
/** ... and declare the worker dead when a ping stays unanswered this many beats (counted in
 * beats, not wall-clock time: a frozen tab freezes the worker too, and its timer fires once on
 * waking, which must not read as a missed answer). */
export const PING_MISSED_BEATS = 5;
/** A request in flight with no word from the worker this long: hung (a long prefill or session
 * opening of the models onnxpipe runs stays well under it). */
export const BUSY_SILENCE_MS = 120_000;

let watches = 0;

export class WorkerWatch {
  private readonly lock = `onnxpipe-runtime-alive-${crypto.randomUUID?.() ?? `${Date.now()}-${Math.random()}`}-${watches++}`;
  private readonly abort = new AbortController();
  private timer: ReturnType<typeof setInterval> | null = null;
  private waiting = false;   // a ping is unanswered
  private missed = 0;   // beats since it was sent
  private silent = 0;   // beats with a request in flight and no message from the worker
  private stopped = false;

  /** ``idle``: nothing in flight (then pings are judged); ``onDeath`` is called at most once;
   * ``everyMs``: the beat (shorter on test pages); ``busySilenceMs``: see BUSY_SILENCE_MS. */
  constructor(
    private readonly channel: Channel,
    private readonly idle: () => boolean,
    private readonly onDeath: (reason: string) => void,
    private readonly everyMs = PING_EVERY_MS,
    private busySilenceMs = BUSY_SILENCE_MS,
  ) {}

  /** Judge silence in the calls from now on by ``ms`` (test pages: a tight watch on one call
   * only, after a load that is silent for longer). */
  setBusySilence(ms: number): void {
    this.busySilenceMs = ms;
    this.silent = 0;
  }

  /** Ask the worker to take the lock (``debug``: allow the test-only 'crash' verb); start pinging. */
  start(debug: boolean): void {
    this.channel.call('watch', { lock: this.lock, debug }).then(({ locks }) => this.watching(locks), () => {});
    this.timer = setInterval(() => this.beat(), this.everyMs);
  }

  /** The worker holds the lock (``locks`` false: it has no Web Locks): wait for its release. */
  private watching(locks: boolean): void {
    if (!locks || this.stopped || !navigator.locks) return;
    navigator.locks.request(this.lock, { signal: this.abort.signal }, () => this.die('the worker ended (terminated or crashed)'))
      .catch(() => {});   // aborted by stop(), or no Web Locks in this page
  }

  /** Any message from the worker: it is alive and working on what is in flight. */
  heard(): void {
    this.silent = 0;
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
    if (this.timer !== null) clearInterval(this.timer);
  }

  private beat(): void {
    if (!this.idle()) {
      this.waiting = false;   // a ping sent before a request began is not judged
      // counted in beats, as pings are: a frozen tab's one late timer is one beat
      if (++this.silent * this.everyMs >= this.busySilenceMs) {
        this.die(`a request heard nothing from it for ${this.busySilenceMs / 1000} s`);
      }
      return;
    }
    this.silent = 0;
    if (!this.waiting) {
      this.waiting = true;
      this.missed = 0;
      this.channel.call('ping', {}).then(() => {
        this.waiting = false;
      }, () => {});   // rejected when the worker is replaced
    } else if (++this.missed >= PING_MISSED_BEATS) {
      this.die(`it did not answer a ping in ${(PING_MISSED_BEATS * this.everyMs) / 1000} s`);
    }
  }

  private die(reason: string): void {
    if (this.stopped) return;
    this.stop();
    this.onDeath(reason);
  }
}
