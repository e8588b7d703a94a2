// The installable app (tools/pwa.ts, web/src/offline.ts): the web app manifest on every page,
// the Workbox service worker and its precache, an offline reload that still boots and answers,
// and the update prompt after a rebuild. Each scenario runs in a fresh browser.newContext()
// profile; servers are tools/serve.py on 127.0.0.1 and nothing may leave it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, guardContext, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { buildWithId, cacheContents, pngHeader, pngPixels, precachedUrls, waitForControl } from './lib/pwa.mjs';
import { FIXTURE_CACHE, copyBundle, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const WORK = path.join(ROOT, 'build', `pwa-e2e-${process.pid}`);
const FIXTURE = 'genai_llama_noshare';
const SMOLLM2 = 'smollm2-135m-instruct';
const QUESTION = 'What is the capital of France?';
const LEGACY_CACHE = 'onnxpipe-site-v1';
const ARTIFACTS = path.join(ROOT, 'build', 'e2e', 'artifacts'); // update-prompt.png
// the app's pages; embed.html is the widget's frame, checked when this build has it
const PAGES = ['', 'tts.html', 'voice.html', 'transcribe.html', 'library.html', 'embed.html'];

let browser;
before(async () => {
  fs.mkdirSync(WORK, { recursive: true });
  ({ browser } = await launchBrowser());
});
after(async () => {
  await browser?.close();
  fs.rmSync(WORK, { recursive: true, force: true });
});

/** A fresh profile (browser.newContext()) guarded like launchBrowser's. */
async function freshContext() {
  const context = await browser.newContext();
  return { context, ...(await guardContext(context)) };
}

async function fetchBytes(url) {
  const response = await fetch(url);
  assert.equal(response.status, 200, `GET ${url}: HTTP ${response.status}`);
  return { type: response.headers.get('content-type'), body: Buffer.from(await response.arrayBuffer()) };
}

test('the manifest is linked from every page and valid; its icons are real PNGs of their sizes', { timeout: TIMEOUTS.file }, async () => {
  const site = siteDir();
  const server = await startServer({ root: site });
  const { context, offsite } = await freshContext();
  try {
    const pages = PAGES.filter((p) => fs.existsSync(path.join(site, p || 'index.html')));
    const seen = new Set();
    for (const name of pages) {
      const page = await context.newPage();
      await page.goto(server.url + name);
      const head = await page.evaluate(() => ({
        manifests: [...document.querySelectorAll('link[rel=manifest]')].map((l) => l.href),
        themes: [...document.querySelectorAll('meta[name=theme-color]')].map((m) => m.content),
      }));
      assert.equal(head.manifests.length, 1, `/${name}: one <link rel="manifest">, found ${JSON.stringify(head.manifests)}`);
      assert.equal(head.themes.length, 1, `/${name}: one <meta name="theme-color">, found ${JSON.stringify(head.themes)}`);
      seen.add(JSON.stringify([head.manifests[0], head.themes[0]]));
      await page.close();
    }
    assert.equal(seen.size, 1, `every page links the same manifest and theme colour: ${[...seen].join(' | ')}`);
    const [manifestUrl, themeMeta] = JSON.parse([...seen][0]);

    const { type, body } = await fetchBytes(manifestUrl);
    assert.match(type, /^application\/manifest\+json/, `${manifestUrl}: Content-Type`);
    const manifest = JSON.parse(body.toString('utf8'));
    for (const field of ['name', 'short_name', 'description', 'start_url', 'scope', 'theme_color', 'background_color']) {
      assert.equal(typeof manifest[field], 'string', `manifest.${field}: a string expected, found ${JSON.stringify(manifest[field])}`);
      assert.ok(manifest[field].length > 0, `manifest.${field} is empty`);
    }
    assert.equal(manifest.display, 'standalone');
    assert.match(manifest.theme_color, /^#[0-9a-f]{6}$/i);
    assert.match(manifest.background_color, /^#[0-9a-f]{6}$/i);
    assert.equal(themeMeta.toLowerCase(), manifest.theme_color.toLowerCase(), '<meta name="theme-color"> matches the manifest');
    // start_url and scope resolve inside the site, and the start page is in scope
    const origin = new URL(server.url).origin;
    const start = new URL(manifest.start_url, manifestUrl);
    const scope = new URL(manifest.scope, manifestUrl);
    for (const [what, url] of [['start_url', start], ['scope', scope]]) {
      assert.equal(url.origin, origin, `manifest.${what} ${manifest[what]} leaves the site: ${url.href}`);
    }
    assert.ok(start.href.startsWith(scope.href), `start_url ${start.href} is outside scope ${scope.href}`);
    assert.equal((await fetch(start)).status, 200, `start_url ${start.href} is served`);

    // icons: 192 and 512 px, each a PNG whose IHDR says the size `sizes` claims; one maskable
    assert.ok(Array.isArray(manifest.icons) && manifest.icons.length > 0, 'manifest.icons');
    const sizes = new Set();
    let maskable = null;
    for (const icon of manifest.icons) {
      const url = new URL(icon.src, manifestUrl);
      assert.equal(url.origin, origin, `icon ${icon.src} leaves the site`);
      const { type, body } = await fetchBytes(url);
      assert.equal(type, 'image/png', `${url.href}: Content-Type`);
      assert.equal(icon.type, 'image/png', `${icon.src}: manifest type`);
      const { width, height } = pngHeader(body, url.href);
      assert.equal(`${width}x${height}`, icon.sizes, `${icon.src}: IHDR says ${width}x${height}, the manifest ${icon.sizes}`);
      sizes.add(icon.sizes);
      if ((icon.purpose ?? 'any').split(/\s+/).includes('maskable')) maskable = { icon, body, url };
    }
    assert.ok(sizes.has('192x192') && sizes.has('512x512'), `icon sizes ${[...sizes].join(', ')}`);
    assert.ok(maskable, 'one icon has purpose "maskable"');

    // maskable: no transparency (the platform cuts its own shape) and the mark inside the safe
    // zone, the centred circle of radius 40%: outside it every pixel is the background colour
    const img = pngPixels(maskable.body, maskable.url.href);
    const background = img.at(0, 0);
    const safe = 0.4 * img.width;
    let outside = 0;
    let markPixels = 0;
    for (let y = 0; y < img.height; y++) {
      for (let x = 0; x < img.width; x++) {
        const px = img.at(x, y);
        assert.equal(px[3], 255, `${maskable.icon.src}: pixel (${x}, ${y}) is not opaque`);
        const differs = px.some((v, i) => v !== background[i]);
        if (!differs) continue;
        markPixels++;
        if (Math.hypot(x + 0.5 - img.width / 2, y + 0.5 - img.height / 2) > safe) outside++;
      }
    }
    assert.ok(markPixels > 0.02 * img.width * img.height, `${maskable.icon.src}: the mark covers only ${markPixels} pixels`);
    assert.equal(outside, 0, `${maskable.icon.src}: ${outside} mark pixels outside the safe zone`);
    console.log(`# manifest: ${pages.length} pages link ${new URL(manifestUrl).pathname}; icons ${manifest.icons.map((i) => `${i.sizes}/${i.purpose ?? 'any'}`).join(', ')}; ` +
      `maskable mark ${markPixels} px, all inside the safe zone`);
    assert.deepEqual(offsite, []);
  } finally {
    await context.close();
    await server.stop();
  }
});

test('the service worker controls the page; its precache holds Pyodide and onnxruntime-web, no models', { timeout: TIMEOUTS.file }, async () => {
  const site = siteDir();
  const server = await startServer({ root: site });
  const { context, offsite, logs } = await freshContext();
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    const script = await waitForControl(page);
    assert.equal(script, `${server.url}sw.js`);
    const urls = precachedUrls(await cacheContents(page));
    const paths = urls.map((u) => new URL(u).pathname);
    for (const must of ['/index.html', '/tts.html', '/manifest.webmanifest', '/pyodide/pyodide.asm.wasm', '/pyodide/python_stdlib.zip',
      '/pyodide/pyodide-lock.json', '/pyodide/pyodide.mjs', '/pyodide/pyodide.asm.mjs', '/espeak-ng/espeak-ng.data', '/espeak-ng/espeak-ng.js']) {
      assert.ok(paths.includes(must), `${must} is not precached`);
    }
    assert.ok(paths.some((p) => /^\/pyodide\/onnxpipe-.*\.whl$/.test(p)), 'the onnxpipe wheel is not precached');
    const ortWasm = fs.readdirSync(path.join(site, 'assets')).filter((f) => /^ort-.*\.wasm$/.test(f));
    assert.ok(ortWasm.length > 0, `no onnxruntime-web wasm in ${site}/assets`);
    for (const f of ortWasm) assert.ok(paths.includes(`/assets/${f}`), `/assets/${f} is not precached`);
    assert.deepEqual(paths.filter((p) => p.startsWith('/models/')), [], 'model files are precached');
    // the widget's frame comes from the server, so its frame-ancestors allow-list is never stale
    assert.ok(!paths.includes('/embed.html'), '/embed.html is precached');
    const sizes = paths.map((p) => fs.statSync(path.join(site, p)).size);
    const mb = sizes.reduce((a, b) => a + b, 0) / 1e6;
    const { usage, quota } = await page.evaluate(() => navigator.storage.estimate());
    console.log(`# precache: ${paths.length} files, ${mb.toFixed(1)} MB (${ortWasm.join(', ')}); ` +
      `origin storage ${(usage / 1e6).toFixed(1)} MB used of ${(quota / 1e6).toFixed(0)} MB`);
    // the page is answered by the worker from now on
    const reload = await page.reload();
    assert.equal(reload.fromServiceWorker(), true, 'the reloaded page did not come from the service worker');
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await context.close();
    await server.stop();
  }
});

/** Take the network away: the context goes offline and nothing listens on the port any more. */
async function goOffline(context, server) {
  await context.setOffline(true);
  await server.stop();
}

test('offline reload of the chat page boots and runs a stored fixture bundle (fresh profile)', { timeout: TIMEOUTS.file }, async (t) => {
  const source = path.join(FIXTURE_CACHE, FIXTURE);
  if (!fs.existsSync(path.join(source, 'expected.json'))) return t.skip(`tests/fixtures/.cache/${FIXTURE} missing: run make fixtures`);
  const expected = JSON.parse(fs.readFileSync(path.join(source, 'expected.json'), 'utf8'));
  const bundleDir = copyBundle(source, path.join(WORK, 'bundles', FIXTURE));
  const server = await startServer({ root: siteDir(), mounts: { [`/models/${FIXTURE}/`]: bundleDir } });
  const bundleUrl = `${server.url}models/${FIXTURE}/`;
  const request = { input_ids: expected.input_ids, options: { do_sample: false, max_new_tokens: 16, ignore_eos: true } };
  const { context, offsite, logs } = await freshContext();
  try {
    const page = await openRuntimePage(context, server.url);
    await waitForControl(page);
    await loadBundle(page, bundleUrl, { ep: 'wasm' });
    const online = await generate(page, request);
    assert.deepEqual(online.result.tokens, expected.greedy_tokens.slice(0, 16));

    await goOffline(context, server);
    const response = await page.reload();
    assert.equal(response.fromServiceWorker(), true, 'the offline page did not come from the service worker');
    await page.waitForFunction(() => Boolean(window.__onnxpipe?.client), null, { timeout: TIMEOUTS.page, polling: 50 });
    // the precached page keeps its COOP/COEP headers: threads stay possible offline
    assert.equal(await page.evaluate(() => crossOriginIsolated), true, 'the offline page is not cross-origin isolated');
    // and its Content-Security-Policy (docs/security.md): an injected inline script stays refused
    assert.match(response.headers()['content-security-policy'] ?? '', /^default-src 'self'; script-src 'self' 'wasm-unsafe-eval';/);
    assert.equal(await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = 'window.__injected = true';
      document.body.append(s);
      return window.__injected ?? false;
    }), false, 'an inline script ran on the offline page');
    await loadBundle(page, bundleUrl, { ep: 'wasm' });
    const offline = await generate(page, request);
    assert.deepEqual(offline.result.tokens, online.result.tokens, 'same tokens offline');
    console.log(`# offline fixture: ${FIXTURE} answered ${offline.result.tokens.length} tokens after an offline reload`);
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await context.close();
    await server.stop();
  }
});

/** Load `bundle` through the chat page's UI and ask QUESTION; resolves to the reply text. */
async function askThroughUi(page, bundle) {
  await page.getByTestId('load-button').waitFor({ timeout: TIMEOUTS.page });
  await page.waitForFunction(() => document.querySelector('[data-testid=bundle-select] option') && window.__onnxpipe?.controller, null, { timeout: TIMEOUTS.page });
  await page.getByTestId('bundle-select').selectOption(bundle);
  await page.getByTestId('ep-select').selectOption('wasm');
  await page.getByTestId('load-button').click();
  await page.waitForFunction(() => window.__onnxpipe.state.status !== 'loading' && ['ready', 'idle', 'error'].includes(window.__onnxpipe.state.status),
    null, { timeout: TIMEOUTS.load, polling: 100 });
  const loaded = await page.evaluate(() => ({ error: window.__onnxpipe.state.lastError, warnings: window.__onnxpipe.state.loaded?.warnings ?? [] }));
  assert.equal(loaded.error, null, `load failed: ${JSON.stringify(loaded.error)}`);
  await page.getByTestId('max-new-tokens').fill('24');
  await page.getByTestId('prompt').fill(QUESTION);
  await page.getByTestId('prompt').press('Enter');
  await page.waitForFunction(() => window.__onnxpipe.state.status === 'generating' || window.__onnxpipe.state.lastResult, null, { timeout: TIMEOUTS.page });
  await page.waitForFunction(() => window.__onnxpipe.state.status === 'ready', null, { timeout: TIMEOUTS.generate, polling: 100 });
  const state = await page.evaluate(() => ({ result: window.__onnxpipe.state.lastResult, error: window.__onnxpipe.state.lastError }));
  assert.equal(state.error, null, `generation failed: ${JSON.stringify(state.error)}`);
  return { text: state.result.text, warnings: loaded.warnings };
}

test(`offline reload of the chat page answers with ${SMOLLM2} from stored files (fresh profile)`, { timeout: TIMEOUTS.file * 2 }, async (t) => {
  const dir = path.join(ROOT, 'public', 'models', SMOLLM2);
  if (!fs.existsSync(path.join(dir, 'manifest.json'))) return t.skip(`public/models/${SMOLLM2} missing: run make models`);
  const server = await startServer({ root: siteDir() });
  const { context, offsite, logs } = await freshContext();
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    await waitForControl(page);
    const online = await askThroughUi(page, SMOLLM2);
    assert.match(online.text, /Paris/, `online answer: ${online.text}`);
    if (online.warnings.length) console.log(`# ${SMOLLM2} load warnings: ${online.warnings.join(' | ')}`);

    await goOffline(context, server);
    const response = await page.reload();
    assert.equal(response.fromServiceWorker(), true, 'the offline page did not come from the service worker');
    const offline = await askThroughUi(page, SMOLLM2);
    assert.match(offline.text, /Paris/, `offline answer: ${offline.text}`);
    console.log(`# offline ${SMOLLM2}: "${offline.text}"`);
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await context.close();
    await server.stop();
  }
});

test('after a rebuild the update prompt appears, Reload activates the new build, old caches are gone', { timeout: TIMEOUTS.file * 2 }, async () => {
  const out = path.join(WORK, 'site');
  const stamp = `${process.pid}-${Date.now()}`;
  const [first, second] = [`pwa-test-a-${stamp}`, `pwa-test-b-${stamp}`];
  buildWithId(out, first);
  const server = await startServer({ root: out });
  const { context, offsite, logs } = await freshContext();
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    await waitForControl(page);
    assert.equal(await page.getByTestId('build-id').textContent(), first);
    const oldAssets = precachedUrls(await cacheContents(page)).filter((u) => new URL(u).pathname.startsWith('/assets/'));
    // what the hand-written service worker of earlier releases left behind
    await page.evaluate(async (name) => {
      const cache = await caches.open(name);
      await cache.put('/legacy-entry', new Response('kept by public/sw.js'));
    }, LEGACY_CACHE);
    assert.equal(await page.getByTestId('update-prompt').count(), 0, 'no prompt before an update');

    buildWithId(out, second);
    const newAssets = fs.readdirSync(path.join(out, 'assets')).map((f) => new URL(`assets/${f}`, server.url).href);
    const gone = oldAssets.filter((u) => !newAssets.includes(u));
    assert.ok(gone.length > 0, 'the rebuild changed no hashed asset: the build id did not reach the scripts');

    // the reload is still the old build, answered by the old worker from its precache ...
    await page.reload();
    assert.equal(await page.getByTestId('build-id').textContent(), first, 'a new build took over silently');
    // ... which notices the new worker waiting and asks; so does the speech page
    await page.getByTestId('update-prompt').waitFor({ timeout: TIMEOUTS.load });
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'update-prompt.png') });
    const tts = await context.newPage();
    await tts.goto(server.url + 'tts.html');
    await tts.getByTestId('update-prompt').waitFor({ timeout: TIMEOUTS.page });
    assert.equal(await tts.getByTestId('build-id').textContent(), first);

    const reloaded = page.waitForEvent('load', { timeout: TIMEOUTS.page });
    await page.getByTestId('update-reload').click();
    await reloaded;
    await page.getByTestId('build-id').waitFor({ timeout: TIMEOUTS.page });
    assert.equal(await page.getByTestId('build-id').textContent(), second, 'after Reload the page runs the new build');
    assert.equal(await page.getByTestId('update-prompt').count(), 0, 'no prompt once updated');
    // the other page reloaded itself too, onto the new build
    await tts.waitForFunction((id) => document.querySelector('[data-testid=build-id]')?.textContent === id, second, { timeout: TIMEOUTS.page });

    const contents = await cacheContents(page);
    assert.ok(!(LEGACY_CACHE in contents), `${LEGACY_CACHE} is still there: ${JSON.stringify(Object.keys(contents))}`);
    const all = Object.values(contents).flat().map((u) => {
      const url = new URL(u);
      url.searchParams.delete('__WB_REVISION__');
      return url.href;
    });
    const left = gone.filter((u) => all.includes(u));
    assert.deepEqual(left, [], 'the previous build\'s assets are still cached');
    const now = precachedUrls(contents);
    for (const u of newAssets.filter((u) => !u.endsWith('.map'))) assert.ok(now.includes(u), `${u} of the new build is not precached`);
    console.log(`# update: ${first} -> ${second}; ${gone.length} old assets removed (${gone.map((u) => new URL(u).pathname).join(', ')}); ` +
      `${LEGACY_CACHE} removed; caches now ${JSON.stringify(Object.keys(contents))}`);
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await context.close();
    await server.stop();
  }
});
