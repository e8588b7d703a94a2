// Download one bundle file into its OPFS file, hashing as the bytes arrive. A partial file
// left by an interrupted visit is resumed with `Range: bytes=N-`; the partial is named by the
// manifest's sha256, so it can only belong to the same file. Never one buffer for the file.

import { LoadError, isQuotaError, megabytes } from './errors';
import type { ManifestFile } from './bundle-index';
import { Sha256 } from './sha256';

const READ_CHUNK = 4 << 20;   // re-hash a partial file in 4 MB reads
const RETRIES = 3;            // consecutive failed attempts (no new bytes) before giving up

export type FetchProgress = (phase: 'fetch' | 'verify', loaded: number, total: number) => void;

export interface Downloaded {
  sha256: string;
  resumedFrom: number[];   // offsets the download resumed from (Range requests sent)
  /** Set when the quota ran out: the bytes past ``storedBytes`` are only in memory. */
  memory: Uint8Array[] | null;
  storedBytes: number;
  quotaError: string | null;
}

/** Hash the first ``size`` bytes already in ``handle``. */
function hashExisting(handle: FileSystemSyncAccessHandle, size: number, hash: Sha256): void {
  const buffer = new Uint8Array(Math.min(READ_CHUNK, size));
  for (let at = 0; at < size;) {
    const n = handle.read(buffer.subarray(0, Math.min(buffer.length, size - at)), { at });
    if (n <= 0) throw new Error(`stored partial file ended at ${at} of ${size} bytes`);
    hash.update(buffer.subarray(0, n));
    at += n;
  }
}

/** Write ``data`` at ``at``; the reason when storage took less than all of it, else null. */
function writeAll(handle: FileSystemSyncAccessHandle, data: Uint8Array, at: number): string | null {
  try {
    const n = handle.write(data, { at });
    return n === data.length ? null : `storage accepted ${n >= 0 && n < data.length ? n : 'none'} of ${data.length} bytes written at byte ${at}`;
  } catch (error) {
    return isQuotaError(error) ? String(error) : `writing at byte ${at} failed: ${String(error)}`;
  }
}

/** "bytes 100-199/200" -> [100, 199, 200]; null when malformed. */
function contentRange(header: string | null): [number, number, number] | null {
  const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(header?.trim() ?? '');
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

/** Where a download stands: bytes so far (on disk, then in ``out.memory`` past the quota). */
interface Cursor { at: number; hash: Sha256 }

/**
 * Fetch ``file`` from ``url`` into ``target`` (resuming what it holds) and check its sha256.
 * Retries a broken transfer from where it stopped. Throws LoadError ('network' | 'integrity').
 */
export async function downloadFile(url: URL, file: ManifestFile, target: FileSystemFileHandle, progress: FetchProgress): Promise<Downloaded> {
  const handle = await target.createSyncAccessHandle();
  const out: Downloaded = { sha256: '', resumedFrom: [], memory: null, storedBytes: 0, quotaError: null };
  try {
    const cursor: Cursor = { at: handle.getSize(), hash: new Sha256() };
    if (cursor.at > file.bytes) {   // longer than the manifest says: not a prefix of this file
      handle.truncate(0);
      cursor.at = 0;
    }
    hashExisting(handle, cursor.at, cursor.hash);
    let failures = 0;
    while (cursor.at < file.bytes) {
      const start = cursor.at;
      try {
        await transfer(url, file, handle, cursor, out, progress);
      } catch (error) {
        if (error instanceof LoadError) throw error;
        if (cursor.at === start && ++failures >= RETRIES) {
          throw new LoadError('network', `cannot fetch ${url.pathname}: ${String(error)} (stopped at ${cursor.at} of ${file.bytes} bytes; load again to resume)`);
        }
      }
      if (cursor.at > start) failures = 0;
      handle.flush();
    }
    progress('verify', cursor.at, file.bytes);
    out.sha256 = cursor.hash.hex();
    if (out.sha256 !== file.sha256) {
      handle.truncate(0);   // never resume from bytes that made a wrong file
      throw new LoadError('integrity', `${file.path}: sha256 ${out.sha256} does not match manifest.json (${file.sha256})`);
    }
    if (!out.memory) out.storedBytes = cursor.at;
    return out;
  } finally {
    handle.close();
  }
}

/** One request from ``cursor.at`` to the end (or until the transfer breaks: then it throws). */
async function transfer(
  url: URL, file: ManifestFile, handle: FileSystemSyncAccessHandle, cursor: Cursor, out: Downloaded, progress: FetchProgress,
): Promise<void> {
  const start = cursor.at;
  if (start > 0) out.resumedFrom.push(start);
  // no-store: a ranged answer must come from the server, not be stitched by the HTTP cache
  const response = await fetch(url, { headers: start > 0 ? { Range: `bytes=${start}-` } : {}, cache: 'no-store' });
  if (response.status === 206) {
    const range = contentRange(response.headers.get('Content-Range'));
    if (!range || range[0] !== start || range[2] !== file.bytes) {
      throw new LoadError('network', `${url.pathname}: asked for bytes ${start}- of ${file.bytes}, the server sent Content-Range "${response.headers.get('Content-Range')}"`);
    }
  } else if (response.ok) {
    if (start > 0) {   // no range support: a full download, nothing spliced onto the partial
      handle.truncate(0);
      out.memory = null;
      out.storedBytes = 0;
      cursor.at = 0;
      cursor.hash = new Sha256();
    }
  } else {
    throw new LoadError('network', `cannot fetch ${url.pathname}: HTTP ${response.status}`);
  }
  if (!response.body) throw new LoadError('network', `cannot fetch ${url.pathname}: no response body`);
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (cursor.at + value.length > file.bytes) {
      await reader.cancel();
      handle.truncate(0);
      throw new LoadError('integrity', `${file.path}: more than the ${file.bytes} bytes manifest.json lists`);
    }
    cursor.hash.update(value);
    if (out.memory) {
      out.memory.push(value);
    } else {
      // past the quota a write throws QuotaExceededError, or (in-memory profiles, measured)
      // writes fewer bytes than asked: either way the rest of the file stays in memory
      const problem = writeAll(handle, value, cursor.at);
      if (problem) {
        handle.truncate(cursor.at);   // keep the stored prefix (a later visit resumes from it)
        out.storedBytes = cursor.at;
        out.quotaError = problem;
        out.memory = [value];
      }
    }
    cursor.at += value.length;
    progress('fetch', cursor.at, file.bytes);
  }
  if (cursor.at !== file.bytes) throw new Error(`the response ended at ${cursor.at} of ${file.bytes} bytes (${megabytes(file.bytes)})`);
}
