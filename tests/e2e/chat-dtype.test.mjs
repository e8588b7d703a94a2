// The chat page with a transformers.js folder offering several dtypes (smollm2-135m-instruct-tjs,
// built by `make models`): load it through the UI, check the dtype picker lists what the folder
// offers with the opened one selected, pick fp16 (which reloads), and ask "What is the capital
// of France?" greedily: the reply names Paris, and its tokens follow the native CPython run of
// the same fp16 file (`python -m tests.agreement greedy --dtype fp16`) under the margin rule.
// A screenshot of the loader panel (dtype picker) is saved to build/e2e/artifacts/chat-dtype.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { assertGreedyAgrees, nativeGreedy } from './lib/agreement.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = 'smollm2-135m-instruct-tjs';
const BUNDLE_DIR = path.join(ROOT, 'public', 'models', BUNDLE);
const DTYPE = 'fp16';
const QUESTION = 'What is the capital of France?';
const MAX_NEW_TOKENS = 24;
const ARTIFACTS = path.join(ROOT, 'build', 'e2e', 'artifacts');
/** Logit tolerance between onnxruntime-web's WASM kernels and native onnxruntime's on one fp16
 * file: logits are fp16 (one ulp is 1/64 near 20) and fp16 ops may accumulate in another order. */
const FP16_WASM_VS_NATIVE = 0.1;
// transformers.js's file suffix of each dtype (onnxpipe/config/transformers_js.py DTYPE_SUFFIX)
const SUFFIX = { fp32: '', fp16: '_fp16', q8: '_quantized', int8: '_int8', uint8: '_uint8', q4: '_q4', q4f16: '_q4f16', bnb4: '_bnb4' };
const missing = ['.built', 'manifest.json', 'config.json'].filter((f) => !fs.existsSync(path.join(BUNDLE_DIR, f)));

/** The dtypes the folder has an onnx/model<suffix>.onnx for, read from disk. */
function dtypesOnDisk() {
  const files = new Set(fs.readdirSync(path.join(BUNDLE_DIR, 'onnx')));
  return Object.entries(SUFFIX).filter(([, s]) => files.has(`model${s}.onnx`)).map(([d]) => d);
}

let server, browser, context, offsite, logs;
before(async () => {
  if (missing.length) return;
  server = await startServer({ root: siteDir() });
  ({ browser, context, offsite, logs } = await launchBrowser());
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

/** Wait until a load (of ``dtype``, when given) has settled; resolves to {loaded, error}. */
async function settled(page, dtype = null) {
  await page.waitForFunction(
    (want) => {
      const s = window.__onnxpipe.state;
      return s.lastError !== null || (s.status === 'ready' && s.loaded !== null && (want === null || s.loaded.dtype === want));
    }, dtype, { timeout: TIMEOUTS.load, polling: 100 });
  return page.evaluate(() => ({ loaded: window.__onnxpipe.state.loaded, error: window.__onnxpipe.state.lastError }));
}

test(`chat page: ${BUNDLE} offers its dtypes, reloads as ${DTYPE} and answers "${QUESTION}"`, { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`public/models/${BUNDLE}/ lacks ${missing.join(', ')}: run make models`);
  const page = await context.newPage();
  try {
    await page.goto(server.url);
    await page.waitForFunction(() => window.__onnxpipe?.controller
      && document.querySelector(`[data-testid=bundle-select] option[value="smollm2-135m-instruct-tjs"]`),
    null, { timeout: TIMEOUTS.page });
    const picker = page.getByTestId('dtype-select');
    assert.equal(await picker.isVisible(), false, 'no dtype picker before a folder with dtypes is loaded');

    // first load: no dtype asked, the folder's default for WASM
    await page.getByTestId('bundle-select').selectOption(BUNDLE);
    await page.getByTestId('ep-select').selectOption('wasm');
    await page.getByTestId('load-button').click();
    const first = await settled(page);
    assert.equal(first.error, null, `load failed: ${JSON.stringify(first.error)}`);
    const offered = dtypesOnDisk();
    assert.ok(offered.length >= 2 && offered.includes(DTYPE), `the folder offers ${offered.join(', ')}`);
    assert.deepEqual(first.loaded.dtypes, offered, 'LoadedInfo.dtypes: what the folder has');
    assert.ok(offered.includes(first.loaded.dtype), `opened dtype ${first.loaded.dtype}`);
    assert.equal(first.loaded.sessions.decoder.file, `onnx/model${SUFFIX[first.loaded.dtype]}.onnx`);
    assert.equal(await picker.isVisible(), true, 'the dtype picker is shown for a folder with several dtypes');
    const options = await picker.locator('option').evaluateAll((els) => els.map((e) => e.value));
    assert.deepEqual(options, offered, 'the picker lists the offered dtypes');
    assert.equal(await picker.inputValue(), first.loaded.dtype, 'the picker shows the opened dtype');

    // picking another dtype reloads with it
    const other = first.loaded.dtype === DTYPE ? offered.find((d) => d !== DTYPE) : DTYPE;
    if (other !== DTYPE) {   // the default was fp16 already: go through another dtype and back
      await picker.selectOption(other);
      const mid = await settled(page, other);
      assert.equal(mid.error, null, `reload as ${other} failed: ${JSON.stringify(mid.error)}`);
    }
    await picker.selectOption(DTYPE);
    const { loaded, error } = await settled(page, DTYPE);
    assert.equal(error, null, `reload as ${DTYPE} failed: ${JSON.stringify(error)}`);
    assert.equal(loaded.dtype, DTYPE);
    assert.equal(await page.evaluate(() => window.__onnxpipe.state.dtype), DTYPE, 'the load asked for it');
    assert.equal(loaded.sessions.decoder.file, `onnx/model${SUFFIX[DTYPE]}.onnx`);
    assert.match(loaded.sessions.decoder.provider, /wasm/i);
    assert.match(await page.getByTestId('load-status').textContent(), new RegExp(`\\(${DTYPE}\\)`));
    assert.equal(await picker.inputValue(), DTYPE);

    // greedy (the page's default) answer
    assert.equal(await page.getByTestId('mode-greedy').isChecked(), true);
    await page.getByTestId('max-new-tokens').fill(String(MAX_NEW_TOKENS));
    await page.getByTestId('prompt').fill(QUESTION);
    await page.getByTestId('prompt').press('Enter');
    await page.waitForFunction(() => window.__onnxpipe.state.status === 'generating' || window.__onnxpipe.state.lastResult, null, { timeout: TIMEOUTS.page });
    await page.waitForFunction(() => window.__onnxpipe.state.status === 'ready', null, { timeout: TIMEOUTS.generate, polling: 100 });
    const state = await page.evaluate(() => ({ result: window.__onnxpipe.state.lastResult, error: window.__onnxpipe.state.lastError }));
    assert.equal(state.error, null, `generation failed: ${JSON.stringify(state.error)}`);
    const { result } = state;
    assert.match(result.text, /Paris/, `the ${DTYPE} reply: "${result.text}"`);

    const native = await nativeGreedy(BUNDLE_DIR, ['--chat', QUESTION, '--max-new-tokens', String(MAX_NEW_TOKENS), '--dtype', DTYPE]);
    const agreed = assertGreedyAgrees(result.tokens, native.tokens, native.margins, FP16_WASM_VS_NATIVE,
      `browser "${result.text}" vs native "${native.text}"`);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.locator('section.loader').screenshot({ path: path.join(ARTIFACTS, 'chat-dtype.png') });
    console.log(`# chat-dtype: ${BUNDLE} offers ${offered.join(', ')}; default on WASM ${first.loaded.dtype}; ` +
      `${DTYPE}: "${result.text}" (${result.tokens.length} tokens, ${agreed.split === null ? 'same tokens as native' : `split from native at step ${agreed.split}, margin ${agreed.margin}`}); ` +
      `decode ${result.decode_tokens_per_s.toFixed(1)} tokens/s`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  } catch (error) {
    console.error(logs.slice(-40).join('\n'));
    throw error;
  } finally {
    await page.close();
  }
});
