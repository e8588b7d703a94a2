// The chat page end to end with the demo model: load smollm2-135m-instruct through the UI,
// type a question, watch the reply stream into the assistant bubble, and check its tokens
// against the native CPython run of the same file (`python -m tests.agreement greedy --chat --variant`),
// under the margin rule (tests/e2e/lib/agreement.mjs).
// On the way, the page's states must tell the truth: the empty conversation's line follows the
// load, the composer waits while loading, the runtime's progress row reaches "ready" and files
// do not sit at "checking" while the load goes on; the time-to-first-token figures wait behind
// a closed disclosure.
// A screenshot of the page after the reply is saved to build/e2e/artifacts/chat.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { assertGreedyAgrees, nativeGreedy, WASM_VS_NATIVE } from './lib/agreement.mjs';
import { loadOnChatPage } from './lib/chat-page.mjs';
import { recordStates, recordedStates } from './lib/page-states.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = 'smollm2-135m-instruct';
const BUNDLE_DIR = path.join(ROOT, 'public', 'models', BUNDLE);
const QUESTION = 'What is the capital of France?';
const MAX_NEW_TOKENS = 24;
const ARTIFACTS = path.join(ROOT, 'build', 'e2e', 'artifacts');
const missing = ['model.onnx', 'manifest.json', 'pipeline.json'].filter((f) => !fs.existsSync(path.join(BUNDLE_DIR, f)));

let server, browser, context, offsite, logs;
before(async () => {
  if (missing.length) return;
  server = await startServer({ root: siteDir() });
  ({ browser, context, offsite, logs } = await launchBrowser({ contextOptions: { viewport: { width: 1280, height: 900 } } }));
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

/** The file pipeline.json gives a provider (file_for: the provider's, else default, else cpu). */
function fileFor(provider) {
  const spec = JSON.parse(fs.readFileSync(path.join(BUNDLE_DIR, 'pipeline.json'), 'utf8'));
  const file = spec.pipeline.sessions.decoder.file;
  return typeof file === 'string' ? file : file[provider] ?? file.default ?? file.cpu;
}

test(`chat page: ${BUNDLE} answers "${QUESTION}" like native (token for token up to a near tie)`, { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`public/models/${BUNDLE}/ lacks ${missing.join(', ')}: run make models`);
  const page = await context.newPage();
  try {
    await recordStates(page, {
      status: ['[data-testid=app]', 'data-status'],
      empty: ['[data-testid=messages-empty]', 'text'],
      promptDisabled: ['[data-testid=prompt]', '?disabled'],
      sendDisabled: ['[data-testid=send-button]', '?disabled'],
      rows: ['[data-testid=progress-file]', 'data-file|data-phase', true],
    });
    await loadOnChatPage(page, server.url, BUNDLE, 'wasm');
    await assertLoadStates(page);
    const info = await page.evaluate(() => window.__onnxpipe.state.loaded);
    const decoder = info.sessions.decoder;
    assert.match(decoder.provider, /wasm/i);
    assert.equal(decoder.file, fileFor('wasm'), 'the browser opened the file pipeline.json names for wasm');
    await expectStatus(page, 'load-status', /Loaded/);

    // greedy (the default) with a short budget; then record every text the assistant bubble shows
    assert.equal(await page.getByTestId('mode-greedy').isChecked(), true);
    await page.getByTestId('max-new-tokens').fill(String(MAX_NEW_TOKENS));
    await page.evaluate(() => {
      window.__seen = [];
      const root = document.querySelector('[data-testid=messages]');
      const record = () => {
        const bubble = root.querySelector('[data-testid=message][data-role=assistant]:last-of-type');
        if (!bubble) return;
        const text = bubble.querySelector('.msg-body')?.textContent ?? '';
        const streaming = bubble.classList.contains('streaming');
        const last = window.__seen.at(-1);
        if (!last || last.text !== text || last.streaming !== streaming) window.__seen.push({ text, streaming });
      };
      new MutationObserver(record).observe(root, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await page.getByTestId('prompt').fill(QUESTION);
    await page.getByTestId('prompt').press('Enter');
    await page.waitForFunction(() => window.__onnxpipe.state.status === 'generating' || window.__onnxpipe.state.lastResult, null, { timeout: TIMEOUTS.page });
    await page.waitForFunction(() => window.__onnxpipe.state.status === 'ready', null, { timeout: TIMEOUTS.generate, polling: 100 });
    const state = await page.evaluate(() => ({
      result: window.__onnxpipe.state.lastResult, error: window.__onnxpipe.state.lastError, seen: window.__seen,
      messages: window.__onnxpipe.state.messages,
    }));
    assert.equal(state.error, null, `generation failed: ${JSON.stringify(state.error)}`);
    const { result } = state;

    // it streamed: at least two distinct non-empty texts while the bubble was still streaming
    const partial = [...new Set(state.seen.filter((s) => s.streaming && s.text).map((s) => s.text))];
    assert.ok(partial.length >= 2, `the reply did not stream: ${JSON.stringify(state.seen)}`);
    for (const text of partial) assert.ok(result.text.startsWith(text), `streamed "${text}" is not a prefix of "${result.text}"`);
    const bubble = page.locator('[data-testid=message][data-role=assistant]').last();
    assert.equal((await bubble.locator('.msg-body').textContent()), result.text);
    assert.deepEqual(state.messages.at(-1), { role: 'assistant', content: result.text });
    assert.equal(await page.getByTestId('stats').getAttribute('data-tokens'), String(result.tokens.length));
    await assertStartupBreakdown(page);

    // against CPython (onnxruntime) on the same file: token for token up to a near tie, if any
    const native = await nativeGreedy(BUNDLE_DIR, ['--chat', QUESTION, '--max-new-tokens', String(MAX_NEW_TOKENS), '--variant', 'wasm']);
    const agreed = assertGreedyAgrees(result.tokens, native.tokens, native.margins, WASM_VS_NATIVE, `browser "${result.text}" vs native "${native.text}"`);
    if (agreed.split === null) {
      assert.equal(result.tokens.length, native.tokens.length);
      assert.equal(result.text, native.text);
      assert.equal(result.finish_reason, native.finish_reason);
    } else {
      console.log(`# chat: browser and native split at step ${agreed.split}, a near tie (native margin ${agreed.margin})`);
    }

    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const shot = path.join(ARTIFACTS, 'chat.png');
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`# chat: "${result.text}" (${result.tokens.length} tokens, ${result.finish_reason}; ${partial.length} streamed states); ` +
      `${decoder.provider} ${decoder.file}; decode ${result.decode_tokens_per_s.toFixed(1)} tokens/s ` +
      `prefill ${Math.round(result.prefill_ms)} ms; load ${Math.round(info.load_ms)} ms, boot ${Math.round(info.boot_ms)} ms; screenshot ${path.relative(ROOT, shot)}`);
    if (info.warnings.length) console.log(`# load warnings: ${info.warnings.join(' | ')}`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  } catch (error) {
    console.error(logs.slice(-40).join('\n'));
    throw error;
  } finally {
    await page.close();
  }
});

/** What the page showed before and while loading, and once loaded (recordStates snapshots). */
async function assertLoadStates(page) {
  const states = await recordedStates(page);
  const where = (status) => states.filter((s) => s.status === status);
  assert.ok(where('idle').length > 0 && where('loading').length > 0, JSON.stringify(states.map((s) => s.status)));
  assert.ok(where('idle').every((s) => s.empty === 'Load a model, then type a message below.'), 'before Load');
  for (const s of where('loading')) {
    assert.equal(s.empty, 'The model is loading. Once it is ready, type a message below.');
    assert.equal(s.promptDisabled && s.sendDisabled, true, 'the composer waits while loading');
  }
  const ready = states.at(-1);
  assert.equal(ready.status, 'ready');
  assert.equal(ready.empty, 'The model is ready. Type a message below.');
  assert.equal(ready.promptDisabled, false);
  // the runtime's row says it is ready while the load still runs (not only when it ends)
  const whileLoading = where('loading').flatMap((s) => s.rows);
  assert.ok(whileLoading.includes('runtime ready'), `runtime row: ${JSON.stringify([...new Set(whileLoading.filter((r) => r.startsWith('runtime')))])}`);
  // a file being checked is marked checked once the loader moves on, while the load still runs
  const checking = [...new Set(whileLoading.filter((r) => r.endsWith(' verify')).map((r) => r.slice(0, -' verify'.length)))];
  assert.ok(checking.length > 0, 'this fresh profile downloaded and checked files');
  for (const file of checking) assert.ok(whileLoading.includes(`${file} verified`), `${file} sat at "checking": ${JSON.stringify(whileLoading.filter((r) => r.startsWith(file)))}`);
}

/** The time-to-first-token line (web/src/chat/startup.ts): consecutive parts, each >= 0, summing
 * to no more than the total; the worker's stages (some run at once) each >= 0 and <= the total.
 * Sanity only: timings themselves are never asserted. */
async function assertStartupBreakdown(page) {
  const shown = await page.evaluate(() => {
    const root = document.querySelector('[data-testid=ttft]');
    const read = (sel, key) => [...root.querySelectorAll(sel)].map((e) => [e.dataset[key], Number(e.dataset.ms), e.textContent]);
    return { hidden: root.hidden, total: Number(root.dataset.totalMs), parts: read('[data-testid=ttft-part]', 'part'),
      stages: read('[data-testid=ttft-stage]', 'stage'), text: root.textContent, tag: root.localName, open: root.open };
  });
  assert.equal(shown.hidden, false, 'the time-to-first-token breakdown is shown after the first reply');
  // only the total shows at first: the figures wait behind a closed disclosure
  assert.deepEqual([shown.tag, shown.open], ['details', false]);
  assert.match(await page.getByTestId('ttft-summary').textContent(), /^First token [\d.]+ m?s after opening the page$/);
  assert.equal(await page.locator('[data-testid=ttft-part]').first().isVisible(), false);
  await page.getByTestId('ttft-summary').click();
  assert.equal(await page.locator('[data-testid=ttft-part]').first().isVisible(), true, 'the figures open with a click');
  assert.ok(shown.total > 0, shown.text);
  assert.deepEqual(shown.parts.map(([name]) => name), ['page', 'runtime', 'files', 'session', 'you', 'prefill', 'first token']);
  for (const [name, ms] of [...shown.parts, ...shown.stages]) {
    assert.ok(Number.isFinite(ms) && ms >= 0, `${name}: ${ms} ms in "${shown.text}"`);
    assert.ok(ms <= shown.total + 1, `${name}: ${ms} ms > total ${shown.total} ms`);
  }
  const sum = shown.parts.reduce((a, [, ms]) => a + ms, 0);
  assert.ok(sum <= shown.total + 1, `parts sum to ${sum} ms > total ${shown.total} ms: "${shown.text}"`);
  for (const stage of ['pyodide', 'onnxruntime', 'import', 'files', 'session']) {
    assert.ok(shown.stages.some(([name]) => name === stage), `stage ${stage} missing: "${shown.text}"`);
  }
}

async function expectStatus(page, testid, pattern) {
  const text = await page.getByTestId(testid).textContent();
  assert.match(text, pattern, `${testid}: ${text}`);
}
