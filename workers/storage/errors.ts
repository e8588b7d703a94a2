// Load failures with a kind that survives the worker boundary (web/src/protocol.ts ErrorKind).

export class LoadError extends Error {
  constructor(readonly kind: 'network' | 'integrity' | 'quota' | 'bundle' | 'input', message: string) {
    super(message);
  }
}

export function megabytes(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/** True for the DOMException a write past the origin's quota throws. */
export function isQuotaError(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'QuotaExceededError';
}
