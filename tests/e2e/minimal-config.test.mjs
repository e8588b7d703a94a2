// The seed's seven-line pipeline.json (section 4.1) beside an onnxruntime-genai builder's
// model.onnx, in the REAL runtime worker on WASM: no kv_cache.head_size, although the builder
// leaves the KV inputs' last dim symbolic. Python reads the graph through range reads of the
// bytes the worker holds (onnxpipe_js.readRange) and finds it; the greedy tokens equal
// expected.json (every step decisive, so the margin rule of lib/agreement.mjs asks for all).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, ensureManifest, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { assertDecisive } from './lib/agreement.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLES = path.join(ROOT, 'build', 'e2e', `minimal-${process.pid}`);
const FILES = ['model.onnx', 'model.onnx.data', 'tokenizer.json', 'tokenizer_config.json'];
const names = ['genai_llama', 'genai_qwen2', 'genai_qwen3'].filter((n) => FILES.every((f) => fs.existsSync(path.join(FIXTURE_CACHE, n, f))));
const expected = Object.fromEntries(names.map((n) => [n, JSON.parse(fs.readFileSync(path.join(FIXTURE_CACHE, n, 'expected.json'), 'utf8'))]));

/** Section 4.1 of the seed as written, with this model's eos. */
const seedConfig = (eos) => ({
  version: 2,
  pipeline: { extends: 'autoregressive-decoder', sessions: { decoder: { file: 'model.onnx' } } },
  tokens: { eos: [eos], pad: 0 },
  generation: { max_length: 4096, sampling: { temperature: 0.7 } },
  metadata: { model_type: 'qwen2', source: 'mobius' },
});

let server;
before(async () => {
  if (names.length === 0) return;
  for (const n of names) {
    const dir = path.join(BUNDLES, n);
    fs.mkdirSync(dir, { recursive: true });
    for (const f of FILES) fs.copyFileSync(path.join(FIXTURE_CACHE, n, f), path.join(dir, f));
    fs.writeFileSync(path.join(dir, 'pipeline.json'), JSON.stringify(seedConfig(expected[n].eos_token_id), null, 2));
    ensureManifest(dir);
  }
  server = await startServer({ root: siteDir(), mounts: { '/minimal/': BUNDLES } });
});
after(async () => {
  await server?.stop();
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

describe('WASM: the seven-line pipeline.json on onnxruntime-genai builds', { timeout: TIMEOUTS.file }, () => {
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
    if (names.length === 0) t.skip('no genai fixtures built: run make fixtures');
  });

  for (const name of names) {
    test(name, async () => {
      const e = expected[name];
      assertDecisive(e, name);
      const loaded = await loadBundle(page, `${server.url}minimal/${name}/`, { ep: 'wasm' });
      assert.match(loaded.info.sessions.decoder.provider, /wasm/i);
      const { result } = await generate(page, {
        input_ids: e.input_ids,
        options: { do_sample: false, max_new_tokens: e.max_new_tokens, ignore_eos: true },
      });
      assert.deepEqual(result.tokens, e.greedy_tokens, `${name}: browser tokens differ from expected.json`);
      assert.equal(result.finish_reason, 'length');
      console.log(`# ${name} (seven-line pipeline.json): ${result.tokens.length}/${e.greedy_tokens.length} tokens equal`);
    });
  }

  test('nothing left 127.0.0.1', (t) => {
    if (names.length === 0) return t.skip('no fixtures');
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  });
});
