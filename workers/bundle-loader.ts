// Fetch a model bundle for the worker: manifest.json, then every file with progress, checked
// against the manifest (bytes, sha256) and kept in the Cache API so a second visit is offline.

export const CACHE_NAME = 'onnxpipe-models-v1';
const LARGE = /\.(onnx|data|bin|onnx_data)$/i;

export interface ManifestFile { path: string; bytes: number; sha256: string }
export interface Manifest { version: number; files: ManifestFile[] }

export class LoadError extends Error {
  constructor(readonly kind: 'network' | 'integrity' | 'quota' | 'bundle', message: string) {
    super(message);
  }
}

/** Per-file progress: bytes of ``file`` so far and its size. */
export type Progress = (phase: 'fetch' | 'cache' | 'verify', file: string, loaded: number, total: number) => void;

async function sha256(data: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', data as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

async function openCache(): Promise<Cache | null> {
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null; // no Cache API (e.g. an opaque origin): still works, just not offline
  }
}

async function readManifest(base: URL, cache: Cache | null): Promise<Manifest> {
  const url = new URL('manifest.json', base);
  let response: Response | undefined;
  try {
    response = await fetch(url, { cache: 'no-cache' });
    if (response.ok) await cache?.put(url, response.clone()).catch(() => undefined);
  } catch {
    response = (await cache?.match(url)) ?? undefined;   // offline: the cached manifest
  }
  if (!response || !response.ok) {
    throw new LoadError('network', `cannot fetch ${url.pathname}: ${response ? `HTTP ${response.status}` : 'offline and not cached'}`);
  }
  const manifest = (await response.json()) as Manifest;
  if (!Array.isArray(manifest.files)) throw new LoadError('bundle', `${url.pathname}: expected a "files" list`);
  return manifest;
}

async function download(url: URL, file: ManifestFile, progress: Progress): Promise<Uint8Array> {
  let response: Response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw new LoadError('network', `cannot fetch ${url.pathname}: ${String(error)}`);
  }
  if (!response.ok || !response.body) throw new LoadError('network', `cannot fetch ${url.pathname}: HTTP ${response.status}`);
  const out = new Uint8Array(file.bytes);
  const reader = response.body.getReader();
  let at = 0;
  for (;;) {
    const { done: end, value } = await reader.read();
    if (end) break;
    if (at + value.length > out.length) {
      throw new LoadError('integrity', `${file.path}: more than the ${file.bytes} bytes manifest.json lists`);
    }
    out.set(value, at);
    at += value.length;
    progress('fetch', file.path, at, file.bytes);
  }
  if (at !== file.bytes) throw new LoadError('integrity', `${file.path}: got ${at} bytes, manifest.json lists ${file.bytes}`);
  return out;
}

function quotaMessage(file: ManifestFile, error: unknown): string {
  return `the browser would not store ${file.path} (${(file.bytes / 1e6).toFixed(1)} MB) for offline use: ` +
    `${String(error)}. Free some site storage (or allow more) and load again; the model still runs this time.`;
}

/**
 * The bundle at ``base``, verified: first its small files (configs, tokenizer), then only the
 * large ones ``choose`` picks once it has seen the small ones (the model variant the engine
 * will open). ``warnings`` collects non-fatal problems.
 */
export async function loadBundle(
  base: URL,
  progress: Progress,
  warnings: string[],
  choose: (small: Map<string, Uint8Array>, large: string[]) => Promise<Set<string>>,
): Promise<Map<string, Uint8Array>> {
  const cache = await openCache();
  const manifest = await readManifest(base, cache);
  const small = manifest.files.filter((f) => !isLarge(f.path));
  const out = await fetchFiles(base, small, cache, progress, warnings);
  const needed = await choose(out, manifest.files.filter((f) => isLarge(f.path)).map((f) => f.path));
  const large = manifest.files.filter((f) => needed.has(f.path));
  const missing = [...needed].filter((path) => !large.some((f) => f.path === path));
  if (missing.length) throw new LoadError('bundle', `manifest.json does not list ${missing.join(', ')}`);
  for (const [path, data] of await fetchFiles(base, large, cache, progress, warnings)) {
    out.set(path, data);
  }
  return out;
}

async function fetchFiles(
  base: URL, list: ManifestFile[], cache: Cache | null, progress: Progress, warnings: string[],
): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  for (const file of list) {
    const url = new URL(file.path, base);
    const cached = await cache?.match(url);
    let data: Uint8Array | null = null;
    if (cached) {
      data = new Uint8Array(await cached.arrayBuffer());
      progress('cache', file.path, data.length, file.bytes);
      if (data.length !== file.bytes || (await sha256(data)) !== file.sha256) data = null; // stale: refetch
    }
    if (!data) {
      data = await download(url, file, progress);
      progress('verify', file.path, data.length, file.bytes);
      const digest = await sha256(data);
      if (digest !== file.sha256) {
        throw new LoadError('integrity', `${file.path}: sha256 ${digest} does not match manifest.json (${file.sha256})`);
      }
      try {
        await cache?.put(url, new Response(data as Uint8Array<ArrayBuffer>, { headers: { 'Content-Length': String(data.length) } }));
      } catch (error) {
        warnings.push(quotaMessage(file, error));
      }
    }
    out.set(file.path, data);
  }
  return out;
}

export function isLarge(path: string): boolean {
  return LARGE.test(path);
}
