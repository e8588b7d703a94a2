// Worker supervision for RuntimeClient (client.ts): start a runtime worker, watch it
// (runtime-watch.ts), and when it dies (a crash, a 'fatal', a hang) fail what was in flight,
// start a new one and let the client bring its bundle back; give up after MAX_DEATHS_IN_A_ROW.

import type { ArgsOf, ExecutionProvider, LoadedInfo, ResultOf, Verb, WorkerMessage } from './protocol';
import type { RuntimeAssets } from './runtime-assets';
import { PING_EVERY_MS, WorkerWatch } from './runtime-watch';
import { Channel, type CallOptions, RuntimeError } from './transport';

/** Self-healing, as the page should show it: the worker died (a new one is starting and the
 * bundle that was loaded is loading again from this device's storage), the bundle is back
 * (``info``: null when none had been loaded; ``ep`` the provider it now runs on: 'wasm' after a
 * lost WebGPU device), or it could not be brought back (the page must load again). */
export type RuntimeStatus =
  | { state: 'stopped'; reason: string }
  | { state: 'restored'; reason: string; info: LoadedInfo | null; ep: ExecutionProvider }
  | { state: 'failed'; reason: string; message: string };

/** After this many deaths with no successful reload between them, stop reloading. */
const MAX_DEATHS_IN_A_ROW = 3;

export interface SupervisorOptions {
  makeWorker: () => Worker;
  /** Sent to each worker first ('configure'): where its runtime's files are. */
  assets: RuntimeAssets;
  debug: boolean; // test pages: a 250 ms heartbeat and the 'crash' verb allowed
  busySilenceMs: number;
  /** After a death, in the new worker: load the bundle again (``gpuLost``: the WebGPU device was
   * lost, go on with WASM); resolves with what was reloaded, or null when nothing had been. */
  reopen(gpuLost: boolean): Promise<{ info: LoadedInfo | null; ep: ExecutionProvider } | null>;
  /** Messages for no call in flight (a running 'listen's events). */
  stray(message: WorkerMessage): void;
  /** The worker died: everything in flight failed with this error. */
  died(error: RuntimeError): void;
}

export class Supervisor {
  private worker!: Worker;
  private channel!: Channel;
  private watch: WorkerWatch | null = null;
  /** Set while a replacement worker reloads; other calls wait for it. */
  private restoring: Promise<void> | null = null;
  private deathsInRow = 0;
  /** Gave up restarting: calls fail until start() (a load) starts a worker. */
  private dead = false;
  private readonly statusListeners = new Set<(status: RuntimeStatus) => void>();

  constructor(private readonly options: SupervisorOptions) {
    this.start();
  }

  /** Run ``verb`` in the worker; while a replacement worker reloads the bundle, first wait for
   * that (``now``: the reload's own calls). */
  async call<V extends Verb>(verb: V, args: ArgsOf<V>, options: CallOptions<V> = {}, now = false): Promise<ResultOf<V>> {
    await this.whenUsable(verb, now);
    return this.channel.call(verb, args, options);
  }

  /** Wait for a reload under way (unless ``now``); refuse ``verb`` when restarting gave up. */
  async whenUsable(verb: Verb, now = false): Promise<void> {
    if (!now && this.restoring) await this.restoring;
    if (this.dead) throw new RuntimeError('stopped', `the runtime stopped; load a bundle again before "${verb}"`);
  }

  get reloading(): boolean {
    return this.restoring !== null;
  }

  /** A load of the page's own: it replaces any reload under way; with ``fresh`` (or after
   * restarting gave up) it runs in a new worker, and what ran in the old one fails with ``message``. */
  takeOver(fresh: boolean, message: string): void {
    this.restoring = null;
    if (!fresh && !this.dead) return;
    this.stop();
    this.channel.failAll('internal', message);
    this.dead = false;
    this.start();
  }

  /** A load succeeded: the worker works. */
  loaded(): void {
    this.deathsInRow = 0;
  }

  /** Hear of the worker's death and of the reload that follows; returns an unsubscribe. */
  onStatus(listener: (status: RuntimeStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  /** End the worker behind the supervisor's back, as a crash would (a test hook). */
  kill(): void {
    this.worker.terminate();
  }

  /** End the worker for good (no restart). */
  terminate(): void {
    this.restoring = null;
    this.stop();
  }

  /** Start a worker and watch it: its death replaces it. */
  private start(): void {
    const worker = this.options.makeWorker();
    this.worker = worker;
    const died = (reason: string, gpuLost = false): void => {
      if (this.worker === worker) this.died(reason, gpuLost);
    };
    this.channel = new Channel(worker, {
      heard: () => this.watch?.heard(),
      fatal: (event) => died(event.reason, event.gpu_lost),
      stray: (message) => this.options.stray(message),
    });
    worker.onerror = (error) => died(`an uncaught error in the worker (${error.message || 'no message'})`);
    worker.onmessageerror = () => died('a message from the worker could not be read');
    const channel = this.channel;
    // posted before any other call, so the worker knows its asset URLs before it boots
    channel.call('configure', { assets: this.options.assets }).catch((error: unknown) => {
      if (error instanceof RuntimeError && error.kind !== 'stopped') died(`the worker refused its asset URLs (${error.message})`);
    });
    this.watch = new WorkerWatch(channel, () => !channel.working, (reason) => died(reason),
      this.options.debug ? 250 : PING_EVERY_MS, this.options.busySilenceMs);
    this.watch.start(this.options.debug);
  }

  /** Calls from now on (in this worker and its replacements) are hung after ``ms`` of silence. */
  setBusySilence(ms: number): void {
    this.options.busySilenceMs = ms;
    this.watch?.setBusySilence(ms);
  }

  /** Stop watching and end the worker (a new load, terminate(), or its death). */
  private stop(): void {
    this.watch?.stop();
    this.watch = null;
    this.channel.close();
    this.worker.onerror = this.worker.onmessageerror = null;
    this.worker.terminate();
  }

  /** The worker died: fail what was in flight, start a new one, load the last bundle again
   * (from this device's storage: its files were stored and verified by the first load). */
  private died(reason: string, gpuLost: boolean): void {
    this.stop();
    const givingUp = ++this.deathsInRow > MAX_DEATHS_IN_A_ROW;
    const message = `the runtime stopped: ${reason}; ${givingUp ? 'load a bundle again' : 'restarting'}`;
    this.channel.failAll('stopped', message);
    this.options.died(new RuntimeError('stopped', message));
    this.emit({ state: 'stopped', reason });
    if (givingUp) {
      // no new worker: one that dies as it starts would be replaced forever; a load starts one
      this.dead = true;
      this.restoring = null;
      this.emit({ state: 'failed', reason, message: `the runtime stopped ${this.deathsInRow} times in a row (last: ${reason}); load a bundle again` });
      return;
    }
    this.start();
    const restore = async (): Promise<void> => {
      const back = await this.options.reopen(gpuLost);
      if (back) this.deathsInRow = 0;   // else nothing showed the new worker works
      this.emit({ state: 'restored', reason, info: back?.info ?? null, ep: back?.ep ?? 'wasm' });
    };
    const restoring = restore().catch((error: unknown) => {
      // superseded by a newer death or a load of the page's own: that one reports
      if (this.restoring === restoring) this.emit({ state: 'failed', reason, message: error instanceof Error ? error.message : String(error) });
    }).finally(() => {
      if (this.restoring === restoring) this.restoring = null;
    });
    this.restoring = restoring;
  }

  private emit(status: RuntimeStatus): void {
    for (const listener of this.statusListeners) listener(status);
  }
}
