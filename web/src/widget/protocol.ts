// The postMessage protocol between a widget element on the host page (web/src/widget/) and
// its frame on onnxpipe's origin (web/embed.html, web/src/embed/). Types only: both sides are
// separate bundles (widget.js must not share chunks with the frame), so each side validates
// what it receives with its own small checks (widget/messages.ts, embed/messages.ts).
//
// Every message carries `onnxpipe: PROTOCOL` and a `type`; requests from the element carry an
// `id` that the frame's answer repeats. Origins are checked on both ends (docs/widget.md):
// the frame answers only its parent window's origin; the element listens only to its own
// frame's window on the onnxpipe origin.

import type { LoadedInfo, SpeechResult } from '../protocol';

/** Version tag in every message: a frame and an element of different builds refuse each other. */
export type ProtocolTag = 'onnxpipe-widget/1';

/** A message before its version tag is added (distributes over a union's members). */
export type Untagged<T> = T extends unknown ? Omit<T, 'onnxpipe'> : never;

/** Which element a frame serves; the frame refuses requests of the other kind. */
export type WidgetKind = 'chat' | 'speak';

/** Element -> frame. */
export type HostMessage =
  | { onnxpipe: ProtocolTag; type: 'load'; id: number; bundle: string; threads: number | null }
  | { onnxpipe: ProtocolTag; type: 'send'; id: number; messages: WidgetTurn[]; maxNewTokens: number }
  | { onnxpipe: ProtocolTag; type: 'speak'; id: number; text: string }
  | { onnxpipe: ProtocolTag; type: 'cancel'; id: number };

export interface WidgetTurn {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** What `el.ready` resolves with: the runtime's LoadedInfo (``threads`` included) plus the
 * frame's isolation, which decides whether threads are possible. */
export interface WidgetLoaded extends LoadedInfo {
  crossOriginIsolated: boolean;
}

export interface WidgetSpoken extends SpeechResult {
  wav: Uint8Array; // 16-bit PCM WAV of all of it
}

/** Frame -> element. `hello` is sent once when the frame is up (no id). */
export type FrameMessage =
  | { onnxpipe: ProtocolTag; type: 'hello'; kind: WidgetKind; crossOriginIsolated: boolean }
  | {
      onnxpipe: ProtocolTag; type: 'progress'; id: number; phase: string; file: string;
      loaded: number; total: number; percent: number;
    }
  | { onnxpipe: ProtocolTag; type: 'loaded'; id: number; info: WidgetLoaded }
  | { onnxpipe: ProtocolTag; type: 'token'; id: number; text: string }
  | { onnxpipe: ProtocolTag; type: 'audio'; id: number; index: number; samples: Float32Array; sampleRate: number; text: string }
  | { onnxpipe: ProtocolTag; type: 'replied'; id: number; text: string; finishReason: string | null }
  | { onnxpipe: ProtocolTag; type: 'spoken'; id: number; result: WidgetSpoken }
  | { onnxpipe: ProtocolTag; type: 'error'; id: number | null; kind: string; message: string }
  // the frame's runtime worker died and is restarting / was restarted with the bundle / could not be (no id)
  | { onnxpipe: ProtocolTag; type: 'runtime'; state: 'stopped' | 'restored' | 'failed'; message: string };
