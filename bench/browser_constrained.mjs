#!/usr/bin/env node
// Constrained vs free decoding in the browser: the real runtime worker (Pyodide ->
// onnxruntime-web, WASM, one thread by default) on SmolLM2, the same chat prompt with and
// without a JSON schema, runs interleaved in one page. Prints decode tokens/s of each (the
// first token excluded, as the runtime counts it), the per-token cost ratio (goal <= 1.10) and
// the schema's compile time, first and cached. Not a test: `make bench` runs it.
//
//   node bench/browser_constrained.mjs [BUNDLE_DIR] [--tokens 64] [--runs 3] [--threads 1] [--json]
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
const RUNS = Number(opt('--runs', 3));
const THREADS = Number(opt('--threads', 1));
const JSON_OUT = args.includes('--json') && args.splice(args.indexOf('--json'), 1);
const BUNDLE = path.resolve(args[0] ?? path.join(ROOT, 'public', 'models', 'smollm2-135m-instruct'));
const NAME = path.basename(BUNDLE);
const log = (m) => process.stderr.write(`${m}\n`);

// the same prompt and schema as bench/constrained.py's speed part (PEOPLE): at least thirty
// people cannot end early, so both runs decode the whole budget
export const PROMPT = 'List thirty people with their name, age and city as JSON.';
export const SCHEMA = {
  type: 'object', required: ['people'], properties: { people: {
    type: 'array', minItems: 30, items: {
      type: 'object', required: ['name', 'age', 'city'],
      properties: { name: { type: 'string' }, age: { type: 'integer' }, city: { type: 'string' } } } } },
};

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const site = ensureSite({ log });
  ensureManifest(BUNDLE);
  const server = await startServer({ root: site, mounts: { [`/models/${NAME}/`]: BUNDLE } });
  const { browser, context } = await launchBrowser();
  const threads = Math.min(THREADS, os.availableParallelism());
  const out = { bundle: path.relative(ROOT, BUNDLE), tokens: TOKENS, runs: RUNS, threads, browser: browser.version(), prompt: PROMPT };
  try {
    const page = await openRuntimePage(context, server.url);
    await loadBundle(page, `${server.url}models/${NAME}/`, { ep: 'wasm', threads });
    const messages = [{ role: 'user', content: PROMPT }];
    const format = { type: 'json_schema', json_schema: { name: 'people', schema: SCHEMA } };
    const free = [], constrained = [], compiles = [];
    for (let r = 0; r < RUNS; r++) {
      // interleaved: free then constrained in each round, so drift hits both alike
      const a = (await generate(page, { messages, options: { do_sample: false, max_new_tokens: TOKENS, ignore_eos: true } }, { timeout: 600_000 })).result;
      const b = (await generate(page, { messages, options: { do_sample: false, max_new_tokens: TOKENS, response_format: format } }, { timeout: 600_000 })).result;
      free.push(a.decode_tokens_per_s);
      constrained.push(b.decode_tokens_per_s);
      compiles.push(b.grammar);
      log(`# round ${r + 1}: free ${a.decode_tokens_per_s.toFixed(2)} tok/s (${a.tokens.length} tokens), ` +
        `constrained ${b.decode_tokens_per_s.toFixed(2)} tok/s (${b.tokens.length} tokens, ${b.finish_reason}), ` +
        `compile ${b.grammar?.compile_ms} ms${b.grammar?.cached ? ' (cached)' : ''}`);
    }
    out.free_tokens_per_s = median(free);
    out.constrained_tokens_per_s = median(constrained);
    out.per_token_cost_ratio = out.free_tokens_per_s / out.constrained_tokens_per_s;
    out.first_compile_ms = compiles[0]?.compile_ms ?? null;
    out.vocabulary_ms = compiles[0]?.vocabulary_ms ?? null;
    out.cached_compile_ms = compiles.at(-1)?.compile_ms ?? null;
    await page.close();
  } finally {
    await browser.close();
    await server.stop();
  }
  if (JSON_OUT) {
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  } else {
    log(`browser (${threads} thread${threads > 1 ? 's' : ''}): free ${out.free_tokens_per_s.toFixed(2)} tok/s, ` +
      `constrained ${out.constrained_tokens_per_s.toFixed(2)} tok/s, per-token cost x${out.per_token_cost_ratio.toFixed(3)} ` +
      `(goal <= 1.10); schema compile ${out.first_compile_ms} ms first (+ ${out.vocabulary_ms} ms giving the vocabulary), ` +
      `${out.cached_compile_ms} ms cached`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
