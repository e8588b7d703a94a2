// transformers.js folders (the tjs_* fixtures: config.json + onnx/model*.onnx, no pipeline.json)
// through the REAL runtime worker in WASM: the fp16 file of each one (float16 KV cache and logits)
// against onnxruntime run natively on that same file (expected.json `variants`, computed when the
// fixture was built), under the margin rule; and what the loaded event reports about dtypes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, copyBundle, fixtureNames, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { assertDecisive, assertGreedyAgrees } from './lib/agreement.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

// Logit tolerance between onnxruntime-web's WASM fp16 kernels and native onnxruntime's on the
// same fp16 file: a few fp16 ulps at logits of magnitude ~10-30 (one ulp there is 0.008-0.016).
const FP16_WASM_VS_NATIVE = 0.05;

const BUNDLES = path.join(ROOT, 'build', 'e2e', `tjs-${process.pid}`);
// tjs_lfm2 and tjs_qwen35 (hybrid decoders) run natively only: fixtures.test.mjs's genai_lfm2 is the
// hybrid state's browser case
const names = fixtureNames().filter((n) => n.startsWith('tjs_') && !['tjs_lfm2', 'tjs_qwen35'].includes(n) && fs.existsSync(path.join(FIXTURE_CACHE, n, 'expected.json')));
const expected = Object.fromEntries(names.map((n) => [n, JSON.parse(fs.readFileSync(path.join(FIXTURE_CACHE, n, 'expected.json'), 'utf8'))]));

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

describe('WASM: transformers.js folders load unchanged', { timeout: TIMEOUTS.file }, () => {
  let browser, context, offsite, page;
  before(async () => {
    if (names.length === 0) return;
    ({ browser, context, offsite } = await launchBrowser());
    page = await openRuntimePage(context, server.url);
  });
  after(async () => {
    await browser?.close();
  });

  test('fixtures exist', (t) => {
    if (names.length === 0) t.skip('no tjs_* fixtures built: python -m tests.fixtures.tiny_models tjs_llama ...');
  });

  for (const name of names) {
    test(`${name}: fp16 equals native onnxruntime on the same file`, async () => {
      const e = expected[name];
      const ref = e.variants.fp16;
      const loaded = await loadBundle(page, `${server.url}fixtures/${name}/`, { ep: 'wasm', dtype: 'fp16' });
      assert.equal(loaded.info.dtype, 'fp16');
      assert.deepEqual(loaded.info.dtypes, Object.keys(e.variants));
      for (const s of Object.values(loaded.info.sessions)) {
        assert.match(s.provider, /wasm/i);
        assert.equal(s.file, ref.file);
      }
      const { result } = await generate(page, requestFor(e));
      assert.equal(result.tokens.length, ref.greedy_tokens.length);
      const agreed = assertGreedyAgrees(result.tokens, ref.greedy_tokens, ref.margins, FP16_WASM_VS_NATIVE, `${name} fp16`);
      console.log(`# ${name} fp16: ${agreed.agreed}/${ref.greedy_tokens.length} tokens equal native` +
        (agreed.split === null ? '' : ` (split at a near tie, margin ${agreed.margin})`) +
        `; decode ${result.decode_tokens_per_s.toFixed(1)} tokens/s`);
    });
  }

  test('no dtype: WASM opens its default (fp16); fp32 asked gives the fp32 greedy tokens', async (t) => {
    const name = names.find((n) => n.includes('merged')) ?? names[0];
    if (!name) return t.skip('no fixtures');
    const e = expected[name];
    assertDecisive(e, name);
    const byDefault = await loadBundle(page, `${server.url}fixtures/${name}/`, { ep: 'wasm' });
    assert.equal(byDefault.info.dtype, 'fp16');
    for (const s of Object.values(byDefault.info.sessions)) assert.equal(s.file, e.variants.fp16.file);
    const loaded = await loadBundle(page, `${server.url}fixtures/${name}/`, { ep: 'wasm', dtype: 'fp32' });
    assert.equal(loaded.info.dtype, 'fp32');
    const { result } = await generate(page, requestFor(e));
    assert.deepEqual(result.tokens, e.greedy_tokens, `${name}: fp32 in the browser differs from expected.json`);
  });

  test('a dtype the folder lacks is a bundle error listing what it has', async (t) => {
    if (names.length === 0) return t.skip('no fixtures');
    const name = names[0];
    await assert.rejects(loadBundle(page, `${server.url}fixtures/${name}/`, { ep: 'wasm', dtype: 'bnb4' }), (err) => {
      assert.equal(err.kind, 'bundle');
      assert.match(err.detail, /dtype "bnb4" is not in this folder/);
      assert.match(err.detail, new RegExp(`it has ${Object.keys(expected[name].variants).join(', ')}`));
      return true;
    });
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  });
});
