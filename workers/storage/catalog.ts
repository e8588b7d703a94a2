// What the page's "Storage on this device" panel asks for: the stored bundles with their
// sizes, and removing one. Uses only the async OPFS API, so it runs in the worker or a page.

import type { StoredBundle } from '../../web/src/protocol';
import { readIndex } from './bundle-index';
import { bundlesRoot, entries, folderBytes } from './opfs';

export type { StoredBundle };

export async function listStored(): Promise<StoredBundle[]> {
  const root = await bundlesRoot();
  const out: StoredBundle[] = [];
  for (const [key, handle] of await entries(root)) {
    if (handle.kind !== 'directory') continue;
    const dir = handle as FileSystemDirectoryHandle;
    const index = await readIndex(dir);
    const url = index?.url ?? decodeURIComponent(key);
    const name = new URL(url).pathname.split('/').filter(Boolean).pop() ?? url;
    out.push({ key, url, name, bytes: await folderBytes(dir), files: Object.keys(index?.files ?? {}).length });
  }
  return out.sort((a, b) => a.url.localeCompare(b.url));
}

/** Delete everything stored for the bundle ``key``. Throws when ``key`` is not stored. */
export async function removeStored(key: string): Promise<void> {
  const root = await bundlesRoot();
  try {
    await root.removeEntry(key, { recursive: true });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'NotFoundError') {
      throw new Error(`no bundle "${decodeURIComponent(key)}" is stored on this device`);
    }
    throw new Error(`could not remove "${decodeURIComponent(key)}" from this device: ${String(error)}`);
  }
}
