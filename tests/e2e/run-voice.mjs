#!/usr/bin/env node
// Talk to the voice chat page (/voice.html) in headless Chromium with a WAV as the microphone,
// and print what happened in one turn:
//
//   node tests/e2e/run-voice.mjs --audio question.wav [--json] [--voice BUNDLE] [--voice-name NAME]
//        [--timeout SECONDS]
//
// prints {"transcript", "reply", "reply_audio_seconds", "latency_ms": {vad, transcript,
// first_token, first_audio}, "spans_ms": {...}, ...}: latency_ms counts from the end of the speech
// in the WAV (cumulative); stage_ms has each stage on its own; spans_ms the work behind them,
// [start, end] each, overlapped (the prefill runs before the end of speech: negative).
// The WAV (any rate, 16-bit PCM or 32-bit float, read by tests/e2e/lib/wav.mjs) is played once
// by Chromium's fake audio capture, with silence before and after it (Chromium would loop it
// otherwise). The page loads its four models (VAD, Whisper, SmolLM2, the voice) from
// public/models/ through tools/serve.py; the site is dist/ (rebuilt when stale) or
// $ONNXPIPE_E2E_DIST. Every request not to 127.0.0.1 is blocked.
//
// The benchmark (make bench): several questions, each page at 1 and at 2 WASM threads per model:
//
//   node tests/e2e/run-voice.mjs --questions 8 --threads 1,2 --barge-in --json
//        [--audio a.wav --audio b.wav ...]
//
// renders the first N questions of bench/voice_questions.json with the Piper voice (or takes the
// --audio WAVs), says them one after another into one page per thread count (a scripted
// microphone: the page's capture path is unchanged), each once the last reply was heard, and
// prints {"runs": [{"threads", "turns": [...], "p50": {...}, "p95": {...}, "barge_in_ms"}]}:
// p50/p95 over the questions of every stage since the end of speech (first_audio: end of speech
// -> first audio) and of each stage on its own, and "reply_gap_seconds" (p50/p95 of the silence
// the voice left inside a reply: its next piece came after the last had played). --barge-in: then a long question; over its reply
// a 150 ms noise (the reply must go on: "noise": {held, reply_went_on}), then a second question:
// barge_in_ms is from the start of that speech to the reply's playback stopped (held).
// --model-threads asr=1,llm=2: those models' WASM threads over the page's plan for --threads
// (?asr_threads=1&llm_threads=2); each run's "models" says the threads every model got.
// Exits 1 with the error on stderr on failure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launchBrowser, startServer } from './lib/browser.mjs';
import { ensureSite } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import {
  fakeMicWav, installScriptedMicrophone, joinWavs, normalizeText, openVoicePage, renderSpeech, say, shortNoiseWav, startListening,
  stageProblem, turnJson, turnsDone, voiceState, waitVoice,
} from './lib/voice.mjs';

const USAGE = 'usage: node tests/e2e/run-voice.mjs (--audio question.wav ... | --questions N) [--threads 1,2] [--model-threads asr=2,llm=1] [--barge-in] '
  + '[--json] [--voice BUNDLE] [--voice-name NAME] [--timeout SECONDS]';
const QUESTIONS = JSON.parse(fs.readFileSync(path.join(ROOT, 'bench', 'voice_questions.json'), 'utf8')).questions;
const STORY = 'Tell me a long story about a brave knight and a dragon.';
const OVER = 'What color is the sky?';

export function parseArgs(argv) {
  const a = { json: false, timeout: null, audio: [], questions: 0, threads: [1], modelThreads: {}, bargeIn: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case '--audio': a.audio.push(value()); break;
      case '--questions': a.questions = Number(value()); break;
      case '--threads': a.threads = value().split(',').map(Number); break;
      case '--model-threads':
        // one model's threads over the page's plan (web/src/voice/models.ts THREAD_PLAN): ?<role>_threads=M
        for (const item of value().split(',')) {
          const [role, n] = item.split('=');
          if (!['vad', 'asr', 'llm', 'voice'].includes(role) || !Number.isInteger(Number(n)) || Number(n) < 1 || Number(n) > 16) {
            throw new Error(`--model-threads ${item}: expected ROLE=N (ROLE one of vad, asr, llm, voice; N a whole number from 1 to 16)`);
          }
          a.modelThreads[role] = Number(n);
        }
        break;
      case '--barge-in': a.bargeIn = true; break;
      case '--voice': a.voice = value(); break;
      case '--voice-name': a.voiceName = value(); break;
      case '--timeout': a.timeout = Number(value()); break;
      case '--json': a.json = true; break;
      case '-h': case '--help': console.log(USAGE); process.exit(0); break;
      default: throw new Error(`unknown argument ${arg}\n${USAGE}`);
    }
  }
  if (!a.audio.length && !a.questions) throw new Error(`--audio or --questions is required\n${USAGE}`);
  if (a.audio.length && a.questions) throw new Error('--audio and --questions: give one of them');
  if (!Number.isInteger(a.questions) || a.questions < 0 || a.questions > QUESTIONS.length) {
    throw new Error(`--questions wants a whole number from 1 to ${QUESTIONS.length} (bench/voice_questions.json)`);
  }
  for (const file of a.audio) if (!fs.existsSync(file) || !fs.statSync(file).isFile()) throw new Error(`--audio ${file}: no such file`);
  if (!a.threads.length || a.threads.some((n) => !Number.isInteger(n) || n < 1 || n > 16)) {
    throw new Error('--threads wants whole numbers from 1 to 16, comma-separated (e.g. 1,2)');
  }
  if (a.timeout !== null && !(a.timeout > 0)) throw new Error('--timeout wants a positive number of seconds');
  return a;
}

/** The benchmark's form: more than one question, thread count or the barge-in. */
function isBench(a) {
  return a.audio.length !== 1 || a.threads.length !== 1 || a.threads[0] !== 1 || a.bargeIn || Object.keys(a.modelThreads).length > 0;
}

/** The loaded models: bundle, load time, threads. */
function modelsOf(page) {
  return page.evaluate(() => Object.fromEntries(Object.entries(window.__onnxpipeVoice.view.models.slots)
    .map(([role, slot]) => [role, slot.info ? { bundle: slot.info.bundle, load_ms: Math.round(slot.info.load_ms), threads: slot.info.threads } : null])));
}

/** One spoken turn through the page; resolves to the JSON object printed. */
export async function runVoice(a) {
  const site = ensureSite();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-voice-'));
  const mic = fakeMicWav(path.resolve(a.audio[0]), path.join(work, 'mic.wav'));
  const server = await startServer({ root: site });
  const { browser, context, offsite, logs } = await launchBrowser({ fakeMicrophone: mic.path });
  const limit = a.timeout ? a.timeout * 1000 : null;
  try {
    const page = await openVoicePage(context, server.url);
    const started = await startListening(page, { voice: a.voice, voiceName: a.voiceName, timeout: limit ?? TIMEOUTS.load });
    const state = await turnsDone(page, 1, { timeout: limit ?? TIMEOUTS.generate });
    if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
    const turn = state.turns[0];
    if (a.voiceName && !Object.values(turn.voice.controls).includes(a.voiceName)) {
      throw new Error(`asked for voice ${a.voiceName}, the reply was spoken with ${JSON.stringify(turn.voice)}`);
    }
    return turnJson(turn, {
      mic_rate: state.micRate,
      start_ms: Math.round(started.startMs),
      models: await modelsOf(page),
      browser: browser.version(),
    });
  } catch (error) {
    if (process.env.ONNXPIPE_E2E_VERBOSE) process.stderr.write(`${logs.join('\n')}\n`);
    throw error;
  } finally {
    await browser.close().catch(() => {});
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** Nearest-rank percentile of ``values`` (numbers). */
export function percentile(values, p) {
  const sorted = values.filter(Number.isFinite).sort((x, y) => x - y);
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** p50 / p95 of each key of ``rows`` (objects of numbers). */
function summary(rows, p) {
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  return Object.fromEntries(keys.map((k) => [k, percentile(rows.map((r) => r[k]), p)]));
}

/** The questions, as {text (null: unknown), wav}. */
function questionsOf(a, work) {
  if (a.audio.length) return a.audio.map((wav) => ({ text: null, wav: path.resolve(wav) }));
  return QUESTIONS.slice(0, a.questions).map((text, i) => ({ text, wav: renderSpeech(text, path.join(work, `q${i}.wav`)) }));
}

/** The benchmark: every question, one page per thread count, then the barge-in. */
export async function runBench(a) {
  const site = ensureSite();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-voice-bench-'));
  const limit = a.timeout ? a.timeout * 1000 : null;
  const questions = questionsOf(a, work);
  const extra = a.bargeIn ? { story: renderSpeech(STORY, path.join(work, 'story.wav')), over: renderSpeech(OVER, path.join(work, 'over.wav')) } : null;
  if (extra) extra.noise = shortNoiseWav(extra.over, path.join(work, 'noise.wav'));
  // the fake capture only brings the autoplay flags: the test's microphone is scripted
  const silent = joinWavs([{ silence: 0.5 }], path.join(work, 'silent.wav'));
  const server = await startServer({ root: site });
  const runs = [];
  try {
    for (const threads of a.threads) {
      const { browser, context, offsite, logs } = await launchBrowser({ fakeMicrophone: silent.path });
      try {
        const page = await openVoicePage(context, server.url, { prepare: installScriptedMicrophone, query: `?threads=${threads}${Object.entries(a.modelThreads).map(([role, n]) => `&${role}_threads=${n}`).join('')}` });
        const started = await startListening(page, { voice: a.voice, voiceName: a.voiceName, timeout: limit ?? TIMEOUTS.load });
        const turns = [];
        for (const [i, q] of questions.entries()) {
          await say(page, q.wav);
          const state = await waitVoice(page, `(s) => s.turns.length >= ${i + 1} && s.phase === 'listening' && !s.playing`,
            { timeout: limit ?? TIMEOUTS.generate, what: `question ${i + 1}` });
          const problem = state.turns[i].finish === 'done' ? stageProblem(state.turns[i]) : null;
          if (problem) throw new Error(`question ${i + 1}: the breakdown is not whole and in order: ${problem}`);
          const turn = turnJson(state.turns[i]);
          if (q.text !== null) turn.transcript_ok = normalizeText(turn.transcript) === normalizeText(q.text);
          turns.push(turn);
          process.stderr.write(`[threads ${threads}] "${turn.transcript}": first audio ${turn.latency_ms.first_audio} ms after the end of speech; `
            + `${turn.reply_gap_seconds.toFixed(2)} s of silence between the reply's pieces\n`);
        }
        const run = {
          threads, turns, models: await modelsOf(page), start_ms: Math.round(started.startMs),
          p50: { latency_ms: summary(turns.map((t) => t.latency_ms), 50), stage_ms: summary(turns.map((t) => t.stage_ms), 50) },
          p95: { latency_ms: summary(turns.map((t) => t.latency_ms), 95), stage_ms: summary(turns.map((t) => t.stage_ms), 95) },
          // silence the voice left inside a reply (its next piece came after the last had played)
          reply_gap_seconds: { p50: percentile(turns.map((t) => t.reply_gap_seconds), 50),
            p95: percentile(turns.map((t) => t.reply_gap_seconds), 95), replies_with_gaps: turns.filter((t) => t.reply_gap_seconds > 0.05).length },
          barge_in_ms: null,
          noise: null,
        };
        if (extra) {
          const before = turns.length;
          await say(page, extra.story);
          await waitVoice(page, "(s) => s.phase === 'speaking' && s.playing", { timeout: limit ?? TIMEOUTS.generate, what: 'the story reply' });
          // first a noise shorter than the minimum speech (150 ms of the next question's start):
          // the reply may be held while it lasts, and must go on, not end
          const held = (await voiceState(page)).heldNoises;
          await say(page, extra.noise);
          // by then the page has decided (tuning.ts MIN_SPEECH_MS, CONFIRM_SLACK_MS)
          await new Promise((resolve) => setTimeout(resolve, 1500));
          const after = await voiceState(page);
          run.noise = { held: after.heldNoises - held, reply_went_on: after.turns.length === before && after.phase === 'speaking' };
          if (!run.noise.reply_went_on) throw new Error(`barge-in: a 150 ms noise stopped the story reply (${JSON.stringify(run.noise)})`);
          await say(page, extra.over);
          const cut = await waitVoice(page, `(s) => s.turns.length > ${before}`, { timeout: limit ?? TIMEOUTS.generate, what: 'barge-in' });
          const story = cut.turns[before];
          if (story.finish !== 'interrupted') throw new Error(`barge-in: the story reply ended ${story.finish}, not interrupted`);
          run.barge_in_ms = story.bargeInMs;
        }
        if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
        run.browser = browser.version();
        runs.push(run);
      } catch (error) {
        if (process.env.ONNXPIPE_E2E_VERBOSE) process.stderr.write(`${logs.join('\n')}\n`);
        throw error;
      } finally {
        await browser.close().catch(() => {});
      }
    }
  } finally {
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
  return { questions: questions.length, runs };
}

async function main() {
  let a;
  try {
    a = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`run-voice: ${error.message}\n`);
    process.exit(2);
  }
  try {
    if (isBench(a)) {
      const out = await runBench(a);
      if (a.json) console.log(JSON.stringify(out));
      else {
        for (const run of out.runs) {
          const p50 = run.p50.latency_ms;
          const p95 = run.p95.latency_ms;
          console.log(`${run.threads} thread(s), ${run.turns.length} questions, ms from the end of speech, p50 (p95): detected ${p50.vad} (${p95.vad}), `
            + `transcript ${p50.transcript} (${p95.transcript}), first token ${p50.first_token} (${p95.first_token}), `
            + `first audio ${p50.first_audio} (${p95.first_audio})${run.barge_in_ms === null ? '' : `; barge-in stopped the reply in ${run.barge_in_ms} ms`}`
            + `${run.noise === null ? '' : `; a 150 ms noise held it ${run.noise.held} time(s), and it went on`}`
            + `; silence inside a reply p50 ${run.reply_gap_seconds.p50} s (p95 ${run.reply_gap_seconds.p95}; ${run.reply_gap_seconds.replies_with_gaps} with over 50 ms)`);
        }
      }
      return;
    }
    const out = await runVoice(a);
    if (a.json) console.log(JSON.stringify(out));
    else {
      console.log(`you: ${out.transcript}\nassistant: ${out.reply}`);
      const l = out.latency_ms;
      process.stderr.write(`[${out.reply_audio_seconds.toFixed(2)} s of reply heard; from the end of speech: detected ${l.vad} ms, ` +
        `transcript ${l.transcript} ms, first token ${l.first_token} ms, first audio ${l.first_audio} ms]\n`);
    }
  } catch (error) {
    process.stderr.write(`run-voice: ${error.message}\n`);
    process.exit(1);
  }
}

if (process.argv[1]?.endsWith('run-voice.mjs')) await main();
