#!/usr/bin/env node
// Browser decode speed, one model file, one headless Chromium (WASM), three drivers:
//   onnxpipe      the real runtime worker (chat page's RuntimeClient -> Pyodide -> onnxruntime-web)
//   bare loop     bench/browser/bare_loop.html: a JS greedy loop on onnxruntime-web (argmax in JS)
//   transformers.js  @huggingface/transformers from build/bench-node/ (npm i --ignore-scripts)
// Prints tokens/s for each and the ratios; then onnxpipe on chat prompts with and without
// prompt lookup (speculative decoding: drafts copied from the conversation, verified 4 per
// pass), with the acceptance rate. Not a test.
//
//   node bench/browser_decode.mjs [BUNDLE_DIR] [--tokens 64] [--runs 2] [--threads 1] [--ort ort.wasm.min.mjs] [--json]
//
// BUNDLE_DIR defaults to public/models/smollm2-135m-instruct; the file is the one its
// pipeline.json maps to "wasm" (else its plain file). Threads: min(2, cores), as the worker.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launchBrowser, startServer } from '../tests/e2e/lib/browser.mjs';
import { ensureManifest, ensureSite, generate, loadBundle, openRuntimePage } from '../tests/e2e/lib/runtime.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const TOKENS = Number(opt('--tokens', 64));
const RUNS = Number(opt('--runs', 2));
const ORT_BUILD = opt('--ort', 'ort.wasm.min.mjs'); // the build the worker loads for WASM
const THREADS = Number(opt('--threads', 1)); // the worker's default
const JSON_OUT = args.includes('--json') && args.splice(args.indexOf('--json'), 1);
const BUNDLE = path.resolve(args[0] ?? path.join(ROOT, 'public', 'models', 'smollm2-135m-instruct'));
const NAME = path.basename(BUNDLE);
const PROMPT = [1, 504, 3575, 282, 4649, 314]; // "<s>The capital of France is" in SmolLM2's vocabulary
// chat prompts (the template adds SmolLM2's system prompt): an everyday question, and a reply
// that quotes its prompt (prompt lookup's good case: editing, quoting, summarising)
const CHATS = ['What is the capital of France?',
  'Fix the spelling and write the text out again: The quick brown fox jumpd over the lazy dog near the ' +
  'river bank in the erly morning light, while the farmer walked slowly to the old red barn.'];
const LOOKUP = { method: 'prompt_lookup', max_draft: 4, ngram: 3 };
const TJS_DIR = path.join(ROOT, 'build', 'bench-node');
const TJS = path.join(TJS_DIR, 'node_modules', '@huggingface', 'transformers', 'dist');
const TJS_ORT = path.join(TJS_DIR, 'node_modules', 'onnxruntime-web', 'dist');
const log = (m) => process.stderr.write(`${m}\n`);

function sessionFiles() {
  const spec = JSON.parse(fs.readFileSync(path.join(BUNDLE, 'pipeline.json'), 'utf8'));
  const session = Object.values(spec.pipeline.sessions)[0];
  const pick = (v) => (typeof v === 'string' || Array.isArray(v) ? v : v?.wasm ?? v?.default ?? v?.cpu);
  const file = pick(session.file);
  let data = pick(session.external_data) ?? [];
  if (typeof data === 'string') data = [data];
  if (!data.length && fs.existsSync(path.join(BUNDLE, `${file}.data`))) data = [`${file}.data`];
  const variant = typeof session.file === 'object' && session.file.wasm ? 'wasm' : undefined;
  return { file, data, variant };
}

/** A transformers.js model folder: config.json from genai_config.json + links to the bundle's files. */
function transformersModel(file, data) {
  const dir = path.join(TJS_DIR, 'models', NAME);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'onnx'), { recursive: true });
  const g = JSON.parse(fs.readFileSync(path.join(BUNDLE, 'genai_config.json'), 'utf8')).model;
  const d = g.decoder;
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({
    architectures: ['LlamaForCausalLM'], model_type: g.type, vocab_size: g.vocab_size,
    hidden_size: d.hidden_size, num_hidden_layers: d.num_hidden_layers,
    num_attention_heads: d.num_attention_heads, num_key_value_heads: d.num_key_value_heads, head_dim: d.head_size,
    bos_token_id: g.bos_token_id, eos_token_id: g.eos_token_id, pad_token_id: g.pad_token_id,
    max_position_embeddings: g.context_length, tie_word_embeddings: true,
  }));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.symlinkSync(path.join(BUNDLE, f), path.join(dir, f));
  fs.symlinkSync(path.join(BUNDLE, file), path.join(dir, 'onnx', 'model.onnx'));
  for (const f of data) fs.symlinkSync(path.join(BUNDLE, f), path.join(dir, 'onnx', f));
  return dir;
}

async function pageResult(page, url, timeoutMs) {
  await page.goto(url);
  await page.waitForFunction(() => window.__result || window.__error, null, { timeout: timeoutMs, polling: 250 });
  const { result, error } = await page.evaluate(() => ({ result: window.__result, error: window.__error }));
  if (error) throw new Error(error);
  return result;
}

async function main() {
  const { file, data, variant } = sessionFiles();
  const haveTjs = fs.existsSync(path.join(TJS, 'transformers.min.js'));
  if (!haveTjs) log(`# transformers.js missing: (cd build/bench-node && npm i --ignore-scripts @huggingface/transformers) to compare with it`);
  const site = ensureSite({ log });
  ensureManifest(BUNDLE);
  const mounts = {
    [`/models/${NAME}/`]: BUNDLE, '/ort/': path.join(ROOT, 'node_modules', 'onnxruntime-web', 'dist'),
    '/model/': BUNDLE, '/bench/': path.join(ROOT, 'bench'),
  };
  if (haveTjs) Object.assign(mounts, { '/tjs/': TJS, '/tjs-ort/': TJS_ORT, [`/tjs-model/${NAME}/`]: transformersModel(file, data) });
  // bare_loop.html and browser_transformers.html are inline-script pages of other runtimes
  const server = await startServer({ root: site, mounts, csp: false });
  // a fresh browser process per driver (same binary and flags): none inherits another's memory
  let browser, context;
  const offsite = [];
  const fresh = async () => {
    await browser?.close();
    const launched = await launchBrowser();
    ({ browser, context } = launched);
    launched.offsite.push = (...u) => offsite.push(...u);
  };
  await fresh();
  const threads = Math.min(THREADS, os.availableParallelism());
  const out = { bundle: path.relative(ROOT, BUNDLE), file, data, tokens: TOKENS, prompt: PROMPT, threads, browser: browser.version() };
  try {
    // onnxpipe: load once, generate RUNS times (fresh prompt each time), keep the best
    let page = await openRuntimePage(context, server.url);
    const loaded = await loadBundle(page, `${server.url}models/${NAME}/`, { ep: 'wasm', variant, threads });
    const pipeRuns = [];
    for (let r = 0; r < RUNS; r++) {
      const { result } = await generate(page, { input_ids: PROMPT, options: { do_sample: false, max_new_tokens: TOKENS, ignore_eos: true } }, { timeout: 600_000 });
      pipeRuns.push(result);
      log(`# onnxpipe run ${r + 1}: ${result.decode_tokens_per_s.toFixed(2)} tokens/s, prefill ${result.prefill_ms.toFixed(0)} ms`);
    }
    out.chat = [];
    for (const question of CHATS) {
      const row = { question };
      for (const [key, speculative] of [['plain', null], ['prompt_lookup', LOOKUP]]) {
        const runs = [];
        for (let r = 0; r < RUNS; r++) {
          const messages = [{ role: 'user', content: question }];
          const { result } = await generate(page, { messages, options: { do_sample: false, max_new_tokens: TOKENS, speculative } }, { timeout: 600_000 });
          runs.push(result);
        }
        const top = runs.reduce((a, b) => (b.decode_tokens_per_s > a.decode_tokens_per_s ? b : a));
        row[key] = { tokens_per_s: top.decode_tokens_per_s, tokens: top.tokens.length, speculative: top.speculative ?? null, ids: top.tokens };
        log(`# onnxpipe chat ${key}: ${top.decode_tokens_per_s.toFixed(2)} tokens/s, ${top.tokens.length} tokens` +
          (top.speculative ? `, ${top.speculative.accepted}/${top.speculative.drafted} drafts accepted` : ''));
      }
      row.same_tokens = JSON.stringify(row.plain.ids) === JSON.stringify(row.prompt_lookup.ids);
      delete row.plain.ids;
      delete row.prompt_lookup.ids;
      out.chat.push(row);
    }
    await page.close();
    const best = pipeRuns.reduce((a, b) => (b.decode_tokens_per_s > a.decode_tokens_per_s ? b : a));
    out.onnxpipe = { tokens_per_s: best.decode_tokens_per_s, runs: pipeRuns.map((r) => r.decode_tokens_per_s), prefill_ms: best.prefill_ms, session: loaded.info.sessions, load_ms: loaded.info.load_ms };

    // bare loop: one run per page load (it decodes TOKENS after its prefill step)
    await fresh();
    const bareRuns = [];
    for (let r = 0; r < RUNS; r++) {
      page = await context.newPage();
      const q = new URLSearchParams({ file, data: data.join(','), tokens: String(TOKENS), threads: String(threads), prompt: PROMPT.join(','), ort: ORT_BUILD, eos: '' });
      const res = await pageResult(page, `${server.url}bench/browser/bare_loop.html?${q}`, 600_000);
      bareRuns.push(res);
      log(`# bare loop run ${r + 1}: ${res.tokens_per_s.toFixed(2)} tokens/s (threads ${res.threads}, ${res.ort_build})`);
      await page.close();
    }
    const bare = bareRuns.reduce((a, b) => (b.tokens_per_s > a.tokens_per_s ? b : a));
    out.bare_loop = { tokens_per_s: bare.tokens_per_s, runs: bareRuns.map((r) => r.tokens_per_s), prefill_ms: bare.prefill_ms, ort_build: ORT_BUILD };
    out.same_tokens = { onnxpipe_vs_bare: JSON.stringify(best.tokens) === JSON.stringify(bare.tokens) };

    if (haveTjs) {
      await fresh();
      page = await context.newPage();
      const q = new URLSearchParams({ model: NAME, data: data[0] ?? '', prompt: PROMPT.join(','), tokens: String(TOKENS), threads: String(threads), runs: String(RUNS) });
      try {
        const res = await pageResult(page, `${server.url}bench/browser_transformers.html?${q}`, 600_000);
        const tb = res.runs.reduce((a, b) => (b.tokens_per_s > a.tokens_per_s ? b : a));
        for (const [i, r] of res.runs.entries()) log(`# transformers.js run ${i + 1}: ${r.tokens_per_s.toFixed(2)} tokens/s`);
        out.transformers_js = { tokens_per_s: tb.tokens_per_s, runs: res.runs.map((r) => r.tokens_per_s), prefill_ms: tb.prefill_ms, ort: res.ort,
          version: JSON.parse(fs.readFileSync(path.join(TJS, '..', 'package.json'), 'utf8')).version };
        out.same_tokens.onnxpipe_vs_transformers_js = JSON.stringify(best.tokens) === JSON.stringify(tb.tokens);
      } catch (error) {
        out.transformers_js = { error: String(error.message).split('\n')[0] };
      }
      await page.close();
    }
    if (offsite.length) out.offsite = offsite;
  } finally {
    await browser?.close();
    await server.stop();
  }
  out.ratio = { onnxpipe_over_bare_loop: out.onnxpipe.tokens_per_s / out.bare_loop.tokens_per_s };
  if (out.transformers_js?.tokens_per_s) out.ratio.onnxpipe_over_transformers_js = out.onnxpipe.tokens_per_s / out.transformers_js.tokens_per_s;
  if (JSON_OUT) return console.log(JSON.stringify(out, null, 2));
  const f = (x) => (x === undefined ? '-' : x.toFixed(2));
  console.log(`browser decode, ${out.file} (${out.bundle}), ${TOKENS} greedy tokens, WASM, ${threads} threads, Chromium ${out.browser}`);
  console.log(`  onnxpipe (worker)  ${f(out.onnxpipe.tokens_per_s)} tokens/s`);
  console.log(`  bare JS loop       ${f(out.bare_loop.tokens_per_s)} tokens/s   (${ORT_BUILD})`);
  console.log(`  transformers.js    ${out.transformers_js?.tokens_per_s ? `${f(out.transformers_js.tokens_per_s)} tokens/s   (${out.transformers_js.version}, ort ${out.transformers_js.ort})` : out.transformers_js?.error ?? 'not installed'}`);
  console.log(`  ratio onnxpipe / bare loop       ${f(out.ratio.onnxpipe_over_bare_loop)}   (target >= 0.95)`);
  console.log(`  ratio onnxpipe / transformers.js ${f(out.ratio.onnxpipe_over_transformers_js)}   (target > 1)`);
  console.log(`  same tokens: ${JSON.stringify(out.same_tokens)}`);
  console.log(`onnxpipe on chat prompts (greedy, up to ${TOKENS} tokens), plain vs prompt lookup (max_draft 4, ngram 3):`);
  for (const row of out.chat) {
    const s = row.prompt_lookup.speculative;
    const vsTjs = out.transformers_js?.tokens_per_s ? `, ${f(row.prompt_lookup.tokens_per_s / out.transformers_js.tokens_per_s)}x transformers.js` : '';
    console.log(`  "${row.question.slice(0, 40)}…": ${f(row.plain.tokens_per_s)} -> ${f(row.prompt_lookup.tokens_per_s)} tokens/s ` +
      `(${f(row.prompt_lookup.tokens_per_s / row.plain.tokens_per_s)}x${vsTjs}; accepted ${s.accepted}/${s.drafted} = ${f(s.acceptance_rate)}; same tokens ${row.same_tokens})`);
  }
}

main().catch((error) => {
  log(`browser_decode: ${error.message}`);
  process.exit(1);
});
