// Start the runtime: onnxruntime-web (wasm fetched, compiled, initialised) and Pyodide with the
// onnxpipe wheel at the same time, then the Python entry. Each part is timed for the page's
// time-to-first-token breakdown (docs/quick-start.md).

import type * as Ort from 'onnxruntime-web';

import type { ExecutionProvider, StartupStage, ThreadChoice } from '../web/src/protocol';
import { assets } from './assets';
import { bridge, useOrt } from './bridge';
import { useMainOrt } from './ort-instances';
import { bootPython, type PyodideLike, type SnapshotUse } from './python-boot';
import { chooseThreads } from './threads';

/** Epoch ms: the page and the worker have different time origins. */
export const now = (): number => performance.timeOrigin + performance.now();

/** Timed parts of starting, in the order they ended; watch() hears of each as it ends. */
export class Stages {
  readonly list: StartupStage[] = [];
  private readonly watchers = new Set<() => void>();

  async time<T>(name: StartupStage['name'], fn: () => Promise<T>): Promise<T> {
    const start = now();
    try {
      return await fn();
    } finally {
      this.add(name, start);
    }
  }

  add(name: StartupStage['name'], start: number, end = now()): void {
    this.list.push({ name, start, end });
    for (const watcher of this.watchers) watcher();
  }

  /** Call ``watcher`` after each stage ends; returns the unsubscribe. */
  watch(watcher: () => void): () => void {
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }
}

/** The steps of bootRuntime a load waits for, in no fixed order (the first two run at once). */
export const BOOT_STEPS: readonly StartupStage['name'][] = ['onnxruntime', 'pyodide', 'import'];

/** How many of BOOT_STEPS have ended in ``stages``. */
export function bootStepsDone(stages: Stages): number {
  return BOOT_STEPS.filter((name) => stages.list.some((s) => s.name === name)).length;
}

// An ONNX model of one Identity node on float[1] (ir 8, opset 13): opening a session on it makes
// onnxruntime-web fetch, compile and initialise its wasm now, beside Pyodide's start, instead of
// at the bundle's first session.
const TINY_MODEL = new Uint8Array([
  8, 8, 58, 55, 10, 16, 10, 1, 120, 18, 1, 121, 34, 8, 73, 100, 101, 110, 116, 105, 116, 121, 18, 1, 116, 90, 15,
  10, 1, 120, 18, 10, 10, 8, 8, 1, 18, 4, 10, 2, 8, 1, 98, 15, 10, 1, 121, 18, 10, 10, 8, 8, 1, 18, 4, 10, 2, 8, 1,
  66, 4, 10, 0, 16, 13,
]);

/** The plain WASM build unless WebGPU is asked for: it is faster on WASM and has kernels the
 * WebGPU-capable build lacks (GatherBlockQuantized). Fixed for the worker's lifetime. Imported
 * from the URL the page gave (a bundler renames both files), its wasm named the same way. */
async function loadOrt(ep?: ExecutionProvider): Promise<typeof Ort> {
  const urls = assets();
  const [module, wasm] = ep === 'webgpu' ? [urls.ort_webgpu, urls.ort_webgpu_binary] : [urls.ort_wasm, urls.ort_wasm_binary];
  let ort: typeof Ort;
  try {
    ort = (await import(/* @vite-ignore */ module)) as typeof Ort;
  } catch (error) {
    throw new Error(`onnxruntime-web: cannot import ${module} (${error instanceof Error ? error.message : String(error)})`);
  }
  ort.env.wasm.wasmPaths = { wasm };
  return ort;
}

export interface PythonRuntime extends PyodideLike {
  registerJsModule(name: string, module: object): void;
  pyimport(name: string): unknown;
}

export interface Booted<P extends PythonRuntime> {
  py: P;
  entry: unknown;
  threads: ThreadChoice;
  snapshot: SnapshotUse;
}

export async function bootRuntime<P extends PythonRuntime>(
  ep: ExecutionProvider | undefined, requestedThreads: number | undefined, stages: Stages,
): Promise<Booted<P>> {
  const threads = chooseThreads(requestedThreads, self.crossOriginIsolated, navigator.hardwareConcurrency || 1);
  const start = now();
  const ortModule = loadOrt(ep).then((ort) => {
    ort.env.wasm.numThreads = threads.threads;   // before its wasm starts: fixed from then on
    useOrt(ort);
    useMainOrt(ort);
    return ort;
  });
  const ortReady = stages.time('onnxruntime', async () => {
    const session = await (await ortModule).InferenceSession.create(TINY_MODEL, { executionProviders: ['wasm'] });
    await session.release();
  });
  const python = bootPython<P>(assets());
  const [ort, booted] = await Promise.all([ortModule, python]);
  stages.add('pyodide', start, booted.interpreterAt);
  const { py } = booted;
  const entry = await stages.time('import', async () => {
    py.registerJsModule('ort', ort);
    py.registerJsModule('onnxpipe_js', bridge);
    return py.pyimport('onnxpipe.web_entry');
  });
  // the 'import' stage above began when the wheel was installed, right after the interpreter
  stages.list[stages.list.length - 1]!.start = booted.interpreterAt;
  await ortReady;
  return { py, entry, threads, snapshot: booted.snapshot };
}
