// Self-healing on the speech paths (issue 14, docs/browser-runtime.md "Self-healing"), with the
// real Piper voice (public/models/piper-en-us-joe, `make models`): the speech page and an
// <onnxpipe-speak> on a host page each speak a text, their runtime worker is killed after the
// first sentence of the next speech, the pending speech fails with a 'stopped' error, the page
// (its runtime notice) and the element (its status line, onnxpipe-runtime) say so, a new worker
// loads the voice from this device's storage (the server's log shows no model file fetched
// again) and the same text gives the same audio (sha256) as before the kill: noise off, so it is
// the same by construction. One Chromium; one page per bundle.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser } from './lib/browser.mjs';
import { ensureManifest } from './lib/runtime.mjs';
import { bundleGets, notice, recordStatuses, restored } from './lib/self-heal.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { startWidgetServer, whenReady } from './lib/widget.mjs';

const BUNDLE = 'piper-en-us-joe';
const SOURCE = path.join(ROOT, 'public', 'models', BUNDLE);
// <onnxpipe-speak> has no voice controls: the widget speaks a copy of the voice whose
// pipeline.json makes noise off the default (the same files, hard-linked)
const QUIET = `${BUNDLE}-quiet`;
const VAD = 'silero-vad';
const WORK = path.join(ROOT, 'build', 'e2e', `self-heal-speech-${process.pid}`);
const QUIET_DIR = path.join(WORK, 'voices', QUIET);
const HOST_DIR = path.join(WORK, 'host');
const TEXT = 'The storm passed over the valley. Most of the roofs had held. Nobody spoke. The river kept rising.';
// the speech that is killed: long, so a kill that takes a while to land (the widget's) still
// lands mid-speech; only what is made before the kill costs time
const KILL_TEXT = [TEXT, TEXT, TEXT].join(' ');
const NOISE_OFF = { noise_scale: 0, noise_w: 0 };
const have = [BUNDLE, VAD].every((b) => ['manifest.json', 'pipeline.json'].every((f) => fs.existsSync(path.join(ROOT, 'public', 'models', b, f))));
const skipWhy = `public/models/${BUNDLE}/ or ${VAD}/ is not built: run make models`;

let server, browser, context, offsite, logs;

/** A hard-linked copy of the voice whose inputs default to noise off. */
function quietCopy() {
  fs.rmSync(QUIET_DIR, { recursive: true, force: true });
  fs.mkdirSync(QUIET_DIR, { recursive: true });
  for (const { path: rel } of JSON.parse(fs.readFileSync(path.join(SOURCE, 'manifest.json'), 'utf8')).files) {
    if (rel !== 'pipeline.json') fs.linkSync(path.join(SOURCE, rel), path.join(QUIET_DIR, rel));
  }
  const doc = JSON.parse(fs.readFileSync(path.join(SOURCE, 'pipeline.json'), 'utf8'));
  for (const [name, value] of Object.entries(NOISE_OFF)) doc.pipeline.inputs[name].default = value;
  fs.writeFileSync(path.join(QUIET_DIR, 'pipeline.json'), JSON.stringify(doc, null, 2));
  ensureManifest(QUIET_DIR);
}

before(async () => {
  if (!have) return;
  quietCopy();
  fs.mkdirSync(HOST_DIR, { recursive: true });
  fs.writeFileSync(path.join(HOST_DIR, 'index.html'), `<!doctype html><meta charset="utf-8"><title>host</title>
<script type="module" src="%ONNXPIPE_ORIGIN%/widget.js"></script>
<onnxpipe-speak id="speak" bundle="%ONNXPIPE_ORIGIN%/e2e-voices/${QUIET}/"></onnxpipe-speak>`);
  server = await startWidgetServer({ hostDir: HOST_DIR, mounts: { '/e2e-voices/': path.join(WORK, 'voices') } });
  ({ browser, context, offsite, logs } = await launchBrowser());
});
after(async () => {
  await browser?.close();
  await server?.stop();
  fs.rmSync(WORK, { recursive: true, force: true });
});

/** Listen (client.listen, a voice-activity bundle loaded) to the speech page's last take fed as
 * 16 kHz chunks, then a second of silence; wait for the segment's end. ``reloading``: a
 * replacement worker was reloading the bundle when the listen was made. */
const listenToTake = (page) => page.evaluate(async (timeout) => {
  const { client, controller } = window.__onnxpipeTts;
  const reloading = window.__statuses.at(-1)?.state === 'stopped';
  const audio = new Float32Array(controller.take.length + 16000);
  let at = 0;
  for (const chunk of controller.take.chunks) audio.set(chunk, (at += chunk.length) - chunk.length);
  const channel = new MessageChannel();
  const seen = [];
  let failed = null;
  try {
    const rate = await client.listen(channel.port2, (e) => seen.push({ type: e.type, start: e.start, end: e.end }), (e) => { failed = e.message; });
    for (let from = 0; from < audio.length; from += 4096) channel.port1.postMessage({ type: 'chunk', samples: audio.slice(from, from + 4096), at: from });
    const deadline = performance.now() + timeout;
    while (!seen.some((e) => e.type === 'speech_end') && !failed && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await client.stopListening();
    return { rate, seen, failed, reloading };
  } catch (e) {
    return { error: { kind: e.kind, message: e.message }, reloading };
  }
}, TIMEOUTS.generate);

/** Press Speak on the speech page (``kill``: end the worker when the first sentence shows);
 * wait until it is ready again. Resolves to the outcome and the sha256 of the take's samples. */
async function speakOnPage(page, kill = false) {
  await page.getByTestId('tts-text').fill(kill ? KILL_TEXT : TEXT);
  if (kill) {
    await page.evaluate(() => {
      // the sentence list grows inside the audio event's handler: the kill lands before the next one
      const observer = new MutationObserver((records) => {
        if (!records.some((r) => r.addedNodes.length)) return;
        observer.disconnect();
        window.__onnxpipeTts.client.debug.killWorker();
      });
      observer.observe(document.querySelector('[data-testid=tts-sentences]'), { childList: true });
    });
  }
  await page.getByTestId('tts-speak').click();
  await page.waitForFunction(() => window.__onnxpipeTts.state.status === 'ready'
    && ['done', 'failed'].includes(document.querySelector('[data-testid=tts-status]').dataset.state),
  null, { timeout: TIMEOUTS.generate, polling: 50 });
  return page.evaluate(async () => {
    const { state, controller } = window.__onnxpipeTts;
    const all = new Float32Array(controller.take.length);
    let at = 0;
    for (const chunk of controller.take.chunks) all.set(chunk, (at += chunk.length) - chunk.length);
    return {
      status: document.querySelector('[data-testid=tts-status]').dataset.state, error: state.lastError,
      sentences: state.sentences.length, samples: all.length,
      sha: [...new Uint8Array(await crypto.subtle.digest('SHA-256', all.buffer))].map((b) => b.toString(16).padStart(2, '0')).join(''),
    };
  });
}

describe('the speech page heals its runtime worker', { timeout: TIMEOUTS.file }, () => {
  let page, first;
  before(async () => {
    if (!have) return;
    page = await context.newPage();
    await page.goto(`${server.url}tts.html?onnxpipe-debug`);
    await page.waitForFunction(() => Boolean(window.__onnxpipeTts?.controller?.state)
      && document.querySelector('[data-testid=bundle-select] option'), null, { timeout: TIMEOUTS.page, polling: 50 });
    await recordStatuses(page, '__onnxpipeTts');
    await page.getByTestId('bundle-select').selectOption(BUNDLE);
    await page.getByTestId('ep-select').selectOption('wasm');
    await page.getByTestId('load-button').click();
    await page.waitForFunction(() => ['ready', 'idle'].includes(window.__onnxpipeTts.state.status) && window.__onnxpipeTts.state.bundle,
      null, { timeout: TIMEOUTS.load, polling: 100 });
    assert.equal(await page.evaluate(() => window.__onnxpipeTts.state.loaded?.bundle), BUNDLE,
      `load: ${JSON.stringify(await page.evaluate(() => window.__onnxpipeTts.state.lastError))}\n${logs.slice(-20).join('\n')}`);
    for (const [name, value] of Object.entries(NOISE_OFF)) await page.getByTestId(`tts-control-${name}`).fill(String(value));
  });
  after(() => page?.close());

  test('killed mid-speech: a stopped error, a notice, the voice back from storage, the same audio', async (t) => {
    if (!have) return t.skip(skipWhy);
    first = await speakOnPage(page);
    assert.equal(first.status, 'done', JSON.stringify(first));
    assert.ok(first.sentences >= 2 && first.samples > 0, JSON.stringify(first));
    const gets = bundleGets(server, `/models/${BUNDLE}/`, SOURCE);
    assert.ok(gets['en_US-joe-medium.wasm.onnx'] >= 1, `the first load fetched the voice: ${JSON.stringify(gets)}`);

    const killed = await speakOnPage(page, true);
    assert.equal(killed.status, 'failed', JSON.stringify(killed));
    assert.equal(killed.error?.kind, 'stopped', `the pending speech was rejected: ${JSON.stringify(killed)}`);
    assert.equal(killed.error.during, 'speak');
    assert.match(killed.error.message, /^the runtime stopped: the worker ended \(terminated or crashed\); restarting$/);
    assert.ok(killed.sentences >= 1 && killed.sentences < 3 * first.sentences, `killed after ${killed.sentences} sentences`);
    const { last, statuses } = await restored(page, 1, logs);
    assert.equal(statuses[0].state, 'stopped', 'the death was announced before the reload');
    assert.equal(last.bundle, BUNDLE);
    const shown = await notice(page);
    assert.equal(shown.state, 'restored');
    assert.match(shown.text, new RegExp(`restarted \\(the worker ended .*\\): ${BUNDLE} reloaded from this device`));
    assert.deepEqual(bundleGets(server, `/models/${BUNDLE}/`, SOURCE), gets, 'no voice file was fetched again: the reload read this device\'s storage');

    const again = await speakOnPage(page);
    assert.equal(again.status, 'done', JSON.stringify(again));
    assert.deepEqual({ sentences: again.sentences, samples: again.samples, sha: again.sha },
      { sentences: first.sentences, samples: first.samples, sha: first.sha }, 'the same text gives the same audio after the restart');
    console.log(`# speech page: killed after ${killed.sentences} of ${3 * first.sentences} sentences; notice "${shown.text}"; audio sha256 ${first.sha.slice(0, 16)} before and after`);
  });

  // the voice page's listening (web/src/voice/vad-link.ts): after its VAD worker died, Start
  // listens again while the replacement worker may still be reloading the VAD bundle
  test('a listen made while the bundle reloads waits for it and hears the same', async (t) => {
    if (!have || !first) return t.skip(have ? 'the speech test failed' : skipWhy);
    await page.evaluate((url) => window.__onnxpipeTts.client.load(url, { ep: 'wasm' }), `${server.url}models/${VAD}/`);
    const before = await listenToTake(page);
    assert.equal(before.rate, 16000, JSON.stringify(before));
    assert.ok(before.seen.some((e) => e.type === 'speech_end'), `the take is heard as speech: ${JSON.stringify(before)}`);
    await page.evaluate(() => window.__onnxpipeTts.client.debug.killWorker());
    await page.waitForFunction(() => window.__statuses.filter((s) => s.state === 'stopped').length >= 2, null, { timeout: TIMEOUTS.load, polling: 50 });
    const during = await listenToTake(page);
    assert.equal(during.reloading, true, 'the listen was made before the reload ended');
    assert.deepEqual(during, { ...before, reloading: true }, 'the same events after the restart');
    const { last } = await restored(page, 2, logs);
    assert.equal(last.bundle, VAD);
    console.log(`# listen during the reload: ${JSON.stringify(during.seen)}`);
  });
});

describe('<onnxpipe-speak> heals its frame\'s runtime worker', { timeout: TIMEOUTS.file }, () => {
  test('killed mid-speech: the element says so, reloads from storage, speaks the same audio', async (t) => {
    if (!have) return t.skip(skipWhy);
    const host = await context.newPage();
    await host.goto(server.hostUrl);
    const ready = await whenReady(host, '#speak', TIMEOUTS.load);
    assert.ok(ready.info, `widget not ready: ${JSON.stringify(ready.error)}\n${logs.slice(-20).join('\n')}`);
    assert.equal(ready.info.bundle, QUIET);
    const frameWorker = host.workers().find((w) => w.url().includes('runtime.worker'));
    assert.ok(frameWorker, `the frame's runtime worker: ${host.workers().map((w) => w.url())}`);
    // ends the worker as a crash would (the frame exposes no test hooks)
    await host.exposeFunction('__killFrameWorker', () => frameWorker.evaluate(() => self.close()).catch(() => {}));
    const speak = (kill) => host.evaluate(async ({ text, killText, kill }) => {
      const el = document.querySelector('#speak');
      let heard = 0;
      const onAudio = () => {
        if (++heard === 1 && kill) window.__killFrameWorker();
      };
      el.addEventListener('onnxpipe-audio', onAudio);
      try {
        const r = await el.speak(kill ? killText : text);
        const digest = await crypto.subtle.digest('SHA-256', await r.wav.arrayBuffer());
        return { sentences: r.sentences.length, heard, sha: [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('') };
      } catch (e) {
        return { error: { kind: e.kind, message: e.message }, heard };
      } finally {
        el.removeEventListener('onnxpipe-audio', onAudio);
      }
    }, { text: TEXT, killText: KILL_TEXT, kill });
    const status = () => host.locator('#speak').evaluate((el) => el.shadowRoot.querySelector('.status').textContent);

    const first = await speak(false);
    assert.ok(first.sha && first.sentences >= 2, JSON.stringify(first));
    const gets = bundleGets(server, `/e2e-voices/${QUIET}/`, QUIET_DIR);
    assert.ok(gets['en_US-joe-medium.wasm.onnx'] >= 1, `the first load fetched the voice: ${JSON.stringify(gets)}`);
    await host.evaluate(() => {
      window.__runtime = [];
      document.querySelector('#speak').addEventListener('onnxpipe-runtime', (e) => window.__runtime.push(e.detail));
    });

    const killed = await speak(true);
    assert.equal(killed.error?.kind, 'stopped', `the pending speech was rejected: ${JSON.stringify(killed)}`);
    assert.match(killed.error.message, /^the runtime stopped: the worker ended \(terminated or crashed\); restarting$/);
    assert.ok(killed.heard >= 1 && killed.heard < 3 * first.sentences, `killed after ${killed.heard} of ${3 * first.sentences} sentences`);
    await host.waitForFunction(() => window.__runtime.some((r) => r.state !== 'stopped'), null, { timeout: TIMEOUTS.load, polling: 100 });
    const seen = await host.evaluate(() => window.__runtime);
    assert.deepEqual(seen.map((r) => r.state), ['stopped', 'restored'], JSON.stringify(seen));
    const shown = await status();
    assert.match(shown, new RegExp(`restarted .*${QUIET} reloaded from this device`));
    assert.deepEqual(bundleGets(server, `/e2e-voices/${QUIET}/`, QUIET_DIR), gets, 'no voice file was fetched again');

    const again = await speak(false);
    assert.deepEqual({ sentences: again.sentences, sha: again.sha }, { sentences: first.sentences, sha: first.sha },
      'the same text gives the same WAV after the restart');
    console.log(`# widget: killed after ${killed.heard} of ${3 * first.sentences} sentences; status "${shown}"; WAV sha256 ${first.sha.slice(0, 16)} before and after`);
    await host.close();
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  });
});
