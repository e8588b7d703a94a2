// A newcomer's first minutes (issue 24): pages that need the microphone say so plainly, before
// anything is downloaded, in a Chromium with no microphone at all (launched without the fake
// device flags); the model menus name the models as models/index.json labels them, online and
// offline, and an offline page served by the service worker logs no failed request for it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { watchModelRequests } from './lib/page-states.mjs';
import { waitForControl } from './lib/pwa.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { normalizeText, renderSpeech } from './lib/voice.mjs';

const INDEX = JSON.parse(fs.readFileSync(path.join(ROOT, 'public', 'models', 'index.json'), 'utf8')).bundles;
const labelOf = (name) => INDEX.find((b) => b.name === name).label;
const WHISPER = path.join(ROOT, 'public', 'models', 'whisper-base');
const haveWhisper = fs.existsSync(path.join(WHISPER, 'manifest.json'));
const SENTENCE = 'Please open the front door.';
const WORK = path.join(ROOT, 'build', 'e2e', `page-states-${process.pid}`);
const NO_MIC = (then) => `No microphone was found. Plug one in or allow this page to use it, then ${then}.`;
// long enough for a request the click started to be seen
const SETTLE_MS = 1500;

let server, run;
before(async () => {
  server = await startServer({ root: siteDir() });
  run = await launchBrowser();   // no fake microphone: this Chromium has no audio input
});
after(async () => {
  await run?.browser.close();
  await server?.stop();
  fs.rmSync(WORK, { recursive: true, force: true });
});

/** The error banner with ``testid``: its text and kind, once shown. */
async function shownError(page, testid) {
  const banner = page.getByTestId(testid);
  await banner.waitFor({ state: 'visible', timeout: TIMEOUTS.page });
  return { text: (await banner.locator('.error-text').textContent()).trim(), kind: await banner.getAttribute('data-kind') };
}

test('voice page without a microphone: Start says so plainly and downloads nothing', { timeout: TIMEOUTS.file }, async () => {
  const models = watchModelRequests(run.context);
  const page = await run.context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  try {
    await page.goto(`${server.url}voice.html`);
    await page.waitForFunction(() => window.__onnxpipeVoice?.controller, null, { timeout: TIMEOUTS.page });
    assert.equal(await page.getByTestId('voice-empty').textContent(), 'Press Start and ask something out loud.');
    await page.getByTestId('voice-start').click();
    const shown = await shownError(page, 'voice-error');
    assert.equal(shown.text, NO_MIC('press Start'));
    assert.equal(shown.kind, 'device');
    assert.doesNotMatch(shown.text, /internal|\(device\)/);
    const state = await page.evaluate(() => JSON.parse(JSON.stringify(window.__onnxpipeVoice.state)));
    assert.deepEqual([state.lastError.kind, state.lastError.during], ['device', 'microphone']);
    assert.equal(state.running, false);
    // the page around the banner agrees: not started, and what to do next
    assert.equal(await page.getByTestId('voice-status').textContent(), 'Not started: no microphone was found.');
    assert.equal(await page.getByTestId('voice-empty').textContent(), 'Press Start again once the problem above is fixed.');
    assert.equal(await page.getByTestId('voice-start').isEnabled(), true, 'Start can be pressed again');
    await page.waitForTimeout(SETTLE_MS);
    for (const role of ['vad', 'asr', 'llm', 'voice']) {
      assert.equal(await page.getByTestId(`voice-model-${role}`).getAttribute('data-state'), 'idle', `${role} was not loaded`);
    }
    assert.deepEqual(models, [], 'no model file was asked for');
    assert.deepEqual(errors, []);
    assert.deepEqual(run.offsite, []);
    // the voice picker names the voices as index.json does
    const voices = await page.getByTestId('voice-bundle').locator('option').allTextContents();
    assert.deepEqual(voices.slice(0, 2), [labelOf('piper-en-us-joe'), labelOf('kokoro-82m')]);
  } catch (error) {
    console.error(run.logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await page.close();
  }
});

test('voice page with the microphone refused: Start says how to allow it, and downloads nothing', { timeout: TIMEOUTS.file }, async () => {
  const models = watchModelRequests(run.context);
  const page = await run.context.newPage();
  // the browser's answer when the user (or a site setting) refused the microphone
  await page.addInitScript(() => {
    const query = navigator.permissions.query.bind(navigator.permissions);
    navigator.permissions.query = (descriptor) => (descriptor.name === 'microphone' ? Promise.resolve({ state: 'denied' }) : query(descriptor));
    navigator.mediaDevices.getUserMedia = () => Promise.reject(new DOMException('Permission denied', 'NotAllowedError'));
  });
  try {
    await page.goto(`${server.url}voice.html`);
    await page.waitForFunction(() => window.__onnxpipeVoice?.controller, null, { timeout: TIMEOUTS.page });
    await page.getByTestId('voice-start').click();
    const shown = await shownError(page, 'voice-error');
    assert.equal(shown.text, 'This page is not allowed to use the microphone. ' +
      'Allow it in the browser\'s site settings (the icon left of the address), then press Start.');
    assert.equal(shown.kind, 'permission');
    assert.equal(await page.getByTestId('voice-status').textContent(), 'Not started: this page is not allowed to use the microphone.');
    await page.waitForTimeout(SETTLE_MS);
    assert.deepEqual(models, [], 'no model file was asked for');
  } finally {
    await page.close();
  }
});

test('transcribe page without a microphone: Record says so plainly, a dropped file still works', { timeout: TIMEOUTS.file }, async (t) => {
  if (!haveWhisper) return t.skip('public/models/whisper-base missing: run make models');
  const wav = renderSpeech(SENTENCE, path.join(WORK, 'sentence.wav'));
  const models = watchModelRequests(run.context);
  const page = await run.context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  try {
    await page.goto(`${server.url}transcribe.html`);
    await page.waitForFunction(() => Boolean(window.__onnxpipeTranscribe), null, { timeout: TIMEOUTS.page });
    await page.getByTestId('transcribe-record').click();
    const shown = await shownError(page, 'transcribe-error');
    assert.equal(shown.text, NO_MIC('press Record'));
    assert.equal(shown.kind, 'device');
    assert.equal(await page.getByTestId('transcribe-status').textContent(), 'Not recording: no microphone was found. A dropped file still works.');
    assert.equal(await page.getByTestId('transcribe-record').textContent(), 'Record');
    await page.waitForTimeout(SETTLE_MS);
    assert.deepEqual(models, [], 'no model file was asked for');

    await page.getByTestId('transcribe-file').setInputFiles(wav);
    // the page was left 'failed' by the microphone: wait for this file's own outcome
    await page.waitForFunction(() => {
      const { status, lastError } = window.__onnxpipeTranscribe.state;
      return status === 'done' || (status === 'failed' && lastError?.kind !== 'device');
    }, null, { timeout: TIMEOUTS.load + TIMEOUTS.generate, polling: 100 });
    const state = await page.evaluate(() => JSON.parse(JSON.stringify(window.__onnxpipeTranscribe.state)));
    assert.equal(state.lastError, null, JSON.stringify(state.lastError));
    assert.equal(normalizeText(state.text), normalizeText(SENTENCE), `heard "${state.text}"`);
    assert.equal(await page.getByTestId('transcribe-error').isHidden(), true, 'the microphone message went with the new transcription');
    // the watcher sees the worker's requests: the file's transcription asked for the recogniser
    assert.ok(models.some((p) => p.startsWith('/models/whisper-base/')), JSON.stringify(models));
    assert.deepEqual(errors, []);
    assert.deepEqual(run.offsite, []);
  } catch (error) {
    console.error(run.logs.slice(-30).join('\n'));
    throw error;
  } finally {
    await page.close();
  }
});

/** The option texts of a page's model menu (data-testid ``testid``) once it is filled. */
async function menuLabels(page, testid) {
  await page.waitForFunction((id) => document.querySelector(`[data-testid=${id}] option`), testid, { timeout: TIMEOUTS.page });
  return page.getByTestId(testid).locator('option').allTextContents();
}

test('model menus use index.json labels, online and offline; offline, nothing fails for index.json', { timeout: TIMEOUTS.file }, async () => {
  const offlineServer = await startServer({ root: siteDir() });
  const context = await run.browser.newContext();
  const failed = [];
  const consoleErrors = [];
  context.on('requestfailed', (r) => failed.push(`${r.url()} ${r.failure()?.errorText}`));
  try {
    const chat = await context.newPage();
    chat.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    await chat.goto(offlineServer.url);
    const textLabels = INDEX.filter((b) => b.kind === 'text').map((b) => b.label);
    assert.deepEqual(await menuLabels(chat, 'bundle-select'), textLabels);
    const tts = await context.newPage();
    await tts.goto(`${offlineServer.url}tts.html`);
    const speechLabels = await menuLabels(tts, 'bundle-select');
    assert.equal(speechLabels[0], labelOf('piper-en-us-joe'), 'the demo voice is named as index.json names it, not by its folder');
    assert.ok(!speechLabels.includes('piper-en-us-joe'), JSON.stringify(speechLabels));
    await waitForControl(chat);

    // offline: the network is gone and nothing listens on the port any more
    await context.setOffline(true);
    await offlineServer.stop();
    failed.length = 0;
    consoleErrors.length = 0;
    for (const page of [chat, tts]) {
      const response = await page.reload();
      assert.equal(response.fromServiceWorker(), true, `${page.url()} did not come from the service worker`);
    }
    assert.deepEqual(await menuLabels(chat, 'bundle-select'), textLabels, 'offline, the chat menu still names its models');
    assert.deepEqual(await menuLabels(tts, 'bundle-select'), speechLabels);
    await chat.waitForTimeout(SETTLE_MS);
    assert.deepEqual(failed.filter((f) => f.includes('/models/index.json')), [], 'a failed request for index.json');
    assert.deepEqual(consoleErrors.filter((e) => /index\.json|Failed to load resource/.test(e)), [], 'console errors offline');
    console.log(`# offline: menus ${JSON.stringify(textLabels)} / ${JSON.stringify(speechLabels)}; other failed requests: ${failed.length ? failed.join(', ') : 'none'}`);
  } finally {
    await context.close();
    await offlineServer.stop();
  }
});
