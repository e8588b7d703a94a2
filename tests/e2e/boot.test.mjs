// Boot: the built site serves Pyodide + our lockfile + the onnxpipe wheel so that a module
// worker can `loadPackage('onnxpipe')` with no request leaving 127.0.0.1.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';

const pyproject = fs.readFileSync(path.join(ROOT, 'pyproject.toml'), 'utf8');
const VERSION = /^version\s*=\s*"([^"]+)"/m.exec(pyproject)[1];

let site, server, browser, context, offsite, logs;

before(async () => {
  site = siteDir();
  server = await startServer({ root: site, mounts: { '/e2e/': 'tests/e2e/fixtures' } });
  ({ browser, context, offsite, logs } = await launchBrowser());
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('the build holds the Pyodide runtime, our lockfile and the wheel', () => {
  for (const f of ['pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide-lock.json']) {
    assert.ok(fs.existsSync(path.join(site, 'pyodide', f)), `dist/pyodide/${f}`);
  }
  const lock = JSON.parse(fs.readFileSync(path.join(site, 'pyodide', 'pyodide-lock.json'), 'utf8'));
  const entry = lock.packages.onnxpipe;
  assert.equal(entry.version, VERSION);
  assert.ok(fs.existsSync(path.join(site, 'pyodide', entry.file_name)), entry.file_name);
  assert.ok(!fs.existsSync(path.join(site, 'models')), 'models are served in place, never copied into the build');
});

test('headers: cross-origin isolation everywhere, wasm as application/wasm', async () => {
  const wasm = fs
    .readdirSync(path.join(site, 'assets'), { withFileTypes: true })
    .filter((d) => d.isFile() && d.name.endsWith('.wasm'))
    .map((d) => `assets/${d.name}`);
  const checks = {
    '': 'text/html',
    'pyodide/pyodide.mjs': 'text/javascript',
    'pyodide/pyodide.asm.mjs': 'text/javascript',
    'pyodide/pyodide.asm.wasm': 'application/wasm',
    'pyodide/pyodide-lock.json': 'application/json',
    ...Object.fromEntries(wasm.map((w) => [w, 'application/wasm'])), // onnxruntime-web's, once a worker imports it
  };
  for (const [rel, type] of Object.entries(checks)) {
    const res = await fetch(server.url + rel, { method: 'HEAD' });
    assert.equal(res.status, 200, rel);
    assert.equal(res.headers.get('cross-origin-opener-policy'), 'same-origin', rel);
    assert.equal(res.headers.get('cross-origin-embedder-policy'), 'require-corp', rel);
    assert.ok(res.headers.get('content-type').startsWith(type), `${rel}: ${res.headers.get('content-type')}`);
  }
});

test('a module worker boots Pyodide offline and imports onnxpipe', async () => {
  const page = await context.newPage();
  const t0 = performance.now();
  await page.goto(server.url + 'e2e/boot.html');
  const result = await page.evaluate(
    () =>
      Promise.race([
        window.bootResult,
        new Promise((resolve) => setTimeout(() => resolve({ error: 'timeout after 90 s' }), 90_000)),
      ]),
  );
  const wall = Math.round(performance.now() - t0);
  if (result.error) console.error(logs.join('\n'));
  assert.equal(result.error, undefined, result.error);
  assert.equal(result.version, VERSION);
  assert.match(result.python, /^3\.\d+/);
  assert.equal(result.pageIsolated, true, 'page is cross-origin isolated (COOP/COEP)');
  assert.equal(result.workerIsolated, true, 'worker is cross-origin isolated');
  assert.equal(result.sharedArrayBuffer, true);
  console.log(`# boot: python ${result.python}, loadPyodide ${result.ms.loadPyodide} ms, loadPackage ${result.ms.loadPackage} ms, page wall ${wall} ms`);
  await page.close();
  assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
});
