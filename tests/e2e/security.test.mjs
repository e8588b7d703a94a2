// Locked down (docs/security.md): the Content-Security-Policy on every response of the built
// site, an injected inline script refused (a CSP violation seen) and eval refused in the page and
// in the runtime worker; model files only from the page's own origin; each file checked against
// its manifest sha256 (a tampered file is an 'integrity' error naming it); manifest paths and the
// plugin confined to the bundle folder. One runtime worker answers every load here, so each
// refusal is also shown to leave it usable. The widget's origin checks: widget.test.mjs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { copyBundle, ensureManifest, FIXTURE_CACHE, siteAssets } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const NAME = 'novel_two_stage';   // 56 kB, a pipeline.json (so it can declare a plugin)
const SOURCE = path.join(FIXTURE_CACHE, NAME);
const have = fs.existsSync(path.join(SOURCE, 'expected.json'));
const BUNDLES = path.join(ROOT, 'build', 'e2e', `security-${process.pid}`);
const POLICY = JSON.parse(fs.readFileSync(path.join(ROOT, 'tools', 'csp.json'), 'utf8')).policy;

// eval and new Function tried by a script the site serves (Playwright's own evaluate is exempt
// from CSP): in a page it answers on window.__evalProbe, in a worker by postMessage
const EVAL_PROBE = `
  const tries = {};
  try { tries.eval = eval('"ran"'); } catch (e) { tries.eval = e.name; }
  try { tries.Function = new Function('return "ran"')(); } catch (e) { tries.Function = e.name; }
  if (typeof document === 'undefined') postMessage(tries); else window.__evalProbe = tries;
`;

let server, browser, context, offsite, logs, page, expected;
const requests = [];

/** A copy of the fixture at BUNDLES/name, changed by ``edit(dir)`` (manifest rewritten unless ``keepManifest``). */
function variant(name, edit = () => {}, { keepManifest = false } = {}) {
  const dir = copyBundle(SOURCE, path.join(BUNDLES, name));
  edit(dir);
  if (!keepManifest) {
    fs.rmSync(path.join(dir, 'manifest.json'));
    ensureManifest(dir);
  }
  return `${server.url}fixtures/${name}/`;
}

function withPlugin(module) {
  return (dir) => {
    const doc = JSON.parse(fs.readFileSync(path.join(dir, 'pipeline.json'), 'utf8'));
    doc.pipeline.plugin = { module };
    fs.writeFileSync(path.join(dir, 'pipeline.json'), JSON.stringify(doc));
  };
}

before(async () => {
  if (!have) return;
  fs.mkdirSync(BUNDLES, { recursive: true });
  fs.writeFileSync(path.join(BUNDLES, 'eval-probe.js'), EVAL_PROBE);
  expected = JSON.parse(fs.readFileSync(path.join(SOURCE, 'expected.json'), 'utf8'));
  server = await startServer({ root: siteDir(), mounts: { '/fixtures/': BUNDLES } });
  ({ browser, context, offsite, logs } = await launchBrowser());
  context.on('request', (r) => requests.push(r.url()));
  // embed.html opened on its own refuses to start (no parent), so no runtime of the page's own
  // competes with the one below
  page = await context.newPage();
  await page.goto(`${server.url}embed.html`);
  // one runtime worker driven through its protocol (web/src/protocol.ts), kept across loads
  const worker = fs.readdirSync(path.join(siteDir(), 'assets')).find((f) => /^runtime\.worker-.*\.js$/.test(f));
  await page.evaluate(({ url, assets }) => {
    const rt = new Worker(url, { type: 'module' });
    rt.postMessage({ id: 999, verb: 'configure', args: { assets } });   // first, as the page's client does
    let id = 1000;
    window.__runtime = (message) => new Promise((resolve) => {
      const mine = ++id;
      const listen = (e) => {
        if (e.data?.id !== mine || !('result' in e.data || 'error' in e.data)) return;
        rt.removeEventListener('message', listen);
        resolve(e.data.error ? { kind: e.data.error.kind, message: e.data.error.message } : { type: 'result', result: e.data.result });
      };
      rt.addEventListener('message', listen);
      rt.postMessage({ ...message, id: mine });
    });
  }, { url: `/assets/${worker}`, assets: siteAssets(siteDir(), server.url) });
});
after(async () => {
  await browser?.close();
  await server?.stop();
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

const run = (message) => page.evaluate((m) => window.__runtime(m), message);
const load = (bundleUrl) => run({ verb: 'load', args: { bundle_url: bundleUrl, ep: 'wasm' } });

/** Loads the untouched bundle in the same worker and checks its greedy tokens. */
async function stillAnswers(what) {
  const loaded = await load(variant('good'));
  assert.equal(loaded.type, 'result', `${what}: the worker no longer loads a good bundle: ${JSON.stringify(loaded)}\n${logs.slice(-20).join('\n')}`);
  const done = await run({ verb: 'generate', args: { input_ids: expected.input_ids, options: { do_sample: false, max_new_tokens: 6, ignore_eos: true } } });
  assert.deepEqual(done.result?.tokens, expected.greedy_tokens.slice(0, 6), `${what}: ${JSON.stringify(done)}`);
}

test('every page and asset route carries the Content-Security-Policy', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${SOURCE} missing: run make fixtures`);
  const site = siteDir();
  const routes = ['/', '/embed.html?kind=chat', '/missing.html', `/fixtures/${NAME}/manifest.json`, '/models/'];
  for (const dir of ['', 'assets', 'pyodide', 'espeak-ng', 'icons']) {
    for (const f of fs.readdirSync(path.join(site, dir))) if (fs.statSync(path.join(site, dir, f)).isFile()) routes.push(`/${dir ? `${dir}/` : ''}${f}`);
  }
  assert.ok(routes.some((r) => r.endsWith('.html')) && routes.some((r) => /runtime\.worker/.test(r)) && routes.includes('/sw.js'));
  const want = Object.entries(POLICY).map(([k, v]) => [k, ...v].join(' ')).join('; ');
  for (const route of routes) {
    const response = await fetch(new URL(route, server.url), { method: 'HEAD' });
    const csp = response.headers.get('content-security-policy') ?? '';
    assert.ok(csp.startsWith(`${want}; frame-ancestors `), `${route}: ${csp}`);
    assert.equal(csp.split('frame-ancestors ')[1], route.startsWith('/embed.html') ? '*' : "'self'", route);
  }
  console.log(`# CSP checked on ${routes.length} routes`);
});

/** Injects an inline <script> and an inline handler into ``target`` (a page) and loads the eval probe. */
function inject(target) {
  return target.evaluate(() => new Promise((resolve) => {
    const violations = [];
    document.addEventListener('securitypolicyviolation', (e) => violations.push(e.effectiveDirective));
    const script = document.createElement('script');
    script.textContent = 'window.__injected = true;';
    document.body.append(script);
    const handler = document.createElement('button');
    handler.setAttribute('onclick', 'window.__injected = true');
    document.body.append(handler);
    handler.click();
    const probe = document.createElement('script');
    probe.src = '/fixtures/eval-probe.js';
    probe.onload = () => setTimeout(() => resolve({ injected: window.__injected ?? false, violations: [...new Set(violations)].sort(), evaled: window.__evalProbe }), 200);
    document.body.append(probe);
  }));
}

test('an injected inline script does not run, eval is refused in the page and in a worker', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${SOURCE} missing`);
  const chat = await context.newPage();
  await chat.goto(server.url);
  const seen = await inject(chat);
  await chat.close();
  assert.deepEqual(seen, await inject(page), 'the chat page and the frame page refuse alike');
  assert.equal(seen.injected, false, 'the inline script ran');
  assert.deepEqual(seen.violations, ['script-src', 'script-src-attr', 'script-src-elem'], JSON.stringify(seen));
  assert.deepEqual(seen.evaled, { eval: 'EvalError', Function: 'EvalError' });
  const inWorker = await page.evaluate(() => new Promise((resolve) => {
    const w = new Worker('/fixtures/eval-probe.js');
    w.onmessage = (e) => { w.terminate(); resolve(e.data); };
    w.onerror = (e) => resolve(String(e.message));
  }));
  assert.deepEqual(inWorker, { eval: 'EvalError', Function: 'EvalError' });
  // the widget's frame may not frame another origin (widget.test.mjs relaxes this to test the
  // message checks on their own)
  const framed = await page.evaluate((other) => new Promise((resolve) => {
    document.addEventListener('securitypolicyviolation', (e) => resolve(e.effectiveDirective));
    const f = document.createElement('iframe');
    f.src = other;
    document.body.append(f);
  }), `http://localhost:${new URL(server.url).port}/`);
  assert.equal(framed, 'frame-src');
});

test('model files come only from the page\'s origin, checked against manifest.json', { timeout: TIMEOUTS.file * 2 }, async (t) => {
  if (!have) return t.skip(`${SOURCE} missing`);
  const origin = new URL(server.url).origin;
  const elsewhere = `http://localhost:${new URL(server.url).port}/fixtures/good/`;
  const before_ = requests.length;
  const foreign = await load(elsewhere);
  assert.equal(foreign.kind, 'bundle', JSON.stringify(foreign));
  assert.match(foreign.message, /another origin than this page/);
  assert.ok(foreign.message.includes(elsewhere) && foreign.message.includes(origin), foreign.message);
  assert.deepEqual(requests.slice(before_).filter((u) => u.startsWith('http://localhost')), [], 'nothing was fetched from the other origin');
  await stillAnswers('after a bundle on another origin');

  // core.onnx changed after the manifest was written: same size, another sha256
  const tampered = await load(variant('tampered', (dir) => {
    const file = path.join(dir, 'core.onnx');
    const bytes = fs.readFileSync(file);
    bytes[bytes.length - 1] ^= 0xff;
    fs.writeFileSync(file, bytes);
  }, { keepManifest: true }));
  assert.equal(tampered.kind, 'integrity', JSON.stringify(tampered));
  assert.match(tampered.message, /^core\.onnx: sha256 [0-9a-f]{64} does not match manifest\.json/);
  await stillAnswers('after a tampered file');

  for (const [name, entry] of [['escape-parent', `../good/core.onnx`], ['escape-url', `${origin}/fixtures/good/core.onnx`], ['escape-absolute', '/fixtures/good/core.onnx']]) {
    const url = variant(name, (dir) => {
      const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
      manifest.files.push({ ...manifest.files.find((f) => f.path === 'core.onnx'), path: entry });
      fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest));
    }, { keepManifest: true });
    const refused = await load(url);
    assert.equal(refused.kind, 'bundle', `${name}: ${JSON.stringify(refused)}`);
    assert.match(refused.message, /manifest\.json: expected each file's "path" to be a relative path inside the bundle/);
    assert.ok(refused.message.includes(JSON.stringify(entry)), refused.message);
  }
  await stillAnswers('after manifests naming files outside the bundle');
  const models = requests.filter((u) => /\/fixtures\//.test(u));
  assert.ok(models.some((u) => u.endsWith('/good/core.onnx')), 'the good bundle was fetched');
  assert.deepEqual(requests.filter((u) => new URL(u).origin !== origin && !u.startsWith('data:')), [], 'every request went to the page\'s origin');
  assert.deepEqual(offsite, []);
});

test('a plugin path leaving the bundle folder is refused in the browser', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${SOURCE} missing`);
  fs.writeFileSync(path.join(BUNDLES, 'outside.py'), 'raise SystemExit("the outside plugin ran")\n');
  for (const module of ['../outside.py', '/bundles/outside.py', `${server.url}fixtures/outside.py`]) {
    const refused = await load(variant('plugin', withPlugin(module)));
    assert.equal(refused.kind, 'config', `${module}: ${JSON.stringify(refused)}`);
    assert.match(refused.message, /\$\.pipeline\.plugin\.module/);
    assert.ok(refused.message.includes(`expected a relative path inside the bundle, found "${module}"`), refused.message);
  }
  await stillAnswers('after plugins outside the bundle');
});
