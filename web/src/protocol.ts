// The one message protocol between the page (client.ts) and the runtime worker.
// Every request carries an id; every event carries the id of the request it answers.

import type { RuntimeAssets } from './runtime-assets';

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
  suppress_tokens?: number[]; // ids never generated
  suppress_tokens_at_start?: number[]; // ids not generated as a call's first new token
  min_length?: number; // end ids masked until the ids (prompt included) are this long
  min_new_tokens?: number; // end ids masked until this many new tokens
  no_repeat_ngram_size?: number; // no n-gram of this size generated twice
  // beam search (greedy only): the result's `sequences` holds the num_return_sequences best beams
  num_beams?: number;
  length_penalty?: number; // a finished beam's score: log-probability sum / new tokens ** this
  early_stopping?: boolean | 'never';
  num_return_sequences?: number; // 1..num_beams
  // drafts verified several tokens per decoder pass; null turns off the bundle's default
  speculative?: SpeculativeOptions | null;
}

export interface SpeculativeOptions {
  method: 'prompt_lookup';
  max_draft?: number; // draft tokens verified per pass (1..32, default 4)
  ngram?: number; // longest n-gram looked up in the prompt and reply so far (default 3)
}

/** Speculative decoding's counts for one reply (present when it was on). */
export interface SpeculationStats {
  passes: number;
  drafted: number;
  accepted: number;
  acceptance_rate: number;
}

/** Per-call options of a denoising loop (as `python -m onnxpipe run` --seed, --steps,
 * --guidance-scale, --scheduler); absent: the bundle's generation defaults. */
export interface RunOptions {
  seed?: number;
  num_steps?: number;
  guidance_scale?: number; // > 1: classifier-free guidance
  scheduler?: string; // euler_discrete or ddim
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

/** An image for a vision-language bundle: an encoded file (PNG, JPEG, ...; the worker decodes
 * it with createImageBitmap) or decoded RGB bytes (width * height * 3, row by row). */
export type ImageInput = Blob | { rgb: Uint8Array; width: number; height: number };

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
      images?: ImageInput[]; // vision-language bundles: one image token in the prompt per image
    }
  | {
      // text -> audio, sentence by sentence (bundles whose pipeline.output has "audio")
      type: 'speak';
      id: number;
      text: string;
      controls?: Record<string, ControlValue>; // pipeline.inputs by name (e.g. noise_scale, voice)
      inputs?: Record<string, TensorInput>; // other pipeline inputs (e.g. a reference voice's audio_values)
    }
  | {
      // a one-pass bundle once (denoising: text-to-image; single_pass): 'step' events while a
      // denoising loop runs, then 'ran'; cancel stops between steps
      type: 'run';
      id: number;
      inputs?: Record<string, TensorInput>; // pipeline inputs (e.g. input_ids or prompt_embeds)
      controls?: Record<string, ControlValue>; // pipeline.inputs by name
      options?: RunOptions;
    }
  | { type: 'cancel'; id: number }
  // start the runtime before any load (the page does at once): answered by 'booted'; a load with
  // another ep or thread count than the boot's needs a fresh worker (client.ts does that)
  | { type: 'boot'; id: number; ep?: ExecutionProvider; threads?: number }
  // speech to text (transcription bundles): mono samples at any rate, resampled in the worker;
  // a 'transcript' event per window of audio, then 'transcribed'
  | { type: 'transcribe'; id: number; samples: Float32Array; sampleRate: number; options?: SearchOptions }
  // speech segments of a whole recording (voice-activity bundles): answered by 'speechDetected'
  | { type: 'detectSpeech'; id: number; samples: Float32Array; sampleRate: number; controls?: Record<string, ControlValue> }
  // microphone audio straight from the capture worklet (web/src/audio/mic.ts) into the loaded
  // voice-activity bundle: 'listening' once it runs, then 'speech' events until 'unlisten'
  | { type: 'listen'; id: number; port: MessagePort; controls?: Record<string, ControlValue> }
  | { type: 'unlisten'; id: number }
  // the listened audio: the position now, and the samples from ``from`` to now (push to talk)
  | { type: 'audio-clip'; id: number; from?: number }
  | { type: 'dispose'; id: number }
  // models kept on this device (workers/storage/): list them, or remove one (answered by 'stored')
  | { type: 'storage'; id: number; op: 'list' }
  | { type: 'storage'; id: number; op: 'remove'; key: string }
  | { type: 'memory'; id: number } // the worker's wasm heap sizes: answered by 'memory'
  // self-healing (web/src/runtime-watch.ts): the worker holds the Web Lock ``lock`` while it lives
  // (answered by 'watching'); 'ping' is answered by 'pong' (the idle heartbeat)
  | { type: 'configure'; id: number; assets: RuntimeAssets } // first, before any other request
  | { type: 'watch'; id: number; lock: string; debug: boolean }
  | { type: 'ping'; id: number }
  // test only (refused unless 'watch' had debug): make the next engine run trap like a wasm
  // 'unreachable', destroy the WebGPU device, or spin forever once answered (a hung worker)
  // ('hang-in-run': the next engine run spins forever; 'oversized-allocation': the next engine run
  // asks JS for an impossibly large typed array)
  | { type: 'crash'; id: number; how: 'trap' | 'gpu-device' | 'hang' | 'hang-in-run' | 'oversized-allocation' };

export type ErrorKind =
  | 'config' | 'bundle' | 'input' | 'engine' | 'quota' | 'network' | 'integrity' | 'text' | 'internal'
  | 'stopped' // the runtime worker died (client.ts restarts it and reloads the bundle)
  // the user's side, which the user can fix: no microphone (none, busy, unplugged, a browser
  // without the means), or access to it refused (web/src/audio/mic.ts)
  | 'device' | 'permission';

export interface SessionInfo {
  provider: string;
  file: string;
}

/** A caller control declared in pipeline.json's pipeline.inputs: a number with a range, or
 * (options non-empty) a choice among names, whose default is one of them. */
export interface ControlInfo {
  name: string;
  default: ControlValue;
  min: number | null;
  max: number | null;
  doc: string;
  options: string[]; // a choice control's names (e.g. Kokoro's voices); empty for a number
}

/** A number for a number control, an option name for a choice. */
export type ControlValue = number | string;

/** WASM threads and why: asked for in the load request, the worker's rule (one per core, at
 * most 4: workers/threads.ts), or 1 because the page is not cross-origin isolated. */
export interface ThreadChoice {
  threads: number;
  reason: 'explicit' | 'rule' | 'not isolated';
}

/** One part of starting: epoch ms (performance.timeOrigin + now), so a page can place it on its
 * own clock. pyodide: the interpreter (from a snapshot or not); onnxruntime: its wasm compiled and
 * initialised; import: the onnxpipe wheel and entry; files: the bundle's files from storage (or
 * the network); session: the engine sessions opened (Python's open_bundle). Some run at once. */
export interface StartupStage {
  name: 'pyodide' | 'onnxruntime' | 'import' | 'files' | 'session';
  start: number;
  end: number;
}

export interface StartupTimings {
  stages: StartupStage[];
  requested: number; // epoch ms the load request reached the worker
  pythonSnapshot: 'restored' | 'made' | 'none'; // Pyodide's heap from this device's snapshot (workers/python-boot.ts)
}

export interface LoadedInfo {
  bundle: string;
  kind: 'text' | 'speech' | 'voice-activity' | 'transcription' | 'image'; // image: 'run'; speech: 'speak'; text: 'generate'; voice-activity: 'detectSpeech' or 'listen'; transcription: 'transcribe'
  sampleRate: number | null; // speech bundles: of their audio; voice-activity and transcription: the rate they take; else null
  controls: ControlInfo[];
  sessions: Record<string, SessionInfo>;
  warnings: string[];
  structure: string;
  hasChatTemplate: boolean;
  bootMs: number;
  threads: number; // WASM threads the runtime was started with (fixed by a worker's first load)
  threadsReason: ThreadChoice['reason'];
  startup: StartupTimings; // what starting the runtime and opening this bundle took
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
  speculative?: SpeculationStats;
  sequences?: BeamSequence[]; // beam search only: best first; tokens/text above are the first's
  padded?: number[][]; // beam search with tokens.pad: those sequences' tokens filled with it to the longest
}

/** One sequence beam search returned; score is transformers' sequences_scores. */
export interface BeamSequence {
  tokens: number[];
  text?: string;
  score: number;
  finish_reason: string | null;
}

export interface SentenceInfo {
  text: string;
  samples: number;
  audio_seconds: number;
  compute_seconds: number;
  ids: number[]; // the ids the voice was fed (phoneme ids or text token ids)
  tokens?: number[]; // the ids an autoregressive voice generated
}

/** A voice-activity event, decided once ``time`` seconds of audio had been seen: speech began
 * at ``start`` (padded), or the segment [start, end] ended. */
export interface VadEvent {
  type: 'speech_start' | 'speech_end';
  start: number;
  end?: number; // speech_end only
  time: number;
}

/** Speech segments of a recording (py/onnxpipe/pipeline/voice_activity.py). */
export interface VoiceActivityResult {
  segments: [number, number][]; // [start, end] seconds, padded
  probabilities: number[]; // speech probability of each chunk, in order
  events: VadEvent[];
  audio_seconds: number;
  compute_seconds: number;
  sample_rate: number;
  chunk_size: number;
  chunks: number;
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

/** One window of a transcription (py/onnxpipe/pipeline/transcription_result.py). */
export interface TranscriptWindow {
  index: number;
  start_seconds: number; // in the caller's audio
  end_seconds: number;
  text: string;
  tokens: number[];
  compute_seconds: number;
}

/** Speech to text: the same four keys the CLI prints, plus the windows. */
export interface TranscriptionResult {
  text: string;
  tokens: number[]; // generated ids of every window (stop ids left out)
  audio_seconds: number;
  compute_seconds: number;
  windows: TranscriptWindow[];
  finish_reason: 'done' | 'cancelled';
}

/** What a 'run' did: the options it ran with (the seed it picked included), the shapes of its
 * outputs and the steps done; cancelled: stopped between steps, with no outputs. */
export interface RunResult extends RunOptions {
  compute_seconds: number;
  shapes: Record<string, number[]>;
  steps: number; // denoising steps done (0 for a single pass)
  finish_reason: 'done' | 'cancelled';
}

/** One image of pipeline.output.image: 8-bit pixels, row by row (channels interleaved), the
 * same as RGBA for an ImageData, and the PNG file. */
export interface ImageOutput {
  width: number;
  height: number;
  channels: number; // 1, 3 or 4
  pixels: Uint8Array;
  rgba: Uint8ClampedArray;
  png: Uint8Array;
}

/** The outputs of a 'run': float tensors as Float32Array, others as numbers. */
export interface RunOutput {
  result: RunResult;
  outputs: Record<string, { shape: number[]; values: Float32Array | number[] }>;
  images: ImageOutput[];
}

/** Bytes of the worker's WebAssembly heaps now; a wasm heap never shrinks, so this is its peak
 * so far. null: that runtime has not started yet. */
export interface WasmMemory {
  ortBytes: number | null; // onnxruntime-web's heap (model weights, tensors)
  pythonBytes: number | null; // Pyodide's heap
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
      // a file's bytes (fetch, cache, verify: ``loaded`` of ``total``), the sessions opening
      // (session), or the runtime starting (boot, file "runtime": ``loaded`` of ``total`` steps)
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
  | { type: 'step'; id: number; step: number; steps: number } // a 'run' finished denoising step ``step`` of ``steps``
  | ({ type: 'ran'; id: number } & RunOutput) // answers 'run'
  | { type: 'cancelled'; id: number }
  | { type: 'booted'; id: number; threads: ThreadChoice } // answers 'boot' once the runtime is up
  | { type: 'disposed'; id: number }
  | { type: 'stored'; id: number; bundles: StoredBundle[] } // after a storage request
  | { type: 'memory'; id: number; memory: WasmMemory } // answers 'memory'
  | { type: 'listening'; id: number; sampleRate: number } // answers 'listen'
  | {
      // speech heard by a 'listen': start (``end`` null) or end, in seconds of the capture
      // stream; ``position`` is how much audio the worker had then; an end carries the
      // utterance's samples (padded as the bundle's segments are)
      type: 'speech';
      id: number;
      kind: 'start' | 'end';
      start: number;
      end: number | null;
      position: number;
      samples: Float32Array | null;
    }
  | { type: 'clip'; id: number; position: number; samples: Float32Array | null } // answers 'audio-clip'
  | { type: 'speechDetected'; id: number; result: VoiceActivityResult } // answers 'detectSpeech'
  | { type: 'transcript'; id: number; window: TranscriptWindow } // each window as it is done
  | { type: 'transcribed'; id: number; result: TranscriptionResult } // answers 'transcribe'
  | { type: 'error'; id: number; kind: ErrorKind; message: string }
  | { type: 'watching'; id: number; locks: boolean } // locks: false where the frame has no Web Locks
  | { type: 'pong'; id: number }
  // the engine is unusable (a wasm trap, out of memory, Pyodide's fatal error, the WebGPU device
  // lost): the request ``id`` failed and the client replaces the worker
  | { type: 'fatal'; id: number; reason: string; gpuLost: boolean };
