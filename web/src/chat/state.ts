// The page's state, one plain object; exposed as window.__onnxpipe.state for tests.

import type { ChatMessage, ExecutionProvider, GenerationResult, LoadedInfo } from '../protocol';
import type { ShownError } from '../ui/format';

/** idle: nothing loaded · loading · ready: can send · generating · stopping: cancel sent. */
export type Status = 'idle' | 'loading' | 'ready' | 'generating' | 'stopping';

export interface ChatState {
  status: Status;
  /** Bundle name and provider of the last load request. */
  bundle: string | null;
  ep: ExecutionProvider | null;
  /** The dtype the last load asked for (null: the folder's default; the opened one is loaded.dtype). */
  dtype: string | null;
  loaded: LoadedInfo | null;
  /** Shown warnings: the worker's plus any provider fallback found by the page. */
  warnings: string[];
  /** The conversation sent as `messages`: finished turns, plus the pending user turn while generating. */
  messages: ChatMessage[];
  /** Text streamed so far in the running turn. */
  streaming: string;
  lastResult: GenerationResult | null;
  lastError: (ShownError & { during: 'load' | 'generate' | 'cancel' }) | null;
}

export function initialState(): ChatState {
  return {
    status: 'idle', bundle: null, ep: null, dtype: null, loaded: null, warnings: [],
    messages: [], streaming: '', lastResult: null, lastError: null,
  };
}
