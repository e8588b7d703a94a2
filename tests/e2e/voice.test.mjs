// The voice chat page (/voice.html) end to end in headless Chromium, with its four real models
// (Silero VAD, Whisper base, SmolLM2, the Piper voice) and a Piper-rendered question as the
// microphone (Chromium's fake audio capture, played once):
// 1. the transcript is the question, the reply answers it, the reply is heard, and the latency
//    stages come in order;
// 2. barge-in: with a scripted microphone (the page's capture path unchanged), a second
//    question spoken while the first reply plays stops the playback and the writing, and is
//    answered itself; then a question said with a 1 s pause in its middle is one question;
// 3. Stop while the question is being transcribed: no page error, nothing of that question shows
//    up later, and the next Start answers; the empty conversation's line follows the page;
// 4. push to talk: speech without the button starts nothing; held, it is the question;
// 5. offline: the same profile, the server stopped: the page, Pyodide and the four models
//    come from the service worker and this device's storage, and a turn works again.
// The questions are rendered at test time by `python -m onnxpipe tts` (the Piper voice).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchPersistent, siteDir, startServer } from './lib/browser.mjs';
import { recordStates, recordedStates } from './lib/page-states.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import {
  fakeMicWav, installScriptedMicrophone, joinWavs, normalizeText, openVoicePage, renderSpeech, say, startListening, turnsDone,
  stageProblem, voiceState, waitVoice,
} from './lib/voice.mjs';

const BUNDLES = ['silero-vad', 'whisper-base', 'smollm2-135m-instruct', 'piper-en-us-joe'];
const missing = BUNDLES.filter((b) => !['manifest.json', 'pipeline.json'].every((f) => fs.existsSync(path.join(ROOT, 'public', 'models', b, f))));
const skipWhy = `public/models/ lacks ${missing.join(', ')}: run make models`;
// four models load at once on a small machine, and each turn runs three of them
const SLOW = Number(process.env.ONNXPIPE_E2E_SLOW || 1);
const TEST_MS = Math.round(600_000 * SLOW);
const LOAD_MS = Math.round(300_000 * SLOW);
const TURN_MS = Math.round(180_000 * SLOW);

const QUESTION = 'What is the capital of France?';
const STORY = 'Tell me a long story about a brave knight and a dragon.';
const FOLLOW_UP = 'What color is the sky?';
// said in two parts with a second of silence between (the VAD ends speech after 400 ms)
const PAUSED = ['How many legs', 'does a spider have?'];

const WORK = path.join(ROOT, 'build', 'e2e', `voice-${process.pid}`);
let server, profile, mic, wavs, visit, firstTurn;

before(() => {
  if (missing.length) return;
  wavs = {
    question: renderSpeech(QUESTION, path.join(WORK, 'question.wav')),
    story: renderSpeech(STORY, path.join(WORK, 'story.wav')),
    followUp: renderSpeech(FOLLOW_UP, path.join(WORK, 'follow-up.wav')),
    pausedA: renderSpeech(PAUSED[0], path.join(WORK, 'paused-a.wav')),
    pausedB: renderSpeech(PAUSED[1], path.join(WORK, 'paused-b.wav')),
  };
  mic = fakeMicWav(wavs.question, path.join(WORK, 'mic.wav'));
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-e2e-voice-'));
});
after(async () => {
  await visit?.context.close().catch(() => {});
  await server?.stop();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  fs.rmSync(WORK, { recursive: true, force: true });
});

/** The timeline of a whole turn (web/src/voice/latency.ts): every stage and the work behind it,
 * in the order the data allows: the prefill (while the user spoke) before the reply's own call,
 * the transcript after the speech ended (from the pause on, hands-free), the first clause to the voice after the first token,
 * and playback when the voice's first audio came. */
/** Word edits (insertions, deletions, substitutions) from ``said`` to ``heard``. */
function wordEdits(said, heard) {
  const a = said.split(' ').filter(Boolean);
  const b = heard.split(' ').filter(Boolean);
  let row = b.map((_, j) => j + 1);
  row.unshift(0);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next.push(Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1)));
    row = next;
  }
  return row[b.length];
}

function checkTimeline(turn) {
  const l = turn.latencyMs;
  assert.equal(stageProblem(turn), null);
  const s = turn.spansMs;
  const all = ['speech', 'prefill', 'vad', 'transcript', 'first_token', 'first_clause', 'voice', 'reply'];
  for (const span of all) assert.ok(s[span] && s[span].every(Number.isFinite) && s[span][0] <= s[span][1], `span ${span}: ${JSON.stringify(s)}`);
  assert.ok(s.speech[1] === 0 && s.speech[0] < 0, `speech ${JSON.stringify(s.speech)}`);
  assert.ok(s.prefill[0] < 0 && s.speech[0] <= s.prefill[0], `the prefill starts while the user speaks: ${JSON.stringify(s)}`);
  assert.ok(s.vad[0] === 0 && s.vad[1] === l.vad, `vad ${JSON.stringify(s.vad)}`);
  assert.ok(s.prefill[1] <= s.first_token[0] + 1, `the reply's call follows the prefill: ${JSON.stringify(s)}`);
  // hands-free, the transcript begins at the pause (LISTEN_PAUSE_MS of silence), while the VAD
  // waits on for the end; otherwise once the end was decided
  const transcriptFrom = turn.earlyTranscript ? 0 : l.vad - 1;
  assert.ok(s.transcript[0] >= transcriptFrom && s.transcript[1] === l.transcript && s.first_token[0] >= l.transcript - 1 && s.first_token[1] === l.first_token, JSON.stringify(s));
  assert.ok(s.first_clause[0] === l.first_token && s.first_clause[1] === s.voice[0] && s.voice[1] === l.first_audio, JSON.stringify(s));
  assert.ok(turn.cachedTokens > 0 && turn.cachedTokens < turn.promptTokens, `the prefill left ${turn.cachedTokens} of ${turn.promptTokens} prompt tokens in the state`);
}

/** The checks of a whole answered turn of the France question; ``vadMs``: the bounds of the
 * end-of-speech detection (hands-free: the VAD waits for 400 ms of silence, min_silence_ms). */
function checkAnsweredTurn(turn, { vadMs = [300, 5000] } = {}) {
  assert.equal(turn.finish, 'done', JSON.stringify(turn));
  assert.equal(normalizeText(turn.transcript), normalizeText(QUESTION), `transcript "${turn.transcript}"`);
  assert.match(turn.reply, /paris/i, `the reply does not answer: "${turn.reply}"`);
  assert.ok(turn.replyAudioSeconds > 0.5, `reply heard for ${turn.replyAudioSeconds} s`);
  // heard to the end: what was played is what the voice made
  assert.ok(Math.abs(turn.replyAudioSeconds - turn.madeAudioSeconds) < 0.05, `heard ${turn.replyAudioSeconds} s of ${turn.madeAudioSeconds} s`);
  const l = turn.latencyMs;
  checkTimeline(turn);
  assert.ok(l.vad >= vadMs[0] && l.vad <= vadMs[1], `end of speech detected after ${l.vad} ms`);
}

test('voice chat: a spoken question is transcribed, answered and spoken', { timeout: TEST_MS }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  server = await startServer({ root: siteDir() });
  visit = await launchPersistent(profile, { fakeMicrophone: mic.path });
  try {
    const page = await openVoicePage(visit.context, server.url);
    assert.equal(new URL(await page.getByTestId('nav-chat').evaluate((a) => a.href)).pathname, '/');
    const started = await startListening(page, { timeout: LOAD_MS });
    assert.equal(started.state.micRate > 0, true, 'the microphone opened');
    const state = await turnsDone(page, 1, { timeout: TURN_MS });
    firstTurn = state.turns[0];
    checkAnsweredTurn(firstTurn);
    assert.equal(firstTurn.earlyTranscript, true, 'hands-free, the transcript began at the pause');
    // the page shows it: transcript, reply, the latency table
    assert.equal(await page.getByTestId('voice-transcript').first().textContent(), firstTurn.transcript);
    assert.match(await page.getByTestId('voice-reply').first().textContent(), /paris/i);
    assert.notEqual(await page.getByTestId('voice-latency-first_audio').textContent(), '–');
    // and the timeline of the work behind it, one bar per span of the turn record
    const drawn = await page.getByTestId('voice-timeline').locator('li').evaluateAll((items) => items.map((li) => li.dataset.span));
    assert.deepEqual(drawn, Object.keys(firstTurn.spansMs), 'the timeline draws every span');
    // the meter saw the question (the worklet's RMS reached the page)
    assert.ok(Number(await page.getByTestId('voice-level').getAttribute('data-rms')) >= 0);
    // a bundle that is no voice-activity detector refuses to listen, with a clear error
    const refused = await page.evaluate(async () => {
      const { port2 } = new MessageChannel();
      try {
        await window.__onnxpipeVoice.view.models.slots.asr.client.listen(port2, () => {}, () => {});
        return null;
      } catch (e) {
        return { kind: e.kind, message: e.message };
      }
    });
    assert.equal(refused?.kind, 'input', JSON.stringify(refused));
    assert.match(refused.message, /not a voice activity detector/);
    assert.deepEqual(visit.offsite, []);
    console.log(`# voice turn: "${firstTurn.transcript}" -> "${firstTurn.reply}" ` +
      `(${firstTurn.replyAudioSeconds.toFixed(2)} s heard; latency ${JSON.stringify(firstTurn.latencyMs)}; models up in ${(started.startMs / 1000).toFixed(1)} s)`);
    await page.close();
  } catch (error) {
    console.error(visit.logs.slice(-40).join('\n'));
    throw error;
  }
});

test('voice chat: speaking during the reply stops it and is answered (barge-in); a pause is not an end', { timeout: TEST_MS }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  if (!visit) return t.skip('needs the first test');
  const page = await openVoicePage(visit.context, server.url, { prepare: installScriptedMicrophone });
  try {
    await startListening(page, { timeout: LOAD_MS });
    await say(page, wavs.story);
    // the reply is heard while the model is still writing the rest of it
    const speaking = await waitVoice(page, "(s) => s.phase === 'speaking'", { timeout: TURN_MS, what: 'first reply audio' });
    assert.equal(speaking.playing, true);
    assert.equal(speaking.generating, true, 'the first sentence plays while later ones are being written');
    const t0 = performance.now();
    await say(page, wavs.followUp);
    const cut = await waitVoice(page, '(s) => s.turns.length >= 1', { timeout: 30_000 * SLOW, what: 'barge-in' });
    const cutMs = performance.now() - t0;
    const story = cut.turns[0];
    assert.equal(story.finish, 'interrupted', JSON.stringify(story));
    assert.equal(cut.playing, false, 'playback stopped at the barge-in');
    assert.ok(story.replyAudioSeconds > 0 && story.replyAudioSeconds < story.madeAudioSeconds + 0.01,
      `heard ${story.replyAudioSeconds} s of ${story.madeAudioSeconds} s made`);
    // the turn ends once the speech has lasted the page's minimum (250 ms): decided at most
    // about 0.7 s after the VAD reported it (tuning.ts MIN_SPEECH_MS, CONFIRM_SLACK_MS)
    assert.ok(cutMs < 5000 * SLOW, `the reply ran on for ${cutMs.toFixed(0)} ms after the user spoke`);
    // the page's own figure: from the start of the speech over the reply to the playback held,
    // which the VAD reports after 96 ms of speech (vad-link LISTEN_CONTROLS), plus the trip
    assert.ok(story.bargeInMs > 0 && story.bargeInMs < 2000 * SLOW, `barge-in ${story.bargeInMs} ms`);
    // nothing of the stopped reply is heard any more, and the new question is answered
    const done = await waitVoice(page, "(s) => s.turns.length >= 2 && s.phase === 'listening'", { timeout: TURN_MS, what: 'follow-up turn' });
    const followUp = done.turns[1];
    assert.equal(followUp.finish, 'done', JSON.stringify(followUp));
    // the follow-up's words, not the story's: whisper-base on speech + 3 s hears Piper's "What
    // color is the sky?" as "What colors the sky?" (the whole window hears it right; over the
    // faithfulness sets the short context makes no more word errors: docs/voice.md), two edits
    assert.ok(wordEdits(normalizeText(FOLLOW_UP), normalizeText(followUp.transcript)) <= 2, `transcript "${followUp.transcript}"`);
    assert.ok(followUp.replyAudioSeconds > 0, 'the follow-up reply is heard');
    assert.equal((await voiceState(page)).turns[0].replyAudioSeconds, story.replyAudioSeconds, 'the stopped reply stayed stopped');

    // a question with a 1 s pause in its middle: the VAD ends speech at the pause, the page
    // joins the two parts again when speech resumes (tuning.ts CONTINUE_MS)
    const paused = joinWavs([wavs.pausedA, { silence: 1.0 }, wavs.pausedB], path.join(WORK, 'paused.wav'));
    await say(page, paused.path);
    const whole = await waitVoice(page, "(s) => s.turns.length >= 3 && s.phase === 'listening' && !s.playing", { timeout: TURN_MS, what: 'paused question' });
    assert.equal(whole.turns.length, 3, `cut in two: ${JSON.stringify(whole.turns.slice(2).map((x) => x.transcript))}`);
    const pausedTurn = whole.turns[2];
    assert.equal(pausedTurn.finish, 'done', JSON.stringify(pausedTurn));
    // both parts in one transcript; one word may differ (in the page, speech + 3 s hears "...
    // does a spider half?", the whole window "have": docs/voice.md, "Whisper on the speech")
    assert.ok(wordEdits(normalizeText(PAUSED.join(' ')), normalizeText(pausedTurn.transcript)) <= 1, `transcript "${pausedTurn.transcript}"`);
    assert.equal(await page.getByTestId('voice-transcript').count(), 3, 'the first part alone stayed on the page');
    checkTimeline(pausedTurn);
    console.log(`# paused question: "${pausedTurn.transcript}" (the VAD's cut joined again ${pausedTurn.joined} time(s)) -> "${pausedTurn.reply}"`);
    console.log(`# barge-in: story reply cut after ${story.replyAudioSeconds.toFixed(2)} s heard of ${story.madeAudioSeconds.toFixed(2)} s made, ` +
      `${cutMs.toFixed(0)} ms after the follow-up began (the page: ${story.bargeInMs} ms from its speech to silence); follow-up "${followUp.transcript}" -> "${followUp.reply}"`);
    assert.deepEqual(visit.offsite, []);
    await page.close();
  } catch (error) {
    console.error(visit.logs.slice(-40).join('\n'));
    throw error;
  }
});

/** The empty conversation's lines (web/src/voice/conversation.ts promptFor). */
const PROMPT = {
  off: 'Press Start and ask something out loud.',
  loading: 'Getting ready: the microphone, then the four models (downloaded once, then kept on this device)…',
  listening: 'Listening: ask something out loud.',
  pushToTalk: 'Hold the "Hold to talk" button (or the space bar on it) while you ask.',
  hearing: 'Hearing you…',
  transcribing: 'Working out what you said…',
};

/** ``expected`` appear in ``seen`` in this order (others may come between). */
function assertInOrder(seen, expected, what) {
  let at = 0;
  for (const item of seen) if (item === expected[at]) at++;
  assert.equal(at, expected.length, `${what}: expected ${JSON.stringify(expected)} in order, saw ${JSON.stringify(seen)}`);
}

test('voice chat: Stop while the question is transcribed leaves no error; Start again answers', { timeout: TEST_MS }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  if (!visit) return t.skip('needs the first test');
  const page = await openVoicePage(visit.context, server.url, {
    prepare: async (p) => {
      await installScriptedMicrophone(p);
      await recordStates(p, { loading: ['[data-testid=app]', 'data-loading'], empty: ['[data-testid=voice-empty]', 'text'] });
    },
  });
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  try {
    await startListening(page, { timeout: LOAD_MS });
    assert.equal(await page.getByTestId('voice-empty').textContent(), PROMPT.listening);
    await say(page, wavs.question);
    await waitVoice(page, "(s) => s.phase === 'transcribing'", { timeout: TURN_MS, what: 'transcribing' });
    await page.getByTestId('voice-stop').click();
    const stopped = await waitVoice(page, '(s) => !s.running && s.turns.length === 1', { timeout: 30_000 * SLOW, what: 'Stop' });
    assert.equal(stopped.phase, 'off');
    assert.equal(stopped.turns[0].finish, 'interrupted', JSON.stringify(stopped.turns[0]));
    assert.equal(stopped.turns[0].transcript, '', 'Stop came after the transcript: this test did not stop a transcription');
    // the stopped transcription still ends in the recogniser's worker: it must neither throw
    // (the page errors reach here asynchronously: a moment's wait) nor show its question
    await page.evaluate(() => window.__onnxpipeVoice.controller.settled());
    await page.waitForTimeout(500);
    assert.deepEqual(errors, [], 'page errors after the stopped transcription ended');
    assert.equal(await page.getByTestId('voice-transcript').count(), 0, 'the stopped question showed up after all');
    assert.equal(await page.getByTestId('voice-empty').textContent(), PROMPT.off);
    assert.equal((await voiceState(page)).phase, 'off');

    await startListening(page, { timeout: LOAD_MS });
    await say(page, wavs.question);
    const state = await turnsDone(page, 2, { timeout: TURN_MS });
    checkAnsweredTurn(state.turns[1]);
    assert.deepEqual(errors, [], 'page errors');
    assert.equal(await page.getByTestId('voice-transcript').count(), 1, 'the stopped question showed up after all');
    assert.equal(await page.getByTestId('voice-reply').count(), 1);

    const states = await recordedStates(page);
    const lines = states.map((s) => s.empty).filter((line, i, all) => line !== null && line !== all[i - 1]);
    assertInOrder(lines, [PROMPT.off, PROMPT.loading, PROMPT.listening, PROMPT.hearing, PROMPT.transcribing, PROMPT.off, PROMPT.loading], 'empty conversation');
    assert.ok(states.filter((s) => s.empty === PROMPT.loading).every((s) => s.loading === 'true'), 'the loading line only while loading');
    console.log(`# stop while transcribing: no page error; then "${state.turns[1].transcript}" -> "${state.turns[1].reply}"`);
    assert.deepEqual(visit.offsite, []);
    await page.close();
  } catch (error) {
    console.error(visit.logs.slice(-40).join('\n'));
    throw error;
  }
});

test('voice chat: push to talk: what is said while the button is held is the question', { timeout: TEST_MS }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  if (!visit) return t.skip('needs the first test');
  const page = await openVoicePage(visit.context, server.url, { prepare: installScriptedMicrophone });
  try {
    await startListening(page, { mode: 'push-to-talk', timeout: LOAD_MS });
    assert.equal(await page.getByTestId('voice-empty').textContent(), PROMPT.pushToTalk);
    // speech without the button is not a question in this mode (the VAD hears it, nothing starts)
    const ignoredS = await say(page, wavs.followUp);
    await page.waitForTimeout(ignoredS * 1000 + 1500);
    assert.deepEqual((await voiceState(page)).turns, [], 'speech without the button started a turn');
    assert.equal((await voiceState(page)).phase, 'listening');
    const talk = page.getByTestId('voice-talk');
    await talk.hover();
    await page.mouse.down();
    const seconds = await say(page, wavs.question);
    await page.waitForTimeout(seconds * 1000 + 400);
    await page.mouse.up();
    const state = await turnsDone(page, 1, { timeout: TURN_MS });
    const turn = state.turns[0];
    assert.equal(turn.mode, 'push-to-talk');
    checkAnsweredTurn(turn, { vadMs: [0, 0] });
    console.log(`# push to talk: "${turn.transcript}" -> "${turn.reply}" (latency ${JSON.stringify(turn.latencyMs)})`);
    assert.deepEqual(visit.offsite, []);
  } catch (error) {
    console.error(visit.logs.slice(-40).join('\n'));
    throw error;
  } finally {
    await visit.context.close();
    visit = null;
  }
});

test('voice chat: offline on a second visit (server stopped)', { timeout: TEST_MS }, async (t) => {
  if (missing.length) return t.skip(skipWhy);
  if (!firstTurn) return t.skip('needs the first visit');
  await server.stop(); // nothing listens on the port any more
  const second = await launchPersistent(profile, { fakeMicrophone: mic.path });
  try {
    const page = await openVoicePage(second.context, server.url);
    const started = await startListening(page, { timeout: LOAD_MS });
    const state = await turnsDone(page, 1, { timeout: TURN_MS });
    checkAnsweredTurn(state.turns[0]);
    assert.deepEqual(second.offsite, []);
    console.log(`# offline: models up in ${(started.startMs / 1000).toFixed(1)} s; "${state.turns[0].reply}"`);
  } catch (error) {
    console.error(second.logs.slice(-40).join('\n'));
    throw error;
  } finally {
    await second.context.close();
  }
});
