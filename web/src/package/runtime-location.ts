// The npm package's runtime: the worker and every asset as a file next to the package's index.js
// (tools/build_package.mjs lays them out). Each URL is a literal `new URL('./…', import.meta.url)`
// so that a consumer's bundler (Vite, webpack, …) copies the file into their build and rewrites
// the URL, and a page with no bundler finds it beside the module. The worker is referenced as an
// asset, not as `new Worker(new URL(…))`, so bundlers copy it as built instead of rebuilding it.

import type { RuntimeAssets } from '../runtime-assets';

export function makeRuntimeWorker(): Worker {
  const script = new URL('./runtime.worker.js', import.meta.url);
  return new Worker(script, { type: 'module', name: 'onnxpipe-runtime' });
}

export function defaultAssets(): RuntimeAssets {
  return {
    ort_wasm: new URL('./assets/ort/ort.wasm.bundle.min.mjs', import.meta.url).href,
    ort_wasm_binary: new URL('./assets/ort/ort-wasm-simd-threaded.wasm', import.meta.url).href,
    ort_webgpu: new URL('./assets/ort/ort.webgpu.bundle.min.mjs', import.meta.url).href,
    ort_webgpu_binary: new URL('./assets/ort/ort-wasm-simd-threaded.asyncify.wasm', import.meta.url).href,
    pyodide: new URL('./assets/pyodide/pyodide.mjs', import.meta.url).href,
    pyodide_asm: new URL('./assets/pyodide/pyodide.asm.mjs', import.meta.url).href,
    pyodide_wasm: new URL('./assets/pyodide/pyodide.asm.wasm', import.meta.url).href,
    python_stdlib: new URL('./assets/pyodide/python_stdlib.zip', import.meta.url).href,
    pyodide_lock: new URL('./assets/pyodide/pyodide-lock.json', import.meta.url).href,
    onnxpipe_wheel: new URL('./assets/pyodide/onnxpipe-py3-none-any.whl', import.meta.url).href,
    espeak_ng: new URL('./assets/espeak-ng/espeak-ng.js', import.meta.url).href,
    espeak_ng_data: new URL('./assets/espeak-ng/espeak-ng.data', import.meta.url).href,
  };
}
