// The browser's grammar engine: @mlc-ai/web-xgrammar 0.1.27, the same C++ core as the Python
// package py/onnxpipe/grammar/native.py uses (so the same masks). Python reaches it through the
// bridge (onnxpipe_js.grammarEngine, py/onnxpipe/grammar/web.py); the package (1 MB with its
// wasm inlined) is imported on the first constrained call only.

import type * as Ort from 'onnxruntime-web';
import type * as Xgr from '@mlc-ai/web-xgrammar';

import type { Manifest } from './storage/bundle-index';
import type { BundleStore } from './storage/store';

type XgrModule = typeof Xgr;
let xgrModule: Promise<XgrModule> | null = null;
const xgr = (): Promise<XgrModule> => (xgrModule ??= import('@mlc-ai/web-xgrammar'));

/** JSON as these grammars fix it: one line, the separators of Python's json.dumps. */
const SEPARATORS: [string, string] = [', ', ': '];
const JSON_OBJECT = '{"type": "object"}';   // what {"type": "json_object"} compiles

/** grammar/vocabulary.py's GrammarVocabulary.to_json(). */
interface Vocabulary {
  encoded: string[];
  vocab_type: string;
  add_prefix_space: boolean;
  vocab_size: number;
  stop_ids: number[];
}

/** grammar/formats.py's Constraint as it crosses: kind, source, strict and its JSON path. */
interface Constraint {
  kind: string;
  source: string;
  strict: boolean;
  field: string;
}

// ---- the vocabulary, kept next to the loaded bundle --------------------------------------------

let storage: { store: BundleStore; sha256: Map<string, string> } | null = null;

/** The loaded bundle's storage (workers/bundle-loader.ts), where vocabularies are kept. */
export function useBundleStorage(store: BundleStore, manifest: Manifest): void {
  storage = { store, sha256: new Map(manifest.files.map((f) => [f.path, f.sha256])) };
}

/** The stored name of the vocabulary read from ``tokenizer`` (a bundle path) with ``inputs``
 * (logits width, stop ids, format version): named by the file's sha256, so a changed
 * tokenizer.json is read again. Null when the bundle isn't in storage. */
function vocabularyName(tokenizer: string, inputs: string): string | null {
  const sha = storage?.sha256.get(tokenizer);
  return sha && /^[\w.-]+$/.test(inputs) ? `grammar-vocabulary-${sha.slice(0, 32)}-${inputs}.json` : null;
}

/** The GrammarVocabulary JSON stored for this bundle, or null. */
export async function storedVocabulary(tokenizer: string, inputs: string): Promise<string | null> {
  const name = vocabularyName(tokenizer, inputs);
  return name ? storage!.store.derived(name).catch(() => null) : null;
}

/** Keep the GrammarVocabulary JSON next to the bundle (best effort: a full quota only costs a
 * read of tokenizer.json next time). */
export async function storeVocabulary(tokenizer: string, inputs: string, json: string): Promise<void> {
  const name = vocabularyName(tokenizer, inputs);
  if (name) await storage!.store.saveDerived(name, json).catch(() => undefined);
}

// ---- the engine -------------------------------------------------------------------------------

type MakeTensor = (data: Uint32Array, dims: number[]) => Ort.Tensor;

/** What the engine threw: its message, or (a C++ exception reaches JavaScript as a bare
 * pointer in this build) a sentence saying the engine gave none. */
function reason(error: unknown): string {
  if (error instanceof Error) return error.message.split('\n')[0] || error.name;
  if (typeof error === 'number') return 'the engine rejected it (web-xgrammar reports no message for its C++ errors)';
  return String(error);
}

export class GrammarEngine {
  private constructor(
    private readonly x: XgrModule,
    private readonly compiler: Xgr.GrammarCompiler,
    readonly vocabSize: number,
    private readonly tensor: MakeTensor,
  ) {}

  /** An engine for one bundle's vocabulary (the compiler's own cache off: Python caches). */
  static async create(vocabularyJson: string, tensor: MakeTensor): Promise<GrammarEngine> {
    const x = await xgr();
    const v = JSON.parse(vocabularyJson) as Vocabulary;
    const info = await x.TokenizerInfo.createTokenizerInfo(
      v.encoded, v.vocab_type, v.add_prefix_space, v.vocab_size, v.stop_ids.length ? v.stop_ids : undefined);
    return new GrammarEngine(x, await x.GrammarCompiler.createGrammarCompiler(info, false), v.vocab_size, tensor);
  }

  /** ``constraint`` compiled exactly as grammar/native.py compiles it. */
  async compile(constraintJson: string): Promise<Xgr.CompiledGrammar> {
    const c = JSON.parse(constraintJson) as Constraint;
    try {
      switch (c.kind) {
        case 'json_object':
          return await this.compiler.compileJSONSchema(JSON_OBJECT, false, -1, SEPARATORS, false);
        case 'json_schema':
          return await this.compiler.compileJSONSchema(c.source, false, -1, SEPARATORS, c.strict);
        case 'regex':
          return await this.compiler.compileStructuralTag(
            `{"type": "structural_tag", "format": {"type": "regex", "pattern": ${JSON.stringify(c.source)}}}`);
        case 'grammar':
          return await this.compiler.compileGrammar(c.source, 'root');
        case 'structural_tag':
          return await this.compiler.compileStructuralTag(c.source);
      }
    } catch (error) {
      throw new Error(`${c.field}: the grammar engine (XGrammar) cannot compile it: ${reason(error)}`);
    }
    throw new Error(`${c.field}: unknown constraint kind "${c.kind}"`);
  }

  async matcher(compiled: Xgr.CompiledGrammar, stopIds: number[], rows: number): Promise<GrammarMatch> {
    // rollback (draft checking) is unlimited in this XGrammar: maxRollbackTokens left at its default
    const m = await this.x.GrammarMatcher.createGrammarMatcher(compiled, stopIds.length ? stopIds : undefined, false);
    return new GrammarMatch(m, rows, Math.ceil(this.vocabSize / 32), this.tensor);
  }
}

/** One generation's matcher and its bitmask rows: uint32[rows, ceil(V / 32)], a set bit an
 * allowed token (XGrammar's layout, what ops/sampler.py's `allowed` input takes). */
export class GrammarMatch {
  private readonly words: Uint32Array;

  constructor(private readonly m: Xgr.GrammarMatcher, private readonly rows: number, private readonly width: number,
    private readonly tensor: MakeTensor) {
    this.words = new Uint32Array(rows * width);
  }

  /** The next token's mask into row ``row``. */
  async fill(row: number): Promise<void> {
    if (row < 0 || row >= this.rows) throw new Error(`grammar mask row ${row}: this matcher has rows 0..${this.rows - 1}`);
    const mask = await this.m.getNextTokenBitmask();
    this.words.set(new Uint32Array(mask.buffer, mask.byteOffset, this.width), row * this.width);
  }

  /** The first ``rows`` rows as a uint32 tensor (a copy: the next fill doesn't change it). */
  allowed(rows: number): Ort.Tensor {
    return this.tensor(this.words.slice(0, rows * this.width), [rows, this.width]);
  }

  accept(token: number): boolean {
    return this.m.acceptToken(token);
  }

  rollback(count: number): void {
    if (count > 0) this.m.rollBack(count);
  }

  isTerminated(): boolean {
    return this.m.isTerminated();
  }

  dispose(): void {
    this.m.dispose();
  }
}
