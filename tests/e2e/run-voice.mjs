#!/usr/bin/env node
// Talk to the voice chat page (/voice.html) in headless Chromium with a WAV as the microphone,
// and print what happened in one turn:
//
//   node tests/e2e/run-voice.mjs --audio question.wav [--json] [--voice BUNDLE] [--voice-name NAME]
//        [--timeout SECONDS]
//
// prints {"transcript", "reply", "reply_audio_seconds", "latency_ms": {vad, transcript,
// first_token, first_audio}, ...}: latency_ms counts from the end of the speech in the WAV
// (cumulative); stage_ms has each stage on its own. The WAV (any rate, 16-bit PCM or 32-bit
// float, read by tests/e2e/lib/wav.mjs) is played once by Chromium's fake audio capture, with silence before and after it (Chromium
// would loop it otherwise). The page loads its four models (VAD, Whisper, SmolLM2, the voice)
// from public/models/ through tools/serve.py; the site is dist/ (rebuilt when stale) or
// $ONNXPIPE_E2E_DIST. Every request not to 127.0.0.1 is blocked.
// Exits 1 with the error on stderr on failure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchBrowser, startServer } from './lib/browser.mjs';
import { ensureSite } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { fakeMicWav, openVoicePage, startListening, turnJson, turnsDone } from './lib/voice.mjs';

const USAGE = 'usage: node tests/e2e/run-voice.mjs --audio question.wav [--json] [--voice BUNDLE] [--voice-name NAME] [--timeout SECONDS]';

export function parseArgs(argv) {
  const a = { json: false, timeout: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case '--audio': a.audio = value(); break;
      case '--voice': a.voice = value(); break;
      case '--voice-name': a.voiceName = value(); break;
      case '--timeout': a.timeout = Number(value()); break;
      case '--json': a.json = true; break;
      case '-h': case '--help': console.log(USAGE); process.exit(0); break;
      default: throw new Error(`unknown argument ${arg}\n${USAGE}`);
    }
  }
  if (!a.audio) throw new Error(`--audio is required\n${USAGE}`);
  if (!fs.existsSync(a.audio) || !fs.statSync(a.audio).isFile()) throw new Error(`--audio ${a.audio}: no such file`);
  if (a.timeout !== null && !(a.timeout > 0)) throw new Error('--timeout wants a positive number of seconds');
  return a;
}

/** One spoken turn through the page; resolves to the JSON object printed. */
export async function runVoice(a) {
  const site = ensureSite();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-voice-'));
  const mic = fakeMicWav(path.resolve(a.audio), path.join(work, 'mic.wav'));
  const server = await startServer({ root: site });
  const { browser, context, offsite, logs } = await launchBrowser({ fakeMicrophone: mic.path });
  const limit = a.timeout ? a.timeout * 1000 : null;
  try {
    const page = await openVoicePage(context, server.url);
    const started = await startListening(page, { voice: a.voice, voiceName: a.voiceName, timeout: limit ?? TIMEOUTS.load });
    const state = await turnsDone(page, 1, { timeout: limit ?? TIMEOUTS.generate });
    if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
    const turn = state.turns[0];
    const models = await page.evaluate(() => Object.fromEntries(Object.entries(window.__onnxpipeVoice.view.models.slots)
      .map(([role, slot]) => [role, slot.info ? { bundle: slot.info.bundle, load_ms: Math.round(slot.info.load_ms) } : null])));
    if (a.voiceName && !Object.values(turn.voice.controls).includes(a.voiceName)) {
      throw new Error(`asked for voice ${a.voiceName}, the reply was spoken with ${JSON.stringify(turn.voice)}`);
    }
    return turnJson(turn, {
      mic_rate: state.micRate,
      start_ms: Math.round(started.startMs),
      models,
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

async function main() {
  let a;
  try {
    a = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`run-voice: ${error.message}\n`);
    process.exit(2);
  }
  try {
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
