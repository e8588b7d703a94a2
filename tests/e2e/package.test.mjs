// The npm package (issue 25; tools/build_package.mjs, docs/library.md) as a web developer uses it,
// outside this repo: a fresh Vite app (tests/e2e/fixtures/package-consumer) installs the packed
// tarball with npm, type-checks against its declarations (tsc, as Vite's TypeScript template
// does), builds with no Vite config and no files copied by hand, and in Chromium
// streams a chat completion, makes speech (non-silent WAV) and transcribes it, directly and
// through the official `openai` client with `fetch: engine.fetch`; a second visit works with
// every model request failing (the models come from the device's storage), and a third with the
// server gone (the app's own service worker has the files the package added to its build). A page with no
// bundler (tests/e2e/fixtures/package-static) imports the package's ES module from a static
// folder, on a server without cross-origin isolation (one thread), and does the same; with
// `assetBase` every runtime file comes from another origin (a CDN with CORS).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, launchPersistent, startServer } from './lib/browser.mjs';
import { fakeMicWav, renderSpeech } from './lib/voice.mjs';
import { FIXTURES, buildConsumerApp, packageTarball } from './lib/consumer-app.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLES = ['smollm2-135m-instruct', 'piper-en-us-joe', 'whisper-base'];
const missing = BUNDLES.filter((b) => !fs.existsSync(path.join(ROOT, 'public', 'models', b, 'manifest.json')));

// the files of the package's assets/ a chat + speech + transcription session loads (WASM build)
const ASSET_NAMES = new Set(['ort.wasm.bundle.min.mjs', 'ort-wasm-simd-threaded.wasm', 'pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm',
  'python_stdlib.zip', 'pyodide-lock.json', 'onnxpipe-py3-none-any.whl', 'espeak-ng.js', 'espeak-ng.data']);
let work, app, browser;
const servers = [];

before(() => {
  if (missing.length) return;
  assert.ok(packageTarball(), 'no build/package/onnxpipe-X.Y.Z.tgz: run make package');
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-consumer-'));
  app = buildConsumerApp(path.join(work, 'app'));
});

after(async () => {
  await browser?.browser.close();
  for (const server of servers) await server.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

async function serve(options) {
  const server = await startServer({ csp: false, ...options });
  servers.push(server);
  return server;
}

const modelsAt = (url) => Object.fromEntries([['chat', 'smollm2-135m-instruct'], ['voice', 'piper-en-us-joe'], ['asr', 'whisper-base']]
  .map(([k, b]) => [k, new URL(`/models/${b}/`, url).href]));

/** Open ``url`` in ``context`` and run the app's checks (fixtures' checks.js) with ``options``. */
async function runChecks(context, url, options = {}) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(url, { timeout: TIMEOUTS.page });
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, { timeout: TIMEOUTS.page });
  const out = await page.evaluate(([m, o]) => window.runChecks(m, o), [modelsAt(url), options]);
  const isolated = await page.evaluate(() => self.crossOriginIsolated);
  await page.close();
  return { ...out, isolated, errors };
}

function assertWorked(out, { withClient = true } = {}) {
  assert.match(out.text, /Paris/, out.text);
  assert.ok(out.wavBytes > 20_000 && out.wavPeak > 0.05, `speech: ${out.wavBytes} bytes, peak ${out.wavPeak}`);
  assert.match(out.heard.toLowerCase(), /paris/, out.heard);
  assert.deepEqual(out.refused, { onnxpipe: true, kind: 'input', param: 'logprobs' });
  if (withClient) {
    assert.equal(out.client.answer, out.text, 'the openai client streams the same greedy answer');
    assert.ok(out.client.speechPeak > 0.05);
    assert.match(out.client.heard.toLowerCase(), /hello there/);
  }
  assert.deepEqual(out.errors, []);
}

test('a fresh Vite app installs the packed tarball, builds with no config, chats, speaks and transcribes; its second visit needs no model download and a third works offline', { timeout: TIMEOUTS.file * 4 }, async (t) => {
  if (missing.length) return t.skip(`public/models/ lacks ${missing}: run make models`);
  const built = fs.readdirSync(path.join(app, 'dist', 'assets'));
  for (const file of ['runtime.worker', 'pyodide.asm', 'ort-wasm-simd-threaded', 'espeak-ng', 'onnxpipe-py3-none-any']) {
    assert.ok(built.some((name) => name.startsWith(file)), `Vite copied no ${file}* into the app's build: ${built.join(' ')}`);
  }
  const server = await serve({ root: path.join(app, 'dist') });
  const profile = path.join(work, 'profile');
  let visit = await launchPersistent(profile);
  const first = await runChecks(visit.context, server.url);
  await visit.context.close();
  assert.equal(first.isolated, true);
  assertWorked(first);
  assert.deepEqual(visit.offsite, [], 'requests left 127.0.0.1');

  // second visit, same profile: every model request fails, as with the model server gone
  visit = await launchPersistent(profile);
  const refused = [];
  await visit.context.route('**/models/**', (route) => {
    refused.push(new URL(route.request().url()).pathname);
    return route.abort('internetdisconnected');
  });
  const second = await runChecks(visit.context, server.url, { withClient: false });
  await visit.context.close();
  assertWorked(second, { withClient: false });
  assert.equal(second.text, first.text, 'the same greedy answer from the stored model');

  // third visit, offline: the server is gone; the app's own service worker (fixtures'
  // public/sw.js) has its files and the runtime's, onnxpipe's storage has the models
  await server.stop();
  visit = await launchPersistent(profile);
  const offline = await runChecks(visit.context, server.url, { withClient: false });
  await visit.context.close();
  assertWorked(offline, { withClient: false });
  assert.equal(offline.text, first.text, 'offline: the same greedy answer');
  t.diagnostic(`model requests refused on the second visit: ${refused.length}; createEngine ${Math.round(first.timings.createEngine)} / ${Math.round(second.timings.createEngine)} ms, ` +
    `first token ${Math.round(first.timings.firstToken)} / ${Math.round(second.timings.firstToken)} ms after createEngine() began (first / second visit; a busy machine)`);
});

test('a page with no bundler imports the package from a static folder and works without cross-origin isolation', { timeout: TIMEOUTS.file * 2 }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const site = path.join(work, 'static');
  fs.cpSync(path.join(FIXTURES, 'package-static'), site, { recursive: true });
  fs.copyFileSync(path.join(app, 'src', 'checks.js'), path.join(site, 'checks.js'));
  fs.symlinkSync(path.join(app, 'node_modules'), path.join(site, 'node_modules'));
  const server = await serve({ root: site, isolated: false });
  browser ??= await launchBrowser();
  const context = await browser.browser.newContext();
  const out = await runChecks(context, server.url);
  await context.close();
  assert.equal(out.isolated, false, 'served without COOP/COEP: one thread');
  assertWorked(out);
});

test("assetBase: the runtime's files come from another origin (a CDN); an unknown option is refused", { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const site = path.join(work, 'static');
  const cdn = await serve({ root: site, cors: true, isolated: false, mounts: { '/onnxpipe/assets/': path.join(app, 'node_modules', 'onnxpipe', 'dist', 'assets') } });
  const server = await serve({ root: site, isolated: false });
  browser ??= await launchBrowser();
  const context = await browser.browser.newContext();
  const fetched = [];
  context.on('request', (request) => fetched.push(request.url()));
  const assetBase = `${cdn.url}onnxpipe/assets/`;
  const out = await runChecks(context, server.url, { engineOptions: { assetBase }, withClient: false });
  const page = await context.newPage();
  await page.goto(server.url);
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready');
  const typo = await page.evaluate(() => import('./node_modules/onnxpipe/dist/index.js').then(({ createEngine }) =>
    createEngine({ asset_base: '/x/' }).then(() => null, (e) => ({ name: e.name, kind: e.kind, param: e.param, message: e.message }))));
  await context.close();
  assertWorked(out, { withClient: false });
  const runtimeFiles = fetched.filter((url) => ASSET_NAMES.has(path.posix.basename(new URL(url).pathname)));
  assert.ok(runtimeFiles.length >= 9, runtimeFiles.join('\n'));
  assert.deepEqual(runtimeFiles.filter((url) => !url.startsWith(assetBase)), [], 'every runtime file from assetBase');
  assert.deepEqual([typo.name, typo.kind, typo.param], ['InputError', 'input', 'asset_base'], typo.message);
});

test('docs/library.md\'s chat + voice app, built as written: asked out loud through a microphone, it answers in text and speech', { timeout: TIMEOUTS.file * 2 }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const docs = fs.readFileSync(path.join(ROOT, 'docs', 'library.md'), 'utf8');
  const fixture = path.join(FIXTURES, 'package-voice-app');
  for (const [lang, file] of [['html', 'index.html'], ['js', path.join('src', 'main.js')]]) {
    assert.ok(docs.includes(`\`\`\`${lang}\n${fs.readFileSync(path.join(fixture, file), 'utf8')}\`\`\``), `docs/library.md no longer shows ${file} of tests/e2e/fixtures/package-voice-app as it is`);
  }
  const voiceApp = buildConsumerApp(path.join(work, 'voice-app'), 'package-voice-app');
  const question = renderSpeech('What is the capital of France?', path.join(work, 'question.wav'));
  const mic = fakeMicWav(question, path.join(work, 'mic.wav'), { before: 0.5, after: 1.0 });
  const server = await serve({ root: path.join(voiceApp, 'dist') });
  const voiceBrowser = await launchBrowser({ fakeMicrophone: mic.path });
  try {
    const page = await voiceBrowser.context.newPage();
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(server.url);
    await page.waitForFunction(() => !document.getElementById('talk').disabled, null, { timeout: TIMEOUTS.load });
    const button = await page.locator('#talk').boundingBox();
    await page.mouse.move(button.x + 5, button.y + 5);
    await page.mouse.down();
    await page.waitForFunction(() => document.getElementById('status').textContent === 'Listening…');
    await page.waitForTimeout(Math.ceil(mic.seconds * 1000) + 500);   // the whole question, as the microphone plays it
    await page.mouse.up();
    await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('Answered'), null, { timeout: TIMEOUTS.generate });
    const heard = await page.locator('#heard').textContent();
    const reply = await page.locator('#reply').textContent();
    // through Chromium's fake microphone and MediaRecorder's Opus, whisper-base hears "France"
    // as "friends" in this voice; the words around it and a reply are what this test holds to
    assert.match(heard.toLowerCase(), /what is the capital of/, heard);
    assert.ok(reply.trim().length > 10, reply);
    assert.deepEqual(errors, []);
  } finally {
    await voiceBrowser.browser.close();
  }
});

