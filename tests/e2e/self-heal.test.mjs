// Self-healing (issue 14, docs/browser-runtime.md "Self-healing"): the runtime worker dies (killed
// mid-generation, a wasm trap inside an engine run, hung idle or in the middle of a request, its
// WebGPU device destroyed); the pending
// request fails with a 'stopped' error, the page and the widget say so, a new worker loads the
// same bundle from this device's storage (the server's log shows no model file fetched again) and
// the next generation gives the same tokens. One tiny fixture bundle; one Chromium with WebGPU
// (SwiftShader) enabled; the chat page opened with ?onnxpipe-debug for its test hooks. Also: a
// cancel during a long prefill lands between prefill chunks; a JS RangeError from one oversized
// allocation fails its request only.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser } from './lib/browser.mjs';
import { FIXTURE_CACHE, copyBundle, ensureManifest, generate, loadBundle } from './lib/runtime.mjs';
import { bundleGets, notice, recordStatuses, restored as restoredWith } from './lib/self-heal.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { startWidgetServer, whenReady } from './lib/widget.mjs';

const NAME = 'genai_llama_noshare';
// a request with no word from the worker this long means it hung (RuntimeOptions.busySilenceMs):
// long enough for a loaded CI machine's silent runtime start (8 s was not, once), short for a test
const BUSY_SILENCE_MS = 30000;
const WORK = path.join(ROOT, 'build', 'e2e', `self-heal-${process.pid}`);
const BUNDLE_DIR = path.join(WORK, 'bundles', NAME);
const HOST_DIR = path.join(WORK, 'host');
const have = fs.existsSync(path.join(FIXTURE_CACHE, NAME, 'expected.json'));
const expected = have ? JSON.parse(fs.readFileSync(path.join(FIXTURE_CACHE, NAME, 'expected.json'), 'utf8')) : null;
const request = have ? { input_ids: expected.input_ids, options: { do_sample: false, max_new_tokens: expected.max_new_tokens, ignore_eos: true } } : null;

let server, browser, context, offsite, logs, page;
const bundleUrl = () => `${server.url}fixtures/${NAME}/`;
const modelGets = () => bundleGets(server, `/fixtures/${NAME}/`, BUNDLE_DIR);

/** Run ``request`` in the page; ``hook`` (a RuntimeDebug method name) is called after 2 tokens.
 * Resolves to {tokens, result} or {error: {kind, message}, tokens}. */
const generateBroken = (p, hook) => p.evaluate(async ({ request, hook }) => {
  const client = window.__onnxpipe.client;
  const tokens = [];
  try {
    const result = await client.generate({ ...request, onToken: (_, ids) => {
      tokens.push(...ids);
      if (hook && tokens.length === 2) client.debug[hook]();
    } });
    return { result, tokens };
  } catch (e) {
    return { error: { kind: e.kind, message: e.message }, tokens };
  }
}, { request, hook });

/** Wait for the n-th 'restored' status (RuntimeClient.onStatus, recorded in window.__statuses). */
const restored = (p, n) => restoredWith(p, n, logs);

before(async () => {
  if (!have) return;
  copyBundle(path.join(FIXTURE_CACHE, NAME), BUNDLE_DIR);
  // the widget sends chat messages: a minimal template (the fixtures have none)
  fs.writeFileSync(path.join(BUNDLE_DIR, 'chat_template.jinja'), '{% for m in messages %}{{ m.content }} {% endfor %}');
  ensureManifest(BUNDLE_DIR);
  fs.mkdirSync(HOST_DIR, { recursive: true });
  fs.writeFileSync(path.join(HOST_DIR, 'index.html'), `<!doctype html><meta charset="utf-8"><title>host</title>
<script type="module" src="%ONNXPIPE_ORIGIN%/widget.js"></script>
<onnxpipe-chat id="chat" bundle="%ONNXPIPE_ORIGIN%/fixtures/${NAME}/" max-new-tokens="12"></onnxpipe-chat>`);
  server = await startWidgetServer({ hostDir: HOST_DIR, mounts: { '/fixtures/': path.join(WORK, 'bundles') } });
  ({ browser, context, offsite, logs } = await launchBrowser({ args: ['--enable-unsafe-webgpu'] }));
});
after(async () => {
  await browser?.close();
  await server?.stop();
  fs.rmSync(WORK, { recursive: true, force: true });
});

describe('the chat page heals its runtime worker', { timeout: TIMEOUTS.file }, () => {
  let first;
  before(async () => {
    if (!have) return;
    page = await context.newPage();
    await page.goto(`${server.url}?onnxpipe-debug&onnxpipe-busy-silence-ms=${BUSY_SILENCE_MS}`);
    await page.waitForFunction(() => Boolean(window.__onnxpipe?.client), null, { timeout: TIMEOUTS.page });
    await recordStatuses(page);
    await loadBundle(page, bundleUrl(), { ep: 'wasm' });
    first = (await generate(page, request)).result.tokens;
  });

  test('killed mid-generation: a stopped error, a notice, the bundle back from storage, the same tokens', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture: run make fixtures`);
    assert.deepEqual(first, expected.greedy_tokens, 'the first run equals the native greedy tokens');
    const gets = modelGets();
    assert.ok(Object.values(gets).every((n) => n >= 1), `the first load fetched every file: ${JSON.stringify(gets)}`);
    const killed = await generateBroken(page, 'killWorker');
    assert.equal(killed.error?.kind, 'stopped', `the pending generation was rejected: ${JSON.stringify(killed)}`);
    assert.match(killed.error.message, /^the runtime stopped: the worker ended \(terminated or crashed\); restarting$/);
    assert.ok(killed.tokens.length >= 2 && killed.tokens.length < first.length, `killed after ${killed.tokens.length} tokens`);
    const { last, statuses } = await restored(page, 1);
    assert.equal(statuses[0].state, 'stopped', 'the death was announced before the reload');
    assert.equal(last.bundle, NAME);
    const shown = await notice(page);
    assert.equal(shown.state, 'restored');
    assert.match(shown.text, new RegExp(`${NAME} reloaded from this device`));
    assert.deepEqual(modelGets(), gets, 'no bundle file was fetched again: the reload read this device\'s storage');
    const again = await generate(page, request);
    assert.deepEqual(again.result.tokens, first, 'the run after the restart gives the same tokens');
    console.log(`# killed after ${killed.tokens.length} tokens; notice: "${shown.text}"; file GETs ${JSON.stringify(gets)} before and after`);
  });

  test('a wasm trap inside an engine run: the worker is replaced, the next run is right', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture`);
    await page.evaluate(() => window.__onnxpipe.client.debug.trapNextRun());
    const trapped = await generateBroken(page, null);
    assert.equal(trapped.error?.kind, 'stopped', JSON.stringify(trapped));
    assert.match(trapped.error.message, /the runtime stopped: a WebAssembly trap \(RuntimeError: unreachable\); restarting/);
    assert.deepEqual(trapped.tokens, [], 'the trap hit the first engine run');
    await restored(page, 2);
    const again = await generate(page, request);
    assert.deepEqual(again.result.tokens, first);
  });

  test('a hung worker (its lock still held): the idle heartbeat replaces it', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture`);
    await page.evaluate(() => window.__onnxpipe.client.debug.hangWorker());
    const { last } = await restored(page, 3);
    assert.match(last.reason, /^it did not answer a ping in 1\.25 s$/);
    const again = await generate(page, request);
    assert.deepEqual(again.result.tokens, first);
  });

  test('a hang in the middle of a request: its silence replaces the worker, the next run is right', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture`);
    await page.evaluate(() => window.__onnxpipe.client.debug.hangInNextRun());
    const hung = await generateBroken(page, null);
    assert.equal(hung.error?.kind, 'stopped', JSON.stringify(hung));
    assert.match(hung.error.message, new RegExp(`a request heard nothing from it for ${BUSY_SILENCE_MS / 1000} s`));
    assert.deepEqual(hung.tokens, [], 'the request\'s first engine run hung');
    const { last } = await restored(page, 4);
    assert.match(last.reason, /a request heard nothing from it/);
    const again = await generate(page, request);
    assert.deepEqual(again.result.tokens, first);
  });

  test('one oversized JS allocation fails its request, not the worker', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture`);
    const statuses = await page.evaluate(() => window.__statuses.length);
    await page.evaluate(() => window.__onnxpipe.client.debug.oversizedAllocationInNextRun());
    const failed = await generateBroken(page, null);
    assert.equal(failed.error?.kind, 'engine', JSON.stringify(failed));
    assert.match(failed.error.message, /RangeError/);
    const again = await generate(page, request);
    assert.deepEqual(again.result.tokens, first, 'the same worker answers the next request as before');
    assert.equal(await page.evaluate(() => window.__statuses.length), statuses, 'no restart');
  });

  // py/onnxpipe/loops/autoregressive.py PREFILL_CHUNK (128): a 200-id prompt is fed as 128 + 72
  test('cancel during a long prefill: no token is made, and the next run is whole', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture`);
    const long = { input_ids: Array.from({ length: 200 }, (_, i) => 5 + ((i * 37) % 250)), options: { ...request.options, max_length: 256 } };
    const { result, order } = await page.evaluate(async (req) => {
      const client = window.__onnxpipe.client;
      const order = [];
      const run = client.generate({ ...req, onToken: () => order.push('token') }).then((r) => { order.push('done'); return r; });
      const cancel = client.cancel().then(() => order.push('cancelled'));
      const result = await run;
      await cancel;
      return { result, order };
    }, long);
    assert.equal(result.finish_reason, 'cancelled', JSON.stringify(result));
    assert.deepEqual(result.tokens, [], 'cancelled between prefill chunks: no token');
    assert.ok(!order.includes('token'), `events: ${order}`);
    const again = await generate(page, request);
    assert.deepEqual(again.result.tokens, first, 'the worker answers the next request as before');
  });

  test('WebGPU device destroyed: the bundle falls back to WASM and the next run works', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture`);
    const adapter = await page.evaluate(async () => Boolean(await navigator.gpu?.requestAdapter().catch(() => null)));
    if (!adapter) return t.skip('no WebGPU adapter in this Chromium (even with --enable-unsafe-webgpu)');
    const loaded = await loadBundle(page, bundleUrl(), { ep: 'webgpu' });
    assert.ok(Object.values(loaded.info.sessions).some((s) => /webgpu/i.test(s.provider)), JSON.stringify(loaded.info.sessions));
    const onGpu = await generate(page, { ...request, options: { ...request.options, max_new_tokens: 4 } });
    assert.deepEqual(onGpu.result.tokens, first.slice(0, 4), 'WebGPU tokens before the loss');
    await page.evaluate(() => window.__onnxpipe.client.debug.loseGpuDevice());
    const { last } = await restored(page, 5);
    assert.match(last.reason, /the WebGPU device was lost \(destroyed/);
    assert.equal(last.ep, 'wasm');
    const state = await page.evaluate(() => ({ ep: window.__onnxpipe.state.ep, providers: Object.values(window.__onnxpipe.state.loaded.sessions).map((s) => s.provider) }));
    assert.equal(state.ep, 'wasm', 'the chat page shows the provider it now runs on');
    assert.ok(state.providers.every((p) => /wasm/i.test(p)), JSON.stringify(state));
    assert.match((await notice(page)).text, /now on WASM/);
    const again = await generate(page, request);
    assert.deepEqual(again.result.tokens, first, 'on WASM after the device loss');
    console.log(`# device lost: ${last.reason}; then ${again.result.tokens.length} tokens on WASM`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  });
});

describe('the widget heals its frame\'s runtime worker', { timeout: TIMEOUTS.file }, () => {
  test('killed: the element says so, reloads from storage, answers the same', async (t) => {
    if (!have) return t.skip(`no ${NAME} fixture`);
    const host = await context.newPage();
    await host.goto(server.hostUrl);
    const ready = await whenReady(host, '#chat', TIMEOUTS.load);
    assert.ok(ready.info, `widget not ready: ${JSON.stringify(ready.error)}\n${logs.slice(-20).join('\n')}`);
    await host.evaluate(() => {
      window.__runtime = [];
      document.querySelector('#chat').addEventListener('onnxpipe-runtime', (e) => window.__runtime.push(e.detail));
    });
    const gets = modelGets();
    const frameWorker = host.workers().find((w) => w.url().includes('runtime.worker'));
    assert.ok(frameWorker, `the frame's runtime worker: ${host.workers().map((w) => w.url())}`);
    await frameWorker.evaluate(() => self.close()).catch(() => {});   // ends the worker as a crash would
    await host.waitForFunction(() => window.__runtime.some((r) => r.state !== 'stopped'), null, { timeout: TIMEOUTS.load, polling: 100 });
    const seen = await host.evaluate(() => window.__runtime);
    assert.deepEqual(seen.map((r) => r.state), ['stopped', 'restored'], JSON.stringify(seen));
    const status = await host.locator('#chat').evaluate((el) => el.shadowRoot.querySelector('.status').textContent);
    assert.match(status, new RegExp(`restarted .*${NAME} reloaded from this device`));
    assert.deepEqual(modelGets(), gets, 'no bundle file was fetched again');
    const answer = await host.evaluate(() => document.querySelector('#chat').send('Hello'));
    // the same turn through the chat page's runtime (greedy, the widget's max-new-tokens)
    const reference = await generate(page, { messages: [{ role: 'user', content: 'Hello' }], options: { do_sample: false, max_new_tokens: 12 } });
    assert.equal(answer, reference.result.text, 'the widget answers after the restart as a healthy runtime does');
    assert.ok(reference.result.tokens.length > 0);
    console.log(`# widget status after the restart: "${status}"; answer ${JSON.stringify(answer)}`);
    await host.close();
  });
});
