#!/usr/bin/env node
// Run a model bundle in headless Chromium through the REAL runtime worker (the built chat page's
// RuntimeClient), and print one JSON object shaped like `python -m onnxpipe run --json`.
//
//   node tests/e2e/run-bundle.mjs BUNDLE_DIR (--input-ids 1,2,3 | --prompt TEXT | --chat TEXT)
//        [--max-new-tokens N] [--greedy] [--ignore-eos] [--json] [--ep wasm|webgpu]
//        [--variant EP] [--dtype D] [--repeat K] [--threads N]
//        [--min-new-tokens N] [--min-length N] [--no-repeat-ngram-size N] [--num-beams N]
//        [--length-penalty F] [--early-stopping true|false|never] [--num-return-sequences N]
//        (search options as `python -m onnxpipe run` takes them; beam search's returned
//        sequences come back in "sequences")
//        [--sample] [--temperature F] [--top-k N] [--top-p F] [--repetition-penalty F] [--seed N]
//        (with --input-ids/--prompt/--chat, --seed is the sampling seed: random_seed)
//        [--response-format json|FILE.json] [--regex PATTERN] [--grammar FILE.ebnf]
//        [--tools FILE.json] [--tool-choice auto|none|required|NAME]
//        (constrained output as `python -m onnxpipe run` takes it: json = {"type": "json_object"},
//        a file a JSON schema named for the file's stem; tools a list of OpenAI tools)
//        [--image FILE]... (vision-language bundles, as `python -m onnxpipe run --image`: the
//        worker decodes each PNG/JPEG; one image token in the prompt per image)
//   node tests/e2e/run-bundle.mjs BUNDLE_DIR --input NAME=VALUES... [--out x.png] [--steps N]
//        [--guidance-scale F] [--scheduler euler_discrete|ddim] [--seed N] [--json]
//        (one-pass bundles, e.g. text-to-image by denoising: like `python -m onnxpipe run --input`;
//        VALUES a JSON nested list or @file.json; the PNG is the one the worker encoded, a batch
//        gives x-0.png, x-1.png, ...)
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
// times on the one loaded bundle and reports the last (the first pays one-time warm-up); the
// --json object's "memory" holds the runtime worker's wasm heaps and JS heap (after a forced
// GC; tests/e2e/lib/memory.mjs) sampled after the first generation, every 50th and the last:
// {"wasm_bytes": [first, last], "js_heap_bytes": [first, last], "wasm_max_bytes", "js_heap_max_bytes", "samples"}.
// --dtype picks a transformers.js folder's precision (fp32, fp16, q4, q4f16, ...); the JSON
// says which dtype ran ("dtype") and what the folder offers ("dtypes").
// Exits 1 with the error on stderr on failure.
import fs from 'node:fs';
import path from 'node:path';
import { launchBrowser, startServer } from './lib/browser.mjs';
import { detectSpeech, ensureManifest, ensureSite, generate, loadBundle, openRuntimePage, runOnce, speak, transcribe } from './lib/runtime.mjs';
import { memoryProbe, memorySummary } from './lib/memory.mjs';
import { readWav } from './lib/wav.mjs';

export const MEMORY_EVERY = 50;

/** ``once()`` a.repeat times; memory sampled after the first, every MEMORY_EVERY-th and the last. */
async function repeated(a, probe, once) {
  const samples = [];
  let run;
  for (let i = 0; i < a.repeat; i++) {
    run = await once();
    if (i === 0 || (i + 1) % MEMORY_EVERY === 0 || i === a.repeat - 1) samples.push(await probe.sample());
  }
  return { run, memory: memorySummary(samples) };
}

const USAGE = 'usage: node tests/e2e/run-bundle.mjs BUNDLE_DIR (--input-ids 1,2,3 | --prompt TEXT | --chat TEXT | ' +
  '--text TEXT --out x.wav [--set NAME=VALUE]... | --audio x.wav [--set NAME=VALUE]... | ' +
  '--input NAME=VALUES... [--out x.png] [--steps N] [--guidance-scale F] [--scheduler S] [--seed N]) [--max-new-tokens N] [--greedy] [--ignore-eos] [--json] ' +
  '[--ep wasm|webgpu] [--variant EP] [--dtype D] [--repeat K] [--threads N]';

export function parseArgs(argv) {
  const a = { ep: undefined, variant: undefined, dtype: undefined, json: false, greedy: false, ignoreEos: false, repeat: 1, controls: {}, search: {}, runOptions: {} };
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
      case '--image': (a.images ??= []).push(path.resolve(value())); break;
      case '--chat': a.chat = value(); break;
      case '--text': a.text = value(); break;
      case '--audio': a.audio = value(); break;
      case '--out': a.out = value(); break;
      case '--input': {
        const [name, tensor] = tensorArg(value());
        (a.inputs ??= {})[name] = tensor;
        break;
      }
      case '--response-format': a.search.response_format = responseFormatArg(value()); break;
      case '--regex': a.search.response_format = { type: 'regex', regex: value() }; break;
      case '--grammar': a.search.response_format = { type: 'grammar', grammar: readArg(arg, value()) }; break;
      case '--tools': {
        const tools = JSON.parse(readArg(arg, value()));
        if (!Array.isArray(tools)) throw new Error('--tools: expected a JSON file holding a list of OpenAI tools');
        a.search.tools = tools;
        break;
      }
      case '--tool-choice': {
        const v = value();
        a.search.tool_choice = ['auto', 'none', 'required'].includes(v) ? v : { type: 'function', function: { name: v } };
        break;
      }
      case '--sample': a.sample = true; break;
      case '--temperature': case '--top-p': case '--repetition-penalty':
        a.search[arg.slice(2).replaceAll('-', '_')] = numberArg(arg, value(), false); break;
      case '--top-k': a.search.top_k = numberArg(arg, value(), true); break;
      case '--steps': a.runOptions.num_steps = numberArg(arg, value(), true); break;
      case '--seed': a.runOptions.seed = numberArg(arg, value(), true); break;
      case '--guidance-scale': a.runOptions.guidance_scale = numberArg(arg, value(), false); break;
      case '--scheduler': a.runOptions.scheduler = value(); break;
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
      case '--min-new-tokens': case '--min-length': case '--no-repeat-ngram-size': case '--num-beams':
      case '--num-return-sequences': {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 0) throw new Error(`${arg} wants an integer >= 0`);
        a.search[arg.slice(2).replaceAll('-', '_')] = n;
        break;
      }
      case '--length-penalty': {
        const f = Number(value());
        if (!Number.isFinite(f)) throw new Error('--length-penalty wants a number');
        a.search.length_penalty = f;
        break;
      }
      case '--early-stopping': {
        const v = value();
        if (!['true', 'false', 'never'].includes(v)) throw new Error(`--early-stopping: true, false or never, not "${v}"`);
        a.search.early_stopping = v === 'never' ? v : v === 'true';
        break;
      }
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
  if ([a.inputIds, a.prompt, a.chat].some((x) => x !== undefined) && a.runOptions.seed !== undefined) {
    a.search.random_seed = a.runOptions.seed;   // a generation's seed is its sampling seed
    delete a.runOptions.seed;
  }
  // a one-pass run (as the CLI: --input, --out without --text, or a denoising option)
  a.once = a.text === undefined && (a.inputs !== undefined || a.out !== undefined || Object.keys(a.runOptions).length > 0);
  const inputs = [a.inputIds, a.prompt, a.chat, a.text, a.audio, a.once || undefined].filter((x) => x !== undefined);
  if (inputs.length !== 1) throw new Error('give exactly one of --input-ids, --prompt, --chat, --text, --audio or --input');
  if (a.text !== undefined && a.out === undefined) throw new Error('--text and --out go together');
  if (!a.once && Object.keys(a.runOptions).length) throw new Error('--steps, --guidance-scale, --scheduler and --seed go with --input');
  if (a.threads !== undefined && !(Number.isInteger(a.threads) && a.threads > 0)) throw new Error('--threads wants a positive integer');
  if (a.ep && !['wasm', 'webgpu'].includes(a.ep)) throw new Error(`--ep: wasm or webgpu, not "${a.ep}"`);
  if (a.maxNewTokens !== undefined && !(Number.isInteger(a.maxNewTokens) && a.maxNewTokens > 0)) {
    throw new Error('--max-new-tokens wants a positive integer');
  }
  return a;
}

/** A flag's number: an integer when ``integer``, else any finite number. */
function numberArg(flag, text, integer) {
  const n = text.trim() === '' ? NaN : Number(text);
  if (integer ? !Number.isInteger(n) : !Number.isFinite(n)) throw new Error(`${flag} wants ${integer ? 'an integer' : 'a number'}, not "${text}"`);
  return n;
}

/** --input NAME=VALUES (a JSON nested list or number) or NAME=@FILE.json -> [name, {values,
 * shape}], the shape from the nesting, as `python -m onnxpipe run --input` reads it. */
export function tensorArg(text) {
  const eq = text.indexOf('=');
  if (eq < 1) throw new Error(`--input: expected NAME=VALUES (a JSON nested list or @file.json), found "${text}"`);
  const name = text.slice(0, eq);
  let raw = text.slice(eq + 1);
  let data;
  try {
    if (raw.startsWith('@')) raw = fs.readFileSync(raw.slice(1), 'utf8');
    data = JSON.parse(raw);
  } catch (error) {
    throw new Error(`--input ${name}: ${error.message}`);
  }
  const shape = [];
  for (let level = data; Array.isArray(level); level = level[0]) shape.push(level.length);
  const values = Array.isArray(data) ? data.flat(shape.length - 1) : [data];
  if (values.length !== shape.reduce((n, d) => n * d, 1) || values.some((v) => typeof v !== 'number')) {
    throw new Error(`--input ${name}: expected a nested list of numbers with equal-length rows`);
  }
  return [name, { values, shape }];
}

/** A file's text for ``flag``. */
function readArg(flag, file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`${flag} ${file}: ${error.message}`);
  }
}

/** --response-format json (any JSON object) or FILE.json (a JSON schema, named for the file's stem). */
export function responseFormatArg(text) {
  if (text === 'json') return { type: 'json_object' };
  let schema;
  try {
    schema = JSON.parse(readArg('--response-format', text));
  } catch (error) {
    throw new Error(`--response-format: expected json or a JSON schema file: ${error.message}`);
  }
  const name = path.basename(text).replace(/\.[^.]*$/, '').replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'schema';
  return { type: 'json_schema', json_schema: { name, schema } };
}

/** The run request of a one-pass bundle the CLI words stand for. */
export function runRequestOf(a) {
  return { inputs: a.inputs ?? {}, options: { ...a.runOptions } };
}

/** The generate request the CLI words stand for (as `python -m onnxpipe run` builds it). */
export function requestOf(a) {
  const options = { ...a.search };
  if (a.greedy) options.do_sample = false;
  if (a.sample) options.do_sample = true;
  if (a.maxNewTokens !== undefined) options.max_new_tokens = a.maxNewTokens;
  if (a.ignoreEos) options.ignore_eos = true;
  if (a.chat !== undefined) return { messages: [{ role: 'user', content: a.chat }], options };
  if (a.prompt !== undefined) return { prompt: a.prompt, options };
  return { input_ids: a.inputIds, options };
}

/** Load a.bundle in headless Chromium and generate; resolves to the JSON object printed. */
export async function runBundle(a) {
  const site = ensureSite();
  ensureManifest(a.bundle);
  const name = path.basename(a.bundle);
  const images = Object.fromEntries((a.images ?? []).map((f, i) => [`/images/${i}/`, path.dirname(f)]));
  const server = await startServer({ root: site, mounts: { [`/models/${name}/`]: a.bundle, ...images } });
  const { browser, context, offsite, logs } = await launchBrowser({ args: a.ep === 'webgpu' ? ['--enable-unsafe-webgpu'] : [] });
  try {
    const page = await openRuntimePage(context, server.url);
    const loaded = await loadBundle(page, `${server.url}models/${name}/`, { ep: a.ep, variant: a.variant, dtype: a.dtype, threads: a.threads });
    const probe = await memoryProbe(browser, page, server.url);
    if (a.text !== undefined) return await speakBundle(a, page, loaded, browser, offsite, probe);
    if (a.once) return await runBundleOnce(a, page, loaded, browser, offsite, probe);
    if (a.audio !== undefined) return await audioBundle(a, page, loaded, browser, offsite, probe);
    const request = requestOf(a);
    if (a.images) request.imageUrls = a.images.map((_, i) => `${server.url}images/${i}/${path.basename(a.images[i])}`);
    // a fresh conversation each time: inputIds/prompt never reuse the cache across calls
    const { run, memory } = await repeated(a, probe, () => generate(page, request));
    if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
    const { result } = run;
    return {
      ...result,
      ...loadFacts(loaded, browser),
      warnings: loaded.info.warnings,
      ep: a.ep ?? null,
      variant: a.variant ?? null,
      dtype: loaded.info.dtype ?? null,
      dtypes: loaded.info.dtypes ?? [],
      generate_wall_ms: run.wallMs,
      first_token_ms: run.firstTokenMs,
      token_events: run.events.length,
      memory,
    };
  } catch (error) {
    if (process.env.ONNXPIPE_E2E_VERBOSE) process.stderr.write(`${logs.join('\n')}\n`);
    throw error;
  } finally {
    await browser.close().catch(() => {});
    await server.stop();
  }
}

/** What every --json result says about the load: the sessions, the browser and its timings. */
function loadFacts(loaded, browser) {
  return {
    sessions: loaded.info.sessions,
    browser: { version: browser.version(), boot_ms: loaded.info.boot_ms, load_ms: loaded.info.load_ms, load_wall_ms: loaded.wallMs },
  };
}

/** --input: a one-pass run; the worker's PNG(s) written to a.out (x-0.png, ... for a batch). */
async function runBundleOnce(a, page, loaded, browser, offsite, probe) {
  const { run, memory } = await repeated(a, probe, () => runOnce(page, runRequestOf(a)));
  if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
  const files = [];
  if (a.out) {
    if (run.result.finish_reason === 'done' && !run.images.length) throw new Error('--out: this bundle\'s output is not an image (no pipeline.output.image)');
    const dot = a.out.lastIndexOf('.');
    for (const [i, image] of run.images.entries()) {
      const file = run.images.length === 1 ? a.out : dot > 0 ? `${a.out.slice(0, dot)}-${i}${a.out.slice(dot)}` : `${a.out}-${i}`;
      fs.writeFileSync(file, Buffer.from(image.png));
      files.push(file);
    }
  }
  const { shapes, ...result } = run.result;
  return {
    files, shape: shapes.output ?? null, ...result,
    ...loadFacts(loaded, browser),
    warnings: loaded.info.warnings,
    ep: a.ep ?? null,
    threads: loaded.info.threads,
    run_wall_ms: run.wallMs,
    memory,
  };
}

/** --text: speak through the worker, write the worker's WAV to a.out. */
async function speakBundle(a, page, loaded, browser, offsite, probe) {
  const { run, memory } = await repeated(a, probe, () => speak(page, { text: a.text, controls: a.controls }));
  if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
  fs.writeFileSync(a.out, Buffer.from(run.wav));
  return {
    ...run.result,
    out: a.out,
    ...loadFacts(loaded, browser),
    warnings: [...loaded.info.warnings, ...run.result.warnings],
    ep: a.ep ?? null,
    threads: a.threads ?? null,
    speak_wall_ms: run.wallMs,
    first_audio_ms: run.sentences[0]?.ms ?? null,
    memory,
  };
}

/** --audio: what the bundle does with audio depends on its kind. */
async function audioBundle(a, page, loaded, browser, offsite, probe) {
  const { samples, sampleRate } = readWav(a.audio);
  if (loaded.info.kind === 'transcription') return await transcribeBundle(a, page, loaded, browser, offsite, samples, sampleRate, probe);
  if (loaded.info.kind !== 'voice-activity') throw new Error(`--audio: a "${loaded.info.kind}" bundle takes no audio`);
  const { run, memory } = await repeated(a, probe, () => detectSpeech(page, samples, sampleRate, a.controls));
  if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
  const { probabilities: _, events: __, ...result } = run.result;
  return {
    ...result,
    ...loadFacts(loaded, browser),
    warnings: loaded.info.warnings,
    ep: a.ep ?? null,
    detect_wall_ms: run.wallMs,
    memory,
  };
}

/** --audio with a transcription bundle: the CLI's four keys first, then what ran where. */
async function transcribeBundle(a, page, loaded, browser, offsite, samples, sampleRate, probe) {
  if (Object.keys(a.controls).length) throw new Error('--set: a transcription bundle has no controls');
  const options = a.maxNewTokens !== undefined ? { max_new_tokens: a.maxNewTokens } : {};
  const { run, memory } = await repeated(a, probe, () => transcribe(page, samples, sampleRate, options));
  if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
  const { text, tokens, audio_seconds, compute_seconds, windows, finish_reason } = run.result;
  return {
    text, tokens, audio_seconds, compute_seconds, windows, finish_reason,
    ...loadFacts(loaded, browser),
    warnings: loaded.info.warnings,
    ep: a.ep ?? null,
    threads: loaded.info.threads,
    transcribe_wall_ms: run.wallMs,
    memory,
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
    } else if (a.once) {
      const seed = out.seed !== undefined ? `, seed ${out.seed}` : '';
      process.stderr.write(`${out.files.join(', ') || 'no --out'}: output ${JSON.stringify(out.shape)}, ${out.compute_seconds.toFixed(2)} s${seed}` +
        `${out.finish_reason === 'done' ? '' : ` (${out.finish_reason} after ${out.steps} step(s))`}\n`);
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
