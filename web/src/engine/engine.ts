// createEngine(): the runtime as an OpenAI-shaped engine. Each model a request names (a bundle
// URL) loads on demand in its own runtime worker; several stay loaded at once.

import { RuntimeClient, type LoadOptions } from '../client';
import type { ExecutionProvider, LoadedInfo } from '../protocol';
import { Speech, Transcriptions } from './audio';
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
  phase: string;
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
  readonly audio: { speech: Speech; transcriptions: Transcriptions };
  readonly models: { list: () => Promise<{ object: 'list'; data: Model[] }> };
  /** OpenAI's HTTP routes, for the official client's ``fetch`` option. */
  readonly fetch: typeof fetch;

  constructor(private readonly options: EngineOptions, spare: RuntimeClient | null) {
    this.table = new ModelTable(() => newClient(options), spare);
    this.chat = { completions: new ChatCompletions(this.table) };
    this.audio = { speech: new Speech(this.table), transcriptions: new Transcriptions(this.table) };
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
      ep: options.ep ?? this.options.ep, dtype: options.dtype, variant: options.variant, threads: this.options.threads,
      onProgress: onProgress && ((e) => onProgress({ model, file: e.file, loaded: e.loaded, total: e.total, phase: e.phase })),
    };
    return (await this.table.get(model, load)).info;
  }

  /** Drop ``model`` and its worker. */
  unload(model: string): Promise<void> {
    return this.table.unload(model);
  }
}

const ENGINE_OPTIONS: readonly (keyof EngineOptions)[] = ['onProgress', 'ep', 'threads', 'assetBase'];
const LOAD_OPTIONS: readonly (keyof ModelLoadOptions)[] = ['onProgress', 'ep', 'dtype', 'variant'];

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

/** Start the runtime (Pyodide, onnxruntime-web, onnxpipe) and resolve with an engine. */
export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  checkOptions('createEngine', options, ENGINE_OPTIONS);
  let client: RuntimeClient;
  try {
    client = newClient(options);
  } catch (error) {
    throw new InputError(error instanceof Error ? error.message : String(error), 'assetBase');
  }
  try {
    await client.boot({ ep: options.ep, threads: options.threads });
  } catch (error) {
    client.terminate();
    throw fromRuntime(error);
  }
  options.onProgress?.({ model: '', file: 'runtime', loaded: 1, total: 1, phase: 'boot' });
  return new Engine(options, client);
}
