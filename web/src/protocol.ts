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

/** A tensor given by the caller: flat values and shape (dtype from the session input). */
export interface TensorInput {
  values: number[];
  shape: number[];
}

export type Request =
  | {
      type: 'load'; id: number; bundleUrl: string; ep?: ExecutionProvider; variant?: string;
      dtype?: string; // a transformers.js folder's precision (fp32, fp16, q4, q4f16, ...); default: per provider
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
  | {
      // text -> audio, sentence by sentence (bundles whose pipeline.output has "audio")
      type: 'speak';
      id: number;
      text: string;
      controls?: Record<string, number>; // pipeline.inputs by name (e.g. noise_scale, length_scale)
      inputs?: Record<string, TensorInput>; // other pipeline inputs (e.g. a reference voice's audio_values)
    }
  | { type: 'cancel'; id: number }
  | { type: 'dispose'; id: number }
  // models kept on this device (workers/storage/): list them, or remove one (answered by 'stored')
  | { type: 'storage'; id: number; op: 'list' }
  | { type: 'storage'; id: number; op: 'remove'; key: string };

export type ErrorKind =
  | 'config' | 'bundle' | 'input' | 'engine' | 'quota' | 'network' | 'integrity' | 'text' | 'internal';

export interface SessionInfo {
  provider: string;
  file: string;
}

/** A caller control declared in pipeline.json's pipeline.inputs (a number with a range). */
export interface ControlInfo {
  name: string;
  default: number;
  min: number | null;
  max: number | null;
  doc: string;
}

export interface LoadedInfo {
  bundle: string;
  kind: 'text' | 'speech'; // speech: use 'speak'; text: use 'generate'
  sampleRate: number | null; // speech bundles only
  controls: ControlInfo[];
  sessions: Record<string, SessionInfo>;
  warnings: string[];
  structure: string;
  hasChatTemplate: boolean;
  bootMs: number;
  threads: number; // WASM threads the runtime was started with (fixed by a worker's first load)
  loadMs: number; // includes warmUpMs
  warmUpMs: number; // speech bundles: one short word spoken at load so the first Speak is fast
  dtype: string | null; // the precision opened (transformers.js folders); null for other bundles
  dtypes: string[]; // the precisions the folder offers (load again with one of them); empty for other bundles
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

export interface SentenceInfo {
  text: string;
  samples: number;
  audio_seconds: number;
  compute_seconds: number;
  ids: number[]; // the ids the voice was fed (phoneme ids or text token ids)
  tokens?: number[]; // the ids an autoregressive voice generated
}

export interface SpeechResult {
  audio_seconds: number;
  compute_seconds: number;
  sample_rate: number;
  real_time_factor: number; // audio seconds per compute second
  finish_reason: 'done' | 'cancelled';
  samples: number; // all sentences, silence between them included
  sentences: SentenceInfo[];
  warnings: string[]; // e.g. characters the phoneme map does not know (dropped)
}

/** A bundle stored on this device (workers/storage/catalog.ts). */
export interface StoredBundle {
  key: string; // its storage folder: pass it to remove
  url: string; // the bundle's base URL
  name: string; // its last path segment
  bytes: number; // everything stored for it, partial downloads included
  files: number; // files downloaded and verified
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
  | {
      // one sentence of audio, in order; silence between sentences is included at the end
      type: 'audio';
      id: number;
      index: number;
      samples: Float32Array;
      sampleRate: number;
      sentence: SentenceInfo;
    }
  | { type: 'spoken'; id: number; result: SpeechResult; wav: Uint8Array } // 16-bit PCM WAV of all of it
  | { type: 'cancelled'; id: number }
  | { type: 'disposed'; id: number }
  | { type: 'stored'; id: number; bundles: StoredBundle[] } // after a storage request
  | { type: 'error'; id: number; kind: ErrorKind; message: string };
