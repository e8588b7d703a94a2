// This origin's storage as the browser reports it: usage and quota, and whether it is
// persistent (not cleared under storage pressure). persist() exists on pages only, not workers.

export interface DeviceStorage {
  usage: number;       // bytes this origin uses (every store: OPFS, caches, IndexedDB)
  quota: number;       // bytes it may use
  persisted: boolean;  // true: the browser will not evict it without asking
}

export async function deviceStorage(): Promise<DeviceStorage> {
  const storage = navigator.storage;
  if (!storage?.estimate) return { usage: 0, quota: 0, persisted: false };
  const [{ usage = 0, quota = 0 }, persisted] = await Promise.all([
    storage.estimate(), storage.persisted?.() ?? Promise.resolve(false),
  ]);
  return { usage, quota, persisted };
}

let asked: Promise<boolean> | null = null;

/** Ask once per page for persistent storage (the browser may say no, e.g. headless or
 * a site the user rarely visits); resolves with whether storage is persistent now. */
export function askPersistent(): Promise<boolean> {
  asked ??= (navigator.storage?.persist?.() ?? Promise.resolve(false)).catch(() => false);
  return asked;
}
