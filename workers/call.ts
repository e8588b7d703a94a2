// One call the page made (web/src/protocol.ts CallMessage), as its handler sees it: stream
// events under the call's id; return the result (its buffers listed in ``transfer``), or throw.

/** A failure with a ``kind`` the page gets as is (web/src/protocol.ts ErrorKind). */
export class CallError extends Error {
  constructor(readonly kind: string, message: string) {
    super(message);
  }
}

export interface Call {
  readonly id: number;
  /** Send ``{id, event, data}`` now (``transfer``: buffers moved, not copied). */
  emit(event: string, data: unknown, transfer?: Transferable[]): void;
  /** Buffers the result holds, moved to the page with it. */
  readonly transfer: Transferable[];
}
