// More onnxruntime-web instances for one worker, one 4 GiB WASM heap each: a decoder too large
// for one heap runs as consecutive parts (py/onnxpipe/heap/shards.py), part k in instance k.
// Instance 0 is the one the worker booted; each other is the plain WASM build imported again
// under its own URL (a module is instantiated once per URL), with the same thread count.

import type * as Ort from 'onnxruntime-web';

import { assets } from './assets';

type OrtModule = typeof Ort;

let main: OrtModule | null = null;
const others = new Map<number, Promise<OrtModule>>();

/** The instance the worker booted (workers/boot.ts). */
export function useMainOrt(module: OrtModule): void {
  main = module;
}

/** Instance ``heap`` (0: the booted one), imported on first use. */
export function ortInstance(heap: number): Promise<OrtModule> {
  if (!main) return Promise.reject(new Error('onnxruntime-web has not started in this worker'));
  if (heap === 0) return Promise.resolve(main);
  let instance = others.get(heap);
  if (!instance) {
    const threads = main.env.wasm.numThreads ?? 1;
    const urls = assets();
    const url = `${urls.ort_wasm}${urls.ort_wasm.includes('?') ? '&' : '?'}onnxpipe-heap=${heap}`;
    instance = (import(/* @vite-ignore */ url) as Promise<OrtModule>).then((ort) => {
      ort.env.wasm.wasmPaths = { wasm: urls.ort_wasm_binary };
      ort.env.wasm.numThreads = threads;
      return ort;
    });
    others.set(heap, instance);
  }
  return instance;
}

/** One graph as parts in consecutive instances: part k reads the caller's feeds and what the
 * parts before it made, and hands on its outputs (heap/shards.py's Part). */
export interface PartSpec { inputs: string[]; outputs: string[] }

export class PartsSession {
  constructor(private readonly parts: { session: Ort.InferenceSession; ort: OrtModule; spec: PartSpec }[]) {}

  async run(feeds: Record<string, Ort.Tensor>, outputs: string[]): Promise<Record<string, Ort.Tensor>> {
    const values = new Map(Object.entries(feeds));
    for (const [k, { session, ort, spec }] of this.parts.entries()) {
      const mine: Record<string, Ort.Tensor> = {};
      for (const name of spec.inputs) {
        const value = values.get(name);
        if (!value) throw new Error(`part ${k} of the session needs "${name}", which nothing gave it`);
        // a tensor of another instance, as this instance's: the same data, no copy
        mine[name] = value instanceof ort.Tensor ? value : new ort.Tensor(value.type as 'float32', value.data as Float32Array, value.dims);
      }
      const result = await session.run(mine, spec.outputs);
      for (const name of spec.outputs) values.set(name, result[name]!);
    }
    const out: Record<string, Ort.Tensor> = {};
    for (const name of outputs) out[name] = values.get(name)!;
    return out;
  }
}
