// The page's only way into the runtime: RuntimeClient's typed methods, each one call of the
// worker protocol (protocol.ts) through a supervised worker (supervisor.ts, transport.ts).

import type {
  AudioClip, AudioInput, ControlValue, ExecutionProvider, GenerationResult, ImageInput, LoadedInfo, Message, ProgressEvent, RunOptions,
  RunOutput, SearchOptions, SentenceInfo, Speech, SpeechEvent, StoredBundle, TensorInput, ThreadChoice, TranscriptWindow,
  TranscriptionResult, VoiceActivityResult, WasmMemory, WorkerMessage,
} from './protocol';
import { type RuntimeAssets, badAssets } from './runtime-assets';
import { defaultAssets, makeRuntimeWorker } from './runtime-location';
import { BUSY_SILENCE_MS } from './runtime-watch';
import { Supervisor } from './supervisor';
import { RuntimeError, nextCallId } from './transport';

export { RuntimeError } from './transport';
export type { RuntimeStatus } from './supervisor';
export type { Speech, SpeechEvent } from './protocol';

export interface LoadOptions {
  ep?: ExecutionProvider;
  variant?: string;
  dtype?: string; // a transformers.js folder's precision (LoadedInfo.dtypes lists them)
  threads?: number;
  // wasm: MatMulNBits weights expanded to fp32 at load ('auto': as far as the heap allows; docs/large-models.md)
  expandWeights?: 'auto' | 'all' | 'none';
  contextLength?: number; // tokens of KV cache reserved in the heap (default min(max_length, 4096))
  heaps?: 'auto' | number; // wasm: onnxruntime-web instances (4 GiB heaps each) to spread a decoder over
  onProgress?: (event: ProgressEvent) => void;
}

export interface GenerateRequest {
  messages?: Message[]; // chat turns, tool calling's included
  prompt?: string;
  input_ids?: number[];
  options?: SearchOptions;
  images?: ImageInput[]; // vision-language bundles (docs/vision-language.md)
  audios?: AudioInput[]; // speech bundles (docs/speech.md): their sample buffers are transferred to the worker
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
  /** the next engine run spins forever, in the middle of its call: only the call's silence
   * (RuntimeOptions.busySilenceMs; ``onnxpipe-busy-silence-ms`` in the URL here) sees it */
  hangInNextRun(): Promise<void>;
  /** from now on a call that hears nothing from the worker for ``ms`` means it hung (as
   * ``onnxpipe-busy-silence-ms`` in the URL, but after a load that needed longer) */
  watchSilence(ms: number): void;
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
  /** A call that hears nothing from the worker this long means the worker hung: it is
   * replaced like a dead one (runtime-watch.ts BUSY_SILENCE_MS by default). */
  busySilenceMs?: number;
  /** Where the worker finds onnxruntime-web, Pyodide, the wheel and espeak-ng (default: this
   * build's own layout, runtime-location.ts). */
  assets?: RuntimeAssets;
}

export class RuntimeClient {
  private readonly runtime: Supervisor;
  /** The last load that succeeded: loaded again into a replacement worker. */
  private lastLoad: { bundleUrl: string; options: LoadOptions } | null = null;
  /** Test hooks (``?onnxpipe-debug`` in the page's URL), else null. */
  readonly debug: RuntimeDebug | null;
  /** The running 'listen' (its events keep coming after it resolved). */
  private listener: { id: number; onEvent: (event: SpeechEvent) => void; onError: (error: RuntimeError) => void } | null = null;
  private loads = 0;
  /** What boot() started the worker with, until the first load. */
  private booted: { ep?: ExecutionProvider; threads?: number } | null = null;
  private readonly loadedListeners = new Set<() => void>();
  // where cross-origin isolated, cancel is also written here, so the worker sees it at once
  private readonly cancelFlag = self.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(4)) : null;

  /** ``makeWorker`` starts a runtime worker (tests pass their own). */
  constructor(makeWorker: () => Worker = makeRuntimeWorker, options: RuntimeOptions = {}) {
    const assets = options.assets ?? defaultAssets();
    const badAssetMap = badAssets(assets);
    if (badAssetMap) throw new TypeError(badAssetMap);
    const params = pageParams();
    const debug = params.has('onnxpipe-debug');
    const testSilence = debug ? Number(params.get('onnxpipe-busy-silence-ms')) : 0;
    this.runtime = new Supervisor({
      makeWorker, assets, debug, busySilenceMs: testSilence > 0 ? testSilence : options.busySilenceMs ?? BUSY_SILENCE_MS,
      reopen: (gpuLost) => this.reopen(gpuLost),
      stray: (message) => this.toListener(message),
      died: (error) => {
        const listener = this.listener;
        this.listener = null;
        listener?.onError(error);
      },
    });
    const crash = async (how: 'trap' | 'gpu-device' | 'hang' | 'hang-in-run' | 'oversized-allocation') => {
      await this.runtime.call('crash', { how });
    };
    this.debug = debug ? {
      killWorker: () => this.runtime.kill(),
      trapNextRun: () => crash('trap'),
      loseGpuDevice: () => crash('gpu-device'),
      hangWorker: () => crash('hang'),
      hangInNextRun: () => crash('hang-in-run'),
      watchSilence: (ms) => {
        if (!(Number.isFinite(ms) && ms > 0)) throw new RangeError(`watchSilence: expected milliseconds > 0, got ${ms}`);
        this.runtime.setBusySilence(ms);
      },
      oversizedAllocationInNextRun: () => crash('oversized-allocation'),
    } : null;
  }

  /** Hear of the worker's death and of the reload that follows (RuntimeStatus); returns an unsubscribe. */
  onStatus(listener: Parameters<Supervisor['onStatus']>[0]): () => void {
    return this.runtime.onStatus(listener);
  }

  /** In a replacement worker: the last bundle again (WASM after a lost WebGPU device), or the boot. */
  private async reopen(gpuLost: boolean): Promise<{ info: LoadedInfo | null; ep: ExecutionProvider } | null> {
    const last = this.lastLoad;
    const booted = this.booted;
    // a lost WebGPU device: go on with WASM (a new device may fail the same way)
    if (last && gpuLost) last.options = { ...last.options, ep: 'wasm' };
    if (last) return { info: await this.loadInWorker(last.bundleUrl, last.options), ep: last.options.ep ?? 'wasm' };
    if (!booted) return null;
    await this.runtime.call('boot', { ep: booted.ep, threads: booted.threads }, {}, true);
    return { info: null, ep: booted.ep ?? 'wasm' };
  }

  /** Fetch (with progress), verify and cache a bundle, then open its sessions.
   *
   * Each load after the first starts a fresh worker: the old bundle's memory goes with it,
   * and onnxruntime-web's build (WASM or WebGPU) and thread count are chosen anew (its WebGPU
   * kernels also misbehave when a second model with another vocabulary shares a worker). */
  async load(bundleUrl: string, options: LoadOptions = {}): Promise<LoadedInfo> {
    const booted = this.booted;
    const bootFits = !booted || ((booted.ep ?? 'wasm') === (options.ep ?? 'wasm') && booted.threads === options.threads);
    this.runtime.takeOver(this.loads > 0 || !bootFits, 'a new bundle is loading');
    this.booted = null;
    this.lastLoad = null;
    const info = await this.loadInWorker(bundleUrl, options);
    this.lastLoad = { bundleUrl, options };
    this.runtime.loaded();
    return info;
  }

  private async loadInWorker(bundleUrl: string, options: LoadOptions): Promise<LoadedInfo> {
    this.loads++;
    const info = await this.runtime.call('load', {
      bundle_url: bundleUrl, ep: options.ep, variant: options.variant, dtype: options.dtype, threads: options.threads,
      expand_weights: options.expandWeights, context_length: options.contextLength, heaps: options.heaps,
      cancel_buffer: this.cancelFlag?.buffer as SharedArrayBuffer | undefined,
    }, { onEvent: ({ data }) => options.onProgress?.(data) }, true);
    for (const listener of this.loadedListeners) listener();
    return info;
  }

  /** Start the runtime now (Pyodide, onnxruntime-web, the Python entry), before any load: the
   * page calls it when it opens, so a load finds the runtime (nearly) up. A first load with the
   * same ``ep`` and ``threads`` uses it; another one starts a fresh worker. Resolves with the
   * thread count chosen (rejects if that fresh worker replaced this one first). */
  boot(options: { ep?: ExecutionProvider; threads?: number } = {}): Promise<ThreadChoice> {
    if (this.loads > 0) return Promise.reject(new RuntimeError('input', 'boot: a bundle was already loaded in this worker'));
    this.booted = { ep: options.ep, threads: options.threads };
    return this.runtime.call('boot', { ep: options.ep, threads: options.threads });
  }

  /** A call the cancel flag stops: the flag is cleared first. */
  private cancellable(): void {
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 0);
  }

  /** Generate; chat messages continue the worker's conversation state. */
  generate(request: GenerateRequest): Promise<GenerationResult> {
    this.cancellable();
    const { onToken, ...args } = request;
    // each clip's buffer once (a buffer given twice can't be transferred); anything else the worker refuses by name
    const transfer = [...new Set((Array.isArray(args.audios) ? args.audios : [])
      .map((clip) => clip?.samples?.buffer).filter((b): b is ArrayBuffer => b instanceof ArrayBuffer))];
    return this.runtime.call('generate', args, { transfer, onEvent: ({ data }) => onToken?.(data.text, data.token_ids) });
  }

  /** Text to speech: audio arrives sentence by sentence through ``onAudio``; resolves with
   * the timings and the WAV of everything (also after a cancel, with what was made). */
  speak(request: SpeakRequest): Promise<Speech> {
    this.cancellable();
    const { onAudio, ...args } = request;
    return this.runtime.call('speak', args, {
      onEvent: ({ data }) => onAudio?.(data.samples, data.sample_rate, data.sentence, data.index),
    });
  }

  /** Run a one-pass bundle once (text-to-image: the image's RGBA pixels and PNG in ``images``);
   * cancel() stops between denoising steps (finish_reason 'cancelled', no outputs). */
  run(request: RunRequest): Promise<RunOutput> {
    this.cancellable();
    const { onStep, ...args } = request;
    return this.runtime.call('run', args, { onEvent: ({ data }) => onStep?.(data.step, data.steps) });
  }

  /** Events of the running 'listen' once it has started. */
  private toListener(message: WorkerMessage): void {
    const listener = this.listener;
    if (!listener || listener.id !== message.id) return;
    if ('event' in message && message.event === 'speech') listener.onEvent(message.data as SpeechEvent);
    else if ('error' in message) {
      this.listener = null;
      listener.onError(new RuntimeError(message.error.kind, message.error.message));
    }
  }

  /** Run the loaded voice-activity bundle on the microphone audio that arrives on ``port``
   * (the other end goes to the capture worklet: the audio never passes through the page).
   * Resolves with the audio's sample rate once the worker listens; speech events then reach
   * ``onEvent`` until stopListening(); a later failure reaches ``onError``. Like any call it
   * waits for a reload under way (a listen retried after the worker died). */
  async listen(
    port: MessagePort, onEvent: (event: SpeechEvent) => void, onError: (error: RuntimeError) => void,
    controls?: Record<string, ControlValue>, pauseMs?: number,
  ): Promise<number> {
    await this.runtime.whenUsable('listen');
    const id = nextCallId();
    this.listener = { id, onEvent, onError };
    try {
      const started = await this.runtime.call('listen', { port, controls, ...(pauseMs === undefined ? {} : { pause_ms: pauseMs }) }, {
        id, transfer: [port], onEvent: ({ data }) => onEvent(data),
      });
      return started.sample_rate;
    } catch (error) {
      if (this.listener?.id === id) this.listener = null;
      throw error;
    }
  }

  /** Stop listening (the worker finishes the open speech, if any, without reporting it). */
  async stopListening(): Promise<void> {
    this.listener = null;
    await this.runtime.call('unlisten', {});
  }

  /** The listened audio: the position now (samples), and the samples from ``from`` to now. */
  audioClip(from?: number): Promise<AudioClip> {
    return this.runtime.call('audio_clip', { from });
  }

  /** Speech segments of a whole recording (mono ``samples`` at ``sampleRate``) with the loaded
   * voice-activity bundle; ``controls`` set its pipeline.inputs (threshold, min_silence_ms, ...).
   * The samples are copied, so the caller keeps its array. */
  detectSpeech(samples: Float32Array, sampleRate: number, controls?: Record<string, ControlValue>): Promise<VoiceActivityResult> {
    return this.runtime.call('detect_speech', { samples, sample_rate: sampleRate, controls });
  }

  /** Speech to text with the loaded transcription bundle: mono ``samples`` at any
   * ``sampleRate`` (resampled in the worker). Each window of audio (30 s for Whisper) reaches
   * ``onTranscript`` as soon as it is done (the result's text is the windows' texts joined by
   * spaces); resolves with the whole text and token ids (after a cancel: the windows done,
   * finish_reason 'cancelled'). The samples are copied. */
  transcribe(
    samples: Float32Array, sampleRate: number, onTranscript?: (window: TranscriptWindow) => void,
    options?: SearchOptions,
  ): Promise<TranscriptionResult> {
    this.cancellable();
    return this.runtime.call('transcribe', { samples, sample_rate: sampleRate, options }, {
      onEvent: ({ data }) => onTranscript?.(data),
    });
  }

  /** Stop the running generation within one step; its promise resolves with what was made. */
  async cancel(): Promise<void> {
    if (this.cancelFlag) Atomics.store(this.cancelFlag, 0, 1);
    if (this.runtime.reloading) return;   // nothing runs while the bundle reloads
    await this.runtime.call('cancel', {});
  }

  /** Run ``listener`` after each successful load (it may have stored files); returns an unsubscribe. */
  onLoaded(listener: () => void): () => void {
    this.loadedListeners.add(listener);
    return () => this.loadedListeners.delete(listener);
  }

  /** The worker's wasm heap sizes now (each is its peak so far: a wasm heap never shrinks). */
  wasmMemory(): Promise<WasmMemory> {
    return this.runtime.call('memory', {});
  }

  /** Bundles stored on this device (sizes in bytes). */
  storedBundles(): Promise<StoredBundle[]> {
    return this.runtime.call('storage_list', {});
  }

  /** Remove a stored bundle (by its ``key``); resolves with what is left. A loaded bundle
   * keeps running; one whose load is still running is refused (an 'input' error). */
  removeStored(key: string): Promise<StoredBundle[]> {
    return this.runtime.call('storage_remove', { key });
  }

  async dispose(): Promise<void> {
    await this.runtime.call('dispose', {});
  }

  /** End the worker for good (no restart). */
  terminate(): void {
    this.lastLoad = null;
    this.runtime.terminate();
  }
}
