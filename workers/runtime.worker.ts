// The runtime worker: Pyodide + onnxruntime-web + the onnxpipe wheel, all from this origin.
// Speaks the protocol in web/src/protocol.ts. ORT's own thread workers re-run this module
// (Vite bundles it as their script), so the entry is guarded by the worker's name.

import './wasm-memory'; // first: it records the wasm heaps ORT and Pyodide make
import type {
  ErrorKind, Event, ExecutionProvider, LoadedInfo, Request, RunResult, SentenceInfo, SpeechResult, ThreadChoice, TranscriptWindow,
  TranscriptionResult, VoiceActivityResult,
} from '../web/src/protocol';
import { configureAssets } from './assets';
import { BOOT_STEPS, Stages, bootRuntime, bootStepsDone, now } from './boot';
import { type RgbImage, toRgbImages } from './images';
import { files, setCancel, useCancelBuffer } from './bridge';
import {
  destroyGpuDevice, fatalReason, gpuLostReason, hangInNextRun, holdLock, oversizedAllocationInNextRun, trapNextRun, watchGpuDevice,
} from './health';
import { LoadError, bundleLock, loadBundle, lockFor } from './bundle-loader';
import { listStored, removeStored } from './storage/catalog';
import { Listener, type VadEntry } from './listen';
import { wasmMemory } from './wasm-memory';
import { RunCollector } from './one-pass';

interface PyFunction {
  callPromising(...args: unknown[]): Promise<string>;
}
interface Pyodide {
  runPython(code: string): unknown;
  unpackArchive(buffer: Uint8Array, format: string, options: { extractDir: string }): void;
  registerJsModule(name: string, module: object): void;
  pyimport(name: string): Record<string, PyFunction>;
  FS: { mkdirTree(path: string): void; writeFile(path: string, data: Uint8Array): void; rmdir(path: string): void };
}

const post = (event: Event): void => self.postMessage(event);
type Runtime = {
  py: Pyodide; entry: Record<string, PyFunction>; bootMs: number; threads: number; threadChoice: ThreadChoice;
  stages: Stages; snapshot: 'restored' | 'made' | 'none';
};
let runtime: Promise<Runtime> | null = null;
/** The stages of the runtime's start, as they end (a load reports them as its first progress). */
let bootStages: Stages | null = null;
let busy = false;
let sampleRate = 0; // of the loaded speech bundle

/** Start the runtime once per worker (workers/boot.ts): by a 'boot' request when the page
 * opens, else by the first load; the thread count and ORT build are fixed from then on. */
async function boot(requested?: number, ep?: ExecutionProvider): Promise<Runtime> {
  const start = performance.now();
  webgpuBuild = ep === 'webgpu';
  const stages = new Stages();
  bootStages = stages;
  const { py, entry, threads, snapshot } = await bootRuntime<Pyodide>(ep, requested, stages);
  return {
    py, entry: entry as Record<string, PyFunction>, bootMs: performance.now() - start, threads: threads.threads,
    threadChoice: threads, stages, snapshot,
  };
}

let webgpuBuild = false;

async function availableProviders(): Promise<string[]> {
  if (!webgpuBuild) return ['wasm'];   // the plain WASM build was loaded for this worker
  const gpu = (navigator as WorkerNavigator & { gpu?: { requestAdapter(): Promise<unknown> } }).gpu;
  const adapter = gpu ? await gpu.requestAdapter().catch(() => null) : null;
  return adapter ? ['webgpu', 'wasm'] : ['wasm'];
}

class PythonError extends Error {
  constructor(readonly kind: string, message: string) {
    super(message);
  }
}

/** The engine is unusable: say so instead of answering (the client replaces this worker). */
function fatal(id: number, reason: string): void {
  post({ type: 'fatal', id, reason, gpuLost: gpuLostReason() !== null });
}

function fail(id: number, error: unknown): void {
  const unusable = gpuLostReason() ?? fatalReason(error);
  if (unusable) {
    fatal(id, unusable);
  } else if (error instanceof LoadError || error instanceof PythonError) {
    post({ type: 'error', id, kind: error.kind as ErrorKind, message: error.message });
  } else {
    post({ type: 'error', id, kind: 'internal', message: error instanceof Error ? error.message : String(error) });
  }
}

/** Python answers with {"error": {kind, message}} or the payload; turn it into an event. */
function fromPython<T>(id: number, json: string, key: string): T | null {
  const reply = JSON.parse(json) as Record<string, unknown> & { error?: { kind: ErrorKind; message: string } };
  if (reply.error) {
    // a trap inside an engine call reaches here as Python's text ("... RuntimeError: unreachable")
    const unusable = gpuLostReason() ?? fatalReason(reply.error.message);
    if (unusable) fatal(id, unusable);
    else post({ type: 'error', id, kind: reply.error.kind, message: reply.error.message });
    return null;
  }
  return (key ? reply[key] : reply) as T;
}

async function load(request: Extract<Request, { type: 'load' }>): Promise<void> {
  const { id } = request;
  if (typeof request.bundleUrl !== 'string' || !request.bundleUrl) {
    post({ type: 'error', id, kind: 'input', message: `load: "bundleUrl" must be a URL string, found ${JSON.stringify(request.bundleUrl) ?? 'none'}` });
    return;
  }
  const requested = now();
  runtime ??= boot(request.threads, request.ep);
  // the bundle's files are read once the runtime is up: reading them from storage while
  // Pyodide and onnxruntime-web start hung now and then (a small file's read never returned,
  // ~1 load in 10 in tests/e2e/fixtures.test.mjs), and it saved only tens of ms
  const started = runtime;
  await reportBoot(id, started, bootStages!);
  const stages = new Stages();
  let filesFrom = now();
  useCancelBuffer(request.cancelBuffer);
  const base = new URL(request.bundleUrl.endsWith('/') ? request.bundleUrl : `${request.bundleUrl}/`, self.location.href);
  const warnings: string[] = [];
  const name = base.pathname.split('/').filter(Boolean).pop() ?? 'bundle';
  const dir = `/bundles/${name}`;
  const options = { ep: request.ep, variant: request.variant, dtype: request.dtype, available: await availableProviders() };
  const write = (path: string, data: Uint8Array): void => {
    const target = `${dir}/${path}`;
    py!.FS.mkdirTree(target.slice(0, target.lastIndexOf('/')));
    py!.FS.writeFile(target, data);
  };
  files.clear();
  let py: Pyodide | null = null;
  let entry: Record<string, PyFunction> | null = null;
  // held until the sessions have read the stored files (bundle-loader.ts, bundleLock)
  await underLock(bundleLock(base), async () => {
    filesFrom = now();
    const fetched = await loadBundle(base, (phase, file, loaded, total) => {
      post({ type: 'progress', id, phase, file, loaded, total, percent: total ? (100 * loaded) / total : 100 });
    }, warnings, async (small, large) => {
      stages.add('files', filesFrom);
      ({ py, entry } = await started);
      for (const [path, data] of small) write(path, data);
      for (const path of large) write(path, new Uint8Array(0));   // placeholders: bytes stay in JS
      const reply = JSON.parse(await entry.files_needed.callPromising(dir, JSON.stringify(options))) as
        { files?: string[]; error?: { kind: string; message: string } };
      if (reply.error) throw new PythonError(reply.error.kind, reply.error.message);
      filesFrom = now();
      return new Set(reply.files);
    });
    stages.add('files', filesFrom);
    for (const [path, data] of fetched) files.set(path, data);
    post({ type: 'progress', id, phase: 'session', file: name, loaded: 0, total: 0, percent: 100 });
    // dtype/dtypes are absent for bundles without a precision choice
    type FromPython = Omit<LoadedInfo, 'bundle' | 'bootMs' | 'dtype' | 'dtypes'> & Partial<Pick<LoadedInfo, 'dtype' | 'dtypes'>>;
    const opened = await stages.time('session', () => entry!.open_bundle.callPromising(dir, JSON.stringify(options)));
    const info = fromPython<FromPython>(id, opened, '');
    const { bootMs, threads, threadChoice, snapshot, stages: bootStages } = await started;
    if (info) {
      sampleRate = info.sampleRate ?? 0;
      if (Object.values(info.sessions).some((s) => /webgpu/i.test(s.provider))) {
        await watchGpuDevice((reason) => fatal(0, reason));
      }
      post({ type: 'loaded', id, info: {
        ...info, bundle: name, warnings: [...warnings, ...info.warnings], bootMs, threads,
        threadsReason: threadChoice.reason, dtype: info.dtype ?? null, dtypes: info.dtypes ?? [],
        startup: { stages: [...bootStages.list, ...stages.list], requested, pythonSnapshot: snapshot },
      } });
    }
  });
}

/** Wait for the runtime's start, reporting its steps as 'boot' progress: ``loaded`` of
 * ``total`` steps done, at once (a runtime the page booted earlier may be up already) and as
 * each step ends (all of them end before ``started`` resolves). */
async function reportBoot(id: number, started: Promise<Runtime>, stages: Stages): Promise<void> {
  const report = (): void => {
    const done = bootStepsDone(stages);
    post({ type: 'progress', id, phase: 'boot', file: 'runtime', loaded: done, total: BOOT_STEPS.length, percent: (100 * done) / BOOT_STEPS.length });
  };
  report();
  const unwatch = stages.watch(report);
  try {
    await started;
  } finally {
    unwatch();
  }
}

/** Run ``fn`` holding the Web Lock ``name``. A frame the browser gives no storage (third-party
 * storage blocked) has no Web Locks either: then it runs unlocked (nothing is stored to guard). */
async function underLock(name: string, fn: () => Promise<void>): Promise<void> {
  let ran = false;
  try {
    await navigator.locks.request(name, () => {
      ran = true;
      return fn();
    });
  } catch (error) {
    if (ran || !(error instanceof DOMException && error.name === 'SecurityError')) throw error;
    await fn();   // BundleStore.open warns that nothing is stored
  }
}

/** The Python entry once a load has booted the runtime; else an error event and null. */
async function loadedEntry(id: number): Promise<Record<string, PyFunction> | null> {
  if (runtime) return (await runtime).entry;
  post({ type: 'error', id, kind: 'input', message: 'no bundle is loaded: send a load request first' });
  return null;
}

async function generate(request: Extract<Request, { type: 'generate' }>): Promise<void> {
  const { id } = request;
  const entry = await loadedEntry(id);
  if (!entry) return;
  const emit = (json: string): void => {
    const event = JSON.parse(json) as { text: string; tokenIds: number[] };
    post({ type: 'token', id, text: event.text, tokenIds: event.tokenIds });
  };
  setCancel(false);
  const payload = JSON.stringify({ messages: request.messages, prompt: request.prompt, inputIds: request.inputIds, options: request.options });
  let images: RgbImage[] | undefined;
  try {
    images = request.images === undefined || request.images === null ? undefined : await toRgbImages(request.images);
  } catch (err) {
    post({ type: 'error', id, kind: 'input', message: `${(err as Error).message ?? err}` });
    return;
  }
  const result = fromPython<never>(id, await entry.generate.callPromising(payload, emit, images), 'result');
  if (result) post({ type: 'done', id, result });
}

/** Text to speech: each sentence's samples go to the page as soon as Python has them. */
async function speak(request: Extract<Request, { type: 'speak' }>): Promise<void> {
  const { id } = request;
  const entry = await loadedEntry(id);
  if (!entry) return;
  let index = 0;
  let wav: Uint8Array = new Uint8Array(0);
  const emit = (kind: string, json: string, data: ArrayBufferView): void => {
    if (kind === 'wav') {
      wav = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      return;
    }
    const samples = data instanceof Float32Array ? data
      : new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
    const sentence = JSON.parse(json) as SentenceInfo;
    self.postMessage({ type: 'audio', id, index: index++, samples, sampleRate, sentence } satisfies Event, [samples.buffer]);
  };
  setCancel(false);
  const payload = JSON.stringify({ text: request.text, controls: request.controls, inputs: request.inputs });
  const result = fromPython<SpeechResult>(id, await entry.speak.callPromising(payload, emit), 'result');
  if (result) self.postMessage({ type: 'spoken', id, result, wav } satisfies Event, [wav.buffer as ArrayBuffer]);
}

/** Speech segments of a whole recording: the samples cross into Python as one block. */
async function detectSpeech(request: Extract<Request, { type: 'detectSpeech' }>): Promise<void> {
  const { id } = request;
  const entry = await loadedEntry(id);
  if (!entry) return;
  const payload = JSON.stringify({ sampleRate: request.sampleRate, controls: request.controls });
  const result = fromPython<VoiceActivityResult>(id, await entry.detect_speech.callPromising(payload, request.samples), 'result');
  if (result) post({ type: 'speechDetected', id, result });
}

/** Speech to text: the samples cross into Python as one block; each window's text comes back
 * as a 'transcript' event while the next is decoded. */
async function transcribe(request: Extract<Request, { type: 'transcribe' }>): Promise<void> {
  const { id } = request;
  const entry = await loadedEntry(id);
  if (!entry) return;
  const emit = (json: string): void => post({ type: 'transcript', id, window: JSON.parse(json) as TranscriptWindow });
  setCancel(false);
  const payload = JSON.stringify({ sampleRate: request.sampleRate, options: request.options });
  const result = fromPython<TranscriptionResult>(id, await entry.transcribe.callPromising(payload, request.samples, emit), 'result');
  if (result) post({ type: 'transcribed', id, result });
}

/** A one-pass bundle once (text-to-image): a 'step' event per denoising step, then the
 * outputs and images in one 'ran' event (their buffers transferred, not copied). */
async function run(request: Extract<Request, { type: 'run' }>): Promise<void> {
  const { id } = request;
  const entry = await loadedEntry(id);
  if (!entry) return;
  const collector = new RunCollector((step, steps) => post({ type: 'step', id, step, steps }));
  setCancel(false);
  const payload = JSON.stringify({ inputs: request.inputs, controls: request.controls, options: request.options });
  const result = fromPython<RunResult>(id, await entry.run.callPromising(payload, collector.emit), 'result');
  if (!result) return;
  const { output, transfer } = collector.done(result);
  self.postMessage({ type: 'ran', id, ...output } satisfies Event, transfer);
}

/** List or remove stored bundles. A bundle being loaded (its files open for writing, here or
 * in another tab) is not removed; a loaded one may be: its sessions already hold the weights. */
async function storage(request: Extract<Request, { type: 'storage' }>): Promise<void> {
  const { op } = request as { op: unknown };
  if (op !== 'list' && op !== 'remove') {
    post({ type: 'error', id: request.id, kind: 'input', message: `storage: "op" must be "list" or "remove", found ${JSON.stringify(op) ?? 'none'}` });
    return;
  }
  if (request.op === 'remove') {
    const key = request.key;
    if (typeof key !== 'string' || !(await listStored()).some((b) => b.key === key)) {
      post({ type: 'error', id: request.id, kind: 'input', message: `storage remove: no bundle ${JSON.stringify(key) ?? 'none'} is stored on this device (a storage list request gives the keys)` });
      return;
    }
    const removed = await navigator.locks.request(lockFor(key), { ifAvailable: true }, async (lock) => {
      if (lock) await removeStored(key);
      return lock !== null;
    });
    if (!removed) {
      post({ type: 'error', id: request.id, kind: 'input', message: `"${decodeURIComponent(key)}" is loading (in this or another tab): remove it once the load has finished` });
      return;
    }
  }
  post({ type: 'stored', id: request.id, bundles: await listStored() });
}

// microphone audio from the capture worklet's port into a voice-activity bundle (listen.ts)
const listener = new Listener((event, transfer = []) => self.postMessage(event, transfer));
const vadEntry = (entry: Record<string, PyFunction>): VadEntry => ({
  start: (controls) => entry.listen_start.callPromising(controls),
  push: (samples) => entry.listen_push.callPromising(samples),
  stop: () => entry.listen_stop.callPromising(),
});

/** Why a request's audio is not mono samples at a rate, or null (worded as the Python checks word it). */
function badAudio(request: { samples: unknown; sampleRate: unknown }): string | null {
  if (!(request.samples instanceof Float32Array)) return `samples: expected a Float32Array, found ${Object.prototype.toString.call(request.samples)}`;
  const rate = request.sampleRate;
  if (typeof rate !== 'number' || !Number.isInteger(rate) || rate <= 0) return `sample_rate: expected a positive integer, found ${JSON.stringify(rate) ?? 'none'}`;
  return null;
}

async function handle(request: Request): Promise<void> {
  if (request.type === 'transcribe' || request.type === 'detectSpeech') {
    const problem = badAudio(request);
    if (problem) {
      post({ type: 'error', id: request.id, kind: 'input', message: `${request.type}: ${problem}` });
      return;
    }
  }
  switch (request.type) {
    case 'configure':
      configureAssets(request.assets);
      return;
    case 'listen': {
      // chunks keep coming while other requests run: the listen holds no busy flag
      const entry = await loadedEntry(request.id);
      if (entry) await listener.listen(request, vadEntry(entry));
      else request.port.close();
      return;
    }
    case 'unlisten':
      if (runtime) await listener.stop(vadEntry((await runtime).entry));
      post({ type: 'cancelled', id: request.id });
      return;
    case 'audio-clip':
      listener.clip(request);
      return;
    case 'storage':
      await storage(request);
      return;
    case 'memory':
      post({ type: 'memory', id: request.id, memory: wasmMemory() });
      return;
    case 'boot':
      runtime ??= boot(request.threads, request.ep);
      post({ type: 'booted', id: request.id, threads: (await runtime).threadChoice });
      return;
    case 'watch':
      debugHooks = request.debug;
      post({ type: 'watching', id: request.id, locks: await holdLock(request.lock) });
      return;
    case 'ping':
      post({ type: 'pong', id: request.id });
      return;
    case 'crash':
      if (!debugHooks) {
        post({ type: 'error', id: request.id, kind: 'input', message: 'crash: a test-only request (the page needs ?onnxpipe-debug)' });
        return;
      } else if (request.how === 'trap') {
        trapNextRun();
      } else if (request.how === 'hang') {
        setTimeout(() => {
          while (Date.now() > 0);   // never returns: only the page's heartbeat can tell
        }, 0);
      } else if (request.how === 'hang-in-run') {
        hangInNextRun();
      } else if (request.how === 'oversized-allocation') {
        oversizedAllocationInNextRun();
      } else {
        await destroyGpuDevice();
      }
      post({ type: 'cancelled', id: request.id });
      return;
    case 'cancel':
      // only a running request is cancelled: a cancel that arrives after its request ended
      // (the page's shared flag already stopped it) must not stop the next one
      if (busy) setCancel(true);
      post({ type: 'cancelled', id: request.id });
      return;
    case 'dispose':
      if (runtime) await (await runtime).entry.dispose.callPromising();
      files.clear();
      post({ type: 'disposed', id: request.id });
      return;
    case 'load':
    case 'generate':
    case 'speak':
    case 'detectSpeech':
    case 'transcribe':
    case 'run':
      if (busy) {
        post({ type: 'error', id: request.id, kind: 'input', message: `busy: finish or cancel the running request before "${request.type}"` });
        return;
      }
      busy = true;
      try {
        if (request.type === 'load') await load(request);
        else if (request.type === 'speak') await speak(request);
        else if (request.type === 'detectSpeech') await detectSpeech(request);
        else if (request.type === 'transcribe') await transcribe(request);
        else if (request.type === 'run') await run(request);
        else await generate(request);
      } finally {
        busy = false;
      }
      return;
    default: {
      // a request the protocol has no such type for would otherwise go unanswered
      const { id, type } = request as { id: number; type: unknown };
      post({ type: 'error', id, kind: 'input', message: `unknown request type ${JSON.stringify(type)} (web/src/protocol.ts lists them)` });
    }
  }
}

/** Why ``data`` is not a request (an object with a numeric id and a string type), or null. */
function malformed(data: unknown): string | null {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return `a request must be an object with a numeric "id" and a "type", found ${Array.isArray(data) ? 'an array' : String(data)}`;
  }
  const { id, type } = data as { id?: unknown; type?: unknown };
  if (typeof id !== 'number' || !Number.isFinite(id)) return `a request needs a numeric "id", found ${JSON.stringify(id) ?? 'none'}`;
  if (typeof type !== 'string') return `a request needs a string "type", found ${JSON.stringify(type) ?? 'none'}`;
  return null;
}

let debugHooks = false;   // test-only requests ('crash') allowed: set by 'watch'

if (!self.name?.startsWith('em-pthread')) {
  self.onmessage = (message: MessageEvent<Request>) => {
    const problem = malformed(message.data);
    if (problem) {
      // answered with id -1 when the message has no usable id
      const id = (message.data as { id?: unknown } | null)?.id;
      post({ type: 'error', id: typeof id === 'number' && Number.isFinite(id) ? id : -1, kind: 'input', message: problem });
      return;
    }
    handle(message.data).catch((error: unknown) => fail(message.data.id, error));
  };
  // a trap or an allocation failure in a callback no request awaits
  self.addEventListener('unhandledrejection', (event) => {
    const unusable = fatalReason(event.reason);
    if (unusable) fatal(0, unusable);
  });
}
