// The chat page's load through its own controls, shared by the chat-page tests.
import assert from 'node:assert/strict';
import { TIMEOUTS } from './timeouts.mjs';

/** Open the chat page at ``url``, pick ``bundle`` and ``ep`` and press Load; resolves once the
 * page is ready (fails on a load error). */
export async function loadOnChatPage(page, url, bundle, ep = 'wasm') {
  await page.goto(url);
  await page.getByTestId('load-button').waitFor({ timeout: TIMEOUTS.page });
  await page.waitForFunction(() => document.querySelector('[data-testid=bundle-select] option'), null, { timeout: TIMEOUTS.page });
  await page.getByTestId('bundle-select').selectOption(bundle);
  await page.getByTestId('ep-select').selectOption(ep);
  await page.getByTestId('load-button').click();
  await page.waitForFunction(
    () => ['ready', 'idle'].includes(document.querySelector('[data-testid=app]').dataset.status) && window.__onnxpipe.state.status !== 'loading',
    null, { timeout: TIMEOUTS.load, polling: 100 });
  const loadError = await page.evaluate(() => window.__onnxpipe.state.lastError);
  assert.equal(loadError, null, `load failed: ${JSON.stringify(loadError)}`);
  assert.equal(await page.getByTestId('app').getAttribute('data-status'), 'ready');
}
