// Prompt lookup (speculative decoding) on the chat page: the "Prompt lookup" box sends
// speculative {method: "prompt_lookup"} with the turn; the worker (Pyodide -> onnxruntime-web)
// verifies drafts several tokens per decoder pass and reports how many it accepted. The reply's
// tokens must be native plain greedy decoding's (`python -m tests.agreement greedy`), token for
// token up to a near tie (tests/e2e/lib/agreement.mjs), and the page shows the acceptance.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { assertGreedyAgrees, nativeGreedy, WASM_VS_NATIVE } from './lib/agreement.mjs';
import { loadOnChatPage } from './lib/chat-page.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = 'smollm2-135m-instruct';
const BUNDLE_DIR = path.join(ROOT, 'public', 'models', BUNDLE);
// a reply that copies its prompt: prompt lookup's best case, so drafts are taken
const QUESTION = 'Repeat this sentence exactly: The quick brown fox jumps over the lazy dog.';
const MAX_NEW_TOKENS = 32;
const missing = ['model.wasm.onnx', 'manifest.json', 'pipeline.json'].filter((f) => !fs.existsSync(path.join(BUNDLE_DIR, f)));

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

test('chat page: prompt lookup gives native greedy tokens in fewer passes and shows the acceptance', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`public/models/${BUNDLE}/ lacks ${missing.join(', ')}: run make models`);
  const page = await context.newPage();
  try {
    await loadOnChatPage(page, server.url, BUNDLE, 'wasm');

    await page.getByTestId('max-new-tokens').fill(String(MAX_NEW_TOKENS));
    await page.getByTestId('prompt-lookup').check();
    await page.getByTestId('prompt').fill(QUESTION);
    await page.getByTestId('prompt').press('Enter');
    await page.waitForFunction(() => window.__onnxpipe.state.lastResult || window.__onnxpipe.state.lastError, null,
      { timeout: TIMEOUTS.generate, polling: 100 });
    const { result, error } = await page.evaluate(() => ({ result: window.__onnxpipe.state.lastResult, error: window.__onnxpipe.state.lastError }));
    assert.equal(error, null, `generation failed: ${JSON.stringify(error)}`);

    const drafts = result.speculative;
    assert.ok(drafts, 'the result carries speculative counts');
    assert.ok(drafts.accepted > 0 && drafts.accepted <= drafts.drafted, JSON.stringify(drafts));
    assert.ok(drafts.passes < result.tokens.length - 1, `fewer passes than tokens: ${JSON.stringify(drafts)}`);
    const stats = page.getByTestId('stats');
    assert.equal(await stats.getAttribute('data-accepted'), String(drafts.accepted));
    assert.match(await stats.textContent(), new RegExp(`drafts accepted ${drafts.accepted}/${drafts.drafted}`));

    const native = await nativeGreedy(BUNDLE_DIR, ['--chat', QUESTION, '--max-new-tokens', String(MAX_NEW_TOKENS), '--variant', 'wasm']);
    const agreed = assertGreedyAgrees(result.tokens, native.tokens, native.margins, WASM_VS_NATIVE,
      `browser with drafts "${result.text}" vs native plain "${native.text}"`);
    if (agreed.split === null) assert.equal(result.text, native.text);
    console.log(`# prompt lookup: "${result.text}"; ${drafts.accepted}/${drafts.drafted} drafts accepted in ` +
      `${drafts.passes} passes; decode ${result.decode_tokens_per_s.toFixed(1)} tokens/s`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  } catch (err) {
    console.error(logs.slice(-40).join('\n'));
    throw err;
  } finally {
    await page.close();
  }
});
