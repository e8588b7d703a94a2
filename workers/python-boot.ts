// Start Pyodide with the onnxpipe wheel, from a memory snapshot when this device has one; every
// file from the URLs the page gave (web/src/runtime-assets.ts).
//
// Measured in headless Chromium on 2 cores (docs/quick-start.md): loadPyodide spends seconds
// initialising the interpreter on the worker's thread, and importing onnxpipe's pure-Python
// modules a few hundred ms more; restoring a snapshot of Pyodide's heap taken after those
// imports (~35 MB) takes a tenth of that. The first visit boots normally, snapshots the heap
// after importing onnxpipe.web_preload (pure Python: nothing in it refers to a JS object, which
// a snapshot could not hold) and keeps it in the Cache API; later visits restore it. The
// snapshot is keyed by the wheel's sha256, and Pyodide itself refuses one from another build.

import type { RuntimeAssets } from '../web/src/runtime-assets';

const CACHE = 'onnxpipe-python-snapshot';

export interface PyodideLike {
  runPython(code: string): unknown;
  unpackArchive(buffer: Uint8Array, format: string, options: { extractDir: string }): void;
}

interface LoadPyodide {
  (options: object): Promise<PyodideLike & { makeMemorySnapshot?: () => Uint8Array }>;
}

/** restored: from this device's snapshot; made: booted normally and a snapshot kept for next
 * time; none: booted normally (no Cache API here, or the snapshot failed). */
export type SnapshotUse = 'restored' | 'made' | 'none';

export interface PythonBoot<P> {
  py: P;
  snapshot: SnapshotUse;
  /** epoch ms the interpreter was up (started, or restored from the snapshot); the wheel and
   * onnxpipe.web_preload come after */
  interpreterAt: number;
}

interface Wheel {
  sha256: string;
  bytes: Uint8Array;
}

/** The onnxpipe wheel our pyodide-lock.json lists (tools/build_pyodide_lock.py), checked
 * against the lock's sha256. It is unpacked by hand, not by loadPackage: loadPackage records the
 * package in a JS object that a heap snapshot then refuses ("Unexpected hiwire entry"). */
async function fetchWheel(urls: RuntimeAssets): Promise<Wheel> {
  const lockUrl = urls.pyodide_lock;
  const lockResponse = await fetch(lockUrl);
  if (!lockResponse.ok) throw new Error(`${lockUrl}: HTTP ${lockResponse.status}`);
  const lock = (await lockResponse.json()) as { packages?: Record<string, { sha256?: string; file_name?: string }> };
  const entry = lock.packages?.onnxpipe;
  if (!entry?.file_name || !entry.sha256) throw new Error(`${lockUrl} lists no onnxpipe wheel (run tools/build_pyodide_lock.py)`);
  const url = urls.onnxpipe_wheel ?? new URL(entry.file_name, lockUrl).href;
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  const sha256 = Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
  if (sha256 !== entry.sha256) throw new Error(`${url}: sha256 ${sha256}, but ${lockUrl} lists ${entry.sha256} (a wheel and lockfile of different builds)`);
  return { sha256, bytes };
}

function install(py: PyodideLike, wheel: Wheel): void {
  const sitePackages = String(py.runPython("import sysconfig; sysconfig.get_path('purelib')"));
  py.unpackArchive(wheel.bytes, 'wheel', { extractDir: sitePackages });
  py.runPython('import importlib; importlib.invalidate_caches()');
}

async function importModule<T>(url: string): Promise<T> {
  try {
    return (await import(/* @vite-ignore */ url)) as T;
  } catch (error) {
    throw new Error(`Pyodide: cannot import ${url} (${error instanceof Error ? error.message : String(error)})`);
  }
}

/** Run ``start`` with fetches of ``indexURL``pyodide.asm.wasm sent to ``wasmUrl``: Pyodide takes
 * every other file's URL as an option but fetches its wasm by that fixed name, which a bundler
 * that renamed the file breaks. */
async function withWasmAt<T>(indexURL: string, wasmUrl: string, start: () => Promise<T>): Promise<T> {
  const fixedName = `${indexURL}pyodide.asm.wasm`;
  if (fixedName === wasmUrl) return start();
  const realFetch = self.fetch;
  self.fetch = (input: RequestInfo | URL, init?: RequestInit) =>
    realFetch(String(input instanceof Request ? input.url : input) === fixedName ? wasmUrl : input, init);
  try {
    return await start();
  } finally {
    self.fetch = realFetch;
  }
}

async function openCache(): Promise<Cache | null> {
  try {
    return self.caches ? await self.caches.open(CACHE) : null;
  } catch {
    return null;   // storage blocked (a third-party frame): boot without a snapshot
  }
}

async function storedSnapshot(cache: Cache | null, key: string): Promise<Uint8Array | null> {
  if (!cache) return null;
  try {
    const hit = await cache.match(key);
    return hit ? new Uint8Array(await hit.arrayBuffer()) : null;
  } catch {
    return null;
  }
}

async function keepSnapshot(cache: Cache | null, key: string, bytes: Uint8Array): Promise<void> {
  if (!cache) return;
  try {
    for (const old of await cache.keys()) await cache.delete(old);   // one wheel's snapshot at a time
    await cache.put(key, new Response(bytes as BlobPart, { headers: { 'Content-Type': 'application/octet-stream' } }));
  } catch {
    // over quota or storage blocked: the next visit boots normally again
  }
}

/**
 * Pyodide with the onnxpipe wheel installed and onnxpipe.web_preload imported. Nothing
 * JavaScript is registered yet (the caller registers its modules, then imports the entry).
 */
export async function bootPython<P extends PyodideLike>(urls: RuntimeAssets): Promise<PythonBoot<P>> {
  const indexURL = new URL('.', urls.pyodide_asm).href;
  const [{ loadPyodide }, createPyodideModule, wheel, cache] = await Promise.all([
    importModule<{ loadPyodide: LoadPyodide }>(urls.pyodide),
    importModule<{ default: unknown }>(urls.pyodide_asm).then((m) => m.default),
    fetchWheel(urls),
    openCache(),
  ]);
  const key = `${indexURL}onnxpipe-snapshot/${wheel.sha256}`;
  const stored = await storedSnapshot(cache, key);
  const options = { indexURL, lockFileURL: urls.pyodide_lock, stdLibURL: urls.python_stdlib, createPyodideModule };
  const now = (): number => performance.timeOrigin + performance.now();
  if (stored) {
    try {
      const py = await withWasmAt(indexURL, urls.pyodide_wasm, () => loadPyodide({ ...options, _loadSnapshot: stored }));
      const interpreterAt = now();
      // the heap has the imported modules; the files (lazy imports) go back on the file system
      install(py, wheel);
      return { py: py as unknown as P, snapshot: 'restored', interpreterAt };
    } catch (error) {
      console.warn('onnxpipe: the Python snapshot could not be restored; booting normally', error);
      await cache?.delete(key).catch(() => false);
    }
  }
  const making = cache !== null;
  const py = await withWasmAt(indexURL, urls.pyodide_wasm, () => loadPyodide({ ...options, ...(making ? { _makeSnapshot: true } : {}) }));
  const interpreterAt = now();
  install(py, wheel);
  py.runPython('import onnxpipe.web_preload');
  if (!making || !py.makeMemorySnapshot) return { py: py as unknown as P, snapshot: 'none', interpreterAt };
  let snapshot: Uint8Array;
  try {
    snapshot = py.makeMemorySnapshot();
  } catch (error) {
    console.warn('onnxpipe: no Python snapshot this time', error);
    return { py: py as unknown as P, snapshot: 'none', interpreterAt };
  }
  // awaited (tens of ms, first visit only) so a tab closed right after the load still keeps it
  await keepSnapshot(cache, key, snapshot);
  return { py: py as unknown as P, snapshot: 'made', interpreterAt };
}
