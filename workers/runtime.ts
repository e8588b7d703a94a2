// The runtime this worker runs (workers/boot.ts): Pyodide + onnxruntime-web + onnxpipe's Python
// entry, started once per worker by a 'boot' call when the page opens, else by the first load;
// the thread count and ORT build are fixed from then on.

import type { ExecutionProvider, ThreadChoice } from '../web/src/protocol';
import { Stages, bootRuntime } from './boot';
import { CallError } from './call';
import { PythonEntry } from './python-entry';

export interface Pyodide {
  runPython(code: string): unknown;
  unpackArchive(buffer: Uint8Array, format: string, options: { extractDir: string }): void;
  registerJsModule(name: string, module: object): void;
  pyimport(name: string): unknown;
  FS: { mkdirTree(path: string): void; writeFile(path: string, data: Uint8Array): void; rmdir(path: string): void };
}

export interface Runtime {
  py: Pyodide;
  entry: PythonEntry;
  bootMs: number;
  threadChoice: ThreadChoice;
  stages: Stages;
  snapshot: 'restored' | 'made' | 'none';
  webgpuBuild: boolean; // the WebGPU build of onnxruntime-web was loaded (else the plain WASM one)
}

let runtime: Promise<Runtime> | null = null;
/** The stages of the runtime's start, as they end (a load reports them as its first progress). */
let bootStages: Stages | null = null;

/** The runtime, started now with ``threads`` and ``ep`` unless it was already. */
export function startRuntime(threads?: number, ep?: ExecutionProvider): { runtime: Promise<Runtime>; stages: Stages } {
  if (!runtime) {
    const stages = new Stages();
    bootStages = stages;
    const start = performance.now();
    runtime = bootRuntime<Pyodide>(ep, threads, stages).then(({ py, entry, threads: choice, snapshot }) => ({
      py, entry: new PythonEntry(entry), bootMs: performance.now() - start, threadChoice: choice, stages, snapshot,
      webgpuBuild: ep === 'webgpu',
    }));
  }
  return { runtime, stages: bootStages! };
}

/** The runtime if one was started (by a boot or a load), else null. */
export const startedRuntime = (): Promise<Runtime> | null => runtime;

/** The Python entry once a load has booted the runtime; else an 'input' error. */
export async function loadedEntry(): Promise<PythonEntry> {
  if (runtime) return (await runtime).entry;
  throw new CallError('input', 'no bundle is loaded: send a load request first');
}
