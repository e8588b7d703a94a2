// The speech page end to end with the Piper voice (public/models/piper-en-us-joe): load it
// through the UI, speak a sentence, check the status, the real-time factor, the waveform
// picture and the downloadable WAV; stop a long text after its first sentence; then, with the
// server stopped, open the page again in the same Chromium profile and speak from the caches
// (service worker for the site, Cache API for the voice).
// A screenshot of the page after the first speech is saved to build/e2e/artifacts/tts.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchPersistent, siteDir, startServer } from './lib/browser.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = 'piper-en-us-joe';
const BUNDLE_DIR = path.join(ROOT, 'public', 'models', BUNDLE);
const ARTIFACTS = path.join(ROOT, 'build', 'e2e', 'artifacts');
const SAMPLE_RATE = 22050;
const TEXT = 'Every word of this sentence became sound inside the browser.';
const NUMBERS = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve'];
// a long first sentence: its first clause is spoken on its own, so the first audio comes sooner
const PARAGRAPH = 'When the storm finally passed over the valley, the villagers came out of their houses. ' +
  'Most of the roofs had held. Nobody spoke.';
const PARAGRAPH_PIECES = ['When the storm finally passed over the valley,', 'the villagers came out of their houses.',
  'Most of the roofs had held.', 'Nobody spoke.'];
const LONG_TEXT = NUMBERS.map((n) => `This is sentence ${n} of a text that is far too long to wait for.`).join(' ');
const missing = ['manifest.json', 'pipeline.json'].filter((f) => !fs.existsSync(path.join(BUNDLE_DIR, f)));
const skipWhy = `public/models/${BUNDLE}/ lacks ${missing.join(', ')}: run make models`;

let server, profile, visit, first;
before(async () => {
  if (missing.length) return;
  server = await startServer({ root: siteDir() });
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-e2e-tts-'));
});
after(async () => {
  await visit?.context.close();
  await server?.stop();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
});

/** One browser visit in the shared profile: the speech page opened, its controller up. */
async function openVisit(baseUrl) {
  const v = await launchPersistent(profile, { contextOptions: { viewport: { width: 1280, height: 900 } } });
  try {
    v.page = await v.context.newPage();
    await v.page.goto(`${baseUrl}tts.html`, { timeout: TIMEOUTS.page });
    await v.page.waitForFunction(() => Boolean(window.__onnxpipeTts?.controller)
      && document.querySelector('[data-testid=bundle-select] option'), null, { timeout: TIMEOUTS.page, polling: 50 });
  } catch (error) {
    console.error(v.logs.slice(-30).join('\n'));
    await v.context.close();
    throw error;
  }
  return v;
}

/** Press Load with the voice and WASM picked; resolves to the LoadedInfo and the load's wall time. */
async function loadVoice(page) {
  await page.getByTestId('bundle-select').selectOption(BUNDLE);
  await page.getByTestId('ep-select').selectOption('wasm');
  const t0 = performance.now();
  await page.getByTestId('load-button').click();
  await page.waitForFunction(() => ['ready', 'idle'].includes(window.__onnxpipeTts.state.status),
    null, { timeout: TIMEOUTS.load, polling: 100 });
  const state = await page.evaluate(() => ({
    loaded: window.__onnxpipeTts.state.loaded, error: window.__onnxpipeTts.state.lastError,
    threads: window.__onnxpipeTts.state.threads, isolated: self.crossOriginIsolated,
  }));
  assert.equal(state.error, null, `load failed: ${JSON.stringify(state.error)}`);
  assert.equal(state.loaded.kind, 'speech');
  assert.equal(state.loaded.sample_rate, SAMPLE_RATE);
  return { ...state, wallMs: performance.now() - t0 };
}

/** Type the text, press Speak, wait until the page is ready again; the page state then. */
async function speak(page, text, { stopAfterFirst = false } = {}) {
  await page.getByTestId('tts-text').fill(text);
  const t0 = performance.now();
  await page.getByTestId('tts-speak').click();
  let playingAtStop = null;
  if (stopAfterFirst) {
    await page.waitForFunction(() => window.__onnxpipeTts.state.sentences.length > 0, null, { timeout: TIMEOUTS.generate, polling: 20 });
    playingAtStop = await page.evaluate(() => window.__onnxpipeTts.state.playing);
    await page.getByTestId('tts-stop').click();
    // Stop silences playback at once, not when the worker answers
    assert.equal(await page.evaluate(() => window.__onnxpipeTts.state.playing), false, 'playback still running after Stop');
  }
  await page.waitForFunction(() => window.__onnxpipeTts.state.status === 'ready'
    && ['done', 'cancelled', 'failed'].includes(document.querySelector('[data-testid=tts-status]').dataset.state),
  null, { timeout: TIMEOUTS.generate, polling: 50 });
  const state = await page.evaluate(() => {
    const s = window.__onnxpipeTts.state;
    return {
      result: s.lastResult, error: s.lastError, samples: s.samples, sentences: s.sentences, wavBytes: s.wavBytes,
      events: s.events, firstAudioMs: s.firstAudioMs,
      status: document.querySelector('[data-testid=tts-status]').dataset.state,
      rtfText: document.querySelector('[data-testid=tts-rtf]').textContent,
    };
  });
  return { ...state, playingAtStop, wallMs: performance.now() - t0 };
}

/** Columns of the waveform canvas with a painted stroke taller than a flat line. */
async function waveformColumns(page) {
  return page.evaluate(() => {
    const canvas = document.querySelector('[data-testid=tts-waveform]');
    const { width, height } = canvas;
    const data = canvas.getContext('2d').getImageData(0, 0, width, height).data;
    let tall = 0;
    let painted = 0;
    for (let x = 0; x < width; x++) {
      let n = 0;
      for (let y = 0; y < height; y++) if (data[(y * width + x) * 4 + 3] > 0) n++;
      if (n > 0) painted++;
      if (n >= 4) tall++;
    }
    return { width, height, painted, tall, samples: Number(canvas.dataset.samples) };
  });
}

/** The bytes behind the Download WAV link, as a click downloads them (a page may not fetch its
 * blob: URL: the site's CSP allows connect-src 'self' only, docs/security.md). */
async function downloadedWav(page) {
  const link = page.getByTestId('tts-download');
  assert.equal(await link.getAttribute('download'), 'speech.wav');
  const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
  assert.equal(download.suggestedFilename(), 'speech.wav');
  return fs.readFileSync(await download.path());
}

/** RIFF/WAVE chunks -> {format, channels, rate, byteRate, blockAlign, bits, dataBytes}. */
function parseWav(buf) {
  assert.ok(buf.length >= 44, `WAV of ${buf.length} bytes`);
  assert.equal(buf.toString('ascii', 0, 4), 'RIFF');
  assert.equal(buf.toString('ascii', 8, 12), 'WAVE');
  assert.equal(buf.readUInt32LE(4), buf.length - 8, 'RIFF size is the file size - 8');
  const out = {};
  for (let at = 12; at + 8 <= buf.length;) {
    const id = buf.toString('ascii', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    if (id === 'fmt ') {
      Object.assign(out, {
        format: buf.readUInt16LE(at + 8), channels: buf.readUInt16LE(at + 10), rate: buf.readUInt32LE(at + 12),
        byteRate: buf.readUInt32LE(at + 16), blockAlign: buf.readUInt16LE(at + 20), bits: buf.readUInt16LE(at + 22),
      });
    } else if (id === 'data') {
      out.dataBytes = size;
      assert.ok(at + 8 + size <= buf.length, 'data chunk runs past the end of the file');
    }
    at += 8 + size + (size % 2);
  }
  return out;
}

/** The checks every successful speech must pass; returns the figures for the log. */
async function checkSpeech(page, run, { text }) {
  assert.equal(run.error, null, `speak failed: ${JSON.stringify(run.error)}`);
  assert.equal(run.status, 'done');
  assert.equal(run.result.finish_reason, 'done');
  assert.ok(run.result.sentences.length >= 1);
  assert.equal(run.result.sentences.length, run.sentences.length, 'one audio event per sentence');
  assert.equal(run.result.sample_rate, SAMPLE_RATE);
  const spoken = run.result.sentences.map((s) => s.text).join(' ').replace(/\s+/g, ' ').trim();
  assert.equal(spoken, text.replace(/\s+/g, ' ').trim(), 'the sentences cover the text');
  // seconds of audio for a dozen words: generous bounds, the voice speaks about 2-3 words/s
  assert.ok(run.result.audio_seconds > 1.5 && run.result.audio_seconds < 15, `audio ${run.result.audio_seconds} s`);

  const rtf = Number(/([\d.]+)x real time/.exec(run.rtfText)?.[1]);
  assert.ok(rtf > 0, `RTF shown: "${run.rtfText}"`);
  assert.ok(Math.abs(rtf - run.result.real_time_factor) < 0.06, `shown ${rtf} vs result ${run.result.real_time_factor}`);

  const wave = await waveformColumns(page);
  assert.equal(wave.samples, run.samples);
  assert.ok(wave.tall > wave.width * 0.2, `waveform mostly blank: ${JSON.stringify(wave)}`);

  const wav = parseWav(await downloadedWav(page));
  assert.deepEqual(
    { format: wav.format, channels: wav.channels, rate: wav.rate, bits: wav.bits, blockAlign: wav.blockAlign, byteRate: wav.byteRate },
    { format: 1, channels: 1, rate: SAMPLE_RATE, bits: 16, blockAlign: 2, byteRate: SAMPLE_RATE * 2 });
  assert.equal(wav.dataBytes, run.samples * 2, 'WAV data holds every sample the page received');
  assert.ok(Math.abs(wav.dataBytes / 2 / SAMPLE_RATE - run.result.audio_seconds) < 0.01,
    `WAV ${wav.dataBytes / 2 / SAMPLE_RATE} s vs audio_seconds ${run.result.audio_seconds}`);
  return { rtf, wave, wav };
}

test('speech page: the Piper voice speaks a sentence, draws it and offers the WAV', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  visit = await openVisit(server.url);
  const { page, offsite, logs } = visit;
  try {
    assert.equal(new URL(await page.getByTestId('nav-chat').evaluate((a) => a.href)).pathname, '/');
    const loaded = await loadVoice(page);
    const names = loaded.loaded.controls.map((c) => c.name);
    for (const name of names) assert.equal(await page.getByTestId(`tts-control-${name}`).count(), 1, `no input for ${name}`);
    const run = await speak(page, TEXT);
    const figures = await checkSpeech(page, run, { text: TEXT });
    first = run;

    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const shot = path.join(ARTIFACTS, 'tts.png');
    await page.screenshot({ path: shot, fullPage: true });
    const r = run.result;
    console.log(`# tts: ${r.sentences.length} sentence(s), ${r.audio_seconds.toFixed(2)} s audio in ${r.compute_seconds.toFixed(2)} s = ` +
      `${r.real_time_factor.toFixed(1)}x real time (page wall ${(run.wallMs / 1000).toFixed(2)} s); threads ${loaded.threads} ` +
      `(isolated ${loaded.isolated}); load ${Math.round(loaded.loaded.load_ms)} ms (boot ${Math.round(loaded.loaded.boot_ms)} ms, ` +
      `wall ${(loaded.wallMs / 1000).toFixed(1)} s); WAV ${figures.wav.dataBytes + 44} bytes; waveform ${figures.wave.tall}/${figures.wave.width} columns; ` +
      `controls ${names.join(', ')}; screenshot ${path.relative(ROOT, shot)}`);
    if (loaded.loaded.warnings.length) console.log(`# load warnings: ${loaded.loaded.warnings.join(' | ')}`);

    // the settings reach the voice: a longer phoneme length makes longer audio
    await page.getByTestId('tts-control-length_scale').fill('2');
    assert.match(await page.locator('[data-control=length_scale] .tts-control-speed').textContent(), /speed ×0\.50/);
    const slow = await speak(page, TEXT);
    assert.equal(slow.status, 'done', `slow speech: ${JSON.stringify(slow.error)}`);
    assert.ok(slow.result.audio_seconds > r.audio_seconds * 1.3,
      `length_scale 2: ${slow.result.audio_seconds.toFixed(2)} s vs ${r.audio_seconds.toFixed(2)} s at 1.0`);
    await page.getByTestId('tts-controls-reset').click();
    assert.equal(await page.getByTestId('tts-control-length_scale').inputValue(), '1');
    console.log(`# tts length_scale 2: ${slow.result.audio_seconds.toFixed(2)} s audio (${slow.result.real_time_factor.toFixed(1)}x real time)`);

    // a paragraph: the first clause comes first and is heard while the rest is still being made
    const para = await speak(page, PARAGRAPH);
    await checkSpeech(page, para, { text: PARAGRAPH });
    assert.deepEqual(para.sentences.map((x) => x.text), PARAGRAPH_PIECES);
    const kinds = para.events.map((e) => (e.type === 'audio' ? `audio${e.index}` : e.type));
    assert.deepEqual(kinds.filter((k) => k !== 'heard'), [...PARAGRAPH_PIECES.map((_, i) => `audio${i}`), 'done'],
      `events: ${kinds.join(' ')}`);
    const heard = kinds.indexOf('heard');
    assert.ok(heard > kinds.indexOf('audio0') && heard < kinds.indexOf(`audio${PARAGRAPH_PIECES.length - 1}`),
      `the first clause was not heard before the last piece arrived: ${kinds.join(' ')}`);
    const figure = Number(await page.getByTestId('tts-first-audio').getAttribute('data-ms'));
    assert.ok(figure > 0 && Math.abs(figure - para.firstAudioMs) < 1, `first audio shown ${figure} vs state ${para.firstAudioMs}`);
    assert.match(await page.getByTestId('tts-first-audio').textContent(), /^first audio \d+\.\d\d s$/);
    console.log(`# tts paragraph: first audio ${Math.round(para.firstAudioMs)} ms after Speak ` +
      `(first clause ${para.sentences[0].audio_seconds.toFixed(2)} s of ${para.result.audio_seconds.toFixed(2)} s); events ${kinds.join(' ')}`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  } catch (error) {
    console.error(logs.slice(-40).join('\n'));
    throw error;
  }
});

test('speech page: Stop after the first sentence ends the speech early; errors are shown; the page stays usable', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  if (!first) return t.skip('needs the first test');
  const { page, offsite, logs } = visit;
  try {
    const run = await speak(page, LONG_TEXT, { stopAfterFirst: true });
    assert.equal(run.error, null, `speak failed: ${JSON.stringify(run.error)}`);
    assert.equal(run.status, 'cancelled');
    assert.equal(run.result.finish_reason, 'cancelled');
    assert.ok(run.result.sentences.length >= 1 && run.result.sentences.length < NUMBERS.length,
      `${run.result.sentences.length} of ${NUMBERS.length} sentences made`);
    assert.equal(await page.getByTestId('tts-error').isHidden(), true, 'no error shown');
    assert.equal(await page.getByTestId('tts-speak').isEnabled(), true, 'Speak is usable again');
    assert.equal(await page.getByTestId('tts-stop').isDisabled(), true);
    // what was made before the stop is still offered, and matches what the page received
    const wav = parseWav(await downloadedWav(page));
    assert.equal(wav.dataBytes, run.samples * 2);

    // a worker error (nothing speakable) lands in the banner with its kind; Speak still works after
    const failed = await speak(page, '...');
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error?.kind, 'input', JSON.stringify(failed.error));
    const banner = page.getByTestId('tts-error');
    assert.equal(await banner.isVisible(), true);
    assert.equal(await banner.getAttribute('data-kind'), 'input');
    assert.equal(await page.getByTestId('tts-download').getAttribute('href'), null, 'no WAV offered for a failed speech');
    const again = await speak(page, TEXT);
    assert.equal(again.status, 'done', JSON.stringify(again.error));
    assert.equal(await banner.isHidden(), true, 'the banner clears on the next speech');
    console.log(`# tts cancel: stopped after ${run.result.sentences.length}/${NUMBERS.length} sentences ` +
      `(${run.result.audio_seconds.toFixed(2)} s audio; playing when stopped: ${run.playingAtStop}); wall ${(run.wallMs / 1000).toFixed(2)} s`);
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-40).join('\n'));
    throw error;
  } finally {
    await visit.context.close();
    visit = null;
  }
});

test('speech page offline: with the server stopped the page, runtime and voice come from the caches', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  if (!first) return t.skip('needs the first test');
  const baseUrl = server.url;
  await server.stop(); // nothing listens on the port any more: the network is really gone
  const served = [];
  visit = await openVisit(baseUrl);
  const { page, context, offsite, logs } = visit;
  context.on('requestfinished', (req) => served.push(req.url()));
  try {
    const loaded = await loadVoice(page);
    const run = await speak(page, TEXT);
    const figures = await checkSpeech(page, run, { text: TEXT });
    console.log(`# tts offline: ${run.result.audio_seconds.toFixed(2)} s audio at ${figures.rtf}x real time; ` +
      `load ${Math.round(loaded.loaded.load_ms)} ms from the caches; ${served.length} requests answered (service worker / caches)`);
    assert.deepEqual(offsite, []);
  } catch (error) {
    console.error(logs.slice(-40).join('\n'));
    throw error;
  }
});
