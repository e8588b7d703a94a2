// createEngine(): the runtime as an OpenAI-shaped engine. Each model a request names (a bundle
// URL) loads on demand in its own runtime worker; several stay loaded at once.

import { RuntimeClient, type LoadOptions, type RuntimeStatus } from '../client';
import type { ExecutionProvider, LoadedInfo, ProgressEvent, StoredBundle, ThreadChoice } from '../protocol';
import { Speech, Transcriptions } from './audio';
import { Listener } from './listen';
import { ChatCompletions } from './chat';
import { InputError, fromRuntime } from './errors';
import { assetsAt } from '../runtime-assets';
import { engineFetch } from './fetch';
import { ModelTable } from './models';

/** A file's bytes as a model loads (the runtime's start counts its steps as file "runtime"). */
export interface Progress {
  model: string;
  file: string;
  loaded: number;
  total: number;
  phase: ProgressEvent['phase'];
  /** the runtime's own percent (where ``total`` is 0: nothing counted in bytes) */
  percent: number;
}

/** onnxpipe's extra: bundles stored on this device (the runtime caches each model it loads). */
export interface EngineStorage {
  /** The stored bundles, sizes in bytes. */
  list(): Promise<StoredBundle[]>;
  /** Remove the stored bundle ``key`` (from list()); resolves with what is left. A loaded model
   * keeps running; one still loading is refused (InputError). */
  remove(key: string): Promise<StoredBundle[]>;
  /** ``listener`` runs after each model load (a reload after a heal too) and each removal;
   * returns an unsubscribe. */
  onChange(listener: () => void): () => void;
}

export interface EngineOptions {
  onProgress?: (progress: Progress) => void;
  /** 'wasm' (default) or 'webgpu' for the models this engine loads. */
  ep?: ExecutionProvider;
  /** WASM threads (default: one per core up to 4 where the page is cross-origin isolated, else 1). */
  threads?: number;
  /** A folder laid out as the package's assets/ (self-hosted or on a CDN) to load onnxruntime-web,
   * Pyodide, the onnxpipe wheel and espeak-ng from; default: the copies next to this module. */
  assetBase?: string | URL;
}

export interface ModelLoadOptions {
  onProgress?: (progress: Progress) => void;
  ep?: ExecutionProvider;
  dtype?: string;
  variant?: string;
  /** WASM threads for this model's worker (default: the engine's ``threads``). */
  threads?: number;
  /** wasm: MatMulNBits weights expanded to fp32 at load (docs/large-models.md). */
  expandWeights?: 'auto' | 'all' | 'none';
  /** Tokens of KV cache reserved in the WASM heap; prompt + reply stop there. */
  contextLength?: number;
  /** wasm: onnxruntime-web instances (4 GiB heaps each) to spread a decoder over, or 'auto'. */
  heaps?: 'auto' | number;
}

export interface Model {
  id: string;
  object: 'model';
  created: number;
  owned_by: 'onnxpipe';
  kind: LoadedInfo['kind'];
}

export class Engine {
  private readonly table: ModelTable;
  readonly chat: { completions: ChatCompletions };
  /** ``listen``: onnxpipe's extra (voice activity on a microphone stream, engine/listen.ts). */
  readonly audio: { speech: Speech; transcriptions: Transcriptions; listen: Listener['listen'] };
  readonly models: { list: () => Promise<{ object: 'list'; data: Model[] }> };
  /** OpenAI's HTTP routes, for the official client's ``fetch`` option. */
  readonly fetch: typeof fetch;
  /** onnxpipe's extra: the stored bundles. */
  readonly storage: EngineStorage;

  constructor(private readonly options: EngineOptions, spare: RuntimeClient | null) {
    this.table = new ModelTable(() => newClient(options), spare);
    TABLES.set(this, this.table);
    const table = this.table;
    this.storage = {
      list: async () => {
        try {
          return await (await table.anyClient()).storedBundles();
        } catch (error) {
          throw fromRuntime(error);
        }
      },
      remove: async (key: string) => {
        if (typeof key !== 'string' || !key) throw new InputError(`key: expected a stored bundle's key (storage.list()), found ${JSON.stringify(key)}`, 'key');
        try {
          const left = await (await table.anyClient()).removeStored(key);
          table.storageChanged();
          return left;
        } catch (error) {
          throw fromRuntime(error);
        }
      },
      onChange: (listener) => {
        table.storageListeners.add(listener);
        return () => table.storageListeners.delete(listener);
      },
    };
    this.chat = { completions: new ChatCompletions(this.table) };
    const listener = new Listener(this.table);
    this.audio = { speech: new Speech(this.table), transcriptions: new Transcriptions(this.table), listen: (params) => listener.listen(params) };
    this.models = {
      list: async () => ({
        object: 'list',
        data: (await this.table.list()).map((s) => ({ id: s.id, object: 'model', created: s.created, owned_by: 'onnxpipe', kind: s.info.kind })),
      }),
    };
    this.fetch = engineFetch(this);
  }

  /** Load ``model`` now (a request naming it would load it on demand). */
  async load(model: string, options: ModelLoadOptions = {}): Promise<LoadedInfo> {
    checkOptions('load', options, LOAD_OPTIONS);
    const onProgress = options.onProgress ?? this.options.onProgress;
    const load: LoadOptions = {
      ep: options.ep ?? this.options.ep, dtype: options.dtype, variant: options.variant, threads: options.threads ?? this.options.threads,
      expandWeights: options.expandWeights, contextLength: options.contextLength, heaps: options.heaps,
      onProgress: onProgress && ((e) => onProgress({ model, file: e.file, loaded: e.loaded, total: e.total, phase: e.phase, percent: e.percent })),
    };
    return (await this.table.get(model, load)).info;
  }

  /** onnxpipe's extra: hear of a model's worker dying and healing. ``status`` is
   * {state: 'stopped', reason} when it died (its pending request fails with a 'stopped' error),
   * then {state: 'restored', reason, info, ep} once a new worker has loaded the model again from
   * this device's storage (``ep``: 'wasm' after a lost WebGPU device), or {state: 'failed',
   * reason, message} when it could not; ``model`` is the model's id (null: the engine's runtime
   * before any model). Returns an unsubscribe. */
  onStatus(listener: (status: RuntimeStatus, model: string | null) => void): () => void {
    if (typeof listener !== 'function') throw new InputError('onStatus: expected a function', 'listener');
    return this.table.onStatus(listener);
  }

  /** Drop ``model`` and its worker. */
  unload(model: string): Promise<void> {
    return this.table.unload(model);
  }
}

const ENGINE_OPTIONS: readonly (keyof EngineOptions)[] = ['onProgress', 'ep', 'threads', 'assetBase'];
const LOAD_OPTIONS: readonly (keyof ModelLoadOptions)[] = ['onProgress', 'ep', 'dtype', 'variant', 'threads', 'expandWeights', 'contextLength', 'heaps'];

/** Refuse an options object with a key onnxpipe does not know (a typo would be ignored otherwise). */
function checkOptions(call: string, options: object, known: readonly string[]): void {
  if (typeof options !== 'object' || options === null) throw new InputError(`${call}: options must be an object, found ${String(options)}`);
  const unknown = Object.keys(options).find((key) => !known.includes(key));
  if (unknown !== undefined) throw new InputError(`${call}: unknown option "${unknown}" (known: ${known.join(', ')})`, unknown);
  const { ep } = options as { ep?: unknown };
  if (ep !== undefined && ep !== 'wasm' && ep !== 'webgpu') throw new InputError(`${call}: ep must be "wasm" or "webgpu", found ${JSON.stringify(ep)}`, 'ep');
}

function newClient(options: EngineOptions): RuntimeClient {
  return new RuntimeClient(undefined, options.assetBase === undefined ? {} : { assets: assetsAt(options.assetBase) });
}

const TABLES = new WeakMap<Engine, ModelTable>();

/** Not public (the package does not export it): the RuntimeClient running ``model`` (loaded or
 * loading), or with no model the engine's booted runtime not yet given to one. The site's pages
 * expose it as their test hook (window.__onnxpipe.client). */
export function engineClient(engine: Engine, model: string | null = null, start = false): RuntimeClient | null {
  const table = TABLES.get(engine) as ModelTable;
  return table.clientOf(model) ?? (start ? table.spareClient() : null);
}

/** Not public: createEngine without waiting, for a page that shows itself while the runtime
 * starts (a load waits for the boot). ``booted``: the WASM thread count chosen and why. */
export function startEngine(options: EngineOptions = {}): { engine: Engine; booted: Promise<ThreadChoice> } {
  checkOptions('createEngine', options, ENGINE_OPTIONS);
  let client: RuntimeClient;
  try {
    client = newClient(options);
  } catch (error) {
    throw new InputError(error instanceof Error ? error.message : String(error), 'assetBase');
  }
  const booted = client.boot({ ep: options.ep, threads: options.threads });
  return { engine: new Engine(options, client), booted };
}

/** Start the runtime (Pyodide, onnxruntime-web, onnxpipe) and resolve with an engine. */
export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const { engine, booted } = startEngine(options);
  try {
    await booted;
  } catch (error) {
    engineClient(engine)?.terminate();
    throw fromRuntime(error);
  }
  options.onProgress?.({ model: '', file: 'runtime', loaded: 1, total: 1, phase: 'boot', percent: 100 });
  return engine;
}
