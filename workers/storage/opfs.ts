// The Origin Private File System folders bundles are kept in:
//   onnxpipe-bundles/<key>/index.json       what was verified (bundle-index.ts)
//   onnxpipe-bundles/<key>/files/<sha256>   file bytes, named by the manifest's sha256, so a
//                                           changed file never lands on an old partial copy
// Measured: OPFS stores a 300 MB file in a fresh browser.newContext() where one Cache API
// entry of that size fails (docs/browser-runtime.md, "Model storage").

const ROOT = 'onnxpipe-bundles';

/** A folder name for the bundle at ``base`` (one folder per bundle URL). */
export function bundleKey(base: URL): string {
  return encodeURIComponent(base.href);
}

export async function bundlesRoot(): Promise<FileSystemDirectoryHandle> {
  if (!navigator.storage?.getDirectory) {
    throw new Error('this browser has no Origin Private File System (navigator.storage.getDirectory)');
  }
  return (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT, { create: true });
}

/** ``dir``'s child folder ``name``, or null when it does not exist and ``create`` is false. */
export async function childDir(dir: FileSystemDirectoryHandle, name: string, create: boolean): Promise<FileSystemDirectoryHandle | null> {
  try {
    return await dir.getDirectoryHandle(name, { create });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'NotFoundError') return null;
    throw error;
  }
}

/** ``dir``'s file ``name``, or null when it does not exist and ``create`` is false. */
export async function childFile(dir: FileSystemDirectoryHandle, name: string, create = false): Promise<FileSystemFileHandle | null> {
  try {
    return await dir.getFileHandle(name, { create });
  } catch (error) {
    if (error instanceof DOMException && (error.name === 'NotFoundError' || error.name === 'TypeMismatchError')) return null;
    throw error;
  }
}

/** Entries of ``dir`` by name. */
export async function entries(dir: FileSystemDirectoryHandle): Promise<Map<string, FileSystemHandle>> {
  const out = new Map<string, FileSystemHandle>();
  // TypeScript's DOM lib lacks the async iterator on FileSystemDirectoryHandle
  for await (const [name, handle] of (dir as unknown as { entries(): AsyncIterable<[string, FileSystemHandle]> }).entries()) {
    out.set(name, handle);
  }
  return out;
}

/** Total bytes of the files under ``dir`` (partial downloads included). */
export async function folderBytes(dir: FileSystemDirectoryHandle): Promise<number> {
  let total = 0;
  for (const handle of (await entries(dir)).values()) {
    if (handle.kind === 'file') total += (await (handle as FileSystemFileHandle).getFile()).size;
    else total += await folderBytes(handle as FileSystemDirectoryHandle);
  }
  return total;
}
