// Drive the voice chat page (/voice.html) from Node: a WAV as the microphone, the page's
// state read through window.__onnxpipeVoice. Used by tests/e2e/run-voice.mjs and voice.test.mjs.
//
//   const mic = fakeMicWav('question.wav', dir);            // padded copy, 16-bit PCM
//   const { browser, context } = await launchBrowser({ fakeMicrophone: mic.path });
//   const page = await openVoicePage(context, server.url);
//   const turn = await talk(page);                          // Start, wait for one whole turn
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, python } from './browser.mjs';
import { TIMEOUTS } from './timeouts.mjs';
import { readWav } from './wav.mjs';

/** 16-bit PCM mono WAV bytes. */
export function wavBytes(samples, rate) {
  const out = Buffer.alloc(44 + samples.length * 2);
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(36 + samples.length * 2, 4);
  out.write('WAVEfmt ', 8, 'ascii');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20);
  out.writeUInt16LE(1, 22);
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(rate * 2, 28);
  out.writeUInt16LE(2, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36, 'ascii');
  out.writeUInt32LE(samples.length * 2, 40);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.round(Math.max(-1, Math.min(1, samples[i])) * 32767), 44 + i * 2);
  return out;
}

/**
 * Pieces of audio and silence joined into one WAV for the fake microphone, written to
 * ``out``: parts are WAV paths or {silence: seconds}; every WAV must share one rate.
 * Resolves to {path, rate, seconds, spans: [[start_s, end_s] of each WAV part]}.
 */
export function joinWavs(parts, out) {
  const pieces = [];
  let rate = null;
  for (const part of parts) {
    if (typeof part === 'string') {
      const wav = readWav(part);
      if (rate !== null && wav.sampleRate !== rate) throw new Error(`${part}: ${wav.sampleRate} Hz, the others ${rate} Hz`);
      rate = wav.sampleRate;
      pieces.push(wav.samples);
    } else {
      pieces.push({ silence: part.silence });
    }
  }
  rate ??= 16000;
  const total = pieces.reduce((n, p) => n + (p instanceof Float32Array ? p.length : Math.round(p.silence * rate)), 0);
  const samples = new Float32Array(total);
  let at = 0;
  const spans = [];
  for (const p of pieces) {
    if (p instanceof Float32Array) {
      samples.set(p, at);
      spans.push([at / rate, (at + p.length) / rate]);
      at += p.length;
    } else {
      at += Math.round(p.silence * rate);
    }
  }
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, wavBytes(samples, rate));
  return { path: out, rate, seconds: total / rate, spans };
}

/** A noise as short as a cough: ``seconds`` of ``speechWav`` from where its sound begins (the
 * first sample above 5 % of its peak), into ``out``. Shorter than the page's minimum speech
 * (250 ms), it must not stop a reply (the barge-in's check, run-voice.mjs --barge-in). */
export function shortNoiseWav(speechWav, out, { seconds = 0.15 } = {}) {
  const wav = readWav(speechWav);
  let peak = 0;
  for (const x of wav.samples) peak = Math.max(peak, Math.abs(x));
  const from = Math.max(0, wav.samples.findIndex((x) => Math.abs(x) > 0.05 * peak));
  const samples = wav.samples.slice(from, from + Math.round(seconds * wav.sampleRate));
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, wavBytes(samples, wav.sampleRate));
  return out;
}

/** The microphone file for one question: silence, the question, then silence (Chromium plays
 * it once; the page must hear the question's end before the file runs out). */
export function fakeMicWav(questionWav, out, { before = 1.0, after = 3.0 } = {}) {
  return joinWavs([{ silence: before }, questionWav, { silence: after }], out);
}

/** Render ``text`` with the Piper voice natively (`python -m onnxpipe tts`) into ``out``; noise
 * scales 0, so every run hears the same audio (the default noise makes a word differ now and then). */
export function renderSpeech(text, out, { bundle = path.join(ROOT, 'public', 'models', 'piper-en-us-joe') } = {}) {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  execFileSync(python(), ['-m', 'onnxpipe', 'tts', bundle, '--text', text, '--out', out, '--set', 'noise_scale=0', '--set', 'noise_w=0'], {
    cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, PYTHONPATH: `${path.join(ROOT, 'py')}:${ROOT}` },
    timeout: TIMEOUTS.native,
  });
  return out;
}

/** Open /voice.html (``query``: e.g. "?threads=2"); resolves once its controller and voice picker are up. */
export async function openVoicePage(context, baseUrl, { timeout = TIMEOUTS.page, prepare, query = '' } = {}) {
  const page = await context.newPage();
  if (prepare) await prepare(page);   // e.g. installScriptedMicrophone, before the page's scripts run
  await page.goto(`${baseUrl}voice.html${query}`, { timeout });
  await page.waitForFunction(() => Boolean(window.__onnxpipeVoice?.controller)
    && document.querySelector('[data-testid=voice-bundle] option'), null, { timeout, polling: 50 });
  return page;
}

/** The page's state, copied out. */
export function voiceState(page) {
  return page.evaluate(() => JSON.parse(JSON.stringify(window.__onnxpipeVoice.state)));
}

/** Wait until ``predicate(state)`` holds or the page reports an error. The predicate (source
 * text) runs here, on a copy of the state: the page's CSP refuses to compile strings (docs/security.md). */
export async function waitVoice(page, predicate, { timeout = TIMEOUTS.generate, what = 'voice page' } = {}) {
  const holds = new Function(`return (${predicate});`)();
  const end = Date.now() + timeout;
  let state = await voiceState(page);
  while (state.lastError === null && !holds(state)) {
    if (Date.now() > end) throw new Error(`${what}: ${predicate} did not hold in ${timeout} ms; state: ${JSON.stringify(state)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    state = await voiceState(page);
  }
  if (state.lastError) throw new Error(`${what}: the page failed (${state.lastError.during}, ${state.lastError.kind}): ${state.lastError.message}`);
  return state;
}

/**
 * Pick the voice, press Start (the four models load, the microphone opens) and wait for the
 * listening phase. ``voice``: a voice bundle name; ``voiceName``: one of its voices.
 */
export async function startListening(page, { voice, voiceName, mode = 'hands-free', timeout = TIMEOUTS.load } = {}) {
  if (voice) await page.getByTestId('voice-bundle').selectOption(voice);
  await page.getByTestId(mode === 'hands-free' ? 'voice-mode-hands-free' : 'voice-mode-ptt').check();
  const t0 = performance.now();
  await page.getByTestId('voice-start').click();
  const state = await waitVoice(page, '(s) => s.running', { timeout, what: 'start' });
  if (voiceName) {
    await page.getByTestId('voice-voice').selectOption(voiceName);
  }
  return { state, startMs: performance.now() - t0 };
}

/** Wait for ``count`` finished turns; resolves to the state then. */
export function turnsDone(page, count = 1, options = {}) {
  return waitVoice(page, `(s) => s.turns.length >= ${count} && s.phase !== 'transcribing'`, { what: `turn ${count}`, ...options });
}

/** Why a turn's breakdown is not whole and in order (every stage since the end of speech, each
 * no earlier than the one it waits for), or null when it is. */
export function stageProblem(turn) {
  const l = turn.latencyMs;
  const stages = ['vad', 'transcript', 'first_token', 'first_audio'];
  const missing = stages.filter((s) => !Number.isFinite(l[s]));
  if (missing.length) return `no ${missing.join(', ')} in ${JSON.stringify(l)}`;
  for (let i = 1; i < stages.length; i++) {
    if (l[stages[i]] < l[stages[i - 1]]) return `${stages[i]} (${l[stages[i]]} ms) before ${stages[i - 1]} (${l[stages[i - 1]]} ms)`;
  }
  return null;
}

/** The run-voice.mjs JSON of a finished turn. */
export function turnJson(turn, extra = {}) {
  return {
    transcript: turn.transcript,
    reply: turn.reply,
    reply_audio_seconds: Number(turn.replyAudioSeconds.toFixed(3)),
    reply_gap_seconds: Number(turn.replyGapSeconds.toFixed(3)),
    latency_ms: turn.latencyMs,
    stage_ms: turn.stageMs,
    finish: turn.finish,
    speech_seconds: Number(turn.speechSeconds.toFixed(3)),
    reply_done_ms: turn.replyDoneMs,
    spans_ms: turn.spansMs,
    joined_pauses: turn.joined,
    early_transcript: turn.earlyTranscript,
    barge_in_ms: turn.bargeInMs,
    prompt_tokens: turn.promptTokens,
    cached_tokens: turn.cachedTokens,
    voice: turn.voice,
    ...extra,
  };
}

/** Lower case, no punctuation, single spaces: for comparing transcripts. */
export function normalizeText(text) {
  return text.toLowerCase().replace(/[^\p{L}\p{N}\s']/gu, ' ').replace(/\s+/g, ' ').trim();
}

/**
 * Replace the page's microphone with one the test speaks into: getUserMedia answers with the
 * stream of a MediaStreamAudioDestinationNode, and `window.__scriptedMic.say(base64Wav)` plays
 * a WAV into it at the moment the test chooses (resolves with its duration in seconds). The
 * page's own capture path (worklet, VAD worker) is unchanged. Needs the autoplay flag
 * (fakeMicrophoneFlags has it) so the test's AudioContext runs without a gesture.
 */
export async function installScriptedMicrophone(page) {
  await page.addInitScript(() => {
    let ctx = null;
    let dest = null;
    const open = () => {
      ctx ??= new AudioContext();
      dest ??= ctx.createMediaStreamDestination();
      return ctx.resume().then(() => dest);
    };
    window.__scriptedMic = {
      async say(base64) {
        const d = await open();
        const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
        const buffer = await ctx.decodeAudioData(bytes.buffer);
        const source = ctx.createBufferSource();
        source.buffer = buffer;
        source.connect(d);
        source.start();
        return buffer.duration;
      },
    };
    // a clone per call, as a real device gives: the page's Stop ends its tracks, not the test's
    navigator.mediaDevices.getUserMedia = async () => (await open()).stream.clone();
  });
}

/** Play ``wavPath`` into the scripted microphone now; resolves with its duration (s). */
export function say(page, wavPath) {
  return page.evaluate((b64) => window.__scriptedMic.say(b64), fs.readFileSync(wavPath).toString('base64'));
}
