// Human-readable numbers for the progress bar and the stats line.

import { RuntimeError } from '../client';

export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '?';
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '?';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

export function clampPercent(value: number): number {
  return Number.isFinite(value) ? Math.min(100, Math.max(0, value)) : 0;
}

export interface ShownError {
  kind: string;
  message: string;
}

/** Kinds the user can fix on their side (web/src/protocol.ts ErrorKind): their message is a
 * whole plain sentence, shown without a technical label. */
const USER_SIDE = new Set(['device', 'permission']);

export function isUserSide(error: ShownError): boolean {
  return USER_SIDE.has(error.kind);
}

/** Any thrown value as {kind, message}; RuntimeError keeps the worker's kind. */
export function describeError(error: unknown): ShownError {
  if (error instanceof RuntimeError) return { kind: error.kind, message: error.message };
  // the engine's errors (engine/errors.ts OnnxpipeError) carry the same kinds, plus 'aborted' / 'not_found'
  if (error instanceof Error && error.name !== 'Error' && typeof (error as { kind?: unknown }).kind === 'string') {
    return { kind: (error as unknown as { kind: string }).kind, message: error.message };
  }
  if (error instanceof Error) return { kind: 'internal', message: error.message || error.name };
  return { kind: 'internal', message: String(error) };
}
