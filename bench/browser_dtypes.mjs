#!/usr/bin/env node
// Browser decode speed and greedy agreement of each dtype a transformers.js folder offers,
// side by side: the real runtime worker (chat page's RuntimeClient -> Pyodide -> onnxruntime-web),
// WASM, one headless Chromium process per dtype, one run each. Not a test.
//
//   node bench/browser_dtypes.mjs [FOLDER] [--tokens 32] [--threads 1] [--dtypes fp32,q8,...] [--json]
//
// FOLDER defaults to public/models/smollm2-135m-instruct-tjs (make models). Every dtype answers
// the same PROMPTS greedily (ignore_eos, so each decodes --tokens tokens); fp32 runs first and
// is the reference: "agreement" is the fraction of tokens equal to fp32's before each prompt's
// first divergence, "prompts" how many of them match fp32's tokens all the way. tokens/s counts
// decode steps only (the worker's own figure), median over the prompts, after one short warm-up.
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
const TOKENS = Number(opt('--tokens', 32));
const THREADS = Number(opt('--threads', 1)); // the worker's default
const ONLY = opt('--dtypes', '');
const JSON_OUT = args.includes('--json') && args.splice(args.indexOf('--json'), 1);
const FOLDER = path.resolve(args[0] ?? path.join(ROOT, 'public', 'models', 'smollm2-135m-instruct-tjs'));
const NAME = path.basename(FOLDER);
const PROMPTS = [
  'What is the capital of France?',
  'Write a haiku about the sea.',
  'Explain what a neural network is in one sentence.',
  'List three fruits that are red.',
  'How many days are in a leap year?',
];
const log = (m) => process.stderr.write(`${m}\n`);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Leading tokens equal to the reference's. */
function agreed(reference, tokens) {
  let n = 0;
  while (n < reference.length && n < tokens.length && reference[n] === tokens[n]) n += 1;
  return n;
}

/** Bytes the dtype downloads: its decoder file and the data files beside it. */
function dtypeBytes(file) {
  const dir = path.join(FOLDER, path.dirname(file));
  const base = path.basename(file);
  return fs.readdirSync(dir).filter((n) => n === base || n.startsWith(`${base}_data`) || n.startsWith(`${base}.data`))
    .reduce((sum, n) => sum + fs.statSync(path.join(dir, n)).size, 0);
}

/** One dtype in a fresh browser: load, warm up, answer every prompt. */
async function runDtype(server, dtype, threads) {
  const { browser, context, offsite } = await launchBrowser();
  try {
    const page = await openRuntimePage(context, server.url);
    const loaded = await loadBundle(page, `${server.url}models/${NAME}/`, { ep: 'wasm', dtype, threads, timeout: 600_000 });
    if (loaded.info.dtype !== dtype) throw new Error(`asked for ${dtype}, the worker opened ${loaded.info.dtype}`);
    const options = { do_sample: false, max_new_tokens: TOKENS, ignore_eos: true };
    await generate(page, { messages: [{ role: 'user', content: 'Hi' }], options: { ...options, max_new_tokens: 4 } }, { timeout: 600_000 });
    const runs = [];
    for (const prompt of PROMPTS) {
      const { result } = await generate(page, { messages: [{ role: 'user', content: prompt }], options }, { timeout: 600_000 });
      runs.push(result);
      log(`# ${dtype} "${prompt}": ${result.decode_tokens_per_s.toFixed(2)} tokens/s, prefill ${result.prefill_ms.toFixed(0)} ms`);
    }
    if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
    const file = loaded.info.sessions.decoder.file;
    return {
      dtype, file, bytes: dtypeBytes(file), load_ms: loaded.info.load_ms, load_wall_ms: loaded.wallMs,
      tokens_per_s: median(runs.map((r) => r.decode_tokens_per_s)), runs_tokens_per_s: runs.map((r) => r.decode_tokens_per_s),
      prefill_ms: median(runs.map((r) => r.prefill_ms)), tokens: runs.map((r) => r.tokens), texts: runs.map((r) => r.text),
      dtypes: loaded.info.dtypes, browser: browser.version(),
    };
  } finally {
    await browser.close().catch(() => {});
  }
}

async function main() {
  if (!fs.existsSync(path.join(FOLDER, 'config.json'))) {
    throw new Error(`${path.relative(ROOT, FOLDER)}: no transformers.js folder here (make models builds it)`);
  }
  const site = ensureSite({ log });
  ensureManifest(FOLDER);
  const server = await startServer({ root: site, mounts: { [`/models/${NAME}/`]: FOLDER } });
  const threads = Math.min(THREADS, os.availableParallelism());
  const rows = [];
  try {
    // fp32 first (the reference), then the others in the folder's order
    const first = await runDtype(server, 'fp32', threads);
    const offered = first.dtypes;
    const wanted = ONLY ? ONLY.split(',') : offered;
    if (wanted.includes('fp32')) rows.push(first);
    for (const dtype of wanted.filter((d) => d !== 'fp32')) rows.push(await runDtype(server, dtype, threads));
    for (const row of rows) {
      const leading = row.tokens.map((t, i) => agreed(first.tokens[i], t));
      row.agreement = leading.reduce((a, b) => a + b, 0) / (PROMPTS.length * TOKENS);
      row.prompts_matched = leading.filter((n) => n === TOKENS).length;
      row.first_divergence = leading.map((n) => (n === TOKENS ? null : n));
    }
  } finally {
    await server.stop();
  }
  const out = { folder: path.relative(ROOT, FOLDER), tokens: TOKENS, prompts: PROMPTS, threads, ep: 'wasm', browser: rows[0]?.browser, rows };
  if (JSON_OUT) return console.log(JSON.stringify(out, null, 2));
  console.log(`browser decode by dtype, ${out.folder}, WASM, ${threads} thread(s), Chromium ${out.browser}; ` +
    `${PROMPTS.length} chat prompts x ${TOKENS} greedy tokens, agreement vs fp32 (same browser, WASM)`);
  console.log('  dtype   file                        MiB   load s  decode tok/s  prefill ms  agreement  prompts equal  first divergence');
  for (const r of rows) {
    console.log(`  ${r.dtype.padEnd(6)}  ${r.file.padEnd(26)}  ${(r.bytes / 2 ** 20).toFixed(0).padStart(4)}  ${(r.load_ms / 1000).toFixed(1).padStart(6)}  ` +
      `${r.tokens_per_s.toFixed(2).padStart(12)}  ${r.prefill_ms.toFixed(0).padStart(10)}  ${(100 * r.agreement).toFixed(1).padStart(8)}%  ` +
      `${`${r.prompts_matched}/${PROMPTS.length}`.padStart(13)}  ${JSON.stringify(r.first_divergence)}`);
  }
  const ref = rows.find((r) => r.dtype === 'fp32');
  if (ref) for (const r of rows) if (r !== ref) console.log(`  ${r.dtype} / fp32 speed: ${(r.tokens_per_s / ref.tokens_per_s).toFixed(2)}`);
}

main().catch((error) => {
  log(`browser_dtypes: ${error.message}`);
  process.exit(1);
});
