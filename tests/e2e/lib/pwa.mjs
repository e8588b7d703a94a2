// Helpers for the installable-app tests (tests/e2e/pwa.test.mjs): PNG headers and pixels,
// the service worker's state and CacheStorage as the page sees them, builds with a build id.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import zlib from 'node:zlib';
import { ROOT } from './browser.mjs';
import { TIMEOUTS } from './timeouts.mjs';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The chunks of a PNG file: [{type, data}]. Throws when `what` is not a PNG. */
function pngChunks(buf, what) {
  assert.ok(buf.subarray(0, 8).equals(PNG_SIGNATURE), `${what}: not a PNG (first bytes ${buf.subarray(0, 8).toString('hex')})`);
  const chunks = [];
  for (let at = 8; at + 8 <= buf.length;) {
    const length = buf.readUInt32BE(at);
    chunks.push({ type: buf.toString('latin1', at + 4, at + 8), data: buf.subarray(at + 8, at + 8 + length) });
    at += 12 + length;
  }
  assert.equal(chunks[0]?.type, 'IHDR', `${what}: the first chunk is ${chunks[0]?.type}, not IHDR`);
  return chunks;
}

/** {width, height, bitDepth, colorType} from the IHDR chunk. */
export function pngHeader(buf, what) {
  const ihdr = pngChunks(buf, what)[0].data;
  return { width: ihdr.readUInt32BE(0), height: ihdr.readUInt32BE(4), bitDepth: ihdr[8], colorType: ihdr[9] };
}

/**
 * RGBA pixels of an 8-bit RGBA, non-interlaced PNG whose rows all use filter 0 (what
 * tools/make_icons.py writes); anything else is reported, not guessed at.
 */
export function pngPixels(buf, what) {
  const chunks = pngChunks(buf, what);
  const { width, height, bitDepth, colorType } = pngHeader(buf, what);
  assert.equal(`${bitDepth}/${colorType}`, '8/6', `${what}: expected 8-bit RGBA (bit depth 8, colour type 6)`);
  const raw = zlib.inflateSync(Buffer.concat(chunks.filter((c) => c.type === 'IDAT').map((c) => c.data)));
  const stride = width * 4 + 1;
  assert.equal(raw.length, stride * height, `${what}: ${raw.length} bytes of image data, expected ${stride * height}`);
  for (let y = 0; y < height; y++) assert.equal(raw[y * stride], 0, `${what}: row ${y} uses PNG filter ${raw[y * stride]}; only 0 is read here`);
  return { width, height, at: (x, y) => [...raw.subarray(y * stride + 1 + x * 4, y * stride + 5 + x * 4)] };
}

/** Wait until a service worker controls `page`; resolves to its script URL. */
export async function waitForControl(page, timeout = TIMEOUTS.load) {
  await page.waitForFunction(() => Boolean(navigator.serviceWorker?.controller), null, { timeout, polling: 100 });
  return page.evaluate(() => navigator.serviceWorker.controller.scriptURL);
}

/** CacheStorage as the page sees it: {cacheName: [url, ...]}. */
export function cacheContents(page) {
  return page.evaluate(async () => {
    const out = {};
    for (const name of await caches.keys()) {
      const cache = await caches.open(name);
      out[name] = (await cache.keys()).map((r) => r.url);
    }
    return out;
  });
}

/** The Workbox precache's URLs (cache-busting __WB_REVISION__ parameters removed). */
export function precachedUrls(contents) {
  const names = Object.keys(contents).filter((n) => n.startsWith('workbox-precache'));
  assert.equal(names.length, 1, `one Workbox precache expected, found caches ${JSON.stringify(Object.keys(contents))}`);
  return contents[names[0]].map((u) => {
    const url = new URL(u);
    url.searchParams.delete('__WB_REVISION__');
    return url.href;
  });
}

/** `vite build` into outDir with ONNXPIPE_BUILD_ID=id (the footer's build line). */
export function buildWithId(outDir, id) {
  const t0 = performance.now();
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--outDir', outDir, '--logLevel', 'warn'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, CI: 'true', ONNXPIPE_BUILD_ID: id },
  });
  process.stderr.write(`# vite build (ONNXPIPE_BUILD_ID=${id}) -> ${path.relative(ROOT, outDir)} in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  return outDir;
}
