// The npm package (issue 25; tools/build_package.mjs, docs/library.md) as a web developer uses it,
// outside this repo: a fresh Vite app (tests/e2e/fixtures/package-consumer) installs the packed
// tarball with npm, builds with no Vite config and no files copied by hand, and in Chromium
// streams a chat completion, makes speech (non-silent WAV) and transcribes it, directly and
// through the official `openai` client with `fetch: engine.fetch`. Then a page with no bundler
// (tests/e2e/fixtures/package-static) imports the package's ES module from a static folder, on a
// server without cross-origin isolation (one thread), and does the same.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, startServer } from './lib/browser.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLES = ['smollm2-135m-instruct', 'piper-en-us-joe', 'whisper-base'];
const missing = BUNDLES.filter((b) => !fs.existsSync(path.join(ROOT, 'public', 'models', b, 'manifest.json')));
const PACKAGE_DIR = path.join(ROOT, 'build', 'package');
const FIXTURES = path.join(ROOT, 'tests', 'e2e', 'fixtures');
const SITE = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const tarball = () => fs.readdirSync(PACKAGE_DIR).filter((n) => /^onnxpipe-\d+\.\d+\.\d+\.tgz$/.test(n)).map((n) => path.join(PACKAGE_DIR, n))[0];

let work, app, run;
const servers = [];

/** npm in ``cwd``, from the registry's cache when it has the files (CI installed them for us). */
function npm(args, cwd) {
  execFileSync('npm', [...args, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd, stdio: ['ignore', 'pipe', 'inherit'], timeout: 300_000 });
}

before(() => {
  if (missing.length) return;
  assert.ok(fs.existsSync(PACKAGE_DIR) && tarball(), 'no build/package/onnxpipe-X.Y.Z.tgz: run make package');
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-consumer-'));
  app = path.join(work, 'app');
  fs.cpSync(path.join(FIXTURES, 'package-consumer'), app, { recursive: true });
  // what `npm create vite` writes, then `npm install ./onnxpipe-X.Y.Z.tgz openai`
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({
    name: 'consumer', private: true, version: '0.0.0', type: 'module',
    scripts: { dev: 'vite', build: 'vite build', preview: 'vite preview' },
    devDependencies: { vite: SITE.devDependencies.vite },
  }, null, 2));
  npm(['install'], app);
  npm(['install', tarball(), `openai@${SITE.devDependencies.openai}`], app);
  execFileSync(path.join(app, 'node_modules', '.bin', 'vite'), ['build', '--logLevel', 'warn'], { cwd: app, stdio: ['ignore', 'pipe', 'inherit'], timeout: 300_000 });
});

after(async () => {
  await run?.browser.close();
  for (const server of servers) await server.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** Open ``url`` in a fresh browser context and run the app's checks (fixtures' checks.js). */
async function runChecks(url) {
  run ??= await launchBrowser();
  const context = await run.browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(url, { timeout: TIMEOUTS.page });
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, { timeout: TIMEOUTS.page });
  const models = Object.fromEntries([['chat', 'smollm2-135m-instruct'], ['voice', 'piper-en-us-joe'], ['asr', 'whisper-base']]
    .map(([k, b]) => [k, new URL(`/models/${b}/`, url).href]));
  const out = await page.evaluate((m) => window.runChecks(m), models);
  const isolated = await page.evaluate(() => self.crossOriginIsolated);
  await context.close();
  return { ...out, isolated, errors };
}

function assertWorked(out) {
  assert.match(out.text, /Paris/, out.text);
  assert.ok(out.wavBytes > 20_000 && out.wavPeak > 0.05, `speech: ${out.wavBytes} bytes, peak ${out.wavPeak}`);
  assert.match(out.heard.toLowerCase(), /paris/, out.heard);
  assert.deepEqual(out.refused, { onnxpipe: true, kind: 'input', param: 'logprobs' });
  assert.equal(out.client.answer, out.text, 'the openai client streams the same greedy answer');
  assert.ok(out.client.speechPeak > 0.05);
  assert.match(out.client.heard.toLowerCase(), /hello there/);
  assert.deepEqual(out.errors, []);
}

test('a fresh Vite app installs the packed tarball, builds with no config, and chats, speaks and transcribes', { timeout: TIMEOUTS.file * 2 }, async (t) => {
  if (missing.length) return t.skip(`public/models/ lacks ${missing}: run make models`);
  const built = fs.readdirSync(path.join(app, 'dist', 'assets'));
  for (const file of ['runtime.worker', 'pyodide.asm', 'ort-wasm-simd-threaded', 'espeak-ng', 'onnxpipe-py3-none-any']) {
    assert.ok(built.some((name) => name.startsWith(file)), `Vite copied no ${file}* into the app's build: ${built.join(' ')}`);
  }
  const server = await startServer({ root: path.join(app, 'dist'), csp: false });
  servers.push(server);
  const out = await runChecks(server.url);
  assert.equal(out.isolated, true);
  assertWorked(out);
  t.diagnostic(`createEngine ${Math.round(out.timings.createEngine)} ms, first token ${Math.round(out.timings.firstToken)} ms after createEngine() began`);
});

test('a page with no bundler imports the package from a static folder and works without cross-origin isolation', { timeout: TIMEOUTS.file * 2 }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const site = path.join(work, 'static');
  fs.cpSync(path.join(FIXTURES, 'package-static'), site, { recursive: true });
  fs.copyFileSync(path.join(app, 'src', 'checks.js'), path.join(site, 'checks.js'));
  fs.symlinkSync(path.join(app, 'node_modules'), path.join(site, 'node_modules'));
  const server = await startServer({ root: site, csp: false, isolated: false });
  servers.push(server);
  const out = await runChecks(server.url);
  assert.equal(out.isolated, false, 'served without COOP/COEP: one thread');
  assertWorked(out);
});
