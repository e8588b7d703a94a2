// Where the runtime worker finds the heavy files it loads at run time: onnxruntime-web (its ES
// module and wasm, per build), Pyodide, the onnxpipe wheel and its lockfile, espeak-ng. The page
// decides (a bundler may have renamed every file) and tells the worker once, as it starts.
//
// Three sources of the same map: the site's own layout (runtime-location.ts), the npm package's
// (package/runtime-location.ts: one `new URL(..., import.meta.url)` per file, which a consumer's
// bundler copies), and `assetBase` (the package's assets/ folder hosted anywhere: assetsAt()).

export interface RuntimeAssets {
  /** onnxruntime-web's WASM build (ort.wasm.bundle.min.mjs) and its wasm binary */
  ort_wasm: string;
  ort_wasm_binary: string;
  /** onnxruntime-web's WebGPU build (ort.webgpu.bundle.min.mjs) and its wasm binary */
  ort_webgpu: string;
  ort_webgpu_binary: string;
  /** Pyodide: pyodide.mjs, pyodide.asm.mjs, pyodide.asm.wasm, python_stdlib.zip */
  pyodide: string;
  pyodide_asm: string;
  pyodide_wasm: string;
  python_stdlib: string;
  /** our pyodide-lock.json (it names the onnxpipe wheel and its sha256) and the wheel (absent:
   * the file the lockfile names, next to it) */
  pyodide_lock: string;
  onnxpipe_wheel?: string;
  /** espeak-ng compiled to JavaScript (GPL-3.0) and its voice data */
  espeak_ng: string;
  espeak_ng_data: string;
}

/** Each file's path inside the package's assets/ folder: what `assetBase` must hold. */
export const PACKAGE_ASSET_FILES: Readonly<Required<RuntimeAssets>> = {
  ort_wasm: 'ort/ort.wasm.bundle.min.mjs',
  ort_wasm_binary: 'ort/ort-wasm-simd-threaded.wasm',
  ort_webgpu: 'ort/ort.webgpu.bundle.min.mjs',
  ort_webgpu_binary: 'ort/ort-wasm-simd-threaded.asyncify.wasm',
  pyodide: 'pyodide/pyodide.mjs',
  pyodide_asm: 'pyodide/pyodide.asm.mjs',
  pyodide_wasm: 'pyodide/pyodide.asm.wasm',
  python_stdlib: 'pyodide/python_stdlib.zip',
  pyodide_lock: 'pyodide/pyodide-lock.json',
  onnxpipe_wheel: 'pyodide/onnxpipe-py3-none-any.whl',
  espeak_ng: 'espeak-ng/espeak-ng.js',
  espeak_ng_data: 'espeak-ng/espeak-ng.data',
};

/** The assets of a folder laid out as the package's assets/ (self-hosted or on a CDN). */
export function assetsAt(base: string | URL): RuntimeAssets {
  let folder: URL;
  try {
    folder = new URL(String(base), self.location.href);
  } catch {
    throw new TypeError(`assetBase: expected a URL of a folder, found ${JSON.stringify(String(base))}`);
  }
  if (!folder.pathname.endsWith('/')) folder.pathname += '/';
  const entries = Object.entries(PACKAGE_ASSET_FILES).map(([key, file]) => [key, new URL(file, folder).href]);
  return Object.fromEntries(entries) as unknown as RuntimeAssets;
}

/** A problem with an asset map from the page, or null (the worker checks before using one). */
export function badAssets(value: unknown): string | null {
  if (!value || typeof value !== 'object') return `assets: expected an object, found ${JSON.stringify(value) ?? 'none'}`;
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(PACKAGE_ASSET_FILES)) {
    if (key === 'onnxpipe_wheel' && record[key] === undefined) continue;
    if (typeof record[key] !== 'string' || !record[key]) return `assets.${key}: expected a URL, found ${JSON.stringify(record[key]) ?? 'none'}`;
  }
  const unknown = Object.keys(record).filter((key) => !(key in PACKAGE_ASSET_FILES));
  return unknown.length ? `assets: unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}` : null;
}
