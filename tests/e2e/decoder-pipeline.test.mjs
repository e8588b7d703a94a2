// onnxruntime-genai's decoder-pipeline type through the REAL runtime worker in WASM: the
// genai_pipeline fixture (the builder's tiny llama cut into stages, with a prompt-only and a
// token-only lm head that differ: tests/fixtures/genai_stages.py) loaded from its genai_config.json
// unchanged; greedy tokens equal onnxruntime-genai's (expected.json, every step decisive).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, copyBundle, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { assertDecisive } from './lib/agreement.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const NAME = 'genai_pipeline';
const SOURCE = path.join(FIXTURE_CACHE, NAME);
const BUNDLES = path.join(ROOT, 'build', 'e2e', `decoder-pipeline-${process.pid}`);
const built = fs.existsSync(path.join(SOURCE, 'expected.json'));

let server;
before(async () => {
  if (!built) return;
  copyBundle(SOURCE, path.join(BUNDLES, NAME));
  server = await startServer({ root: siteDir(), mounts: { '/fixtures/': BUNDLES } });
});
after(async () => {
  await server?.stop();
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

describe('WASM: an onnxruntime-genai decoder-pipeline bundle', { timeout: TIMEOUTS.file }, () => {
  test('stages with run_on_prompt / run_on_token_gen give onnxruntime-genai\'s tokens', async (t) => {
    if (!built) return t.skip(`no ${NAME} fixture: run make fixtures`);
    const e = JSON.parse(fs.readFileSync(path.join(SOURCE, 'expected.json'), 'utf8'));
    assertDecisive(e, NAME);
    const { browser, context, offsite } = await launchBrowser();
    try {
      const page = await openRuntimePage(context, server.url);
      const loaded = await loadBundle(page, `${server.url}fixtures/${NAME}/`, { ep: 'wasm' });
      assert.deepEqual(Object.keys(loaded.info.sessions).sort(),
        ['embeddings', 'layer_0', 'layer_1', 'lm_head', 'lm_head_token']);
      const { result } = await generate(page, {
        input_ids: e.input_ids,
        options: { do_sample: false, max_new_tokens: e.max_new_tokens, ignore_eos: true },
      });
      assert.deepEqual(result.tokens, e.greedy_tokens, 'browser tokens differ from onnxruntime-genai\'s');
      assert.equal(result.finish_reason, 'length');
      assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
      console.log(`# ${NAME}: ${result.tokens.length} tokens equal onnxruntime-genai's`);
    } finally {
      await browser.close();
    }
  });
});
