#!/usr/bin/env node
// Models the size people run, in headless Chromium (WASM), side by side in one run: onnxpipe's
// runtime worker, transformers.js 4.x on the same transformers.js folder and file, and wllama
// (llama.cpp) on the GGUF of the same weights at the same bits (q4 <-> Q4_0, q8 <-> Q8_0). The
// models are `make sized-models`' random-weight ones in the real shapes of Qwen2.5-0.5B,
// Llama-3.2-1B and Qwen2.5-1.5B (build/sized/): speed, memory and loading don't depend on the
// values. Not a test (docs/large-models.md has the figures).
//
//   node bench/sized_models.mjs [--sizes a,b] [--dtypes fp16,q8,q4,q4f16] [--threads 1,2]
//        [--tokens 16] [--prompt-tokens 128] [--long 1000] [--peers onnxpipe,transformers.js,wllama]
//        [--no-second-visit] [--json OUT.json]
//
// Per size, thread count and dtype, each runtime in a fresh browser profile: the first visit
// (download from the local server, store, open) and the second (from the browser's storage:
// OPFS for onnxpipe and wllama, Cache Storage for transformers.js), the WASM heap after load and
// after the generation (onnxruntime-web's heap, read from its WebAssembly.Memory), then one
// greedy generation of --tokens new tokens (ignore_eos) after a --prompt-tokens prompt: decode
// and prefill tokens/s (wllama: llama.cpp's own timings). --long N: onnxpipe's time to first
// token on an N-token prompt at q4, the prompt fed in chunks (loops/autoregressive.py). A load
// refused before download (onnxpipe's fit check) is reported with its message.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launchPersistent, siteDir, startServer } from '../tests/e2e/lib/browser.mjs';
import { ensureManifest, generate, loadBundle, openRuntimePage } from '../tests/e2e/lib/runtime.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const flag = (name) => (args.includes(name) ? (args.splice(args.indexOf(name), 1), true) : false);
const SIZED = path.join(ROOT, 'build', 'sized');
const SIZES = opt('--sizes', 'qwen2.5-0.5b,llama-3.2-1b,qwen2.5-1.5b').split(',').filter(Boolean);
const DTYPES = opt('--dtypes', 'fp16,q8,q4,q4f16').split(',').filter(Boolean);
const THREADS = opt('--threads', '1,2').split(',').map(Number);
const TOKENS = Number(opt('--tokens', 16));
const PROMPT_TOKENS = Number(opt('--prompt-tokens', 128));
const LONG = Number(opt('--long', 1000));
const PEERS = opt('--peers', 'onnxpipe,transformers.js,wllama').split(',');
const SECOND = !flag('--no-second-visit');
const JSON_OUT = opt('--json', '');
const BENCH_NODE = path.join(ROOT, 'build', 'bench-node', 'node_modules');
const TJS = path.join(BENCH_NODE, '@huggingface', 'transformers', 'dist');
const TJS_ORT = path.join(BENCH_NODE, 'onnxruntime-web', 'dist');
const WLLAMA = path.join(BENCH_NODE, '@wllama', 'wllama');
const SUFFIX = { fp32: '', fp16: '_fp16', q8: '_quantized', q4: '_q4', q4f16: '_q4f16' };
const GGUF = { q4: 'Q4_0', q8: 'Q8_0' };
const log = (m) => process.stderr.write(`${m}\n`);
const MB = (n) => (n == null ? null : Math.round(n / 2 ** 20));

// English-like words (export/synthetic_tokenizer.py sample_text): ~2.3 characters a token
const WORDS = ('the of and to in is was for on that with as by at from his her it an are this which be or have one had ' +
  'not but all were they their there been has more when who will would no out so up said what about into than them can').split(' ');
function promptText(tokens) {
  const out = [];
  for (let i = 0; out.join(' ').length < tokens * 2.3; i++) out.push(WORDS[(i * 7 + Math.floor(i / 5)) % WORDS.length]);
  return out.join(' ');
}

// onnxruntime-web makes its heap in JavaScript (new WebAssembly.Memory); a page that runs it
// (transformers.js) has that memory recorded before any of its scripts run
const HEAP_HOOK = `(() => {
  const heaps = []; const Memory = WebAssembly.Memory;
  WebAssembly.Memory = new Proxy(Memory, { construct(t, a) { const m = Reflect.construct(t, a); heaps.push(m); return m; } });
  window.__heaps = () => heaps.reduce((s, m) => s + m.buffer.byteLength, 0);
})();`;

async function profile(body) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-sized-'));
  const { context, offsite } = await launchPersistent(dir);
  try {
    return await body(context, offsite);
  } finally {
    await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const STALL_MS = 120_000;

async function pageResult(context, url, timeoutMs = 1_800_000) {
  const page = await context.newPage();
  await page.addInitScript(HEAP_HOOK);
  let stall;
  try {
    // a renderer that runs out of memory dies without setting either: report it, don't wait
    const crashed = new Promise((_, reject) => page.once('crash', () => reject(new Error('the page crashed (renderer out of memory?)'))));
    crashed.catch(() => undefined);
    // a peer that stalls says why in its console, if anywhere: transformers.js logs "Failed to
    // fetch" for a file over 2 GB and its load never settles, so an error followed by silence
    // ends the run (the successful runs log no console error)
    const stalled = new Promise((_, reject) => {
      const said = (text) => {
        log(`#     ${new URL(url).pathname}: ${text.slice(0, 300)}`);
        clearTimeout(stall);
        stall = setTimeout(() => reject(new Error(`stalled: nothing for ${STALL_MS / 1000} s after its console error "${text.slice(0, 200)}"`)), STALL_MS);
      };
      page.on('console', (m) => { if (m.type() === 'error') said(m.text()); });
      page.on('pageerror', (e) => said(String(e.message)));
    });
    stalled.catch(() => undefined);
    await page.goto(url);
    await Promise.race([crashed, stalled, page.waitForFunction(() => window.__result || window.__error, null, { timeout: timeoutMs, polling: 500 })]);
    const { result, error } = await page.evaluate(() => ({ result: window.__result, error: window.__error }));
    if (error) throw new Error(error.split('\n')[0]);
    return result;
  } finally {
    clearTimeout(stall);
    await page.close();
  }
}

async function onnxpipe(server, size, dtype, threads, prompt) {
  return profile(async (context) => {
    const url = `${server.url}sized/${size}/`;
    const visit = async () => {
      const page = await openRuntimePage(context, server.url);
      const t0 = Date.now();
      const { info } = await loadBundle(page, url, { ep: 'wasm', dtype, threads, timeout: 1_800_000 });
      return { page, info, wallMs: Date.now() - t0 };
    };
    let first;
    try {
      first = await visit();
    } catch (error) {
      return { error: String(error.message ?? error).split('\n')[0] };
    }
    const heap = async () => (await first.page.evaluate(() => window.__onnxpipe.client.wasmMemory())).ort_bytes;
    const heapAfterLoad = await heap();
    const { result } = await generate(first.page, { prompt, options: { do_sample: false, max_new_tokens: TOKENS, ignore_eos: true } }, { timeout: 1_800_000 });
    const out = {
      load_ms: first.wallMs, heap_after_load: heapAfterLoad, heap_peak: await heap(), prompt_tokens: result.prompt_tokens,
      prefill_ms: result.prefill_ms, prompt_per_second: result.prompt_tokens / (result.prefill_ms / 1000),
      tokens_per_s: result.decode_tokens_per_s, heap: first.info.heap, session_heap: first.info.sessions.decoder.heap,
    };
    if (LONG && dtype === 'q4' && threads === 1) {
      const long = await generate(first.page, { prompt: promptText(LONG), options: { do_sample: false, max_new_tokens: 2, ignore_eos: true } }, { timeout: 1_800_000 });
      out.long = { prompt_tokens: long.result.prompt_tokens, first_token_ms: long.firstTokenMs, prefill_ms: long.result.prefill_ms,
                   heap_peak: await heap() };
    }
    await first.page.close();
    if (SECOND) out.second_load_ms = (await visit().then(async (v) => { await v.page.close(); return v.wallMs; }));
    return out;
  });
}

async function transformersJs(server, size, dtype, threads, prompt) {
  const file = path.join(SIZED, size, 'onnx', `model${SUFFIX[dtype]}.onnx`);
  const q = new URLSearchParams({ model: size, dtype, threads: String(threads), tokens: String(TOKENS), prompt,
                                  external: fs.existsSync(`${file}_data`) ? '1' : '0', cache: '1' });
  return profile(async (context) => {
    try {
      const first = await pageResult(context, `${server.url}bench/browser_tjs_folder.html?${q}`);
      if (SECOND) first.second_load_ms = (await pageResult(context, `${server.url}bench/browser_tjs_folder.html?${q}`)).load_ms;
      return first;
    } catch (error) {
      return { error: String(error.message ?? error) };
    }
  });
}

async function wllama(server, size, dtype, threads, prompt) {
  const gguf = path.join(SIZED, `${size}.${GGUF[dtype]}.gguf`);
  if (!fs.existsSync(gguf)) return { error: `${path.relative(ROOT, gguf)} missing: make sized-models` };
  const q = new URLSearchParams({ model: `${server.url}sized/${path.basename(gguf)}`, threads: String(threads),
                                  tokens: String(TOKENS), prompt, cache: '1', ctx: '2048' });
  return profile(async (context) => {
    try {
      const first = await pageResult(context, `${server.url}bench/browser_wllama.html?${q}`);
      if (SECOND) first.second_load_ms = (await pageResult(context, `${server.url}bench/browser_wllama.html?${q}`)).load_ms;
      return { ...first, ...first.runs[0] };
    } catch (error) {
      return { error: String(error.message ?? error) };
    }
  });
}

const RUNNERS = { onnxpipe, 'transformers.js': transformersJs, wllama };

async function main() {
  const missing = PEERS.filter((p) => (p === 'transformers.js' && !fs.existsSync(TJS)) || (p === 'wllama' && !fs.existsSync(WLLAMA)));
  if (missing.length) log(`# ${missing.join(', ')} missing: make bench installs them into build/bench-node`);
  const sizes = SIZES.filter((s) => fs.existsSync(path.join(SIZED, s, 'manifest.json')));
  if (!sizes.length) throw new Error(`no sized model in ${path.relative(ROOT, SIZED)}: run make sized-models`);
  for (const s of sizes) ensureManifest(path.join(SIZED, s));
  const server = await startServer({
    root: siteDir(), csp: false, mounts: {
      '/sized/': SIZED, '/tjs-model/': SIZED, '/tjs/': TJS, '/tjs-ort/': TJS_ORT, '/wllama/': WLLAMA, '/bench/': path.join(ROOT, 'bench'),
    },
  });
  const prompt = promptText(PROMPT_TOKENS);
  const rows = [];
  try {
    for (const size of sizes) {
      for (const threads of THREADS) {
        for (const dtype of DTYPES) {
          for (const peer of PEERS.filter((p) => !missing.includes(p))) {
            if (peer === 'wllama' && !GGUF[dtype]) continue;
            log(`# ${size} ${dtype} ${threads} thread(s): ${peer}`);
            const r = await RUNNERS[peer](server, size, dtype, threads, prompt);
            rows.push({ size, dtype, threads, runtime: peer, ...r });
            log(`#   ${r.error ? `error: ${r.error}` : `load ${(r.load_ms / 1000).toFixed(1)} s (second ${r.second_load_ms ? (r.second_load_ms / 1000).toFixed(1) : '-'} s), heap ${MB(r.heap_peak ?? r.heap_after_load) ?? '-'} MiB${r.session_heap ? ` in ${r.session_heap.heaps} heap(s), ${r.session_heap.expanded} MatMulNBits expanded, ${r.session_heap.kept} kept` : ''}, prefill ${r.prompt_per_second?.toFixed(1)} tok/s, decode ${r.tokens_per_s?.toFixed(2)} tok/s`}`);
          }
        }
      }
    }
  } finally {
    await server.stop();
  }
  report(rows);
  if (JSON_OUT) {
    fs.mkdirSync(path.dirname(path.resolve(JSON_OUT)), { recursive: true });
    fs.writeFileSync(JSON_OUT, JSON.stringify({ tokens: TOKENS, prompt_tokens: PROMPT_TOKENS, rows }, null, 1));
  }
}

function report(rows) {
  const f = (x, d = 2) => (x == null || Number.isNaN(x) ? '-' : x.toFixed(d));
  console.log(`\nsized models, headless Chromium, WASM; ${TOKENS} new tokens after a ${PROMPT_TOKENS}-token prompt`);
  console.log('size | threads | dtype | runtime | load s (2nd) | heap MiB (heaps) | prefill tok/s | decode tok/s');
  for (const r of rows) {
    console.log(r.error ? `${r.size} | ${r.threads} | ${r.dtype} | ${r.runtime} | error: ${r.error.slice(0, 160)}`
      : `${r.size} | ${r.threads} | ${r.dtype} | ${r.runtime} | ${f(r.load_ms / 1000, 1)} (${f(r.second_load_ms / 1000, 1)}) | ${MB(r.heap_peak ?? r.heap_after_load) ?? '-'}${r.session_heap ? ` (${r.session_heap.heaps})` : ''} | ${f(r.prompt_per_second, 1)} | ${f(r.tokens_per_s)}`);
  }
  console.log('\nratios (decode tokens/s):');
  const get = (size, threads, dtype, runtime) => rows.find((r) => r.size === size && r.threads === threads && r.dtype === dtype && r.runtime === runtime && !r.error);
  for (const size of new Set(rows.map((r) => r.size))) {
    for (const threads of new Set(rows.map((r) => r.threads))) {
      const parts = [];
      for (const dtype of ['q4', 'q8']) {
        const a = get(size, threads, dtype, 'onnxpipe');
        const b = get(size, threads, dtype, 'wllama');
        if (a && b) parts.push(`${dtype}/wllama ${GGUF[dtype]} ${f(a.tokens_per_s / b.tokens_per_s)} (goal >= 1)`);
        const c = get(size, threads, dtype, 'transformers.js');
        if (a && c) parts.push(`${dtype}/transformers.js ${f(a.tokens_per_s / c.tokens_per_s)}`);
      }
      const q4 = get(size, threads, 'q4', 'onnxpipe');
      const fp16 = get(size, threads, 'fp16', 'onnxpipe');
      if (q4 && fp16) parts.push(`q4/fp16 ${f(q4.tokens_per_s / fp16.tokens_per_s)}`);
      else if (q4) parts.push(`fp16: ${rows.find((r) => r.size === size && r.threads === threads && r.dtype === 'fp16' && r.runtime === 'onnxpipe')?.error?.slice(0, 100) ?? 'not run'}`);
      console.log(`  ${size}, ${threads} thread(s): ${parts.join('; ')}`);
      if (q4?.long) console.log(`    ${q4.long.prompt_tokens}-token prompt at q4: first token ${f(q4.long.first_token_ms / 1000, 1)} s; heap peak ${MB(q4.long.heap_peak)} MiB; KV reserved at ${q4.heap?.context_length} tokens: ${MB(q4.heap?.kv_bytes / 2)} MiB`);
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
