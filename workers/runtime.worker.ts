// The runtime worker: Pyodide + onnxruntime-web + the onnxpipe wheel, from the asset URLs the
// page gives first ('configure').
// Speaks the protocol in web/src/protocol.ts: {id, verb, args} in; {id, event, data} while a
// call runs, then {id, result} or {id, error}. VERBS below is the one table of what it does.
// onnxruntime-web is imported from its own URL, so its thread workers run its module, not
// this one; the entry stays guarded by the worker's name all the same.

import './wasm-memory'; // first: it records the wasm heaps ORT and Pyodide make
import type { ArgsOf, AudioEvent, AudioInput, ErrorKind, ResultOf, SentenceInfo, TranscriptWindow, TokenEvent, Verb, WorkerMessage } from '../web/src/protocol';
import { type RgbImage, toRgbImages } from './images';
import { configureAssets } from './assets';
import { files, setCancel } from './bridge';
import { type Call, CallError } from './call';
import {
  destroyGpuDevice, fatalReason, gpuLostReason, hangInNextRun, holdLock, oversizedAllocationInNextRun, trapNextRun,
} from './health';
import { LoadError, lockFor } from './bundle-loader';
import { load } from './load';
import { loadedEntry, startRuntime, startedRuntime } from './runtime';
import { listStored, removeStored } from './storage/catalog';
import { Listener } from './listen';
import { wasmMemory } from './wasm-memory';
import { RunCollector } from './one-pass';

const post = (message: WorkerMessage, transfer: Transferable[] = []): void => self.postMessage(message, transfer);
let sampleRate = 0; // of the loaded speech bundle
let debugHooks = false;   // test-only calls ('crash') allowed: set by 'watch'
let busy: Verb | null = null;   // the call that has the engine to itself (VERBS' exclusive ones)

/** The engine is unusable: say so instead of answering (the page replaces this worker). */
function fatal(id: number, reason: string): void {
  post({ id, event: 'fatal', data: { reason, gpu_lost: gpuLostReason() !== null } });
}

function fail(id: number, error: unknown): void {
  // a trap inside an engine call reaches here as Python's text ("... RuntimeError: unreachable")
  const unusable = gpuLostReason() ?? fatalReason(error);
  if (unusable) {
    fatal(id, unusable);
  } else if (error instanceof LoadError || error instanceof CallError) {
    post({ id, error: { kind: error.kind as ErrorKind, message: error.message } });
  } else {
    post({ id, error: { kind: 'internal', message: error instanceof Error ? error.message : String(error) } });
  }
}

/** Why ``args`` is not mono samples at a rate, or null (worded as the Python checks word it). */
function checkAudio(verb: string, args: { samples: unknown; sample_rate: unknown }): void {
  if (!(args.samples instanceof Float32Array)) {
    throw new CallError('input', `${verb}: samples: expected a Float32Array, found ${Object.prototype.toString.call(args.samples)}`);
  }
  const rate = args.sample_rate;
  if (typeof rate !== 'number' || !Number.isInteger(rate) || rate <= 0) {
    throw new CallError('input', `${verb}: sample_rate: expected a positive integer, found ${JSON.stringify(rate) ?? 'none'}`);
  }
}

/** A generate request's ``audios``: a list of {samples: Float32Array, sample_rate}; an error
 * names the clip and the field (audios[i].sample_rate). */
function checkClips(audios: unknown): AudioInput[] {
  if (!Array.isArray(audios)) {
    throw new CallError('input', `generate: audios: expected a list of {samples, sample_rate} clips, found ${Object.prototype.toString.call(audios)}`);
  }
  audios.forEach((clip: unknown, i) => {
    if (typeof clip !== 'object' || clip === null || Array.isArray(clip)) {
      throw new CallError('input', `generate: audios[${i}]: expected {samples, sample_rate}, found ${Object.prototype.toString.call(clip)}`);
    }
    const unknown = Object.keys(clip).find((k) => k !== 'samples' && k !== 'sample_rate');
    if (unknown !== undefined) throw new CallError('input', `generate: audios[${i}]: unknown field "${unknown}"; a clip has samples and sample_rate`);
    checkAudio(`generate: audios[${i}]`, clip as { samples: unknown; sample_rate: unknown });
  });
  return audios as AudioInput[];
}

/** A verb's handler: the arguments it takes (any other is refused, named), whether it needs the
 * engine to itself (one such call at a time), and what it does. */
interface Handler<V extends Verb> {
  takes: readonly string[];
  exclusive?: boolean;
  run(args: ArgsOf<V>, call: Call): Promise<ResultOf<V>> | ResultOf<V>;
}

// microphone audio from the capture worklet's port into a voice-activity bundle (listen.ts)
const listener = new Listener(post);

const VERBS: { [V in Verb]: Handler<V> } = {
  configure: {
    takes: ['assets'],
    run: (args) => {
      configureAssets(args.assets);
      return null;
    },
  },
  boot: {
    takes: ['ep', 'threads'],
    run: async (args) => (await startRuntime(args.threads, args.ep).runtime).threadChoice,
  },
  load: {
    takes: ['bundle_url', 'ep', 'variant', 'dtype', 'threads', 'expand_weights', 'context_length', 'heaps', 'cancel_buffer'],
    exclusive: true,
    run: async (args, call) => {
      const info = await load(args, call, { fatal: (reason) => fatal(0, reason) });
      sampleRate = info.sample_rate ?? 0;
      return info;
    },
  },
  generate: {
    takes: ['messages', 'prompt', 'input_ids', 'options', 'images', 'audios'],
    exclusive: true,
    run: async (args, call) => {
      // images decoded and clips checked here; both cross into Python beside the JSON, as data
      const audios = args.audios === undefined || args.audios === null ? null : checkClips(args.audios);
      const entry = await loadedEntry();
      setCancel(false);
      let images: RgbImage[] | null = null;
      try {
        images = args.images === undefined || args.images === null ? null : await toRgbImages(args.images);
      } catch (err) {
        throw new CallError('input', `${(err as Error).message ?? err}`);
      }
      const { images: _, audios: __, ...rest } = args;
      return entry.call('generate', rest, (event, json) => {
        if (event === 'token') call.emit('token', JSON.parse(json) as TokenEvent);
      }, { ...(images ? { images } : {}), ...(audios ? { audios } : {}) });   // absent, not null (Pyodide's jsnull)
    },
  },
  speak: {
    takes: ['text', 'controls', 'inputs'],
    exclusive: true,
    run: async (args, call) => {
      // each sentence's samples go to the page as soon as Python has them
      const entry = await loadedEntry();
      let index = 0;
      let wav: Uint8Array = new Uint8Array(0);
      setCancel(false);
      const result = await entry.call('speak', args, (event, json, data) => {
        if (!data) return;
        if (event === 'wav') {
          wav = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
          return;
        }
        const samples = data instanceof Float32Array ? data
          : new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
        const audio: AudioEvent = { index: index++, samples, sample_rate: sampleRate, sentence: JSON.parse(json) as SentenceInfo };
        call.emit('audio', audio, [samples.buffer]);
      });
      call.transfer.push(wav.buffer);
      return { result, wav };
    },
  },
  run: {
    takes: ['inputs', 'controls', 'options'],
    exclusive: true,
    run: async (args, call) => {
      // a 'step' event per denoising step, then the outputs and images (their buffers moved)
      const entry = await loadedEntry();
      const collector = new RunCollector((step) => call.emit('step', step));
      setCancel(false);
      const result = await entry.call('run', args, collector.emit);
      return collector.done(result, call.transfer);
    },
  },
  transcribe: {
    takes: ['samples', 'sample_rate', 'options'],
    exclusive: true,
    run: async (args, call) => {
      // the samples cross into Python as one block; each window's text comes back as it is done
      checkAudio('transcribe', args);
      const entry = await loadedEntry();
      setCancel(false);
      const { samples, ...rest } = args;
      return entry.call('transcribe', rest, (event, json) => {
        if (event === 'transcript') call.emit('transcript', JSON.parse(json) as TranscriptWindow);
      }, samples);
    },
  },
  detect_speech: {
    takes: ['samples', 'sample_rate', 'controls'],
    exclusive: true,
    run: async (args) => {
      checkAudio('detect_speech', args);
      const { samples, ...rest } = args;
      return (await loadedEntry()).call('detect_speech', rest, undefined, samples);
    },
  },
  listen: {
    // chunks keep coming while other calls run: a listen holds no engine to itself
    takes: ['port', 'controls', 'pause_ms'],
    run: async (args, call) => {
      if (!(args.port instanceof MessagePort)) throw new CallError('input', 'listen: "port" must be a MessagePort (transferred with the call)');
      let entry;
      try {
        entry = await loadedEntry();
      } catch (error) {
        args.port.close();
        throw error;
      }
      return listener.listen(call.id, args, entry);
    },
  },
  unlisten: {
    takes: [],
    run: async () => {
      const runtime = startedRuntime();
      if (runtime) await listener.stop((await runtime).entry);
      return null;
    },
  },
  audio_clip: { takes: ['from'], run: (args, call) => listener.clip(args, call.transfer) },
  cancel: {
    // only a call still running: a cancel that arrives after its call ended (the page clears the
    // shared flag as it starts the next) must not stop the next one
    takes: [],
    run: () => {
      if (busy) setCancel(true);
      return null;
    },
  },
  dispose: {
    takes: [],
    run: async () => {
      const runtime = startedRuntime();
      if (runtime) await (await runtime).entry.call('dispose', {});
      files.clear();
      return null;
    },
  },
  storage_list: { takes: [], run: () => listStored() },
  storage_remove: {
    // a bundle being loaded (its files open for writing, here or in another tab) is not
    // removed; a loaded one may be: its sessions already hold the weights
    takes: ['key'],
    run: async ({ key }) => {
      if (typeof key !== 'string' || !(await listStored()).some((b) => b.key === key)) {
        throw new CallError('input', `storage_remove: no bundle ${JSON.stringify(key) ?? 'none'} is stored on this device (storage_list gives the keys)`);
      }
      const removed = await navigator.locks.request(lockFor(key), { ifAvailable: true }, async (lock) => {
        if (lock) await removeStored(key);
        return lock !== null;
      });
      if (!removed) throw new CallError('input', `"${decodeURIComponent(key)}" is loading (in this or another tab): remove it once the load has finished`);
      return listStored();
    },
  },
  memory: { takes: [], run: () => wasmMemory() },
  watch: {
    takes: ['lock', 'debug'],
    run: async (args) => {
      debugHooks = args.debug === true;
      return { locks: await holdLock(args.lock) };
    },
  },
  ping: { takes: [], run: () => null },
  crash: {
    takes: ['how'],
    run: async ({ how }) => {
      if (!debugHooks) throw new CallError('input', 'crash: a test-only verb (the page needs ?onnxpipe-debug)');
      if (how === 'trap') trapNextRun();
      else if (how === 'hang') {
        setTimeout(() => {
          while (Date.now() > 0);   // never returns: only the page's heartbeat can tell
        }, 0);
      } else if (how === 'hang-in-run') hangInNextRun();
      else if (how === 'oversized-allocation') oversizedAllocationInNextRun();
      else if (how === 'gpu-device') await destroyGpuDevice();
      else throw new CallError('input', `crash: "how" must be trap, gpu-device, hang, hang-in-run or oversized-allocation, found ${JSON.stringify(how)}`);
      return null;
    },
  },
};

/** Check the call's shape, verb and argument names, then run its handler. */
async function handle(verb: string, args: Record<string, unknown>, call: Call): Promise<unknown> {
  if (!Object.hasOwn(VERBS, verb)) {
    throw new CallError('input', `unknown verb ${JSON.stringify(verb)}; the worker takes ${Object.keys(VERBS).join(', ')} (web/src/protocol.ts Verbs)`);
  }
  const handler = VERBS[verb as Verb] as Handler<Verb>;
  const unknown = Object.keys(args).filter((name) => !handler.takes.includes(name));
  if (unknown.length) {
    throw new CallError('input', `${verb}: unknown argument ${JSON.stringify(unknown[0])}; it takes ${handler.takes.join(', ') || 'none'}`);
  }
  if (!handler.exclusive) return handler.run(args as never, call);
  if (busy) throw new CallError('input', `busy: finish or cancel the running "${busy}" before "${verb}"`);
  busy = verb as Verb;
  try {
    return await handler.run(args as never, call);
  } finally {
    busy = null;
  }
}

/** Why ``data`` is not a call (an object with a numeric id, a string verb, object args), or null. */
function malformed(data: unknown): string | null {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return `a call must be an object {id, verb, args}, found ${Array.isArray(data) ? 'an array' : String(data)}`;
  }
  const { id, verb, args } = data as { id?: unknown; verb?: unknown; args?: unknown };
  if (typeof id !== 'number' || !Number.isFinite(id)) return `a call needs a numeric "id", found ${JSON.stringify(id) ?? 'none'}`;
  if (typeof verb !== 'string') return `a call needs a string "verb", found ${JSON.stringify(verb) ?? 'none'}`;
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    return `${verb}: "args" must be an object, found ${JSON.stringify(args)}`;
  }
  const extra = Object.keys(data).filter((key) => key !== 'id' && key !== 'verb' && key !== 'args');
  if (extra.length) return `a call has only id, verb and args, found ${JSON.stringify(extra[0])}`;
  return null;
}

if (!self.name?.startsWith('em-pthread')) {
  self.onmessage = (message: MessageEvent<unknown>) => {
    const problem = malformed(message.data);
    if (problem) {
      // answered with id -1 when the message has no usable id
      const id = (message.data as { id?: unknown } | null)?.id;
      post({ id: typeof id === 'number' && Number.isFinite(id) ? id : -1, error: { kind: 'input', message: problem } });
      return;
    }
    const { id, verb, args = {} } = message.data as { id: number; verb: string; args?: Record<string, unknown> };
    const transfer: Transferable[] = [];
    const call: Call = { id, transfer, emit: (event, data, moved = []) => post({ id, event, data }, moved) };
    handle(verb, args, call).then((result) => post({ id, result }, transfer), (error: unknown) => fail(id, error));
  };
  // a trap or an allocation failure in a callback no call awaits
  self.addEventListener('unhandledrejection', (event) => {
    const unusable = fatalReason(event.reason);
    if (unusable) fatal(0, unusable);
  });
}
