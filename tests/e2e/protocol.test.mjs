// Every verb of the worker protocol (web/src/protocol.ts Verbs) round-trips through the REAL
// runtime worker, posted raw as {id, verb, args}: its events arrive as {id, event, data} with
// snake_case keys, then one {id, result} or {id, error}. One worker, loaded in turn with the
// tiny LLM fixture, Piper, Silero VAD, Whisper and the tiny diffusion fixture; the audio Piper
// speaks is what the VAD and Whisper hear. Unknown verbs, unknown arguments and malformed calls
// are refused by name.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, copyBundle, siteAssets } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, runRequestOf } from './run-bundle.mjs';

const MODELS = path.join(ROOT, 'public', 'models');
const LLM = 'genai_llama';
const DIFFUSION = 'tiny_diffusion';
const BUNDLES = path.join(ROOT, 'build', 'e2e', `protocol-${process.pid}`);
const needed = [path.join(FIXTURE_CACHE, LLM, 'expected.json'), path.join(FIXTURE_CACHE, DIFFUSION, 'expected.json'),
  path.join(MODELS, 'piper-en-us-joe', 'en_US-joe-medium.onnx'), path.join(MODELS, 'silero-vad', 'silero_vad_v5.onnx'),
  path.join(MODELS, 'whisper-base', 'encoder.onnx')];
const missing = needed.find((f) => !fs.existsSync(f));
const expected = missing ? null : JSON.parse(fs.readFileSync(needed[0], 'utf8'));

/** Every verb the worker takes; the test checks each was called. */
const VERBS = ['configure', 'boot', 'load', 'generate', 'speak', 'run', 'transcribe', 'detect_speech', 'listen', 'unlisten', 'audio_clip',
  'cancel', 'dispose', 'storage_list', 'storage_remove', 'memory', 'watch', 'ping', 'crash'];
const called = new Set();

let server, browser, context, logs, page;
before(async () => {
  if (missing) return;
  for (const name of [LLM, DIFFUSION]) copyBundle(path.join(FIXTURE_CACHE, name), path.join(BUNDLES, name));
  server = await startServer({ root: siteDir(), mounts: { '/fixtures/': BUNDLES, '/m/': MODELS } });
  ({ browser, context, logs } = await launchBrowser());
  page = await context.newPage();
  await page.goto(`${server.url}embed.html`);   // on its own it starts no runtime: only the one below runs
  const worker = fs.readdirSync(path.join(siteDir(), 'assets')).find((f) => /^runtime\.worker-.*\.js$/.test(f));
  await page.evaluate((url) => {
    const rt = new Worker(url, { type: 'module' });
    // what crossed, with typed arrays and ports described (page.evaluate returns plain data)
    const plain = (v) => (ArrayBuffer.isView(v) ? { typed: v.constructor.name, length: v.length }
      : v instanceof MessagePort ? { port: true }
        : Array.isArray(v) ? v.map(plain)
          : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)])) : v);
    window.__messages = [];
    window.__audio = null;   // Piper's sentences, kept for the VAD and Whisper
    let id = 0;
    rt.addEventListener('message', (e) => {
      window.__messages.push(plain(e.data));
      if (e.data?.event === 'audio') window.__audio = [...(window.__audio ?? []), e.data.data.samples];
    });
    /** Post a call; resolve with its events and its last word. ``cancelAfter``: post a cancel
     * once that many events came. */
    window.__call = (verb, args, { cancelAfter = 0, transfer = [] } = {}) => new Promise((resolve) => {
      const mine = ++id;
      const events = [];
      const listen = (e) => {
        if (e.data?.id !== mine) return;
        if ('event' in e.data) {
          events.push(plain(e.data));
          if (cancelAfter && events.length === cancelAfter) rt.postMessage({ id: ++id, verb: 'cancel', args: {} });
          return;
        }
        rt.removeEventListener('message', listen);
        resolve({ id: mine, events, end: plain(e.data) });
      };
      rt.addEventListener('message', listen);
      rt.postMessage({ id: mine, verb, args }, transfer);
    });
    window.__raw = (message) => new Promise((resolve) => {
      const listen = (e) => {
        if (!e.data?.error) return;
        rt.removeEventListener('message', listen);
        resolve(e.data);
      };
      rt.addEventListener('message', listen);
      rt.postMessage(message);
    });
    window.__heard = () => {
      const all = window.__audio ?? [];
      const out = new Float32Array(all.reduce((n, a) => n + a.length, 0));
      let at = 0;
      for (const a of all) {
        out.set(a, at);
        at += a.length;
      }
      return out;
    };
  }, `/assets/${worker}`);
});
after(async () => {
  await browser?.close();
  await server?.stop();
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

/** ``verb`` with ``args`` in the page. */
async function call(verb, args = {}, options = {}) {
  called.add(verb);
  return page.evaluate(({ verb, args, options }) => window.__call(verb, args, options), { verb, args, options });
}

/** The result of a call that must succeed (else the error, shown). */
function ok(reply) {
  assert.ok('result' in reply.end, `${JSON.stringify(reply.end)}\n${logs.slice(-20).join('\n')}`);
  return reply.end.result;
}

function refused(reply, kind, pattern) {
  assert.ok(reply.end.error, `expected an error, got ${JSON.stringify(reply.end).slice(0, 300)}`);
  assert.equal(reply.end.error.kind, kind, reply.end.error.message);
  assert.match(reply.end.error.message, pattern);
}

const load = async (url) => {
  const reply = await call('load', { bundle_url: `${server.url}${url}`, ep: 'wasm' });
  const info = ok(reply);
  assert.ok(reply.events.every((e) => e.event === 'progress' && 'percent' in e.data), JSON.stringify(reply.events.slice(0, 3)));
  assert.ok(reply.events.some((e) => e.data.phase === 'session'));
  return info;
};

test('every verb round-trips through the runtime worker', { timeout: TIMEOUTS.file, skip: missing ? `${missing} missing: run make models fixtures` : false }, async () => {
  // first: where the runtime's files are (a map with a field missing is refused, by name)
  const assets = siteAssets(siteDir(), server.url);
  const { pyodide_wasm: _, ...partial } = assets;
  refused(await call('configure', { assets: partial }), 'input', /configure: assets\.pyodide_wasm: expected a URL/);
  refused(await call('configure', { assets: { ...assets, cdn: 'x' } }), 'input', /unknown field "cdn"/);
  assert.equal(ok(await call('configure', { assets })), null);
  // before any load
  refused(await call('generate', { input_ids: [1] }), 'input', /no bundle is loaded/);
  assert.deepEqual(Object.keys(ok(await call('boot', { ep: 'wasm' }))).sort(), ['reason', 'threads']);
  assert.deepEqual(ok(await call('watch', { lock: 'protocol-test', debug: false })), { locks: true });
  assert.equal(ok(await call('ping')), null);
  refused(await call('crash', { how: 'trap' }), 'input', /test-only/);

  // text
  const info = await load(`fixtures/${LLM}/`);
  for (const key of ['kind', 'sample_rate', 'has_chat_template', 'load_ms', 'warm_up_ms', 'boot_ms', 'threads_reason', 'startup', 'sessions', 'controls']) {
    assert.ok(key in info, `LoadedInfo.${key}: ${Object.keys(info)}`);
  }
  assert.ok('python_snapshot' in info.startup);
  const gen = await call('generate', { input_ids: expected.input_ids, options: { do_sample: false, max_new_tokens: 6, ignore_eos: true } });
  assert.deepEqual(ok(gen).tokens, expected.greedy_tokens.slice(0, 6));
  assert.ok(gen.events.length > 0 && gen.events.every((e) => e.event === 'token' && Array.isArray(e.data.token_ids) && typeof e.data.text === 'string'));
  assert.deepEqual(gen.events.flatMap((e) => e.data.token_ids), ok(gen).tokens);
  called.add('cancel');
  const stopped = ok(await call('generate', { input_ids: expected.input_ids, options: { do_sample: false, max_new_tokens: 200, ignore_eos: true } }, { cancelAfter: 1 }));
  assert.ok(stopped.tokens.length < 200, `a cancel stops the generation: ${stopped.tokens.length} tokens`);
  assert.equal(ok(await call('cancel')), null);
  const memory = ok(await call('memory'));
  assert.ok(memory.ort_bytes > 0 && memory.python_bytes > 0, JSON.stringify(memory));
  const stored = ok(await call('storage_list'));
  assert.ok(stored.some((b) => b.name === LLM), JSON.stringify(stored));
  refused(await call('storage_remove', { key: 'no-such-key' }), 'input', /no bundle "no-such-key" is stored/);
  assert.equal(ok(await call('dispose')), null);
  refused(await call('generate', { input_ids: [1] }), 'input', /no bundle is loaded/);

  // speech
  assert.equal((await load('m/piper-en-us-joe/')).sample_rate, 22050);
  const spoken = await call('speak', { text: 'Hello there. How are you today?' });
  const speech = ok(spoken);
  assert.equal(speech.wav.typed, 'Uint8Array');
  assert.equal(speech.result.sentences.length, 2);
  assert.deepEqual(spoken.events.map((e) => [e.event, e.data.index, e.data.sample_rate, e.data.samples.typed]),
    [['audio', 0, 22050, 'Float32Array'], ['audio', 1, 22050, 'Float32Array']]);
  assert.equal(spoken.events[0].data.sentence.text, speech.result.sentences[0].text);

  // voice activity: the whole recording, then the same audio live through a port
  await load('m/silero-vad/');
  called.add('detect_speech');
  const detected = await page.evaluate(() => window.__call('detect_speech', { samples: window.__heard(), sample_rate: 22050 }));
  assert.ok(ok(detected).segments.length >= 1, JSON.stringify(ok(detected)));
  assert.deepEqual(ok(detected).events.map((e) => e.type).slice(0, 2), ['speech_start', 'speech_end']);
  for (const verb of ['listen', 'audio_clip', 'unlisten']) called.add(verb);
  const live = await page.evaluate(async () => {
    const channel = new MessageChannel();
    const started = await window.__call('listen', { port: channel.port2, controls: { min_silence_ms: 300 } }, { transfer: [channel.port2] });
    // the capture worklet's chunks, at 16 kHz (web/src/audio/capture-protocol.ts): resampled crudely here
    const heard = window.__heard();
    const audio = new Float32Array(Math.floor(heard.length * 16000 / 22050) + 16000);
    for (let i = 0; i < audio.length && Math.floor(i * 22050 / 16000) < heard.length; i++) audio[i] = heard[Math.floor(i * 22050 / 16000)];
    for (let at = 0; at < audio.length; at += 512) channel.port1.postMessage({ type: 'chunk', samples: audio.slice(at, at + 512), at });
    const deadline = performance.now() + 30_000;
    const speech = () => window.__messages.filter((m) => m.id === started.id && m.event === 'speech');
    while (!speech().some((m) => m.data.type === 'speech_end') && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    let clip = await window.__call('audio_clip', { from: 0 });
    while (clip.end.result?.position < audio.length && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));   // chunks still on their way through the port
      clip = await window.__call('audio_clip', { from: 0 });
    }
    const stopped = await window.__call('unlisten', {});
    return { started, speech: speech(), clip, stopped, total: audio.length };
  });
  assert.deepEqual(ok(live.started), { sample_rate: 16000 });
  assert.deepEqual(live.speech.map((m) => m.data.type).slice(0, 2), ['speech_start', 'speech_end'], JSON.stringify(live.speech).slice(0, 400));
  assert.equal(live.speech[1].data.samples.typed, 'Float32Array');
  assert.equal(ok(live.clip).position, live.total);
  assert.deepEqual(ok(live.clip).samples, { typed: 'Float32Array', length: live.total });
  assert.equal(ok(live.stopped), null);

  // speech to text
  assert.equal((await load('m/whisper-base/')).kind, 'transcription');
  called.add('transcribe');
  const heard = await page.evaluate(() => window.__call('transcribe', { samples: window.__heard(), sample_rate: 22050 }));
  assert.match(ok(heard).text, /hello/i);
  assert.deepEqual(heard.events.map((e) => e.event), ['transcript']);
  assert.equal(heard.events[0].data.text, ok(heard).text);

  // a one-pass bundle (denoising)
  await load(`fixtures/${DIFFUSION}/`);
  const source = path.join(FIXTURE_CACHE, DIFFUSION);
  const reference = JSON.parse(fs.readFileSync(path.join(source, 'expected.json'), 'utf8')).references[0];
  const request = runRequestOf(parseArgs([source, '--input', `input_ids=${JSON.stringify(reference.input_ids)}`,
    '--steps', String(reference.num_steps), '--seed', String(reference.seed)]));
  const ran = await call('run', request);
  assert.equal(ok(ran).result.steps, reference.num_steps);
  assert.equal(ok(ran).result.seed, reference.seed);
  assert.deepEqual(ran.events.map((e) => [e.event, e.data.step]), Array.from({ length: reference.num_steps }, (_, i) => ['step', i + 1]));
  assert.ok(ok(ran).images.length === 1 && ok(ran).images[0].png.typed === 'Uint8Array');

  assert.deepEqual(VERBS.filter((v) => !called.has(v)), [], 'verbs not called');
});

test('unknown verbs, unknown arguments and malformed calls are refused by name', { timeout: TIMEOUTS.file, skip: missing ? 'bundles missing' : false }, async () => {
  refused(await call('detectSpeech', {}), 'input', /unknown verb "detectSpeech"; the worker takes configure, boot, load, /);
  refused(await call('generate', { inputIds: [1] }), 'input', /generate: unknown argument "inputIds"; it takes messages, prompt, input_ids, options, images/);
  refused(await call('load', { bundleUrl: 'x' }), 'input', /load: unknown argument "bundleUrl"/);
  refused(await call('transcribe', { samples: [1], sample_rate: 16000 }), 'input', /transcribe: samples: expected a Float32Array/);
  const raw = (m) => page.evaluate((m) => window.__raw(m), m);
  assert.match((await raw({ id: 5, type: 'generate' })).error.message, /a call needs a string "verb"/);
  assert.match((await raw({ id: 6, verb: 'ping', args: [] })).error.message, /ping: "args" must be an object/);
  assert.match((await raw({ id: 7, verb: 'ping', args: {}, extra: 1 })).error.message, /a call has only id, verb and args, found "extra"/);
  assert.deepEqual((await raw(null)).id, -1);
});
