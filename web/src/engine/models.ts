// The models an engine holds: one runtime worker each (a voice app loads chat, speech and
// transcription at once), keyed by the bundle URL a request names. A busy model queues requests
// in order rather than refusing them.

import { RuntimeClient, type LoadOptions, type RuntimeStatus } from '../client';
import type { LoadedInfo } from '../protocol';
import { ModelNotFoundError, fromRuntime } from './errors';

export interface ModelSlot {
  id: string;
  client: RuntimeClient;
  info: LoadedInfo;
  created: number;
}

export class ModelTable {
  private readonly slots = new Map<string, Promise<ModelSlot>>();
  private readonly queues = new Map<string, Promise<unknown>>();
  /** A client booted by createEngine() for the first model (its runtime starts early). */
  private spare: RuntimeClient | null;

  /** engine.onStatus listeners: each hears every client's status, with the model it holds. */
  private readonly statusListeners = new Set<(status: RuntimeStatus, model: string | null) => void>();
  /** engine.storage.onChange listeners: after each load (a heal's reload too) and each removal. */
  readonly storageListeners = new Set<() => void>();
  /** The model each client was given (a spare has none). */
  private readonly modelOf = new Map<RuntimeClient, string>();

  constructor(private readonly makeClient: () => RuntimeClient, spare: RuntimeClient | null) {
    this.spare = spare && this.watch(spare);
  }

  /** Forward ``client``'s statuses and loads to the engine's listeners. */
  private watch(client: RuntimeClient): RuntimeClient {
    client.onStatus((status) => {
      const model = this.modelOf.get(client) ?? null;
      for (const listener of this.statusListeners) listener(status, model);
    });
    client.onLoaded(() => this.storageChanged());
    return client;
  }

  storageChanged(): void {
    for (const listener of this.storageListeners) listener();
  }

  onStatus(listener: (status: RuntimeStatus, model: string | null) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  /** A client to ask for what is not a model's (stored bundles): the spare, a loaded model's, or
   * a new spare. */
  async anyClient(): Promise<RuntimeClient> {
    if (this.spare) return this.spare;
    for (const slot of await this.list()) return slot.client;
    return this.spareClient();
  }

  /** The spare client (the next model's), started now when there is none (not booted). */
  spareClient(): RuntimeClient {
    this.spare ??= this.watch(this.makeClient());
    return this.spare;
  }

  /** The client running model ``id`` (loaded or loading), else the spare; null when neither. */
  clientOf(id: string | null): RuntimeClient | null {
    const key = id === null ? null : normalize(id);
    for (const [client, model] of this.modelOf) if (model === key) return client;
    return this.spare;
  }

  /** The loaded model ``id`` (a bundle URL), loading it first when ``load`` says so. */
  get(id: string, options: LoadOptions = {}, load = true): Promise<ModelSlot> {
    const key = normalize(id);
    const known = this.slots.get(key);
    if (known) return known;
    if (!load) return Promise.reject(new ModelNotFoundError(`model "${id}" is not loaded`));
    const client = this.spare ?? this.watch(this.makeClient());
    this.spare = null;
    this.modelOf.set(client, key);
    const slot = client.load(key, options).then(
      (info) => ({ id: key, client, info, created: Math.floor(Date.now() / 1000) }),
      (error: unknown) => {
        this.slots.delete(key);
        this.modelOf.delete(client);
        client.terminate();
        const failed = fromRuntime(error);
        throw failed.kind === 'network' || failed.kind === 'bundle' ? new ModelNotFoundError(`model "${id}": ${failed.message}`) : failed;
      },
    );
    this.slots.set(key, slot);
    return slot;
  }

  /** Run ``job`` on model ``id`` after the requests queued before it. */
  queue<T>(id: string, job: (slot: ModelSlot) => Promise<T>, options?: LoadOptions): Promise<T> {
    const key = normalize(id);
    const before = this.queues.get(key) ?? Promise.resolve();
    const run = before.catch(() => {}).then(async () => job(await this.get(key, options)));
    this.queues.set(key, run.catch(() => {}));
    return run;
  }

  async list(): Promise<ModelSlot[]> {
    const settled = await Promise.allSettled(this.slots.values());
    return settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  }

  /** Drop model ``id`` and its worker (and its memory). */
  async unload(id: string): Promise<void> {
    const key = normalize(id);
    const slot = this.slots.get(key);
    if (!slot) throw new ModelNotFoundError(`model "${id}" is not loaded`);
    this.slots.delete(key);
    this.queues.delete(key);
    const client = (await slot.catch(() => null))?.client;
    if (client) this.modelOf.delete(client);
    client?.terminate();
  }
}

/** Bundle URLs name one model with or without the trailing slash, relative or absolute. */
export function normalize(id: string): string {
  const url = new URL(id, self.location.href).href;
  return url.endsWith('/') ? url : `${url}/`;
}
