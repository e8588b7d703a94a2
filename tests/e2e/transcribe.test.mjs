// The transcribe page (/transcribe.html): a WAV picked in the file input, and a recording from
// the microphone (Chromium's fake capture playing a Piper-rendered sentence once), both come
// back as the sentence (ignoring case and punctuation), with Whisper base in the page's worker.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { fakeMicWav, normalizeText, renderSpeech } from './lib/voice.mjs';
import { readWav } from './lib/wav.mjs';

const BUNDLE = path.join(ROOT, 'public', 'models', 'whisper-base');
const missing = !fs.existsSync(path.join(BUNDLE, 'manifest.json'));
const SENTENCE = 'Please open the front door.';
const WORK = path.join(ROOT, 'build', 'e2e', `transcribe-${process.pid}`);
const SLOW = Number(process.env.ONNXPIPE_E2E_SLOW || 1);
const TEST_MS = Math.round(300_000 * SLOW);

let server, wav, mic, run;
before(async () => {
  if (missing) return;
  wav = renderSpeech(SENTENCE, path.join(WORK, 'sentence.wav'));
  mic = fakeMicWav(wav, path.join(WORK, 'mic.wav'), { before: 0.5, after: 1.5 });
  server = await startServer({ root: siteDir() });
  run = await launchBrowser({ fakeMicrophone: mic.path });
});
after(async () => {
  await run?.browser.close();
  await server?.stop();
  fs.rmSync(WORK, { recursive: true, force: true });
});

async function openPage() {
  const page = await run.context.newPage();
  await page.goto(`${server.url}transcribe.html`, { timeout: TIMEOUTS.page });
  await page.waitForFunction(() => Boolean(window.__onnxpipeTranscribe), null, { timeout: TIMEOUTS.page });
  return page;
}

async function finished(page) {
  await page.waitForFunction(() => ['done', 'failed'].includes(window.__onnxpipeTranscribe.state.status),
    null, { timeout: TIMEOUTS.load + TIMEOUTS.generate, polling: 100 });
  const state = await page.evaluate(() => JSON.parse(JSON.stringify(window.__onnxpipeTranscribe.state)));
  assert.equal(state.lastError, null, JSON.stringify(state.lastError));
  return state;
}

test('transcribe page: a picked WAV file', { timeout: TEST_MS }, async (t) => {
  if (missing) return t.skip('public/models/whisper-base missing: run make models');
  const page = await openPage();
  try {
    await page.getByTestId('transcribe-file').setInputFiles(wav);
    const state = await finished(page);
    assert.equal(normalizeText(state.text), normalizeText(SENTENCE), `heard "${state.text}"`);
    assert.equal(await page.getByTestId('transcribe-text').textContent(), state.text);
    const { samples, sampleRate } = readWav(wav);
    assert.ok(Math.abs(state.audioSeconds - samples.length / sampleRate) < 0.01, `${state.audioSeconds} s of audio`);
    assert.deepEqual(run.offsite, []);
    console.log(`# file: "${state.text}" (${state.audioSeconds.toFixed(2)} s in ${state.computeSeconds.toFixed(2)} s)`);
  } catch (error) {
    console.error(run.logs.slice(-30).join('\n'));
    throw error;
  }
});

test('transcribe page: a recording from the microphone', { timeout: TEST_MS }, async (t) => {
  if (missing) return t.skip('public/models/whisper-base missing: run make models');
  const page = await openPage();
  try {
    const record = page.getByTestId('transcribe-record');
    await record.click();
    await page.waitForFunction(() => window.__onnxpipeTranscribe.state.status === 'recording', null, { timeout: TIMEOUTS.page });
    await page.waitForTimeout(mic.seconds * 1000 + 500);   // the whole fake-microphone file
    await record.click();
    const state = await finished(page);
    assert.equal(normalizeText(state.text), normalizeText(SENTENCE), `heard "${state.text}"`);
    assert.equal(state.source, 'your recording');
    console.log(`# recording: "${state.text}" (${state.audioSeconds.toFixed(2)} s)`);
  } catch (error) {
    console.error(run.logs.slice(-30).join('\n'));
    throw error;
  }
});
