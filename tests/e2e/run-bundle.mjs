#!/usr/bin/env node
// Run a model bundle in headless Chromium through the REAL runtime worker (the built chat page's
// RuntimeClient), and print one JSON object shaped like `python -m onnxpipe run --json`.
//
//   node tests/e2e/run-bundle.mjs BUNDLE_DIR (--input-ids 1,2,3 | --prompt TEXT | --chat TEXT)
//        [--max-new-tokens N] [--greedy] [--ignore-eos] [--json] [--ep wasm|webgpu]
//        [--variant EP] [--dtype D] [--repeat K] [--threads N]
//   node tests/e2e/run-bundle.mjs BUNDLE_DIR --text TEXT --out x.wav [--set NAME=VALUE]... [--json]
//        (VALUE: a number, or an option name for a choice control such as voice=jm_kumo)
//        (speech bundles: like `python -m onnxpipe tts`; the WAV is the one the worker encoded)
//   node tests/e2e/run-bundle.mjs BUNDLE_DIR --audio x.wav [--set NAME=VALUE]... [--json]
//        (voice-activity bundles: like `python -m onnxpipe vad`, {"segments": [[start_s, end_s], ...], ...})
//        (transcription bundles: like `python -m onnxpipe transcribe`, {"text", "tokens",
//        "audio_seconds", "compute_seconds", ...}; any WAV rate, resampled in the worker)
//
// BUNDLE_DIR is any folder on disk: it is served in place at /models/<folder name>/ by
// tools/serve.py (its manifest.json is written first when missing or stale; nothing else in
// it is touched). The site is dist/ (rebuilt with vite when older than its sources) or
// $ONNXPIPE_E2E_DIST. Every request not to 127.0.0.1 is blocked. --repeat K generates K
// times on the one loaded bundle and reports the last (the first pays one-time warm-up).
// --dtype picks a transformers.js folder's precision (fp32, fp16, q4, q4f16, ...); the JSON
// says which dtype ran ("dtype") and what the folder offers ("dtypes").
// Exits 1 with the error on stderr on failure.
import fs from 'node:fs';
import path from 'node:path';
import { launchBrowser, startServer } from './lib/browser.mjs';
import { detectSpeech, ensureManifest, ensureSite, generate, loadBundle, openRuntimePage, speak, transcribe } from './lib/runtime.mjs';
import { readWav } from './lib/wav.mjs';

const USAGE = 'usage: node tests/e2e/run-bundle.mjs BUNDLE_DIR (--input-ids 1,2,3 | --prompt TEXT | --chat TEXT | ' +
  '--text TEXT --out x.wav [--set NAME=VALUE]... | --audio x.wav [--set NAME=VALUE]...) [--max-new-tokens N] [--greedy] [--ignore-eos] [--json] ' +
  '[--ep wasm|webgpu] [--variant EP] [--dtype D] [--repeat K] [--threads N]';

export function parseArgs(argv) {
  const a = { ep: undefined, variant: undefined, dtype: undefined, json: false, greedy: false, ignoreEos: false, repeat: 1, controls: {} };
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case '--input-ids': a.inputIds = value().split(',').filter(Boolean).map((t) => {
        const n = Number(t.trim());
        if (!Number.isInteger(n)) throw new Error(`--input-ids: "${t}" is not an integer`);
        return n;
      }); break;
      case '--prompt': a.prompt = value(); break;
      case '--chat': a.chat = value(); break;
      case '--text': a.text = value(); break;
      case '--audio': a.audio = value(); break;
      case '--out': a.out = value(); break;
      case '--threads': a.threads = Number(value()); break;
      case '--set': {
        // NAME=NUMBER for a number control, NAME=TEXT for a choice: the pipeline checks which
        const [name, raw] = value().split('=');
        if (!name || raw === undefined || raw.trim() === '') {
          throw new Error('--set: expected NAME=NUMBER or NAME=CHOICE (e.g. noise_scale=0, voice=jm_kumo)');
        }
        const number = Number(raw);
        a.controls[name] = Number.isFinite(number) ? number : raw.trim();
        break;
      }
      case '--max-new-tokens': a.maxNewTokens = Number(value()); break;
      case '--ep': a.ep = value(); break;
      case '--variant': a.variant = value(); break;
      case '--dtype': a.dtype = value(); break;
      case '--repeat': a.repeat = Math.max(1, Number(value())); break;
      case '--greedy': a.greedy = true; break;
      case '--ignore-eos': a.ignoreEos = true; break;
      case '--json': a.json = true; break;
      case '-h': case '--help': console.log(USAGE); process.exit(0); break;
      default:
        if (arg.startsWith('--')) throw new Error(`unknown option ${arg}\n${USAGE}`);
        pos.push(arg);
    }
  }
  if (pos.length !== 1) throw new Error(USAGE);
  a.bundle = path.resolve(pos[0]);
  if (!fs.existsSync(a.bundle) || !fs.statSync(a.bundle).isDirectory()) throw new Error(`${pos[0]}: not a folder`);
  const inputs = [a.inputIds, a.prompt, a.chat, a.text, a.audio].filter((x) => x !== undefined);
  if (inputs.length !== 1) throw new Error('give exactly one of --input-ids, --prompt, --chat, --text or --audio');
  if ((a.text === undefined) !== (a.out === undefined)) throw new Error('--text and --out go together');
  if (a.threads !== undefined && !(Number.isInteger(a.threads) && a.threads > 0)) throw new Error('--threads wants a positive integer');
  if (a.ep && !['wasm', 'webgpu'].includes(a.ep)) throw new Error(`--ep: wasm or webgpu, not "${a.ep}"`);
  if (a.maxNewTokens !== undefined && !(Number.isInteger(a.maxNewTokens) && a.maxNewTokens > 0)) {
    throw new Error('--max-new-tokens wants a positive integer');
  }
  return a;
}

/** The generate request the CLI words stand for (as `python -m onnxpipe run` builds it). */
export function requestOf(a) {
  const options = {};
  if (a.greedy) options.do_sample = false;
  if (a.maxNewTokens !== undefined) options.max_new_tokens = a.maxNewTokens;
  if (a.ignoreEos) options.ignore_eos = true;
  if (a.chat !== undefined) return { messages: [{ role: 'user', content: a.chat }], options };
  if (a.prompt !== undefined) return { prompt: a.prompt, options };
  return { inputIds: a.inputIds, options };
}

/** Load a.bundle in headless Chromium and generate; resolves to the JSON object printed. */
export async function runBundle(a) {
  const site = ensureSite();
  ensureManifest(a.bundle);
  const name = path.basename(a.bundle);
  const server = await startServer({ root: site, mounts: { [`/models/${name}/`]: a.bundle } });
  const { browser, context, offsite, logs } = await launchBrowser({ args: a.ep === 'webgpu' ? ['--enable-unsafe-webgpu'] : [] });
  try {
    const page = await openRuntimePage(context, server.url);
    const loaded = await loadBundle(page, `${server.url}models/${name}/`, { ep: a.ep, variant: a.variant, dtype: a.dtype, threads: a.threads });
    if (a.text !== undefined) return await speakBundle(a, page, loaded, browser, offsite);
    if (a.audio !== undefined) return await audioBundle(a, page, loaded, browser, offsite);
    let run;
    for (let i = 0; i < a.repeat; i++) {
      // a fresh conversation each time: inputIds/prompt never reuse the cache across calls
      run = await generate(page, requestOf(a));
    }
    if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
    const { result } = run;
    return {
      ...result,
      sessions: loaded.info.sessions,
      warnings: loaded.info.warnings,
      ep: a.ep ?? null,
      variant: a.variant ?? null,
      dtype: loaded.info.dtype ?? null,
      dtypes: loaded.info.dtypes ?? [],
      browser: { version: browser.version(), boot_ms: loaded.info.bootMs, load_ms: loaded.info.loadMs, load_wall_ms: loaded.wallMs },
      generate_wall_ms: run.wallMs,
      first_token_ms: run.firstTokenMs,
      token_events: run.events.length,
    };
  } catch (error) {
    if (process.env.ONNXPIPE_E2E_VERBOSE) process.stderr.write(`${logs.join('\n')}\n`);
    throw error;
  } finally {
    await browser.close().catch(() => {});
    await server.stop();
  }
}

/** --text: speak through the worker, write the worker's WAV to a.out. */
async function speakBundle(a, page, loaded, browser, offsite) {
  let run;
  for (let i = 0; i < a.repeat; i++) run = await speak(page, { text: a.text, controls: a.controls });
  if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
  fs.writeFileSync(a.out, Buffer.from(run.wav));
  return {
    ...run.result,
    out: a.out,
    sessions: loaded.info.sessions,
    warnings: [...loaded.info.warnings, ...run.result.warnings],
    ep: a.ep ?? null,
    threads: a.threads ?? null,
    browser: { version: browser.version(), boot_ms: loaded.info.bootMs, load_ms: loaded.info.loadMs, load_wall_ms: loaded.wallMs },
    speak_wall_ms: run.wallMs,
    first_audio_ms: run.sentences[0]?.ms ?? null,
  };
}

/** --audio: what the bundle does with audio depends on its kind. */
async function audioBundle(a, page, loaded, browser, offsite) {
  const { samples, sampleRate } = readWav(a.audio);
  if (loaded.info.kind === 'transcription') return await transcribeBundle(a, page, loaded, browser, offsite, samples, sampleRate);
  if (loaded.info.kind !== 'voice-activity') throw new Error(`--audio: a "${loaded.info.kind}" bundle takes no audio`);
  let run;
  for (let i = 0; i < a.repeat; i++) run = await detectSpeech(page, samples, sampleRate, a.controls);
  if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
  const { probabilities: _, events: __, ...result } = run.result;
  return {
    ...result,
    sessions: loaded.info.sessions,
    warnings: loaded.info.warnings,
    ep: a.ep ?? null,
    browser: { version: browser.version(), boot_ms: loaded.info.bootMs, load_ms: loaded.info.loadMs, load_wall_ms: loaded.wallMs },
    detect_wall_ms: run.wallMs,
  };
}

/** --audio with a transcription bundle: the CLI's four keys first, then what ran where. */
async function transcribeBundle(a, page, loaded, browser, offsite, samples, sampleRate) {
  if (Object.keys(a.controls).length) throw new Error('--set: a transcription bundle has no controls');
  const options = a.maxNewTokens !== undefined ? { max_new_tokens: a.maxNewTokens } : {};
  let run;
  for (let i = 0; i < a.repeat; i++) run = await transcribe(page, samples, sampleRate, options);
  if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
  const { text, tokens, audio_seconds, compute_seconds, windows, finish_reason } = run.result;
  return {
    text, tokens, audio_seconds, compute_seconds, windows, finish_reason,
    sessions: loaded.info.sessions,
    warnings: loaded.info.warnings,
    ep: a.ep ?? null,
    threads: loaded.info.threads,
    browser: { version: browser.version(), boot_ms: loaded.info.bootMs, load_ms: loaded.info.loadMs, load_wall_ms: loaded.wallMs },
    transcribe_wall_ms: run.wallMs,
  };
}

async function main() {
  let a;
  try {
    a = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`run-bundle: ${error.message}\n`);
    process.exit(2);
  }
  try {
    const out = await runBundle(a);
    if (a.json) console.log(JSON.stringify(out));
    else if (a.audio !== undefined && out.windows) {
      console.log(out.text);
      process.stderr.write(`[${out.audio_seconds.toFixed(2)} s of audio in ${out.compute_seconds.toFixed(2)} s, ` +
        `${out.windows.length} window(s), ${out.tokens.length} tokens]\n`);
    } else if (a.audio !== undefined && out.segments) {
      for (const [start, end] of out.segments) console.log(`${start.toFixed(3)}\t${end.toFixed(3)}`);
      process.stderr.write(`[${out.segments.length} segment(s) in ${out.audio_seconds.toFixed(2)} s of audio; ${out.compute_seconds.toFixed(3)} s compute]\n`);
    } else if (a.text !== undefined) {
      process.stderr.write(`${out.out}: ${out.audio_seconds.toFixed(2)} s of audio at ${out.sample_rate} Hz in ` +
        `${out.compute_seconds.toFixed(2)} s (${out.real_time_factor.toFixed(1)}x real time, ${out.sentences.length} sentence(s))\n`);
    } else {
      console.log(out.text);
      process.stderr.write(`[${out.tokens.length} tokens, ${out.finish_reason}; prefill ${out.prefill_ms.toFixed(1)} ms, ` +
        `decode ${out.decode_tokens_per_s.toFixed(1)} tokens/s; ${out.dtype ? `dtype ${out.dtype}; ` : ''}${Object.entries(out.sessions).map(([n, s]) => `${n}: ${s.provider} ${s.file}`).join(', ')}]\n`);
    }
  } catch (error) {
    process.stderr.write(`run-bundle: ${error.message}\n`);
    process.exit(1);
  }
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('run-bundle.mjs')) await main();
