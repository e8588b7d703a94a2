// The site's runtime: its worker (bundled by our Vite build) and its asset layout (vite.config.ts,
// tools/serve.py): Pyodide and the wheel under /pyodide/, espeak-ng under /espeak-ng/,
// onnxruntime-web's modules and wasm wherever Vite put them. The npm package replaces this
// module with package/runtime-location.ts at build time (tools/build_package.mjs).

import type { RuntimeAssets } from './runtime-assets';

export const makeRuntimeWorker = (): Worker =>
  new Worker(new URL('../../workers/runtime.worker.ts', import.meta.url), { type: 'module' });

export function defaultAssets(): RuntimeAssets {
  const site = (file: string): string => new URL(file, self.location.origin).href;
  return {
    ort_wasm: new URL('../../node_modules/onnxruntime-web/dist/ort.wasm.bundle.min.mjs', import.meta.url).href,
    ort_wasm_binary: new URL('../../node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.wasm', import.meta.url).href,
    ort_webgpu: new URL('../../node_modules/onnxruntime-web/dist/ort.webgpu.bundle.min.mjs', import.meta.url).href,
    ort_webgpu_binary: new URL('../../node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.wasm', import.meta.url).href,
    pyodide: site('/pyodide/pyodide.mjs'),
    pyodide_asm: site('/pyodide/pyodide.asm.mjs'),
    pyodide_wasm: site('/pyodide/pyodide.asm.wasm'),
    python_stdlib: site('/pyodide/python_stdlib.zip'),
    pyodide_lock: site('/pyodide/pyodide-lock.json'),
    espeak_ng: site('/espeak-ng/espeak-ng.js'),
    espeak_ng_data: site('/espeak-ng/espeak-ng.data'),
  };
}
