// A second visit loads the model from this device's storage (OPFS, workers/storage/): one
// persistent Chromium profile, first visit fetches the bundle, second visit has every /models/
// request aborted and must still load and generate the same tokens (stored manifest + files,
// progress phase 'cache' = read from storage). tests/e2e/storage.test.mjs covers fresh profiles.
// A third visit with the server stopped works too (HTTP cache for the site, see below).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchPersistent, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, copyBundle, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const NAME = 'genai_llama_noshare';
const SOURCE = path.join(FIXTURE_CACHE, NAME);
const BUNDLES = path.join(ROOT, 'build', 'e2e', `offline-${process.pid}`);
const have = fs.existsSync(path.join(SOURCE, 'expected.json'));

let server, profile, bundleUrl, expected, first;
before(async () => {
  if (!have) return;
  copyBundle(SOURCE, path.join(BUNDLES, NAME));
  expected = JSON.parse(fs.readFileSync(path.join(SOURCE, 'expected.json'), 'utf8'));
  server = await startServer({ root: siteDir(), mounts: { [`/models/${NAME}/`]: path.join(BUNDLES, NAME) } });
  bundleUrl = `${server.url}models/${NAME}/`;
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-e2e-profile-'));
});
after(async () => {
  await server?.stop();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

const request = () => ({ input_ids: expected.input_ids, options: { do_sample: false, max_new_tokens: 16, ignore_eos: true } });
const manifestFiles = () => JSON.parse(fs.readFileSync(path.join(BUNDLES, NAME, 'manifest.json'), 'utf8')).files.map((f) => f.path);

/** One visit in the persistent profile; `block(url)` true aborts that request (recorded); `served`:
 * the requests the network answered. */
async function visit(block = () => false) {
  const { context, offsite, logs } = await launchPersistent(profile);
  const blocked = [];
  const served = [];
  try {
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (block(url)) {
        blocked.push(url);
        return route.abort('internetdisconnected');
      }
      return route.fallback();
    });
    // answered by the network, not by the service worker's caches (models/index.json is kept there)
    context.on('requestfinished', async (req) => {
      if (!(await req.response())?.fromServiceWorker()) served.push(req.url());
    });
    const page = await openRuntimePage(context, server.url);
    const loaded = await loadBundle(page, bundleUrl, { ep: 'wasm' });
    const run = await generate(page, request());
    return { loaded, run, blocked, served, offsite };
  } catch (error) {
    console.error(logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await context.close();
  }
}

test('first visit fetches the bundle and stores it', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`tests/fixtures/.cache/${NAME} missing: run make fixtures`);
  first = await visit();
  const fetched = new Set(first.loaded.progress.filter((p) => p.phase === 'fetch').map((p) => p.file));
  assert.deepEqual([...fetched].sort(), manifestFiles().sort(), 'every manifest file downloaded');
  assert.deepEqual(first.loaded.info.warnings, [], 'no storage (quota) warnings');
  assert.deepEqual(first.run.result.tokens, expected.greedy_tokens.slice(0, 16));
  assert.deepEqual(first.offsite, []);
});

test('second visit with /models/ unreachable loads from device storage', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have || !first) return t.skip('needs the first visit');
  const second = await visit((url) => new URL(url).pathname.startsWith('/models/'));
  const phases = second.loaded.progress.filter((p) => p.file && p.phase !== 'session' && p.phase !== 'boot');
  assert.ok(!phases.some((p) => p.phase === 'fetch'), `files fetched over the network: ${JSON.stringify(phases.filter((p) => p.phase === 'fetch'))}`);
  assert.deepEqual([...new Set(phases.filter((p) => p.phase === 'cache').map((p) => p.file))].sort(), manifestFiles().sort(),
    'every manifest file came from storage');
  const modelRequests = second.served.filter((u) => new URL(u).pathname.startsWith('/models/'));
  assert.deepEqual(modelRequests, [], 'no /models/ request was answered by the network');
  // manifest.json is asked for first (no-cache, to see updates) and falls back to the stored copy
  const bundleTried = second.blocked.filter((u) => new URL(u).pathname.startsWith(`/models/${NAME}/`));
  assert.ok(bundleTried.every((u) => new URL(u).pathname === `/models/${NAME}/manifest.json`),
    `only manifest.json may be tried: ${second.blocked.join(', ')}`);
  assert.deepEqual(second.run.result.tokens, first.run.result.tokens, 'same tokens from the stored bundle');
  assert.deepEqual(second.offsite, []);
  console.log(`# offline: ${manifestFiles().length} files from OPFS; tried on the network: ${bundleTried.map((u) => new URL(u).pathname).join(', ') || 'nothing'}`);
});

// With the server stopped: the model comes from OPFS; the page, /assets/ and /pyodide/
// come from Chromium's HTTP cache, which answers with its stored copy when revalidation cannot
// reach the server (measured here; a service worker would make this deliberate, not a browser habit).
test('third visit with the server stopped works from the caches', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have || !first) return t.skip('needs the first visit');
  await server.stop(); // nothing listens on the port any more: the network is really gone
  const third = await visit(() => false);
  console.log(`# third visit: ${third.blocked.length} requests aborted; answered: ${third.served.length}: ${third.served.slice(0, 5).join(', ')}`);
  assert.deepEqual(third.run.result.tokens, first.run.result.tokens);
});
