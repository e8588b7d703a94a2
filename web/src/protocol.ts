// The one message protocol between the page (client.ts) and the runtime worker.
// Every request carries an id; every event carries the id of the request it answers.

export type ExecutionProvider = 'wasm' | 'webgpu';

export interface SearchOptions {
  do_sample?: boolean;
  temperature?: number;
  top_k?: number;
  top_p?: number;
  min_p?: number;
  repetition_penalty?: number;
  random_seed?: number;
  max_new_tokens?: number;
  max_length?: number;
  stop_strings?: string[];
  stop_token_ids?: number[];
  ignore_eos?: boolean;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export type Request =
  | {
      type: 'load'; id: number; bundleUrl: string; ep?: ExecutionProvider; variant?: string;
      threads?: number; // WASM threads, fixed by the first load of a worker
      cancelBuffer?: SharedArrayBuffer; // 4 bytes the page sets to 1 on cancel (isolated pages)
    }
  | {
      type: 'generate';
      id: number;
      messages?: ChatMessage[];
      prompt?: string;
      inputIds?: number[];
      options?: SearchOptions;
    }
  | { type: 'cancel'; id: number }
  | { type: 'dispose'; id: number };

export type ErrorKind =
  | 'config' | 'bundle' | 'input' | 'engine' | 'quota' | 'network' | 'integrity' | 'text' | 'internal';

export interface SessionInfo {
  provider: string;
  file: string;
}

export interface LoadedInfo {
  bundle: string;
  sessions: Record<string, SessionInfo>;
  warnings: string[];
  structure: string;
  hasChatTemplate: boolean;
  bootMs: number;
  loadMs: number;
}

export interface GenerationResult {
  tokens: number[];
  text: string;
  finish_reason: string | null;
  prompt_tokens: number;
  cached_tokens: number;
  prefill_ms: number;
  decode_tokens_per_s: number;
}

export type Event =
  | {
      type: 'progress';
      id: number;
      phase: 'boot' | 'fetch' | 'cache' | 'verify' | 'session';
      file: string;
      loaded: number;
      total: number;
      percent: number;
    }
  | { type: 'loaded'; id: number; info: LoadedInfo }
  | { type: 'token'; id: number; text: string; tokenIds: number[] }
  | { type: 'done'; id: number; result: GenerationResult }
  | { type: 'cancelled'; id: number }
  | { type: 'disposed'; id: number }
  | { type: 'error'; id: number; kind: ErrorKind; message: string };
