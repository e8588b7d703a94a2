// Helpers for the self-healing tests (tests/e2e/self-heal*.test.mjs; docs/browser-runtime.md
// "Self-healing"): record a page's RuntimeClient statuses, wait for a restart, read the runtime
// notice, count the server's GETs of a bundle's files.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { TIMEOUTS } from './timeouts.mjs';

/** Record RuntimeClient.onStatus of ``window[global].client`` in window.__statuses. */
export function recordStatuses(page, global = '__onnxpipe') {
  return page.evaluate((global) => {
    window.__statuses = [];
    window[global].client.onStatus((s) => window.__statuses.push({ state: s.state, reason: s.reason, bundle: s.info?.bundle ?? null, ep: s.ep ?? null }));
  }, global);
}

/** Wait for the n-th status after a 'stopped' one and check it is 'restored' (``logs``: shown
 * when it is not). Resolves to {last, statuses}. */
export async function restored(page, n, logs = []) {
  await page.waitForFunction((n) => window.__statuses.filter((s) => s.state !== 'stopped').length >= n, n, { timeout: TIMEOUTS.load, polling: 100 });
  const statuses = await page.evaluate(() => window.__statuses);
  const last = statuses.filter((s) => s.state !== 'stopped')[n - 1];
  assert.equal(last.state, 'restored', `restart ${n}: ${JSON.stringify(statuses)}\n${logs.slice(-20).join('\n')}`);
  return { last, statuses };
}

/** The page's runtime notice (web/src/runtime-notice.ts) once it shows: {state, text}. */
export async function notice(page) {
  const locator = page.locator('[data-testid=runtime-notice]');
  await locator.waitFor({ state: 'visible' });
  return { state: await locator.getAttribute('data-state'), text: await locator.textContent() };
}

/** GETs the server logged of each file in ``dir``'s manifest, served under ``urlPath`` (manifest.json
 * itself left out: every load asks for it, to see updates). ``server``: startWidgetServer's. */
export function bundleGets(server, urlPath, dir) {
  const files = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8')).files;
  return Object.fromEntries(files.map((f) => [f.path, server.requests(`${urlPath}${f.path}`)]));
}
