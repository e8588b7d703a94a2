// One bundle's files on this device: the worker asks for a file by its manifest entry and
// gets a Blob backed by OPFS (downloaded, verified and recorded first when needed).

import { emptyIndex, readIndex, writeIndex, type BundleIndex, type Manifest, type ManifestFile } from './bundle-index';
import { downloadFile } from './download';
import { LoadError, megabytes } from './errors';
import { bundleKey, bundlesRoot, childDir, childFile, entries } from './opfs';
import { Sha256 } from './sha256';

export type StoreProgress = (phase: 'fetch' | 'cache' | 'verify', file: string, loaded: number, total: number) => void;

const LEGACY_CACHE = 'onnxpipe-models-v1';

export class BundleStore {
  private constructor(
    readonly base: URL,
    readonly key: string,
    private readonly dir: FileSystemDirectoryHandle | null,   // null: no OPFS, memory only
    private readonly blobs: FileSystemDirectoryHandle | null,
    private index: BundleIndex,
    private readonly warnings: string[],
  ) {}

  /** The store for the bundle at ``base``; without OPFS it still loads (into memory) and warns. */
  static async open(base: URL, warnings: string[]): Promise<BundleStore> {
    const key = bundleKey(base);
    try {
      // earlier versions kept whole files in one Cache API cache: free that space
      await self.caches?.delete(LEGACY_CACHE);
      const dir = (await childDir(await bundlesRoot(), key, true))!;
      const blobs = (await childDir(dir, 'files', true))!;
      return new BundleStore(base, key, dir, blobs, (await readIndex(dir)) ?? emptyIndex(base.href), warnings);
    } catch (error) {
      warnings.push(`this browser would not give onnxpipe a place to store models (${String(error)}): the bundle is fetched on every visit`);
      return new BundleStore(base, key, null, null, emptyIndex(base.href), warnings);
    }
  }

  /** manifest.json from the server (no-cache: to see updates), else the stored copy. */
  async manifest(): Promise<Manifest> {
    const url = new URL('manifest.json', this.base);
    let problem = 'offline and not stored on this device';
    try {
      const response = await fetch(url, { cache: 'no-cache' });
      if (response.ok) {
        const manifest = (await response.json()) as Manifest;
        if (!Array.isArray(manifest.files)) throw new LoadError('bundle', `${url.pathname}: expected a "files" list`);
        this.index.manifest = manifest;
        return manifest;
      }
      problem = `HTTP ${response.status}`;
    } catch (error) {
      if (error instanceof LoadError) throw error;
    }
    if (this.index.manifest) return this.index.manifest;
    throw new LoadError('network', `cannot fetch ${url.pathname}: ${problem}`);
  }

  /** ``file``'s bytes as a Blob: the stored copy when its record matches the manifest, else downloaded. */
  async file(file: ManifestFile, progress: StoreProgress): Promise<Blob> {
    const stored = await this.stored(file);
    if (stored) {
      progress('cache', file.path, stored.size, file.bytes);
      return stored;
    }
    const url = new URL(file.path, this.base);
    if (!this.blobs || !this.dir) return this.fetchToMemory(url, file, progress);
    const target = (await childFile(this.blobs, file.sha256, true))!;
    const got = await downloadFile(url, file, target, (phase, loaded, total) => progress(phase, file.path, loaded, total));
    const onDisk = await target.getFile();
    if (got.memory) {
      this.warnings.push(await quotaMessage(file, got.storedBytes, got.quotaError));
      return new Blob([onDisk.slice(0, got.storedBytes), ...(got.memory as Uint8Array<ArrayBuffer>[])]);
    }
    this.index.files[file.path] = { bytes: file.bytes, sha256: got.sha256, storedAt: new Date().toISOString() };
    await writeIndex(this.dir, this.index);
    return onDisk;
  }

  /** The verified copy of ``file`` (size checked, not re-hashed), or null. */
  private async stored(file: ManifestFile): Promise<File | null> {
    const record = this.index.files[file.path];
    if (!this.blobs || !record || record.sha256 !== file.sha256 || record.bytes !== file.bytes) return null;
    const handle = await childFile(this.blobs, file.sha256);
    const data = handle ? await handle.getFile() : null;
    if (data && data.size === file.bytes) return data;
    delete this.index.files[file.path];   // truncated or removed behind our back: fetch again
    return null;
  }

  /** Without OPFS: the file in memory as a Blob of its chunks (still never one buffer). */
  private async fetchToMemory(url: URL, file: ManifestFile, progress: StoreProgress): Promise<Blob> {
    let response: Response;
    try {
      response = await fetch(url);
    } catch (error) {
      throw new LoadError('network', `cannot fetch ${url.pathname}: ${String(error)}`);
    }
    if (!response.ok || !response.body) throw new LoadError('network', `cannot fetch ${url.pathname}: HTTP ${response.status}`);
    const hash = new Sha256();
    const chunks: Uint8Array<ArrayBuffer>[] = [];
    let at = 0;
    const reader = response.body.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      hash.update(r.value);
      chunks.push(r.value as Uint8Array<ArrayBuffer>);
      at += r.value.length;
      progress('fetch', file.path, at, file.bytes);
    }
    progress('verify', file.path, at, file.bytes);
    const digest = hash.hex();
    if (at !== file.bytes || digest !== file.sha256) {
      throw new LoadError('integrity', `${file.path}: got ${at} bytes with sha256 ${digest}; manifest.json lists ${file.bytes} bytes, ${file.sha256}`);
    }
    return new Blob(chunks);
  }

  /** Text the worker derived from this bundle's files (the grammar engine's vocabulary), kept
   * next to them as derived/<name>; null when not stored or without OPFS. */
  async derived(name: string): Promise<string | null> {
    if (!this.dir) return null;
    const folder = await childDir(this.dir, 'derived', false);
    const handle = folder && await childFile(folder, name);
    return handle ? (await handle.getFile()).text() : null;
  }

  async saveDerived(name: string, text: string): Promise<void> {
    if (!this.dir) return;
    const handle = (await childFile((await childDir(this.dir, 'derived', true))!, name, true))!;
    const out = await handle.createWritable();
    await out.write(text);
    await out.close();
  }

  /** Save the manifest and drop stored files the manifest no longer lists (old versions). */
  async finish(manifest: Manifest): Promise<void> {
    if (!this.dir || !this.blobs) return;
    const current = new Set(manifest.files.map((f) => f.sha256));
    const paths = new Set(manifest.files.map((f) => f.path));
    for (const [path, record] of Object.entries(this.index.files)) {
      if (!paths.has(path) || !current.has(record.sha256)) delete this.index.files[path];
    }
    for (const name of (await entries(this.blobs)).keys()) {
      if (!current.has(name)) await this.blobs.removeEntry(name).catch(() => undefined);
    }
    await writeIndex(this.dir, this.index);
  }
}

async function quotaMessage(file: ManifestFile, stored: number, error: unknown): Promise<string> {
  const { usage = 0, quota = 0 } = await navigator.storage.estimate().catch(() => ({ usage: 0, quota: 0 }));
  return `quota: this device's storage would not hold ${file.path} (${megabytes(file.bytes)}): ` +
    `${String(error)}; ${megabytes(Math.max(0, quota - usage))} of the ${megabytes(quota)} quota was left ` +
    `(${megabytes(stored)} of the file kept). The model runs from memory this time; remove stored models ` +
    `(Storage on this device) or allow more, then load again to keep it offline.`;
}
