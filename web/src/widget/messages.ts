// The element's side of the protocol checks (web/src/widget/protocol.ts): only messages from
// its own frame's window and the onnxpipe origin, well-formed, are let through.

import type { FrameMessage, HostMessage, ProtocolTag, Untagged } from './protocol';

export const TAG: ProtocolTag = 'onnxpipe-widget/1';

const FRAME_TYPES = new Set(['hello', 'progress', 'loaded', 'token', 'audio', 'replied', 'spoken', 'error', 'runtime']);
const WITHOUT_ID = new Set(['hello', 'error', 'runtime']);

/** The message if ``event`` comes from ``frame`` on ``origin`` and is one of ours, else null. */
export function fromFrame(event: MessageEvent, frame: Window | null, origin: string): FrameMessage | null {
  if (!frame || event.source !== frame || event.origin !== origin) return null;
  const data = event.data as { onnxpipe?: unknown; type?: unknown; id?: unknown } | null;
  if (typeof data !== 'object' || data === null || data.onnxpipe !== TAG) return null;
  if (typeof data.type !== 'string' || !FRAME_TYPES.has(data.type)) return null;
  if (!WITHOUT_ID.has(data.type) && typeof data.id !== 'number') return null;
  return data as FrameMessage;
}

/** A request with the version tag added. */
export const tagged = (message: Untagged<HostMessage>): HostMessage => ({ ...message, onnxpipe: TAG }) as HostMessage;
