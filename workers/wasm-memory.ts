// The worker's WebAssembly memories, for reporting how much the runtime keeps resident.
// A wasm memory grows but never shrinks, so its size now is its peak so far. Neither
// onnxruntime-web nor Pyodide exposes its memory, so this module (imported first by the worker)
// records them as they are made: onnxruntime-web's threaded build constructs its shared heap in
// JavaScript (`new WebAssembly.Memory({shared: true, ...})`); Pyodide's heap is its instance's
// exported memory. Pyodide's one-page shared memory (used only for Atomics.wait) is left out.

import type { WasmMemory } from '../web/src/protocol';

const ortHeaps: WebAssembly.Memory[] = [];
const pythonHeaps: WebAssembly.Memory[] = [];

function isSharedHeap(descriptor: unknown): boolean {
  const d = descriptor as WebAssembly.MemoryDescriptor & { shared?: boolean } | undefined;
  return Boolean(d?.shared) && (d?.maximum ?? Infinity) > 1;
}

function recordExported(result: unknown): void {
  const instance = (result as { instance?: WebAssembly.Instance }).instance ?? (result as WebAssembly.Instance);
  const memory = instance?.exports?.memory;
  if (memory instanceof WebAssembly.Memory && !ortHeaps.includes(memory) && !pythonHeaps.includes(memory)) {
    pythonHeaps.push(memory);
  }
}

const OriginalMemory = WebAssembly.Memory;
WebAssembly.Memory = new Proxy(OriginalMemory, {
  construct(target, args: [WebAssembly.MemoryDescriptor]) {
    const memory = Reflect.construct(target, args) as WebAssembly.Memory;
    if (isSharedHeap(args[0])) ortHeaps.push(memory);
    return memory;
  },
});
const instantiate = WebAssembly.instantiate.bind(WebAssembly);
WebAssembly.instantiate = (async (...args: Parameters<typeof WebAssembly.instantiate>) => {
  const result = await instantiate(...args);
  recordExported(result);
  return result;
}) as typeof WebAssembly.instantiate;
const instantiateStreaming = WebAssembly.instantiateStreaming?.bind(WebAssembly);
if (instantiateStreaming) {
  WebAssembly.instantiateStreaming = async (...args: Parameters<typeof WebAssembly.instantiateStreaming>) => {
    const result = await instantiateStreaming(...args);
    recordExported(result);
    return result;
  };
}

const total = (heaps: WebAssembly.Memory[]): number | null =>
  heaps.length ? heaps.reduce((sum, m) => sum + m.buffer.byteLength, 0) : null;

/** Bytes of each runtime's wasm heap now (= its peak so far); null before it exists. */
export function wasmMemory(): WasmMemory {
  return { ort_bytes: total(ortHeaps), ort_heaps: ortHeaps.map((m) => m.buffer.byteLength), python_bytes: total(pythonHeaps) };
}
