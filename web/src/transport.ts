// The page's end of the worker protocol (web/src/protocol.ts): call(verb, args) posts
// {id, verb, args} and resolves with the {id, result} that ends it (or rejects with its error);
// {id, event, data} messages reach the call's onEvent meanwhile. One Channel per worker.

import { ALIVE_EVENT, type ArgsOf, type CallMessage, type ErrorKind, type EventOf, type FatalEvent, type ResultOf, type Verb, type WorkerMessage } from './protocol';

export class RuntimeError extends Error {
  constructor(readonly kind: ErrorKind | string, message: string) {
    super(message);
    this.name = 'RuntimeError';
  }
}

export interface CallOptions<V extends Verb> {
  /** Each event the worker streams for this call, until it ends. */
  onEvent?: (event: EventOf<V>) => void;
  /** Buffers or ports moved to the worker with the call. */
  transfer?: Transferable[];
  /** The call's id (from nextCallId()), for a caller that needs it before the call ends. */
  id?: number;
}

export interface ChannelHooks {
  /** Any message from the worker: it is alive (runtime-watch.ts). */
  heard(): void;
  /** The worker said its engine is unusable ('fatal', under any id). */
  fatal(event: FatalEvent): void;
  /** A message for no call in flight (events of a 'listen' that already resolved). */
  stray(message: WorkerMessage): void;
}

/** Calls that do not count as work in flight: the watch's own (runtime-watch.ts judges pings
 * only while nothing else runs). */
const SUPERVISION: ReadonlySet<Verb> = new Set(['watch', 'ping']);

type Pending = { verb: Verb; resolve(value: unknown): void; reject(error: RuntimeError): void; onEvent?(event: unknown): void };

let lastId = 0;
/** A fresh call id, unique in this page (ids never repeat across the workers it starts). */
export const nextCallId = (): number => ++lastId;

export class Channel {
  private readonly pending = new Map<number, Pending>();

  constructor(private readonly worker: Worker, private readonly hooks: ChannelHooks) {
    worker.onmessage = (message: MessageEvent<WorkerMessage>) => this.receive(message.data);
  }

  /** Run ``verb`` in the worker. */
  call<V extends Verb>(verb: V, args: ArgsOf<V>, options: CallOptions<V> = {}): Promise<ResultOf<V>> {
    const id = options.id ?? nextCallId();
    return new Promise<ResultOf<V>>((resolve, reject) => {
      this.pending.set(id, { verb, resolve: resolve as (value: unknown) => void, reject, onEvent: options.onEvent as Pending['onEvent'] });
      this.worker.postMessage({ id, verb, args } satisfies CallMessage<V>, options.transfer ?? []);
    });
  }

  /** True while a call other than the watch's own is in flight. */
  get working(): boolean {
    for (const p of this.pending.values()) if (!SUPERVISION.has(p.verb)) return true;
    return false;
  }

  /** Reject every call in flight with ``kind`` and ``message``. */
  failAll(kind: ErrorKind, message: string): void {
    const calls = [...this.pending.values()];
    this.pending.clear();
    for (const p of calls) p.reject(new RuntimeError(kind, message));
  }

  /** Stop hearing the worker (it is being replaced). */
  close(): void {
    this.worker.onmessage = null;
  }

  private receive(message: WorkerMessage): void {
    this.hooks.heard();
    if ('event' in message && message.event === ALIVE_EVENT) return;   // heard: nothing more to it
    if ('event' in message && message.event === 'fatal') {
      this.hooks.fatal(message.data as FatalEvent);
      return;
    }
    const pending = this.pending.get(message.id);
    if (!pending) {
      this.hooks.stray(message);
    } else if ('event' in message) {
      pending.onEvent?.({ event: message.event, data: message.data });
    } else if ('error' in message) {
      this.pending.delete(message.id);
      pending.reject(new RuntimeError(message.error.kind, message.error.message));
    } else {
      this.pending.delete(message.id);
      pending.resolve(message.result);
    }
  }
}
