// The frame's side of the protocol checks (web/src/widget/protocol.ts): a request is taken
// only from the parent window on the parent's origin, and only when it is well-formed.

import type { HostMessage, ProtocolTag, WidgetTurn } from '../widget/protocol';

export const TAG: ProtocolTag = 'onnxpipe-widget/1';

const ROLES = new Set(['system', 'user', 'assistant']);

const isTurn = (t: unknown): t is WidgetTurn =>
  typeof t === 'object' && t !== null && ROLES.has((t as WidgetTurn).role) && typeof (t as WidgetTurn).content === 'string';

const wholeAtLeast1 = (n: unknown): boolean => typeof n === 'number' && Number.isInteger(n) && n >= 1;

/** The request if ``event`` is a well-formed one from ``parent`` on ``origin``, else null. */
export function fromParent(event: MessageEvent, parent: Window, origin: string): HostMessage | null {
  if (event.source !== parent || event.origin !== origin) return null;
  const m = event.data as Record<string, unknown> | null;
  if (typeof m !== 'object' || m === null || m.onnxpipe !== TAG || typeof m.id !== 'number') return null;
  switch (m.type) {
    case 'load':
      return typeof m.bundle === 'string' && (m.threads === null || wholeAtLeast1(m.threads)) ? (m as HostMessage) : null;
    case 'send':
      return Array.isArray(m.messages) && m.messages.every(isTurn) && wholeAtLeast1(m.maxNewTokens) ? (m as HostMessage) : null;
    case 'speak':
      return typeof m.text === 'string' ? (m as HostMessage) : null;
    case 'cancel':
      return m as HostMessage;
    default:
      return null;
  }
}
