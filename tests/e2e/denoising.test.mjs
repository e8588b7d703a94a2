// The denoising loop in the REAL runtime worker (Pyodide -> onnxruntime-web WASM) on the tiny
// Stable-Diffusion-shaped fixture (tests/fixtures/tiny_diffusion.py): the browser's latents and
// image equal the native run of the same request (computed here, at test time) within
// IMAGE_TOLERANCE, and its PNG's pixels within one level, for Euler with classifier-free
// guidance and for DDIM; both also stay within REFERENCE_TOLERANCE of diffusers' schedulers
// driving the torch models (the fixture's expected.json). The requests are the ones
// run-bundle.mjs builds from the CLI's flags. Bad requests fail with an input error and the
// worker then runs again; cancel stops between steps. One page, one load.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, RuntimeFailure, copyBundle, loadBundle, openRuntimePage, runOnce } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, runRequestOf } from './run-bundle.mjs';

const NAME = 'tiny_diffusion';
const SOURCE = path.join(FIXTURE_CACHE, NAME);
const BUNDLES = path.join(ROOT, 'build', 'e2e', `denoising-${process.pid}`);
const have = fs.existsSync(path.join(SOURCE, 'expected.json'));
const expected = have ? JSON.parse(fs.readFileSync(path.join(SOURCE, 'expected.json'), 'utf8')) : null;

/** WASM vs native kernels on the same files, measured max |difference|: image 1.3e-6 (Euler,
 * guidance 3, 4 steps) and 2.9e-6 (DDIM, 3 steps); latents 7.4e-6 and 2.2e-6 (Euler's start at
 * sigma ~15). 1e-4 leaves over 10x room; one step more moves the image by 0.2, guidance 3.05 for 3 by 5e-3. */
const IMAGE_TOLERANCE = 1e-4;
/** Against diffusers + torch: natively under 3e-6 (tests/py/loops/test_denoising.py uses 1e-4). */
const REFERENCE_TOLERANCE = 1e-4;

/** The CLI flags of each fixture reference (tiny_diffusion.REFERENCES). */
const flags = (r) => ['--input', `input_ids=${JSON.stringify(r.input_ids)}`, '--steps', String(r.num_steps),
  '--guidance-scale', String(r.guidance_scale), '--scheduler', r.scheduler, '--seed', String(r.seed)];

let server, browser, context, offsite, logs, page, native;
before(async () => {
  if (!have) return;
  copyBundle(SOURCE, path.join(BUNDLES, NAME));
  server = await startServer({ root: siteDir(), mounts: { '/fixtures/': BUNDLES } });
  ({ browser, context, offsite, logs } = await launchBrowser());
  page = await openRuntimePage(context, server.url);
  // native: the same requests through the Python API (the CLI's own test is tests/py's)
  const script = 'import json, sys, onnxpipe\n' +
    'from onnxpipe.diffusion.image import to_pixels\n' +
    'pipe = onnxpipe.load(sys.argv[1])\n' +
    'out = []\n' +
    'for r in json.loads(sys.argv[2]):\n' +
    '    res = pipe.run({k: (v["values"], tuple(v["shape"])) for k, v in r["inputs"].items()}, **r["options"])\n' +
    '    image, shape = res.read("output")\n' +
    '    out.append({"image": image, "shape": list(shape), "latents": res.read("latents")[0],\n' +
    '                "pixels": list(to_pixels(image, shape)[0][3])})\n' +
    'print(json.dumps(out))';
  const requests = expected.references.map((r) => runRequestOf(parseArgs([SOURCE, ...flags(r)])));
  native = JSON.parse(execFileSync(python(), ['-c', script, SOURCE, JSON.stringify(requests)], {
    cwd: ROOT, encoding: 'utf8', timeout: TIMEOUTS.native, env: { ...process.env, PYTHONPATH: path.join(ROOT, 'py') },
  }));
});
after(async () => {
  await browser?.close();
  await server?.stop();
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

const maxDiff = (a, b) => {
  assert.equal(a.length, b.length, 'lengths');
  return a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
};

async function check(t, index) {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const ref = expected.references[index];
  const request = runRequestOf(parseArgs([SOURCE, ...flags(ref)]));
  assert.deepEqual(request.options, { num_steps: ref.num_steps, guidance_scale: ref.guidance_scale, scheduler: ref.scheduler, seed: ref.seed });
  const run = await runOnce(page, request).catch((error) => {
    console.error(logs.slice(-40).join('\n'));
    throw error;
  });
  const want = native[index];
  assert.equal(run.result.finish_reason, 'done');
  assert.deepEqual(run.steps.map((s) => [s.step, s.steps]), Array.from({ length: ref.num_steps }, (_, i) => [i + 1, ref.num_steps]));
  assert.deepEqual(run.outputs.output.shape, want.shape);
  const image = maxDiff(run.outputs.output.values, want.image);
  const latents = maxDiff(run.outputs.latents.values, want.latents);
  const reference = maxDiff(run.outputs.output.values, ref.image);
  console.log(`# ${ref.scheduler} x${ref.num_steps} guidance ${ref.guidance_scale}: browser vs native image ${image.toExponential(1)}, ` +
    `latents ${latents.toExponential(1)}; vs diffusers ${reference.toExponential(1)}; ${run.wallMs.toFixed(0)} ms`);
  assert.ok(image <= IMAGE_TOLERANCE, `image: browser vs native ${image}`);
  assert.ok(latents <= IMAGE_TOLERANCE, `latents: browser vs native ${latents}`);
  assert.ok(reference <= REFERENCE_TOLERANCE, `image: browser vs diffusers ${reference}`);
  assert.equal(run.images.length, 1);
  const [img] = run.images;
  assert.deepEqual([img.width, img.height, img.channels, img.rgba], [16, 16, 3, 16 * 16 * 4]);
  assert.ok(maxDiff(img.pixels, want.pixels) <= 1, 'pixels within one level of the native ones');
  assert.deepEqual(img.png.slice(0, 8), [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG');
  return run;
}

test('worker loads the fixture as an image bundle', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const { info } = await loadBundle(page, `${server.url}fixtures/${NAME}/`, { ep: 'wasm' });
  assert.equal(info.kind, 'image');
});

test('Euler with classifier-free guidance equals the native run', { timeout: TIMEOUTS.file }, (t) => check(t, 0));

let ddim = null;
test('DDIM equals the native run', { timeout: TIMEOUTS.file }, async (t) => {
  ddim = await check(t, 1);
});

test('bad requests fail clearly; the worker then still runs', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const ids = expected.references[1].input_ids;
  const input = (e, re) => e instanceof RuntimeFailure && e.kind === 'input' && re.test(e.detail);
  await assert.rejects(runOnce(page, { inputs: { input_ids: { values: ids.flat(), shape: [1, 8] } }, options: { scheduler: 'karras' } }),
    (e) => input(e, /scheduler: "karras" is not one of euler_discrete, ddim/));
  // guidance needs [unconditional, conditional] rows: one row is the wrong batch
  await assert.rejects(runOnce(page, { inputs: { input_ids: { values: ids.flat(), shape: [1, 8] } }, options: { guidance_scale: 3 } }),
    (e) => input(e, /has batch 1; guidance_scale 3 needs 2/));
  await assert.rejects(runOnce(page, { inputs: { input_ids: { values: [0, 1, 2], shape: [1, 8] } } }),
    (e) => input(e, /3 values do not fill shape \(1, 8\)/));
  await assert.rejects(runOnce(page, { inputs: { input_ids: { values: ids.flat(), shape: [1, 8] } }, options: { eta: 0.5 } }),
    (e) => input(e, /"eta" is not an option of the denoising loop/));
  const again = await check(t, 1);
  if (ddim) assert.deepEqual(again.outputs.output.values, ddim.outputs.output.values, 'the same image as before the errors');
});

test('cancel stops between steps; the next run is whole', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const ids = expected.references[1].input_ids;
  const request = { inputs: { input_ids: { values: ids.flat(), shape: [1, 8] } }, options: { scheduler: 'ddim', num_steps: 8, guidance_scale: 1 } };
  const run = await runOnce(page, request, { cancelAfter: 1 });
  assert.equal(run.result.finish_reason, 'cancelled');
  assert.ok(run.result.steps >= 1 && run.result.steps < 8, `stopped after ${run.result.steps} of 8 steps`);
  assert.deepEqual(run.images, []);
  await check(t, 1);
  assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
});
