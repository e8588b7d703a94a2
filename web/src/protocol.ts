// The one protocol between the page (web/src/transport.ts) and the runtime worker
// (workers/runtime.worker.ts): the page posts {id, verb, args} (CallMessage); the worker answers
// with {id, event, data} for each streamed event, then {id, result} or {id, error}
// (WorkerMessage). `Verbs` lists every verb with its args, result and events. Keys are
// snake_case, as in Python (py/onnxpipe/web_protocol.py) and OpenAI's wire format.

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
  // constrained output and tool calls (py/onnxpipe/grammar/): passed to pipe.chat / pipe.generate
  response_format?: ResponseFormat;
  tools?: ChatTool[];
  tool_choice?: ToolChoice;
  // generate only: other pipeline inputs (an encoder-decoder folder's audio_features)
  inputs?: Record<string, TensorInput>;
}

/** OpenAI's response_format, plus onnxpipe's regex and grammar (EBNF, XGrammar's syntax). */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; schema?: Record<string, unknown>; strict?: boolean | null; description?: string } }
  | { type: 'regex'; regex: string }
  | { type: 'grammar'; grammar: string; syntax?: 'ebnf' };

/** An OpenAI function tool; parameters is a JSON schema of the call's arguments. */
export interface ChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

export type Tool = ChatTool;

export type ToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

/** A call the model made, in OpenAI's shape (arguments: a JSON string). */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** How a constrained generation went: kind of constraint, compile time (0 when cached), the
 * vocabulary's first load, and whether the grammar ended (false with finish_reason "length"). */
export interface GrammarInfo {
  kind: string;
  compile_ms: number;
  cached: boolean;
  vocabulary_ms: number;
  complete: boolean;
  // when complete: the output checked against its constraint (py/onnxpipe/grammar/check.py);
  // null where nothing could check it (no JSON Schema validator in the worker)
  valid?: boolean | null;
  error?: string;
}

export interface SpeculativeOptions {
  method: 'prompt_lookup';
  max_draft?: number; // draft tokens verified per pass (1..32, default 4)
  ngram?: number; // longest n-gram looked up in the prompt and reply so far (default 3)
}

/** Per-call options of a denoising loop (as `python -m onnxpipe run` --seed, --steps,
 * --guidance-scale, --scheduler); absent: the bundle's generation defaults. */
export interface RunOptions {
  seed?: number;
  num_steps?: number;
  guidance_scale?: number; // > 1: classifier-free guidance
  scheduler?: string; // euler_discrete or ddim
}

/** A turn; an assistant turn may carry the calls it made, a tool turn answers one of them. */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; tool_calls?: ToolCall[] }
  | { role: 'tool'; content: string; tool_call_id: string };

/** Tool calling's turns (OpenAI's shape): an assistant turn that called functions, and a tool
 * turn answering one of those calls. */
export interface ToolCallMessage {
  role: 'assistant';
  content: string | null;
  tool_calls: ToolCall[];
}

export interface ToolMessage {
  role: 'tool';
  content: string;
  tool_call_id: string;
}

export type Message = ChatMessage | ToolCallMessage | ToolMessage;

/** A tensor given by the caller: flat values and shape (dtype from the session input). */
export interface TensorInput {
  values: number[];
  shape: number[];
}

/** An image for a vision-language bundle: an encoded file (PNG, JPEG, ...; the worker decodes
 * it with createImageBitmap) or decoded RGB bytes (width * height * 3, row by row). */
export type ImageInput = Blob | { rgb: Uint8Array; width: number; height: number };

/** One audio clip of a generate request (Phi-4-multimodal bundles, docs/speech.md): mono
 * samples in [-1, 1] at ``sample_rate`` (the bundle's audio processor names the rates it takes). */
export interface AudioInput { samples: Float32Array; sample_rate: number }

export type ErrorKind =
  | 'config' | 'bundle' | 'input' | 'engine' | 'quota' | 'network' | 'integrity' | 'text' | 'internal'
  | 'memory' // the bundle can't fit the WASM heap as asked (said before its weights are fetched)
  | 'stopped' // the runtime worker died (client.ts restarts it and reloads the bundle)
  // the user's side, which the user can fix: no microphone (none, busy, unplugged, a browser
  // without the means), or access to it refused (web/src/audio/mic.ts)
  | 'device' | 'permission';

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
  python_snapshot: 'restored' | 'made' | 'none'; // Pyodide's heap from this device's snapshot (workers/python-boot.ts)
}

// ---- Results and events Python makes: each interface below mirrors the dataclass of its name
// in py/onnxpipe/web_protocol.py (tests/py/test_web_protocol.py compares their fields). ---------

/** What a wasm session's heap plan made of its file (py/onnxpipe/heap/plan.py, docs/large-models.md). */
export interface HeapInfo {
  weight_bytes: number; // the session's weights as they sit in onnxruntime-web's WASM heap
  temp_bytes: number; // the largest buffer a MatMulNBits left as it is allocates per call
  expanded: number; // MatMulNBits nodes opened as fp32 MatMuls (exact)
  kept: number; // MatMulNBits nodes left as they are
  kept_why: string[]; // why: the heap budget, or what such a node has that the expansion does not do
  widened: number; // fp16 MatMul weights opened as fp32 (what the engine computes them in anyway)
  heaps: number; // onnxruntime-web instances the graph is spread over, in consecutive parts
}

export interface SessionInfo {
  provider: string;
  file: string;
  heap?: HeapInfo; // wasm sessions only
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

/** What Python reports of a bundle it opened ('open_bundle'); the worker adds the rest of LoadedInfo. */
export interface OpenedBundle {
  kind: 'text' | 'speech' | 'voice-activity' | 'transcription' | 'image'; // image: 'run'; speech: 'speak'; text: 'generate'; voice-activity: 'detect_speech' or 'listen'; transcription: 'transcribe'
  sample_rate: number | null; // speech bundles: of their audio; voice-activity and transcription: the rate they take; else null
  controls: ControlInfo[];
  sessions: Record<string, SessionInfo>;
  warnings: string[];
  structure: string;
  has_chat_template: boolean;
  load_ms: number; // includes warm_up_ms
  warm_up_ms: number; // speech bundles: one short word spoken at load so the first Speak is fast
  dtype: string | null; // the precision opened (transformers.js folders); null for other bundles
  dtypes: string[]; // the precisions the folder offers (load again with one of them); empty for other bundles
  heap?: HeapFit; // wasm: the bundle's fit in the WASM heap
}

/** The large files a bundle opens here ('files_needed', asked before any is fetched). */
/** A bundle's fit in onnxruntime-web's WASM heap, in bytes (py/onnxpipe/heap/fit.py,
 * docs/large-models.md). A load that can't fit fails before any weight is fetched, kind 'memory'. */
export interface HeapFit {
  limit_bytes: number; // the heap's size limit (4 GiB)
  need_bytes: number; // what the load needs (every MatMulNBits expanded when that fits)
  full_bytes: number; // with every MatMulNBits expanded (the fast plan)
  least_bytes: number; // with none expanded (weights as stored)
  kv_bytes: number; // the KV cache at context_length (twice: a step's past and present)
  work_bytes: number; // one prefill chunk's working memory
  engine_bytes: number; // the engine's own
  context_length: number; // tokens the KV cache is reserved for: prompt + reply stop there
  weights_exact: boolean; // weights read from the graphs (else counted from config.json)
  expanded_all: boolean; // every MatMulNBits opens expanded
  heaps: number; // onnxruntime-web instances (4 GiB heaps each) the weights are spread over
}

export interface FilesNeeded {
  files: string[];
  heap?: HeapFit; // wasm: the heap it will need
}

/** New text since the previous 'token' event, and the ids it came from. */
export interface TokenEvent {
  text: string;
  token_ids: number[];
}

/** Speculative decoding's counts for one reply (present when it was on). */
export interface SpeculationStats {
  passes: number;
  drafted: number;
  accepted: number;
  acceptance_rate: number;
}

/** One sequence beam search returned; score is transformers' sequences_scores. */
export interface BeamSequence {
  tokens: number[];
  score: number;
  finish_reason: string | null;
  text?: string;
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
  tool_calls?: ToolCall[]; // the reply as tool calls (finish_reason "tool_calls")
  grammar?: GrammarInfo; // with response_format or a forced tool call
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

/** A voice-activity event, decided once ``time`` seconds of audio had been seen: speech began
 * at ``start`` (padded), or the segment [start, end] ended. */
export interface VadEvent {
  type: 'speech_start' | 'speech_pause' | 'speech_end';
  start: number;
  time: number;
  end?: number; // speech_pause and speech_end
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

/** A live detector started ('listen_start'): the rate it takes. */
export interface ListenStarted {
  sample_rate: number;
}

/** The events one chunk of live audio decided ('listen_push'). */
export interface ListenHeard {
  events: VadEvent[];
}

/** A 'run' finished denoising step ``step`` of ``steps``. */
export interface StepEvent {
  step: number;
  steps: number;
}

/** What a 'run' did: the options it ran with (the seed it picked included), the shapes of its
 * outputs and the steps done; cancelled: stopped between steps, with no outputs. */
export interface RunResult {
  compute_seconds: number;
  shapes: Record<string, number[]>;
  steps: number; // denoising steps done (0 for a single pass)
  finish_reason: 'done' | 'cancelled';
  seed?: number;
  num_steps?: number;
  guidance_scale?: number;
  scheduler?: string;
}

// ---- The worker's own results and events -----------------------------------------------------

/** What a load resolves with: Python's OpenedBundle plus the runtime's part. */
export interface LoadedInfo extends OpenedBundle {
  bundle: string;
  boot_ms: number;
  threads: number; // WASM threads the runtime was started with (fixed by a worker's first load)
  threads_reason: ThreadChoice['reason'];
  startup: StartupTimings; // what starting the runtime and opening this bundle took
}

/** A file's bytes (fetch, cache, verify: ``loaded`` of ``total``), the sessions opening
 * (session), or the runtime starting (boot, file "runtime": ``loaded`` of ``total`` steps). */
export interface ProgressEvent {
  phase: 'boot' | 'fetch' | 'cache' | 'verify' | 'session';
  file: string;
  loaded: number;
  total: number;
  percent: number;
}

/** One sentence of audio, in order; silence between sentences is included at the end. */
export interface AudioEvent {
  index: number;
  samples: Float32Array;
  sample_rate: number;
  sentence: SentenceInfo;
}

/** What 'speak' resolves with. */
export interface Speech {
  result: SpeechResult;
  wav: Uint8Array; // 16-bit PCM WAV of the whole text (encoded by onnxpipe's Python in the worker)
}

/** Speech heard by a 'listen', in seconds of the capture stream: it began (``end`` null),
 * paused (with 'listen''s ``pause_ms``: a silence that long, bounded as its end will be if the
 * speech does not resume) or ended; ``position``: how much audio the worker had then; a pause
 * and an end carry the utterance's samples (padded as the bundle's segments are). */
export interface SpeechEvent {
  type: 'speech_start' | 'speech_pause' | 'speech_end';
  start: number;
  end: number | null;
  position: number;
  samples: Float32Array | null;
}

/** The listened audio: the position now, and the samples from ``from`` to now (push to talk). */
export interface AudioClip {
  position: number;
  samples: Float32Array | null;
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
  ort_bytes: number | null; // onnxruntime-web's heaps, summed (model weights, tensors)
  ort_heaps: number[]; // each onnxruntime-web instance's heap (more than one: a decoder spread over heaps)
  python_bytes: number | null; // Pyodide's heap
}

/** A bundle stored on this device (workers/storage/catalog.ts). */
export interface StoredBundle {
  key: string; // its storage folder: pass it to remove
  url: string; // the bundle's base URL
  name: string; // its last path segment
  bytes: number; // everything stored for it, partial downloads included
  files: number; // files downloaded and verified
}

/** The engine is unusable (a wasm trap, out of memory, Pyodide's fatal error, the WebGPU device
 * lost): sent instead of the answer of request ``id`` (0: none was running); the page replaces
 * the worker. */
export interface FatalEvent {
  reason: string;
  gpu_lost: boolean;
}

// ---- The verbs: what each takes, what it resolves with, what it streams meanwhile ------------

type AudioArgs = { samples: Float32Array; sample_rate: number };

export interface Verbs {
  // first, before any other call: where onnxruntime-web, Pyodide, the wheel and espeak-ng are
  // (web/src/runtime-assets.ts); a map with a field missing or unknown is refused by name
  configure: { args: { assets: RuntimeAssets }; result: null; events: never };
  // start the runtime before any load (the page does at once); a load with another ep or
  // thread count than the boot's needs a fresh worker (client.ts does that)
  boot: { args: { ep?: ExecutionProvider; threads?: number }; result: ThreadChoice; events: never };
  load: {
    args: {
      bundle_url: string; ep?: ExecutionProvider; variant?: string;
      dtype?: string; // a transformers.js folder's precision (fp32, fp16, q4, q4f16, ...); default: per provider
      // wasm: MatMulNBits weights expanded to fp32 at load: 'auto' (as far as the heap allows,
      // the default), 'all' or 'none' (as stored: ~10x slower; docs/large-models.md)
      expand_weights?: 'auto' | 'all' | 'none';
      context_length?: number; // tokens of KV cache to reserve (default min(max_length, 4096)); prompt + reply stop there
      // wasm: onnxruntime-web instances (4 GiB heaps each) to spread a decoder over, or 'auto' (the
      // default): the fewest of 1 or 2 that hold its weights expanded (docs/large-models.md)
      heaps?: 'auto' | number;
      threads?: number; // WASM threads, fixed by the first load of a worker
      cancel_buffer?: SharedArrayBuffer; // 4 bytes the page sets to 1 on cancel (isolated pages)
    };
    result: LoadedInfo; events: { progress: ProgressEvent };
  };
  generate: {
    args: {
      messages?: Message[]; prompt?: string; input_ids?: number[]; options?: SearchOptions;
      images?: ImageInput[]; // vision-language bundles: one image token in the prompt per image
      audios?: AudioInput[]; // speech bundles: one <|audio_N|> tag in the prompt per clip (buffers transferred)
    };
    result: GenerationResult; events: { token: TokenEvent };
  };
  // text -> audio, sentence by sentence (bundles whose pipeline.output has "audio")
  speak: {
    args: {
      text: string;
      controls?: Record<string, ControlValue>; // pipeline.inputs by name (e.g. noise_scale, voice)
      inputs?: Record<string, TensorInput>; // other pipeline inputs (e.g. a reference voice's audio_values)
    };
    result: Speech; events: { audio: AudioEvent };
  };
  // a one-pass bundle once (denoising: text-to-image; single_pass); cancel stops between steps
  run: {
    args: { inputs?: Record<string, TensorInput>; controls?: Record<string, ControlValue>; options?: RunOptions };
    result: RunOutput; events: { step: StepEvent };
  };
  // speech to text (transcription bundles): mono samples at any rate, resampled in the worker
  transcribe: { args: AudioArgs & { options?: SearchOptions }; result: TranscriptionResult; events: { transcript: TranscriptWindow } };
  // speech segments of a whole recording (voice-activity bundles)
  detect_speech: { args: AudioArgs & { controls?: Record<string, ControlValue> }; result: VoiceActivityResult; events: never };
  // microphone audio straight from the capture worklet (web/src/audio/mic.ts) into the loaded
  // voice-activity bundle: resolves once it runs; 'speech' events under its id until 'unlisten'
  listen: { args: { port: MessagePort; controls?: Record<string, ControlValue>; pause_ms?: number }; result: ListenStarted; events: { speech: SpeechEvent } };
  unlisten: { args: Record<string, never>; result: null; events: never };
  audio_clip: { args: { from?: number }; result: AudioClip; events: never };
  cancel: { args: Record<string, never>; result: null; events: never }; // the running request stops within one step
  dispose: { args: Record<string, never>; result: null; events: never };
  // models kept on this device (workers/storage/): list them, or remove one
  storage_list: { args: Record<string, never>; result: StoredBundle[]; events: never };
  storage_remove: { args: { key: string }; result: StoredBundle[]; events: never };
  memory: { args: Record<string, never>; result: WasmMemory; events: never }; // the worker's wasm heap sizes
  // self-healing (web/src/runtime-watch.ts): the worker holds the Web Lock ``lock`` while it
  // lives (locks: false where the frame has no Web Locks); 'ping' is the idle heartbeat
  watch: { args: { lock: string; debug: boolean }; result: { locks: boolean }; events: never };
  ping: { args: Record<string, never>; result: null; events: never };
  // test only (refused unless 'watch' had debug): make the next engine run trap like a wasm
  // 'unreachable', destroy the WebGPU device, spin forever once answered (a hung worker), spin
  // forever in the next engine run, or ask JS for an impossibly large typed array in it
  crash: { args: { how: 'trap' | 'gpu-device' | 'hang' | 'hang-in-run' | 'oversized-allocation' }; result: null; events: never };
}

export type Verb = keyof Verbs;
export type ArgsOf<V extends Verb> = Verbs[V]['args'];
export type ResultOf<V extends Verb> = Verbs[V]['result'];
export type EventsOf<V extends Verb> = Verbs[V]['events'];
/** A streamed event of verb ``V``: its name and data, as one tagged value. */
export type EventOf<V extends Verb> = { [E in keyof EventsOf<V> & string]: { event: E; data: EventsOf<V>[E] } }[keyof EventsOf<V> & string];

// ---- The messages: one shape each way ---------------------------------------------------------

/** Page -> worker: run ``verb`` with ``args``; everything the worker sends about it carries ``id``. */
export interface CallMessage<V extends Verb = Verb> {
  id: number;
  verb: V;
  args: ArgsOf<V>;
}

export interface WireError {
  kind: ErrorKind;
  message: string;
}

/** 'alive': the worker is busy on a call and well (sent at most every ALIVE_EVERY_MS while it
 * runs, between steps and prefill chunks): a long prefill that streams no token is not a hang. */
export const ALIVE_EVENT = 'alive';
export const ALIVE_EVERY_MS = 500;

/** Worker -> page: an event streamed while a call runs ('fatal' and 'alive' may come under any
 * id), then exactly one of result or error ends the call. */
export type WorkerMessage =
  | { id: number; event: string; data: unknown }
  | { id: number; result: unknown }
  | { id: number; error: WireError };
