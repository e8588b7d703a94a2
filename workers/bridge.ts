// What Python (py/onnxpipe/backends/web.py, text/web.py, web_entry.py) calls in JavaScript,
// registered in Pyodide as the module `onnxpipe_js`. Keep it small: tensors, files, text.

import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import type * as Ort from 'onnxruntime-web';

import { GrammarEngine, storedVocabulary, storeVocabulary } from './grammar';
import { type ExternalDataEntry, type HeapPlanWire, planExternalData } from './heap-weights';
import { type PartSpec, PartsSession, ortInstance } from './ort-instances';
import { phonemize } from './phonemizer';
import { ALIVE_EVENT, ALIVE_EVERY_MS, type WorkerMessage } from '../web/src/protocol';

type Dtype = 'float32' | 'float16' | 'int64' | 'int32' | 'int8' | 'uint8' | 'bool';

type OrtModule = typeof Ort;
let ort: OrtModule;

/** The onnxruntime-web build the worker chose (sessions and tensors must share it). */
export function useOrt(module: OrtModule): void {
  ort = module;
}

/** That build, once the worker chose it (else null). */
export const currentOrt = (): OrtModule | null => ort ?? null;

/** Bundle files the worker loaded, by bundle-relative path: bytes, or a Blob backed by this
 * device's storage for weight files (passed to onnxruntime-web as externalData as it is). */
export const files = new Map<string, Uint8Array | Blob>();
let cancelRequested = false;
const templates = new Map<string, Template>();
const tick = new MessageChannel();
let lastAlive = -Infinity;

/** Typed data for a tensor from Python. float16 values arrive as half bits (Python rounds
 * them; JavaScript can't without Float16Array): a Uint16Array, which onnxruntime-web takes as
 * 'float16' data whether or not the engine has Float16Array. */
function typed(dtype: Dtype, values: ArrayLike<number>): Ort.Tensor['data'] {
  switch (dtype) {
    case 'int64': return BigInt64Array.from(values as ArrayLike<number>, (v) => BigInt(v));
    case 'int32': return Int32Array.from(values);
    case 'int8': return Int8Array.from(values);
    case 'uint8': return Uint8Array.from(values);
    case 'bool': return Uint8Array.from(values);
    case 'float16': return Uint16Array.from(values);
    default: return Float32Array.from(values);
  }
}

/** The bytes under float16 data: a Uint16Array of bits, or a Float16Array where the engine has
 * one (onnxruntime-web then returns that); both hold the same 2-byte IEEE halves. */
function halfBytes(data: Ort.Tensor['data']): Uint8Array {
  const view = data as unknown as ArrayBufferView;
  if (!ArrayBuffer.isView(view) || (view as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT !== 2) {
    throw new Error('expected float16 tensor data (Uint16Array or Float16Array)');
  }
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

let cancelShared: Int32Array | null = null;

export function setCancel(value: boolean): void {
  cancelRequested = value;
  // the page clears the shared flag itself when it starts a generation
  if (cancelShared && value) Atomics.store(cancelShared, 0, 1);
}

/** Shared memory the page writes on cancel (cross-origin isolated pages only). */
export function useCancelBuffer(buffer: SharedArrayBuffer | undefined): void {
  cancelShared = buffer ? new Int32Array(buffer) : null;
}

export const bridge = {
  getFile(path: string): Uint8Array | Blob {
    const data = files.get(path);
    if (!data) throw new Error(`bundle file "${path}" was not fetched (is it in manifest.json?)`);
    return data;
  },
  hasFile(path: string): boolean {
    return files.has(path);
  },
  fileSize(path: string): number {
    const data = bridge.getFile(path);
    return data instanceof Blob ? data.size : data.byteLength;
  },
  /** ``length`` bytes at ``offset`` of a bundle file, for py/onnxpipe/onnx_info's graph reader:
   * a copy of just that range (a Blob is read asynchronously, so then a Promise). */
  readRange(path: string, offset: number, length: number): Uint8Array | Promise<Uint8Array> {
    const data = bridge.getFile(path);
    const end = Math.min(offset + length, data instanceof Blob ? data.size : data.byteLength);
    if (data instanceof Blob) return data.slice(offset, end).arrayBuffer().then((b) => new Uint8Array(b));
    return data.subarray(offset, end);
  },
  /** A session's externalData from its heap plan (py/onnxpipe/heap/plan.py; workers/heap-weights.ts). */
  heapExternalData(planJson: string): Promise<ExternalDataEntry[]> {
    return planExternalData(bridge.getFile, JSON.parse(planJson) as HeapPlanWire);
  },
  /** A session in onnxruntime-web instance ``heap`` (workers/ort-instances.ts; 0: the worker's own). */
  async createSession(heap: number, model: Uint8Array, options: Ort.InferenceSession.SessionOptions): Promise<Ort.InferenceSession> {
    return (await ortInstance(heap)).InferenceSession.create(model, options);
  },
  /** Sessions of consecutive instances run as one (heap/shards.py): part k in instance k. */
  async partsSession(sessions: Ort.InferenceSession[], specs: PartSpec[]): Promise<PartsSession> {
    const instances = await Promise.all(sessions.map((_, k) => ortInstance(k)));
    return new PartsSession(sessions.map((session, k) => ({ session, ort: instances[k]!, spec: specs[k]! })));
  },

  tensor(dtype: Dtype, values: number[], dims: number[]): Ort.Tensor {
    return new ort.Tensor(dtype, typed(dtype, values), dims);
  },
  /** A float32 tensor from its bytes (Python's array('f')): one copy, no per-value work. */
  float32Tensor(bytes: Uint8Array, dims: number[]): Ort.Tensor {
    const own = bytes.slice();   // aligned, and not a view of memory Python may reuse
    return new ort.Tensor('float32', new Float32Array(own.buffer, 0, own.byteLength / 4), dims);
  },
  full(dtype: Dtype, dims: number[], value: number): Ort.Tensor {
    const size = dims.reduce((a, b) => a * b, 1);
    const data = typed(dtype, []);
    const filled = new (data.constructor as { new (n: number): typeof data })(size);
    (filled as { fill: (v: unknown) => void }).fill(dtype === 'int64' ? BigInt(value) : value);
    return new ort.Tensor(dtype, filled, dims);
  },
  toArray(tensor: Ort.Tensor): number[] {
    return Array.from(tensor.data as ArrayLike<number | bigint>, (v) => Number(v));
  },
  /** A float tensor's bytes as float32 (Python reads them into an array('f') in one copy). */
  float32Bytes(tensor: Ort.Tensor): Uint8Array {
    const data = tensor.data instanceof Float32Array ? tensor.data : Float32Array.from(tensor.data as ArrayLike<number>);
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  },
  /** A float16 tensor's raw half bits as bytes (Python unpacks them with struct 'e'). */
  halfBytes(tensor: Ort.Tensor): Uint8Array {
    return halfBytes(tensor.data);
  },
  async downloadHalfBytes(tensor: Ort.Tensor): Promise<Uint8Array> {
    return halfBytes(await tensor.getData());
  },
  async download(tensor: Ort.Tensor): Promise<number[]> {
    const data = await tensor.getData();
    return Array.from(data as ArrayLike<number | bigint>, (v) => Number(v));
  },
  makeTokenizer(tokenizerJson: string, configJson: string) {
    const tokenizer = new Tokenizer(JSON.parse(tokenizerJson), JSON.parse(configJson));
    const special = [...tokenizer.get_added_tokens_decoder().entries()]
      .filter(([, token]) => (token as unknown as { special?: boolean }).special)
      .map(([id]) => id);
    const vocab = tokenizer.get_vocab(true);
    const byteFallback: number[] = [];
    for (let b = 0; b < 256; b++) {
      const id = vocab.get(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
      if (id !== undefined) byteFallback.push(id);
    }
    return {
      encode: (text: string, addSpecial: boolean): number[] =>
        tokenizer.encode(text, { add_special_tokens: addSpecial }).ids,
      decode: (ids: number[], skipSpecial: boolean): string =>
        tokenizer.decode(ids, { skip_special_tokens: skipSpecial }),
      tokenToId: (token: string): number => tokenizer.token_to_id(token) ?? -1,
      specialIds: (): number[] => special,
      byteFallbackIds: (): number[] => byteFallback,
      vocabSize: (): number => vocab.size,
    };
  },
  /** espeak-ng IPA of one text chunk (py/onnxpipe/phonemes/web.py turns it into ids). */
  phonemize(voice: string, text: string): Promise<string> {
    return phonemize(voice, text);
  },
  /** The grammar engine for a bundle's vocabulary (py/onnxpipe/grammar/web.py; workers/grammar.ts). */
  grammarEngine(vocabularyJson: string): Promise<GrammarEngine> {
    return GrammarEngine.create(vocabularyJson, (data, dims) => new ort.Tensor('uint32', data, dims));
  },
  /** The grammar vocabulary kept next to the bundle (read from ``tokenizer`` with ``inputs``), or null. */
  storedVocabulary,
  storeVocabulary,
  renderChatTemplate(source: string, contextJson: string): string {
    let template = templates.get(source);
    if (!template) {
      template = new Template(source);
      templates.set(source, template);
    }
    return template.render(JSON.parse(contextJson) as Record<string, unknown>);
  },
  /** One session run with feeds as parallel name/value arrays: one FFI crossing each way. */
  async run(session: Ort.InferenceSession | PartsSession, names: string[], values: Ort.Tensor[], outputs: string[]): Promise<Ort.Tensor[]> {
    const feeds: Record<string, Ort.Tensor> = {};
    for (let i = 0; i < names.length; i++) feeds[names[i]!] = values[i]!;
    const result = await (session as Ort.InferenceSession).run(feeds, outputs);
    return outputs.map((name) => result[name]!);
  },
  /** KV caches [B, H, T, D] in JavaScript memory (the wasm provider's) cut to their first
   * ``length`` positions of T: one copy of the rows kept, here, instead of a session run that
   * copies every tensor into the WASM heap and the cut back out (py/onnxpipe/state/kv_cache.py). */
  sliceSeq(tensors: Ort.Tensor[], length: number): Ort.Tensor[] {
    return tensors.map((tensor) => {
      const [batch, heads, total, width] = tensor.dims as number[];
      if (tensor.dims.length !== 4 || length > total!) throw new Error(`sliceSeq: can't cut [${tensor.dims}] to ${length} positions`);
      const data = tensor.data as Float32Array | Uint16Array;
      const rows = batch! * heads!;
      const from = total! * width!;
      const to = length * width!;
      const out = new (data.constructor as { new (n: number): Float32Array | Uint16Array })(rows * to);
      for (let r = 0; r < rows; r++) out.set(data.subarray(r * from, r * from + to), r * to);
      return new ort.Tensor(tensor.type as 'float32', out as Float32Array, [batch!, heads!, length, width!]);
    });
  },
  disposeAll(tensors: Ort.Tensor[]): void {
    for (const tensor of tensors) tensor.dispose();
  },
  /** The cancel flag the page sets in shared memory (read with no event-loop turn):
   * 1 cancelled, 0 not, -1 no shared memory (then use checkCancelled). */
  cancelFlag(): number {
    return cancelShared === null ? -1 : Atomics.load(cancelShared, 0);
  },
  /** Tell the page the call in flight is still running (at most every ALIVE_EVERY_MS): Python
   * calls it wherever it checks for a cancel, so a long prefill is not taken for a hang. */
  alive(): void {
    const now = performance.now();
    if (now - lastAlive < ALIVE_EVERY_MS) return;
    lastAlive = now;
    self.postMessage({ id: 0, event: ALIVE_EVENT, data: null } satisfies WorkerMessage);
  },
  /** Resolves after one macrotask turn (so a cancel message can arrive) with the flag. */
  checkCancelled(): Promise<boolean> {
    return new Promise((resolve) => {
      tick.port1.onmessage = () => resolve(cancelRequested);
      tick.port2.postMessage(0);
    });
  },
};
