// Model storage on this device (workers/storage/): OPFS files verified once, resumable
// downloads, the "Storage on this device" panel, files over 2 GB. Every browser context here
// is a fresh browser.newContext() (the profile where one big Cache API entry failed).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, guardContext, launchBrowser, launchPersistent, siteDir, startServer } from './lib/browser.mjs';
import { startCuttingProxy } from './lib/cutting-proxy.mjs';
import { generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const NAME = 'smollm2-135m-instruct';
const BIG = 'model.wasm.onnx.data';
const BIG_PATH = `/models/${NAME}/${BIG}`;
const have = fs.existsSync(path.join(ROOT, 'public', 'models', NAME, BIG));
const BIG_BYTES = have ? fs.statSync(path.join(ROOT, 'public', 'models', NAME, BIG)).size : 0;
const WORK = path.join(ROOT, 'build', 'e2e', `storage-${process.pid}`);
const PROBE = path.join(WORK, 'probe');
const HUGE = path.join(WORK, 'huge');
const CHAT = {
  messages: [{ role: 'user', content: 'What is the capital of France?' }],
  options: { do_sample: false, max_new_tokens: 12 },
};

let server, browser, reference = null;
before(async () => {
  fs.mkdirSync(PROBE, { recursive: true });
  fs.mkdirSync(HUGE, { recursive: true });
  // the store's own modules, bundled for a test worker that drives them directly
  execFileSync(path.join(ROOT, 'node_modules', '.bin', 'rolldown'),
    [path.join(ROOT, 'tests', 'e2e', 'fixtures', 'storage-probe.worker.ts'), '-o', path.join(PROBE, 'probe.js'), '-f', 'esm', '-p', 'browser'],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  server = await startServer({ root: siteDir(), mounts: { '/e2e-storage/': PROBE, '/e2e-huge/': HUGE } });
  ({ browser } = await launchBrowser());
});
after(async () => {
  await browser?.close();
  await server?.stop();
  fs.rmSync(WORK, { recursive: true, force: true });
});

/** A fresh profile (browser.newContext()) with the 127.0.0.1 guard and a request log. */
async function freshContext() {
  const context = await browser.newContext();
  const guard = await guardContext(context);
  const requests = [];
  context.on('request', (r) => requests.push({ url: r.url(), range: r.headers().range ?? null }));
  return { context, requests, ...guard };
}

function probe(page, message, timeout) {
  return page.evaluate(({ message }) => new Promise((resolve) => {
    const worker = new Worker('/e2e-storage/probe.js', { type: 'module' });
    worker.onmessage = (e) => { worker.terminate(); resolve(e.data); };
    worker.onerror = (e) => resolve({ error: String(e.message) });
    worker.postMessage(message);
  }), { message }, { timeout });
}

/** The same xorshift32 bytes as tests/e2e/fixtures/storage-probe.worker.ts. */
function seeded(size, seed) {
  const out = new Uint8Array(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

const bundleUrl = (base) => `${base}models/${NAME}/`;
const phasesOf = (loaded, file) => new Set(loaded.progress.filter((p) => p.file === file).map((p) => p.phase));

test('incremental SHA-256 equals Node crypto on random data, in the browser', { timeout: TIMEOUTS.file }, async () => {
  const { context } = await freshContext();
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    const sizes = [0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 65536 + 3, (1 << 20) + 17];
    for (const [i, size] of sizes.entries()) {
      const want = crypto.createHash('sha256').update(seeded(size, i + 1)).digest('hex');
      for (const chunk of [1, 7, 63, 64, 65, 4096, Math.max(1, size)]) {
        if (chunk === 1 && size > 5000) continue;
        const got = await probe(page, { op: 'sha', size, seed: i + 1, chunk }, 60_000);
        assert.equal(got.hex, want, `size ${size} fed in ${chunk}-byte pieces: ${JSON.stringify(got)}`);
      }
    }
  } finally {
    await context.close();
  }
});

test('SmolLM2\'s 271 MB file is stored and read back in a fresh context; sha256 verified once', { timeout: TIMEOUTS.file * 2 }, async (t) => {
  if (!have) return t.skip(`public/models/${NAME}/${BIG} missing: run make models`);
  const { context, requests, offsite, logs } = await freshContext();
  try {
    const page = await openRuntimePage(context, server.url);
    const first = await loadBundle(page, bundleUrl(server.url), { ep: 'wasm' });
    assert.deepEqual(first.info.warnings, [], 'stored without quota warnings');
    assert.ok(phasesOf(first, BIG).has('fetch') && phasesOf(first, BIG).has('verify'), 'first load downloads and verifies');
    reference = (await generate(page, CHAT)).result;
    assert.match(reference.text, /Paris/);
    const panelRow = page.locator(`[data-testid="storage-bundle"][data-key="${encodeURIComponent(bundleUrl(server.url))}"]`);
    await panelRow.waitFor({ timeout: TIMEOUTS.page });
    assert.ok(Number(await panelRow.getAttribute('data-bytes')) >= BIG_BYTES, 'the panel lists the stored bundle with its size');

    const before = requests.length;
    const second = await loadBundle(page, bundleUrl(server.url), { ep: 'wasm' });   // a fresh worker, same profile
    const fetched = requests.slice(before).filter((r) => new URL(r.url).pathname === BIG_PATH);
    assert.deepEqual(fetched, [], 'no network request for the stored file');
    const phases = new Set(second.progress.filter((p) => p.file && p.phase !== 'session' && p.phase !== 'boot').map((p) => p.phase));
    assert.deepEqual([...phases], ['cache'], 'every file from storage: no fetch, no verify (sha256 checked once)');
    const again = (await generate(page, CHAT)).result;
    assert.deepEqual(again.tokens, reference.tokens, 'same tokens from the stored file');
    console.log(`# 271 MB: first load (download + hash + store) ${(first.wallMs / 1000).toFixed(1)} s, second load from OPFS ${(second.wallMs / 1000).toFixed(1)} s`);

    // "Remove from this device" in the panel: space freed, worker unharmed, next load fetches
    const usage = page.locator('[data-testid="storage-usage"]');
    const usedBefore = Number(await usage.getAttribute('data-usage'));
    await panelRow.locator('[data-testid="storage-remove"]').click();
    await panelRow.waitFor({ state: 'detached', timeout: TIMEOUTS.page });
    await page.waitForFunction((b) => Number(document.querySelector('[data-testid="storage-usage"]')?.dataset.usage) <= b,
      usedBefore - BIG_BYTES, { timeout: TIMEOUTS.page });
    const usedAfter = Number(await usage.getAttribute('data-usage'));
    console.log(`# remove: usage ${usedBefore} -> ${usedAfter} bytes`);
    assert.ok(usedBefore - usedAfter >= BIG_BYTES, `usage dropped by ${usedBefore - usedAfter} bytes, less than ${BIG_BYTES}`);
    const afterRemove = (await generate(page, CHAT)).result;
    assert.deepEqual(afterRemove.tokens, reference.tokens, 'the loaded model keeps running after its files were removed');
    const before3 = requests.length;
    const third = await loadBundle(page, bundleUrl(server.url), { ep: 'wasm' });
    assert.ok(phasesOf(third, BIG).has('fetch'), 'the next load downloads again');
    assert.ok(requests.slice(before3).some((r) => new URL(r.url).pathname === BIG_PATH));
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await context.close();
  }
});

test('a download cut off half way resumes with Range from where it stopped', { timeout: TIMEOUTS.file * 2 }, async (t) => {
  if (!have) return t.skip(`public/models/${NAME}/${BIG} missing: run make models`);
  const cutAfter = Math.floor(BIG_BYTES / 2);
  const proxy = await startCuttingProxy({ upstream: server.url, cutPath: BIG_PATH, cutAfter });
  const { context, offsite, logs } = await freshContext();
  try {
    const page = await openRuntimePage(context, proxy.url);
    await loadBundle(page, bundleUrl(proxy.url), { ep: 'wasm' });
    const asked = proxy.requests.filter((r) => r.path === BIG_PATH);
    console.log(`# resume: ${JSON.stringify(asked)}; bytes served ${proxy.bytes.get(BIG_PATH)} of ${BIG_BYTES}`);
    assert.equal(asked[0].range, null);
    assert.ok(asked[0].cut, 'the first response was cut');
    const resumed = asked.find((r) => r.range);
    assert.ok(resumed, 'a Range request followed');
    const n = Number(/^bytes=(\d+)-$/.exec(resumed.range)?.[1]);
    assert.ok(n <= cutAfter && n >= cutAfter * 0.9, `resumed from byte ${n}, cut after ${cutAfter}`);
    assert.equal(resumed.status, 206);
    assert.ok(proxy.bytes.get(BIG_PATH) < 1.1 * BIG_BYTES, `served ${proxy.bytes.get(BIG_PATH)} bytes for a ${BIG_BYTES}-byte file`);
    const run = (await generate(page, CHAT)).result;   // the stitched file verified (sha256) and runs
    if (reference) assert.deepEqual(run.tokens, reference.tokens);
    else assert.match(run.text, /Paris/);
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await context.close();
    await proxy.stop();
  }
});

// Measured: a fresh browser.newContext() keeps OPFS in memory and takes at most ~1.34 GB per
// origin here (writes then store fewer bytes than asked), so a 2.1 GB file is stored in a
// persistent profile, and the fresh context is checked to fall back to memory with a quota warning.
let huge = null;
function makeHugeBundle() {
  if (huge) return huge;
  const bytes = 2_100_000_000;
  const file = path.join(HUGE, 'huge.data');
  fs.closeSync(fs.openSync(file, 'w'));
  fs.truncateSync(file, bytes);   // sparse: no 2 GB written to disk
  const fd = fs.openSync(file, 'r+');
  for (const at of [0, 1 << 30, 2 ** 31 - 1, 2 ** 31, bytes - 5]) fs.writeSync(fd, Buffer.from(`@${at}`), 0, undefined, at);
  fs.closeSync(fd);
  huge = { file, size: fs.statSync(file).size };
  return huge;
}

async function hugeSha(file) {
  const hash = crypto.createHash('sha256');
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 8 << 20 })) hash.update(chunk);
  return hash.digest('hex');
}

async function storeHuge(context) {
  const { file, size } = makeHugeBundle();
  huge.sha256 ??= await hugeSha(file);
  fs.writeFileSync(path.join(HUGE, 'manifest.json'), JSON.stringify({ version: 1, files: [{ path: 'huge.data', bytes: size, sha256: huge.sha256 }] }));
  const page = await context.newPage();
  await page.goto(server.url);
  const got = await probe(page, { op: 'store', base: `${server.url}e2e-huge/`, path: 'huge.data' }, 280_000);
  assert.equal(got.error, undefined, got.error);
  console.log(`# ${size} bytes: stored in ${(got.storeMs / 1000).toFixed(1)} s, read back in ${(got.readMs / 1000).toFixed(1)} s; warnings ${JSON.stringify(got.warnings)}`);
  assert.equal(got.size, size);
  assert.equal(got.readSha, huge.sha256, 'the bytes read back hash as Node hashed the file');
  assert.ok(got.largest <= 16 << 20, `read back in pieces of at most 16 MB (largest ${got.largest})`);
  assert.deepEqual(got.phases.sort(), ['fetch', 'verify']);
  return got;
}

test('a file over 2 GB is stored and read back in chunks (persistent profile)', { timeout: 300_000 }, async () => {
  const profile = fs.mkdtempSync(path.join(WORK, 'profile-'));
  const { context, offsite } = await launchPersistent(profile);
  try {
    const got = await storeHuge(context);
    assert.deepEqual(got.warnings, []);
    assert.equal(got.record?.sha256, huge.sha256, 'the recorded sha256 is the one Node computed');
    assert.equal(got.record?.bytes, huge.size);
    assert.deepEqual(offsite, []);
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
});

test('past the quota (2.1 GB in a fresh context) the file still loads, with a quota warning', { timeout: 300_000 }, async () => {
  const { context, offsite } = await freshContext();
  try {
    const got = await storeHuge(context);
    assert.equal(got.record, null, 'not recorded as stored');
    assert.equal(got.warnings.length, 1);
    assert.match(got.warnings[0], /^quota: .*huge\.data \(2147\.5 MB\).* MB of the .* MB quota was left/);
    assert.deepEqual(offsite, []);
  } finally {
    await context.close();
    fs.rmSync(HUGE, { recursive: true, force: true });
  }
});
