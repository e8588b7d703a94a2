// The page's only way to talk to the runtime worker: typed requests in, typed events out.

import type {
  ChatMessage, ControlValue, Event, ExecutionProvider, GenerationResult, ImageInput, LoadedInfo, Request, RunOptions, RunOutput, SearchOptions,
  SentenceInfo, ThreadChoice, SpeechResult, StoredBundle, TensorInput, TranscriptWindow, TranscriptionResult, VoiceActivityResult, WasmMemory,
} from './protocol';
import { BUSY_SILENCE_MS, PING_EVERY_MS, WorkerWatch } from './runtime-watch';
import { type RuntimeAssets, badAssets } from './runtime-assets';
import { defaultAssets, makeRuntimeWorker } from './runtime-location';

export class RuntimeError extends Error {
  constructor(readonly kind: string, message: string) {
    super(message);
    this.name = 'RuntimeError';
  }
}

export interface LoadOptions {
  ep?: ExecutionProvider;
  variant?: string;
  dtype?: string; // a transformers.js folder's precision (LoadedInfo.dtypes lists them)
  threads?: number;
  onProgress?: (event: Extract<Event, { type: 'progress' }>) => void;
}

export interface GenerateRequest {
  messages?: ChatMessage[];
  prompt?: string;
  inputIds?: number[];
  options?: SearchOptions;
  images?: ImageInput[]; // vision-language bundles (docs/vision-language.md)
  onToken?: (text: string, tokenIds: number[]) => void;
}

export interface SpeakRequest {
  text: string;
  controls?: Record<string, ControlValue>;
  inputs?: Record<string, TensorInput>;
  /** each sentence's samples as soon as it is made (play them while the next is computed) */
  onAudio?: (samples: Float32Array, sampleRate: number, sentence: SentenceInfo, index: number) => void;
}

/** A one-pass bundle's run (LoadedInfo.kind 'image': text-to-image by denoising). */
export interface RunRequest {
  inputs?: Record<string, TensorInput>;
  controls?: Record<string, ControlValue>;
  options?: RunOptions;
  /** after each denoising step (step counts from 1) */
  onStep?: (step: number, steps: number) => void;
}

export interface Speech {
  result: SpeechResult;
  wav: Uint8Array; // 16-bit PCM WAV of the whole text (encoded by onnxpipe's Python in the worker)
}

/** Self-healing, as the page should show it: the worker died (a new one is starting and the
 * bundle that was loaded is loading again from this device's storage), the bundle is back
 * (``info``: null when none had been loaded; ``ep`` the provider it now runs on: 'wasm' after a
 * lost WebGPU device), or it could not be brought back (the page must load again). */
export type RuntimeStatus =
  | { state: 'stopped'; reason: string }
  | { state: 'restored'; reason: string; info: LoadedInfo | null; ep: ExecutionProvider }
  | { state: 'failed'; reason: string; message: string };

/** After this many deaths with no successful reload between them, stop reloading. */
const MAX_DEATHS_IN_A_ROW = 3;

/** Test hooks, only on a page opened with ``?onnxpipe-debug`` (RuntimeClient.debug). */
export interface RuntimeDebug {
  /** terminate the worker behind the client's back, as a crash would */
  killWorker(): void;
  /** the next engine run in the worker traps (wasm 'unreachable') */
  trapNextRun(): Promise<void>;
  /** destroy the worker's WebGPU device (GPUDevice.destroy()) */
  loseGpuDevice(): Promise<void>;
  /** the worker spins forever (holding its lock): only the heartbeat, 250 ms a beat here, sees it */
  hangWorker(): Promise<void>;
  /** the next engine run spins forever, in the middle of its request: only the request's silence
   * (RuntimeOptions.busySilenceMs; ``onnxpipe-busy-silence-ms`` in the URL here) sees it */
  hangInNextRun(): Promise<void>;
  /** the next engine run asks JS for an impossibly large typed array (a RangeError) */
  oversizedAllocationInNextRun(): Promise<void>;
}

const pageParams = (): URLSearchParams => {
  try {
    return new URLSearchParams(self.location.search);
  } catch {
    return new URLSearchParams();
  }
};

export interface RuntimeOptions {
  /** A request that hears nothing from the worker this long means the worker hung: it is
   * replaced like a dead one (runtime-watch.ts BUSY_SILENCE_MS by default). */
  busySilenceMs?: number;
  /** Where the worker finds onnxruntime-web, Pyodide, the wheel and espeak-ng (default: this
   * build's own layout, runtime-location.ts). */
  assets?: RuntimeAssets;
}

/** What a 'listen' reports: speech started, or ended (with the utterance's samples). */
export type SpeechEvent = Extract<Event, { type: 'speech' }>;

type Pending = {
  resolve: (value: unknown) => void;
  reject: (error: RuntimeError) => void;
  onEvent?: (event: Event) => void;
};

export class RuntimeClient {
  private worker!: Worker;
  private watch: WorkerWatch | null = null;
  /** The last load that succeeded: loaded again into a replacement worker. */
  private lastLoad: { bundleUrl: string; options: LoadOptions } | null = null;
  /** Set while a replacement worker reloads; other requests wait for it. */
  private restoring: Promise<void> | null = null;
  private deathsInRow = 0;
  /** Gave up restarting (runtime-watch.ts): requests fail until a load starts a worker. */
  private dead = false;
  private readonly statusListeners = new Set<(status: RuntimeStatus) => void>();
  /** Test hooks (``?onnxpipe-debug`` in the page's URL), else null. */
  readonly debug: RuntimeDebug | null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private generating: number | null = null;
  /** The running 'listen' (its events keep coming after it resolved). */
  private listener: { id: number; onEvent: (event: SpeechEvent) => void; onError: (error: RuntimeError) => void } | null = null;
  private loads = 0;
  /** What boot() started the worker with, until the first load. */
  private booted: { ep?: ExecutionProvider; threads?: number } | null = null;
  private readonly loadedListeners = new Set<() => void>();
  // where cross-origin isolated, cancel is also written here, so the worker sees it at once
  private readonly cancelFlag = self.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(4)) : null;

  private readonly busySilenceMs: number;
  private readonly assets: RuntimeAssets;

  /** ``makeWorker`` starts a runtime worker (tests pass their own). */
  constructor(private readonly makeWorker: () => Worker = makeRuntimeWorker, options: RuntimeOptions = {}) {
    this.assets = options.assets ?? defaultAssets();
    const badAssetMap = badAssets(this.assets);
    if (badAssetMap) throw new TypeError(badAssetMap);
    const params = pageParams();
    const debug = params.has('onnxpipe-debug');
    const crash = (how: Extract<Request, { type: 'crash' }>['how']) => this.send<void>({ type: 'crash', id: this.nextId++, how });
    this.debug = debug ? {
      killWorker: () => this.worker.terminate(),
      trapNextRun: () => crash('trap'),
      loseGpuDevice: () => crash('gpu-device'),
      hangWorker: () => crash('hang'),
      hangInNextRun: () => crash('hang-in-run'),
      oversizedAllocationInNextRun: () => crash('oversized-allocation'),
    } : null;
    const testSilence = debug ? Number(params.get('onnxpipe-busy-silence-ms')) : 0;
    this.busySilenceMs = testSilence > 0 ? testSilence : options.busySilenceMs ?? BUSY_SILENCE_MS;
    this.start();
  }

  /** Start a worker and watch it (runtime-watch.ts): its death replaces it. */
  private start(): void {
    const worker = this.makeWorker();
    this.worker = worker;
    const died = (reason: string, gpuLost = false): void => {
      if (this.worker === worker) this.died(reason, gpuLost);
    };
    worker.onmessage = (message: MessageEvent<Event>) => {
      const event = message.data;
      this.watch?.heard();
      if (event.type === 'watching') this.watch?.watching(event.locks);
      else if (event.type === 'pong') this.watch?.pong();
      else if (event.type === 'fatal') died(event.reason, event.gpuLost);
      else this.dispatch(event);
    };
    worker.onerror = (error) => died(`an uncaught error in the worker (${error.message || 'no message'})`);
    worker.onmessageerror = () => died('a message from the worker could not be read');
    worker.postMessage({ type: 'configure', id: this.nextId++, assets: this.assets } satisfies Request);
    this.watch = new WorkerWatch(worker, () => this.pending.size === 0, (reason) => died(reason),
      this.debug ? 250 : PING_EVERY_MS, this.busySilenceMs);
    this.watch.start(this.nextId++, this.debug !== null);
  }

  /** Stop watching and end the worker (a new load, terminate(), or its death). */
  private stop(): void {
    this.watch?.stop();
    this.watch = null;
    this.worker.onmessage = this.worker.onerror = this.worker.onmessageerror = null;
    this.worker.terminate();
  }

  /** Reject everything in flight; ``listening``: also tell the running 'listen' (its worker died). */
  private failAll(kind: string, message: string, listening = false): void {
    for (const [id, p] of this.pending) {
      p.reject(new RuntimeError(kind, message));
      this.pending.delete(id);
    }
    const listener = this.listener;
    if (!listening || !listener) return;
    this.listener = null;
    listener.onError(new RuntimeError(kind, message));
  }

  /** The worker died: fail what was in flight, start a new one, load the last bundle again
   * (from this device's storage: its files were stored and verified by the first load). */
  private died(reason: string, gpuLost: boolean): void {
    this.stop();
    const givingUp = ++this.deathsInRow > MAX_DEATHS_IN_A_ROW;
    this.failAll('stopped', `the runtime stopped: ${reason}; ${givingUp ? 'load a bundle again' : 'restarting'}`, true);
    this.emit({ state: 'stopped', reason });
    if (givingUp) {
      // no new worker: one that dies as it starts would be replaced forever; a load starts one
      this.dead = true;
      this.lastLoad = null;
      this.restoring = null;
      this.emit({ state: 'failed', reason, message: `the runtime stopped ${this.deathsInRow} times in a row (last: ${reason}); load a bundle again` });
      return;
    }
    this.start();
    const last = this.lastLoad;
    const booted = this.booted;
    // a lost WebGPU device: go on with WASM (a new device may fail the same way)
    if (last && gpuLost) last.options = { ...last.options, ep: 'wasm' };
    const restore = async (): Promise<void> => {
      let info: LoadedInfo | null = null;
      if (last) info = await this.loadInWorker(last.bundleUrl, last.options);
      else if (booted) await this.send<ThreadChoice>({ type: 'boot', id: this.nextId++, ep: booted.ep, threads: booted.threads }, undefined, true);
      if (last || booted) this.deathsInRow = 0;   // else nothing showed the new worker works
      this.emit({ state: 'restored', reason, info, ep: last?.options.ep ?? booted?.ep ?? 'wasm' });
    };
    const restoring = restore().catch((error: unknown) => {
      // superseded by a newer death or a load of the page's own: that one reports
      if (this.restoring === restoring) this.emit({ state: 'failed', reason, message: error instanceof Error ? error.message : String(error) });
    }).finally(() => {
      if (this.restoring === restoring) this.restoring = null;
    });
    this.restoring = restoring;
  }

  private emit(status: RuntimeStatus): void {
    for (const listener of this.statusListeners) listener(status);
  }

  /** Hear of the worker's death and of the reload that follows (RuntimeStatus); returns an unsubscribe. */
  onStatus(listener: (status: RuntimeStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  private dispatch(event: Event): void {
    const pending = this.pending.get(event.id);
    if (!pending) {
      this.dispatchListen(event);
      return;
    }
    switch (event.type) {
      case 'progress':
      case 'token':
      case 'audio':
      case 'transcript':
      case 'step':
        pending.onEvent?.(event);
        return;
      case 'error':
        this.pending.delete(event.id);
        pending.reject(new RuntimeError(event.kind, event.message));
        return;
      case 'loaded':
        this.pending.delete(event.id);
        pending.resolve(event.info);
        for (const listener of this.loadedListeners) listener();
        return;
      case 'done':
        this.pending.delete(event.id);
        pending.resolve(event.result);
        return;
      case 'spoken':
        this.pending.delete(event.id);
        pending.resolve({ result: event.result, wav: event.wav });
        return;
      case 'stored':
        this.pending.delete(event.id);
        pending.resolve(event.bundles);
        return;
      case 'memory':
        this.pending.delete(event.id);
        pending.resolve(event.memory);
        return;
      case 'ran':
        this.pending.delete(event.id);
        pending.resolve({ result: event.result, outputs: event.outputs, images: event.images });
        return;
      case 'speechDetected':
      case 'transcribed':
        this.pending.delete(event.id);
        pending.resolve(event.result);
        return;
      case 'listening':
        this.pending.delete(event.id);
        pending.resolve(event.sampleRate);
        return;
      case 'clip':
        this.pending.delete(event.id);
        pending.resolve({ position: event.position, samples: event.samples });
        return;
      case 'speech':
        this.dispatchListen(event);
        return;
      case 'booted':
        this.pending.delete(event.id);
        pending.resolve(event.threads);
        return;
      case 'cancelled':
      case 'disposed':
        this.pending.delete(event.id);
        pending.resolve(null);
        return;
    }
  }

  /** Post ``request`` and wait for its answer; while a replacement worker reloads the bundle,
   * first wait for that (``now``: the reload's own requests). */
  private async send<T>(request: Request, onEvent?: (event: Event) => void, now = false): Promise<T> {
    await this.whenUsable(request.type, now);
    return new Promise<T>((resolve, reject) => {
      this.pending.set(request.id, { resolve: resolve as (v: unknown) => void, reject, onEvent });
      this.worker.postMessage(request);
    });
  }

  /** Wait for a reload under way (unless ``now``); refuse ``type`` when restarting gave up. */
  private async whenUsable(type: Request['type'], now = false): Promise<void> {
    if (!now && this.restoring) await this.restoring;
    if (this.dead) throw new RuntimeError('stopped', `the runtime stopped; load a bundle again before "${type}"`);
  }

  /** Fetch (with progress), verify and cache a bundle, then open its sessions.
   *
   * Each load after the first starts a fresh worker: the old bundle's memory goes with it,
   * and onnxruntime-web's build (WASM or WebGPU) and thread count are chosen anew (its WebGPU
   * kernels also misbehave when a second model with another vocabulary shares a worker). */
  async load(bundleUrl: string, options: LoadOptions = {}): Promise<LoadedInfo> {
    const booted = this.booted;
    const bootFits = !booted || ((booted.ep ?? 'wasm') === (options.ep ?? 'wasm') && booted.threads === options.threads);
    this.restoring = null;   // this load replaces any reload under way
    if (this.loads > 0 || !bootFits || this.dead) {
      this.stop();
      this.failAll('internal', 'a new bundle is loading');
      this.dead = false;
      this.start();
    }
    this.booted = null;
    this.lastLoad = null;
    const info = await this.loadInWorker(bundleUrl, options);
    this.lastLoad = { bundleUrl, options };
    this.deathsInRow = 0;
    return info;
  }

  private loadInWorker(bundleUrl: string, options: LoadOptions): Promise<LoadedInfo> {
    this.loads++;
    const request: Request = {
      type: 'load', id: this.nextId++, bundleUrl, ep: options.ep, variant: options.variant, dtype: options.dtype,
      threads: options.threads,
      cancelBuffer: this.cancelFlag?.buffer as SharedArrayBuffer | undefined,
    };
    return this.send<LoadedInfo>(request, (event) => {
      if (event.type === 'progress') options.onProgress?.(event);
    }, true);
  }

  /** Start the runtime now (Pyodide, onnxruntime-web, the Python entry), before any load: the
   * page calls it when it opens, so a load finds the runtime (nearly) up. A first load with the
   * same ``ep`` and ``threads`` uses it; another one starts a fresh worker. Resolves with the
   * thread count chosen (rejects if that fresh worker replaced this one first). */
  boot(options: { ep?: ExecutionProvider; threads?: number } = {}): Promise<ThreadChoice> {
    if (this.loads > 0) return Promise.reject(new RuntimeError('input', 'boot: a bundle was already loaded in this worker'));
    this.booted = { ep: options.ep, threads: options.threads };
    return this.send<ThreadChoice>({ type: 'boot', id: this.nextId++, ep: options.ep, threads: options.threads });
  }

  /** Generate; chat messages continue the worker's conversation state. */
  async generate(request: GenerateRequest): Promise<GenerationResult> {
    const id = this.nextId++;
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 0);
    this.generating = id;
    const message: Request = {
      type: 'generate', id, messages: request.messages, prompt: request.prompt,
      inputIds: request.inputIds, options: request.options, images: request.images,
    };
    try {
      return await this.send<GenerationResult>(message, (event) => {
        if (event.type === 'token') request.onToken?.(event.text, event.tokenIds);
      });
    } finally {
      if (this.generating === id) this.generating = null;
    }
  }

  /** Text to speech: audio arrives sentence by sentence through ``onAudio``; resolves with
   * the timings and the WAV of everything (also after a cancel, with what was made). */
  async speak(request: SpeakRequest): Promise<Speech> {
    const id = this.nextId++;
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 0);
    this.generating = id;
    try {
      const message: Request = { type: 'speak', id, text: request.text, controls: request.controls, inputs: request.inputs };
      return await this.send<Speech>(message, (event) => {
        if (event.type === 'audio') request.onAudio?.(event.samples, event.sampleRate, event.sentence, event.index);
      });
    } finally {
      if (this.generating === id) this.generating = null;
    }
  }

  /** Run a one-pass bundle once (text-to-image: the image's RGBA pixels and PNG in ``images``);
   * cancel() stops between denoising steps (finish_reason 'cancelled', no outputs). */
  async run(request: RunRequest): Promise<RunOutput> {
    const id = this.nextId++;
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 0);
    this.generating = id;
    try {
      const message: Request = { type: 'run', id, inputs: request.inputs, controls: request.controls, options: request.options };
      return await this.send<RunOutput>(message, (event) => {
        if (event.type === 'step') request.onStep?.(event.step, event.steps);
      });
    } finally {
      if (this.generating === id) this.generating = null;
    }
  }

  /** Events of the running 'listen' once it has started. */
  private dispatchListen(event: Event): void {
    const listener = this.listener;
    if (!listener || listener.id !== event.id) return;
    if (event.type === 'speech') listener.onEvent(event);
    else if (event.type === 'error') {
      this.listener = null;
      listener.onError(new RuntimeError(event.kind, event.message));
    }
  }

  /** Run the loaded voice-activity bundle on the microphone audio that arrives on ``port``
   * (the other end goes to the capture worklet: the audio never passes through the page).
   * Resolves with the audio's sample rate once the worker listens; speech events then reach
   * ``onEvent`` until stopListening(); a later failure reaches ``onError``. Like any request it
   * waits for a reload under way (a listen retried after the worker died). */
  async listen(
    port: MessagePort, onEvent: (event: SpeechEvent) => void, onError: (error: RuntimeError) => void,
    controls?: Record<string, ControlValue>,
  ): Promise<number> {
    await this.whenUsable('listen');
    const id = this.nextId++;
    this.listener = { id, onEvent, onError };
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, {
        resolve: resolve as (v: unknown) => void,
        reject: (error) => {
          if (this.listener?.id === id) this.listener = null;
          reject(error);
        },
      });
      this.worker.postMessage({ type: 'listen', id, port, controls } satisfies Request, [port]);
    });
  }

  /** Stop listening (the worker finishes the open speech, if any, without reporting it). */
  stopListening(): Promise<void> {
    this.listener = null;
    return this.send<void>({ type: 'unlisten', id: this.nextId++ });
  }

  /** The listened audio: the position now (samples), and the samples from ``from`` to now. */
  audioClip(from?: number): Promise<{ position: number; samples: Float32Array | null }> {
    return this.send({ type: 'audio-clip', id: this.nextId++, from });
  }

  /** Speech segments of a whole recording (mono ``samples`` at ``sampleRate``) with the loaded
   * voice-activity bundle; ``controls`` set its pipeline.inputs (threshold, min_silence_ms, ...).
   * The samples are copied, so the caller keeps its array. */
  detectSpeech(samples: Float32Array, sampleRate: number, controls?: Record<string, ControlValue>): Promise<VoiceActivityResult> {
    return this.send<VoiceActivityResult>({ type: 'detectSpeech', id: this.nextId++, samples, sampleRate, controls });
  }

  /** Speech to text with the loaded transcription bundle: mono ``samples`` at any
   * ``sampleRate`` (resampled in the worker). Each window of audio (30 s for Whisper) reaches
   * ``onTranscript`` as soon as it is done (the result's text is the windows' texts joined by
   * spaces); resolves with the whole text and token ids (after a cancel: the windows done,
   * finish_reason 'cancelled'). The samples are copied. */
  async transcribe(
    samples: Float32Array, sampleRate: number, onTranscript?: (window: TranscriptWindow) => void,
    options?: SearchOptions,
  ): Promise<TranscriptionResult> {
    const id = this.nextId++;
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 0);
    this.generating = id;
    try {
      return await this.send<TranscriptionResult>({ type: 'transcribe', id, samples, sampleRate, options }, (event) => {
        if (event.type === 'transcript') onTranscript?.(event.window);
      });
    } finally {
      if (this.generating === id) this.generating = null;
    }
  }

  /** Stop the running generation within one step; its promise resolves with what was made. */
  cancel(): Promise<void> {
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 1);
    if (this.restoring) return Promise.resolve();   // nothing runs while the bundle reloads
    return this.send<void>({ type: 'cancel', id: this.nextId++ });
  }

  /** Run ``listener`` after each successful load (it may have stored files); returns an unsubscribe. */
  onLoaded(listener: () => void): () => void {
    this.loadedListeners.add(listener);
    return () => this.loadedListeners.delete(listener);
  }

  /** The worker's wasm heap sizes now (each is its peak so far: a wasm heap never shrinks). */
  wasmMemory(): Promise<WasmMemory> {
    return this.send<WasmMemory>({ type: 'memory', id: this.nextId++ });
  }

  /** Bundles stored on this device (sizes in bytes). */
  storedBundles(): Promise<StoredBundle[]> {
    return this.send<StoredBundle[]>({ type: 'storage', id: this.nextId++, op: 'list' });
  }

  /** Remove a stored bundle (by its ``key``); resolves with what is left. A loaded bundle
   * keeps running; one whose load is still running is refused (an 'input' error). */
  removeStored(key: string): Promise<StoredBundle[]> {
    return this.send<StoredBundle[]>({ type: 'storage', id: this.nextId++, op: 'remove', key });
  }

  dispose(): Promise<void> {
    return this.send<void>({ type: 'dispose', id: this.nextId++ });
  }

  /** End the worker for good (no restart). */
  terminate(): void {
    this.restoring = null;
    this.lastLoad = null;
    this.stop();
  }
}
