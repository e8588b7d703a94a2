// Load a model bundle for the worker: manifest.json, then each file the engine needs from
// this device's storage (workers/storage/), downloaded and verified once when missing.

import { useBundleStorage } from './grammar';
import type { ManifestFile } from './storage/bundle-index';
import { LoadError } from './storage/errors';
import { checkBundleOrigin, checkManifestPaths } from './storage/origin';
import { bundleKey } from './storage/opfs';
import { BundleStore, type StoreProgress } from './storage/store';

export { LoadError };
export type { Manifest, ManifestFile } from './storage/bundle-index';

// weights and graphs; Optimum splits large weights into model.onnx_data, model.onnx_data_1, ...
const LARGE = /\.(onnx|data|bin|onnx_data(_\d+)?)$/i;

/** Per-file progress: bytes of ``file`` so far and its size. */
export type Progress = StoreProgress;

/** Bytes the engine reads: small files and ONNX graphs as bytes (InferenceSession.create
 * takes no Blob; a graph is a protobuf, under 2 GB by format); weight files as Blobs backed by
 * storage, which onnxruntime-web reads itself (never one JS buffer here for a multi-GB file). */
export type BundleFile = Uint8Array | Blob;

/**
 * The bundle at ``base``, verified: first its small files (configs, tokenizer), then only the
 * large ones ``choose`` picks once it has seen the small ones (the model variant the engine
 * will open). ``warnings`` collects non-fatal problems (e.g. the quota ran out).
 */
export async function loadBundle(
  base: URL,
  progress: Progress,
  warnings: string[],
  choose: (small: Map<string, Uint8Array>, large: ManifestFile[]) => Promise<Set<string>>,
): Promise<Map<string, BundleFile>> {
  checkBundleOrigin(base, self.location.origin);   // model files only from our own origin
  const store = await BundleStore.open(base, warnings);
  const manifest = await store.manifest();
  checkManifestPaths(manifest, base);
  const small = new Map<string, Uint8Array>();
  const large = (f: ManifestFile): boolean => isLarge(f.path) && !isSmallGraph(f, manifest.files);
  for (const file of manifest.files.filter((f) => !large(f))) {
    small.set(file.path, new Uint8Array(await (await store.file(file, progress)).arrayBuffer()));
  }
  const needed = await choose(small, manifest.files.filter(large));
  const chosen = manifest.files.filter((f) => needed.has(f.path) && !small.has(f.path));
  const missing = [...needed].filter((path) => !chosen.some((f) => f.path === path) && !small.has(path));
  if (missing.length) throw new LoadError('bundle', `manifest.json does not list ${missing.join(', ')}`);
  const out = new Map<string, BundleFile>(small);
  for (const file of chosen) out.set(file.path, await engineFile(file, await store.file(file, progress)));
  await store.finish(manifest);
  useBundleStorage(store, manifest);
  return out;
}

async function engineFile(file: ManifestFile, data: Blob): Promise<BundleFile> {
  return /\.onnx$/i.test(file.path) ? new Uint8Array(await data.arrayBuffer()) : data;
}

/** The Web Lock a load of the bundle at ``base`` holds until its sessions have read its files:
 * one load per bundle at a time across this site's tabs and frames (a second one waits, then
 * finds the files stored; an OPFS file being written can't be opened twice), and no removal
 * under a running load. */
export function bundleLock(base: URL): string {
  return lockFor(bundleKey(base));
}

export function lockFor(key: string): string {
  return `onnxpipe-bundle:${key}`;
}

export function isLarge(path: string): boolean {
  return LARGE.test(path);
}

/** Graphs whose weights sit in a data file beside them are small: fetched with the configs, so
 * the fit check reads them (py/onnxpipe/heap/fit.py) before any weight is downloaded. */
const SMALL_GRAPH_BYTES = 16 << 20;

export function isSmallGraph(file: ManifestFile, files: ManifestFile[]): boolean {
  if (!/\.onnx$/i.test(file.path) || file.bytes > SMALL_GRAPH_BYTES) return false;
  return files.some((f) => f.path === `${file.path}.data` || f.path === `${file.path}_data`);
}
