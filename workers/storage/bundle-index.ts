// Per-bundle record of what is stored and verified: a file listed here had the manifest's
// sha256 when it was downloaded, so later loads check only its size (hashing 271 MB on every
// visit took seconds). The manifest itself is kept too, for loads with the network down.

import { childFile } from './opfs';

export interface ManifestFile { path: string; bytes: number; sha256: string }
export interface Manifest { version: number; files: ManifestFile[] }

export interface StoredFile {
  bytes: number;
  sha256: string;   // verified against the manifest when downloaded
  storedAt: string; // ISO time of that verification
}

export interface BundleIndex {
  version: 1;
  url: string;                       // the bundle's base URL
  manifest: Manifest | null;         // the last manifest.json seen
  files: Record<string, StoredFile>; // by bundle-relative path
}

const NAME = 'index.json';

export function emptyIndex(url: string): BundleIndex {
  return { version: 1, url, manifest: null, files: {} };
}

/** The bundle folder's index, or null when it has none (or an unreadable one). */
export async function readIndex(dir: FileSystemDirectoryHandle): Promise<BundleIndex | null> {
  const handle = await childFile(dir, NAME);
  if (!handle) return null;
  try {
    const index = JSON.parse(await (await handle.getFile()).text()) as BundleIndex;
    return index.version === 1 && index.files ? index : null;
  } catch {
    return null;   // torn or foreign: treated as nothing verified, so files are fetched again
  }
}

/** Replace the index (dedicated workers only: it writes through a sync access handle). */
export async function writeIndex(dir: FileSystemDirectoryHandle, index: BundleIndex): Promise<void> {
  const handle = await (await childFile(dir, NAME, true))!.createSyncAccessHandle();
  try {
    const bytes = new TextEncoder().encode(JSON.stringify(index));
    handle.truncate(0);
    handle.write(bytes, { at: 0 });
    handle.flush();
  } finally {
    handle.close();
  }
}
