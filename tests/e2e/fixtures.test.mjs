// Tiny fixture bundles through the REAL runtime worker (chat page -> RuntimeClient -> worker ->
// Pyodide -> onnxruntime-web): greedy tokens identical to the native oracle (expected.json; every
// step decisive, so the margin rule of lib/agreement.mjs asks for every token),
// cancel mid-generation then generate again, and the smallest vocabularies on WebGPU
// (SwiftShader in headless Chromium; skipped when it gives no adapter).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, copyBundle, fixtureNames, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { assertDecisive } from './lib/agreement.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLES = path.join(ROOT, 'build', 'e2e', `bundles-${process.pid}`);
const names = fixtureNames().filter((n) => fs.existsSync(path.join(FIXTURE_CACHE, n, 'expected.json')));
const expected = Object.fromEntries(names.map((n) => [n, JSON.parse(fs.readFileSync(path.join(FIXTURE_CACHE, n, 'expected.json'), 'utf8'))]));

/** Vocabulary size of each fixture: the last dim of its first scoring output (onnx, natively). */
function vocabSizes() {
  const script = `
import glob, json, os, sys, onnx
out = {}
for name in sys.argv[2:]:
    sizes = []
    for f in glob.glob(os.path.join(sys.argv[1], name, '*.onnx')) + glob.glob(os.path.join(sys.argv[1], name, 'onnx', '*.onnx')):
        g = onnx.load(f, load_external_data=False).graph
        sizes += [o.type.tensor_type.shape.dim[-1].dim_value for o in g.output[:1]]
    out[name] = max([s for s in sizes if s] or [0])
print(json.dumps(out))`;
  return JSON.parse(execFileSync(python(), ['-c', script, FIXTURE_CACHE, ...names], { encoding: 'utf8' }));
}

/** Load options that open the file expected.json's greedy tokens came from: a transformers.js
 * folder's fp32 decoder (its own default differs per provider), else the bundle as it is. */
const fileOf = (e, ep) => (e.variants ? { ep, dtype: 'fp32' } : { ep });

/** The generate request that reproduces expected.json: its prompt ids, greedy, past eos. */
const requestFor = (e) => ({
  input_ids: e.input_ids,
  options: { do_sample: false, max_new_tokens: e.max_new_tokens, ignore_eos: true },
});

let server;
before(async () => {
  if (names.length === 0) return;
  fs.mkdirSync(BUNDLES, { recursive: true });
  for (const n of names) copyBundle(path.join(FIXTURE_CACHE, n), path.join(BUNDLES, n));
  server = await startServer({ root: siteDir(), mounts: { '/fixtures/': BUNDLES } });
});
after(async () => {
  await server?.stop();
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

describe('WASM: every tiny fixture equals its native greedy tokens', { timeout: TIMEOUTS.file }, () => {
  let browser, context, offsite, logs, page;
  before(async () => {
    if (names.length === 0) return;
    ({ browser, context, offsite, logs } = await launchBrowser());
    page = await openRuntimePage(context, server.url);
  });
  after(async () => {
    await browser?.close();
  });

  test('fixtures exist', (t) => {
    if (names.length === 0) t.skip('no tiny fixtures built: run make fixtures');
  });

  // genai_qwen35, tjs_lfm2 and tjs_qwen35 run natively only (one browser case for the hybrid decoders:
  // genai_lfm2 covers the conv state in the worker; the others take the same component)
  for (const name of names.filter((n) => !['genai_qwen35', 'tjs_lfm2', 'tjs_qwen35'].includes(n))) {
    test(name, async () => {
      const e = expected[name];
      assertDecisive(e, name);
      const loaded = await loadBundle(page, `${server.url}fixtures/${name}/`, fileOf(e, 'wasm'));
      for (const [session, s] of Object.entries(loaded.info.sessions)) {
        assert.match(s.provider, /wasm/i, `${session} runs on ${s.provider}`);
      }
      const { result, events } = await generate(page, requestFor(e));
      assert.equal(result.tokens.length, e.greedy_tokens.length);
      assert.deepEqual(result.tokens, e.greedy_tokens, `${name}: browser tokens differ from expected.json`);
      assert.equal(result.finish_reason, 'length');
      assert.deepEqual(events.flatMap((ev) => ev.tokenIds), result.tokens, 'streamed token ids = the result');
      console.log(`# ${name}: ${result.tokens.length}/${e.greedy_tokens.length} tokens equal; ` +
        `decode ${result.decode_tokens_per_s.toFixed(1)} tokens/s, load ${Math.round(loaded.wallMs)} ms`);
    });
  }

  test('cancel mid-generation, then generate again', async (t) => {
    if (names.length === 0) return t.skip('no fixtures');
    const name = names.includes('genai_llama_noshare') ? 'genai_llama_noshare' : names[0];
    const e = expected[name];
    await loadBundle(page, `${server.url}fixtures/${name}/`, fileOf(e, 'wasm'));
    const cancelled = await generate(page, requestFor(e), { cancelAfter: 2 });
    assert.equal(cancelled.result.finish_reason, 'cancelled');
    assert.ok(cancelled.result.tokens.length >= 2, `at least the 2 streamed tokens: ${cancelled.result.tokens.length}`);
    assert.ok(cancelled.result.tokens.length < e.greedy_tokens.length,
      `cancelled after 2 events, yet ${cancelled.result.tokens.length} tokens`);
    assert.deepEqual(cancelled.result.tokens, e.greedy_tokens.slice(0, cancelled.result.tokens.length), 'a prefix of the greedy run');
    const again = await generate(page, requestFor(e));
    assert.equal(again.result.finish_reason, 'length');
    assert.deepEqual(again.result.tokens, e.greedy_tokens, 'the run after a cancel is whole and unchanged');
    console.log(`# cancel: stopped after ${cancelled.result.tokens.length} tokens; the next run gave all ${again.result.tokens.length}`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  });
});

describe('WebGPU (SwiftShader): smallest vocabularies', { timeout: TIMEOUTS.file }, () => {
  let browser, context, offsite, page, adapter, picks = [];
  before(async () => {
    if (names.length === 0) return;
    const vocab = vocabSizes();
    const bySize = [...names].sort((a, b) => vocab[a] - vocab[b]);
    // the smallest vocabulary of all, and the smallest onnxruntime-genai decoder (GQA on WebGPU).
    // Not torch_llama: bare onnxruntime-web 1.30 on SwiftShader already gets its prefill logits
    // wrong (argmax 354, WASM and native 361), with no onnxpipe code involved.
    // Plus the hybrid decoder (LFM2's conv state on WebGPU: onnxruntime-web has its ops there).
    picks = [...new Set([bySize[0], bySize.find((n) => n.startsWith('genai_')),
      names.find((n) => n === 'genai_lfm2')].filter(Boolean))];
    ({ browser, context, offsite } = await launchBrowser({ args: ['--enable-unsafe-webgpu'] }));
    page = await openRuntimePage(context, server.url);
    adapter = await page.evaluate(async () => {
      const a = await navigator.gpu?.requestAdapter().catch(() => null);
      return a ? { fallback: a.isFallbackAdapter ?? a.info?.isFallbackAdapter ?? null, vendor: a.info?.vendor ?? '' } : null;
    });
  });
  after(async () => {
    await browser?.close();
  });

  const skipWhy = () => (names.length === 0 ? 'no fixtures' : !adapter ? 'no WebGPU adapter in this Chromium (even with --enable-unsafe-webgpu)' : null);

  // onnxruntime-web 1.30's WebGPU ArgMax keeps the reduce length of the first shape it compiled
  // for (a program cache shared by every session in a worker): after a 97-word vocabulary, a
  // 512-word one got argmax over its first 97 logits only. The client now starts a fresh worker
  // for every load after the first, so a second bundle in the same page is right again: the picks
  // load one after another in one page, the smallest vocabulary first (each pick loaded once).
  test('WebGPU tokens equal the native greedy tokens, one bundle after another in one page (a fresh worker per load)', async (t) => {
    if (skipWhy()) return t.skip(skipWhy());
    for (const [i, name] of picks.entries()) {
      const e = expected[name];
      assertDecisive(e, name);
      const loaded = await loadBundle(page, `${server.url}fixtures/${name}/`, fileOf(e, 'webgpu'));
      for (const [session, s] of Object.entries(loaded.info.sessions)) {
        assert.match(s.provider, /webgpu/i, `${name}: ${session} runs on ${s.provider}, not webgpu`);
      }
      const { result } = await generate(page, requestFor(e));
      const order = i ? ` after ${picks.slice(0, i).join(', ')} in one page` : '';
      assert.deepEqual(result.tokens, e.greedy_tokens, `${name} on WebGPU${order} differs from expected.json`);
      console.log(`# webgpu ${name}${order}: ${result.tokens.length} tokens equal (adapter ${JSON.stringify(adapter)})`);
    }
    if (picks.length < 2) console.log('# webgpu: one pick only, no second bundle in the page');
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  });
});
