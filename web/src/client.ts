// The page's only way to talk to the runtime worker: typed requests in, typed events out.

import type {
  ChatMessage, ControlValue, Event, ExecutionProvider, GenerationResult, LoadedInfo, Request, SearchOptions,
  SentenceInfo, ThreadChoice, SpeechResult, StoredBundle, TensorInput, TranscriptWindow, TranscriptionResult, VoiceActivityResult, WasmMemory,
} from './protocol';

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
  onToken?: (text: string, tokenIds: number[]) => void;
}

export interface SpeakRequest {
  text: string;
  controls?: Record<string, ControlValue>;
  inputs?: Record<string, TensorInput>;
  /** each sentence's samples as soon as it is made (play them while the next is computed) */
  onAudio?: (samples: Float32Array, sampleRate: number, sentence: SentenceInfo, index: number) => void;
}

export interface Speech {
  result: SpeechResult;
  wav: Uint8Array; // 16-bit PCM WAV of the whole text (encoded by onnxpipe's Python in the worker)
}

/** What a 'listen' reports: speech started, or ended (with the utterance's samples). */
export type SpeechEvent = Extract<Event, { type: 'speech' }>;

type Pending = {
  resolve: (value: unknown) => void;
  reject: (error: RuntimeError) => void;
  onEvent?: (event: Event) => void;
};

const defaultWorker = (): Worker =>
  new Worker(new URL('../../workers/runtime.worker.ts', import.meta.url), { type: 'module' });

export class RuntimeClient {
  private worker: Worker;
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

  /** ``makeWorker`` starts a runtime worker (tests pass their own). */
  constructor(private readonly makeWorker: () => Worker = defaultWorker) {
    this.worker = this.start();
  }

  private start(): Worker {
    const worker = this.makeWorker();
    worker.onmessage = (message: MessageEvent<Event>) => this.dispatch(message.data);
    worker.onerror = (error) => this.failAll(`worker failed: ${error.message}`);
    return worker;
  }

  private failAll(message: string): void {
    for (const [id, p] of this.pending) {
      p.reject(new RuntimeError('internal', message));
      this.pending.delete(id);
    }
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

  private send<T>(request: Request, onEvent?: (event: Event) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.set(request.id, { resolve: resolve as (v: unknown) => void, reject, onEvent });
      this.worker.postMessage(request);
    });
  }

  /** Fetch (with progress), verify and cache a bundle, then open its sessions.
   *
   * Each load after the first starts a fresh worker: the old bundle's memory goes with it,
   * and onnxruntime-web's build (WASM or WebGPU) and thread count are chosen anew (its WebGPU
   * kernels also misbehave when a second model with another vocabulary shares a worker). */
  load(bundleUrl: string, options: LoadOptions = {}): Promise<LoadedInfo> {
    const booted = this.booted;
    const bootFits = !booted || ((booted.ep ?? 'wasm') === (options.ep ?? 'wasm') && booted.threads === options.threads);
    if (this.loads++ > 0 || !bootFits) {
      this.worker.terminate();
      this.failAll('a new bundle is loading');
      this.worker = this.start();
    }
    this.booted = null;
    const request: Request = {
      type: 'load', id: this.nextId++, bundleUrl, ep: options.ep, variant: options.variant, dtype: options.dtype,
      threads: options.threads,
      cancelBuffer: this.cancelFlag?.buffer as SharedArrayBuffer | undefined,
    };
    return this.send<LoadedInfo>(request, (event) => {
      if (event.type === 'progress') options.onProgress?.(event);
    });
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
      inputIds: request.inputIds, options: request.options,
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
   * ``onEvent`` until stopListening(); a later failure reaches ``onError``. */
  listen(
    port: MessagePort, onEvent: (event: SpeechEvent) => void, onError: (error: RuntimeError) => void,
    controls?: Record<string, ControlValue>,
  ): Promise<number> {
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

  terminate(): void {
    this.worker.terminate();
  }
}
