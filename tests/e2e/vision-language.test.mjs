// A vision-language bundle in the REAL runtime worker: two PNG images of different sizes are
// decoded by the worker (createImageBitmap), preprocessed by an ONNX graph in onnxruntime-web,
// run through the vision session one by one, merged at the image tokens and laid out as mRoPE
// positions; the greedy tokens equal `python -m onnxpipe run --image` on the same files, run
// here (and transformers' generate, expected.json; tests/py/pipeline/test_vision_language.py).
// Then, in the same worker, bad images (issue 14's fuzzing; the native half is
// tests/py/fuzz/test_fuzz_inputs.py): each an input error naming the image, and the tokens after.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { test } from 'node:test';
import { ROOT, python } from './lib/browser.mjs';
import { generate, onFixturePage, serveFixture } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, requestOf } from './run-bundle.mjs';

const NAME = 'qwen2_vl';
const fx = serveFixture(NAME, 'vl');
const { have, expected, source: SOURCE } = fx;

test('worker: two images of different sizes give the native greedy tokens', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const files = expected.images.map((i) => i.file);
  // the CLI's words: the native run takes them as flags, the worker as run-bundle.mjs's request
  const args = [SOURCE, '--input-ids', expected.input_ids.join(','), '--max-new-tokens', String(expected.max_new_tokens),
    '--greedy', ...files.flatMap((f) => ['--image', path.join(SOURCE, f)])];
  const native = JSON.parse(execFileSync(python(), ['-m', 'onnxpipe', 'run', ...args, '--json'], {
    cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: path.join(ROOT, 'py') },
  }));
  await onFixturePage(fx, async (page, base) => {
    const a = parseArgs(args);
    assert.deepEqual(a.images, files.map((f) => path.join(SOURCE, f)));
    const request = { ...requestOf(a), imageUrls: files.map((f) => base + f) };
    const reply = await generate(page, request);
    assert.deepEqual(reply.result.tokens, native.tokens, 'browser tokens = native tokens');
    assert.deepEqual(native.tokens, expected.greedy_tokens, 'native tokens = transformers generate');
    assert.equal(reply.result.prompt_tokens, expected.expanded_input_ids.length, 'image tokens expanded per grid');

    const cases = badImageCases(fs.readFileSync(path.join(SOURCE, files[0])), encodings(path.join(SOURCE, files[0])));
    const t0 = performance.now();
    const replies = await sendBadImages(page, cases);
    console.log(`# ${cases.length} bad image requests in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    // a size past the limit is refused from the header, before the decoder allocates it
    const wrong = replies.filter((r, i) => r.kind !== 'input' || !(cases[i][2] ?? /image|prompt/).test(r.message ?? ''));
    assert.deepEqual(wrong, [], 'each bad image: an input error naming the image');
    const after = await generate(page, request);
    assert.deepEqual(after.result.tokens, native.tokens, 'the same worker still gives the tokens');
  });
});

const ONE_IMAGE = [1, 17, 301, 300, 302, 42];   // one image token (300) between vision start/end
const TWO_IMAGES = [1, 301, 300, 302, 301, 300, 302, 42];

/** The fixture's first image as JPEG, GIF, BMP and (lossy) WebP bytes, by Pillow. */
function encodings(png) {
  const code = 'import base64, io, json, sys; from PIL import Image; im = Image.open(sys.argv[1]).convert("RGB")\n'
    + 'def enc(f):\n    out = io.BytesIO(); im.save(out, f); return base64.b64encode(out.getvalue()).decode()\n'
    + 'print(json.dumps({f.lower(): enc(f) for f in ("JPEG", "GIF", "BMP", "WEBP")}))';
  const out = JSON.parse(execFileSync(python(), ['-c', code, png], { encoding: 'utf8' }));
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Buffer.from(v, 'base64')]));
}

/** ``png`` with the size its IHDR claims replaced, the CRC fixed (only the size is wrong). */
function pngClaiming(png, width, height) {
  const out = Buffer.from(png);
  out.writeUInt32BE(width, 16);
  out.writeUInt32BE(height, 20);
  out.writeUInt32BE(zlib.crc32(out.subarray(12, 29)), 29);
  return out;
}

/** ``jpeg`` with the size its frame header (SOF0) claims replaced. */
function jpegClaiming(jpeg, width, height) {
  const out = Buffer.from(jpeg);
  const sof = out.indexOf(Buffer.from([0xff, 0xc0]));
  out.writeUInt16BE(height, sof + 5);
  out.writeUInt16BE(width, sof + 7);
  return out;
}

/** ``bytes`` with the size a GIF / BMP / lossy WebP header claims replaced. */
function claiming(bytes, format, width, height) {
  const out = Buffer.from(bytes);
  const [w, h, write] = { gif: [6, 8, 'writeUInt16LE'], bmp: [18, 22, 'writeInt32LE'], webp: [26, 28, 'writeUInt16LE'] }[format];
  out[write](width, w);
  out[write](height, h);
  return out;
}

/** [label, request, message pattern] triples; images are descriptors the page turns into Blobs
 * or typed arrays. */
function badImageCases(png, { jpeg, gif, bmp, webp }) {
  const blob = (bytes, type = 'image/png') => ({ blob: Array.from(bytes), type });
  const rgb = (array, length, width, height) => ({ rgb: { array, length }, width, height });
  const flipped = (bytes, at, value) => { const b = Buffer.from(bytes); b[at] = value; return b; };
  const cases = [];
  const one = (label, images, inputIds = ONE_IMAGE, expect) => cases.push([label, { input_ids: inputIds, images, options: { max_new_tokens: 2 } }, expect]);
  const TOO_LARGE = /too large/;
  for (const cut of [0, 1, 8, 16, 33, 60, 200]) one(`png cut at ${cut}`, [blob(png.subarray(0, cut))]);
  for (const cut of [2, 20, 200]) one(`jpeg cut at ${cut}`, [blob(jpeg.subarray(0, cut), 'image/jpeg')]);
  for (const [w, h] of [[100000, 100000], [0, 0], [0, 40], [70, 0], [2 ** 31 - 1, 1], [70, 100000], [20000, 20000]]) {
    one(`png claiming ${w}x${h}`, [blob(pngClaiming(png, w, h))], ONE_IMAGE, w * h > 1e8 ? TOO_LARGE : undefined);
  }
  for (const [w, h] of [[65535, 65535], [0, 0], [1, 65535]]) {
    one(`jpeg claiming ${w}x${h}`, [blob(jpegClaiming(jpeg, w, h), 'image/jpeg')], ONE_IMAGE, w * h > 1e8 ? TOO_LARGE : undefined);
  }
  one('gif claiming 65535x65535', [blob(claiming(gif, 'gif', 65535, 65535), 'image/gif')], ONE_IMAGE, TOO_LARGE);
  one('bmp claiming 100000x100000', [blob(claiming(bmp, 'bmp', 100000, 100000), 'image/bmp')], ONE_IMAGE, TOO_LARGE);
  one('webp claiming 16383x16383', [blob(claiming(webp, 'webp', 16383, 16383), 'image/webp')], ONE_IMAGE, TOO_LARGE);
  one('png signature broken', [blob(flipped(png, 1, 0x58))]);
  one('jpeg start broken', [blob(flipped(jpeg, 1, 0x00), 'image/jpeg')]);
  one('text as image/png', [blob(Buffer.from('hello, not a picture'))]);
  one('random bytes', [blob(Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 97 + 13) % 256)))]);
  one('svg (no decoder in a worker)', [blob(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>'), 'image/svg+xml')]);
  for (const value of [5, 'a.png', {}, true]) one(`images = ${JSON.stringify(value)}`, value);
  for (const value of [5, null, 'x', [], {}, [[1, 2, 3]]]) one(`images = [${JSON.stringify(value)}]`, [value]);
  one('rgb as a plain array', [rgb('Array', 3, 1, 1)]);
  one('rgb as Float32Array', [rgb('Float32Array', 3, 1, 1)]);
  one('rgba bytes', [rgb('Uint8Array', 4, 1, 1)]);
  one('zero-size rgb', [rgb('Uint8Array', 0, 0, 0)]);
  one('fractional sides', [rgb('Uint8Array', 9, 1.5, 2)]);
  one('sides as strings', [rgb('Uint8Array', 12, '2', '2')]);
  one('NaN side', [rgb('Uint8Array', 3, NaN, 1)]);
  one('claimed 100000x100000 rgb', [rgb('Uint8Array', 3, 100000, 100000)]);
  one('two images for one token', [blob(png), blob(png)]);
  one('one image for two tokens', [blob(png)], TWO_IMAGES);
  one('no image for a token', [], ONE_IMAGE);
  one('past the context (2 x 64 image tokens)', [rgb('Uint8Array', 224 * 224 * 3, 224, 224), rgb('Uint8Array', 224 * 224 * 3, 224, 224)], TWO_IMAGES);
  cases.push(['images with chat messages', { messages: [{ role: 'user', content: 'hi' }], images: [blob(png)], options: { max_new_tokens: 2 } }]);
  return cases;
}

/** Each case through client.generate in the page; {label, kind, message} per case. */
async function sendBadImages(page, cases) {
  return await page.evaluate(async (cases) => {
    const client = window.__onnxpipe.client;
    const make = (d) => {
      if (d?.blob) return new Blob([new Uint8Array(d.blob)], { type: d.type });
      if (d?.rgb) {
        const { array, length } = d.rgb;
        return { rgb: array === 'Array' ? new Array(length).fill(0) : new globalThis[array](length), width: d.width, height: d.height };
      }
      return d;
    };
    const out = [];
    for (const [label, request] of cases) {
      const images = Array.isArray(request.images) ? request.images.map(make) : request.images;
      try {
        const result = await client.generate({ ...request, images });
        out.push({ label, kind: 'none', message: `answered: ${JSON.stringify(result.tokens)}` });
      } catch (e) {
        out.push({ label, kind: e?.kind ?? 'internal', message: String(e?.message ?? e) });
      }
    }
    return out;
  }, cases);
}
