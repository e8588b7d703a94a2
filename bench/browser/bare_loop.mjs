#!/usr/bin/env node
// Decode speed of one ONNX decoder in onnxruntime-web (WASM) inside headless Chromium.
//
//   node bench/browser/bare_loop.mjs MODEL_DIR FILE [--tokens N] [--threads T] [--prompt-ids 1,2,3]
//        [--data a.data,b.data] [--ort ort.wasm.min.mjs] [--eos 2] [--chromium /usr/bin/chromium]
//        [--timeout-s 600] [--profile] [--no-prepack]
//
// Serves MODEL_DIR and onnxruntime-web's dist on 127.0.0.1 (COOP/COEP, so threads > 1 work),
// opens bare_loop.html in a fresh headless Chromium with every other request blocked, runs a
// greedy loop (argmax in JS, KV cache fed back as separate past/present tensors) and prints
// JSON: {tokens_per_s, tokens, decode_steps, prefill_ms, load_ms, threads, ...}.
// tokens_per_s counts decode steps only (the prefill step is reported apart).
// --data defaults to FILE.data when that file exists. --no-prepack: prepacking off, as in the
// runtime worker. --profile: onnxruntime's profiler on; the JSON adds ops_ms_per_step, each op
// type's kernel milliseconds per decode step (median over the last two thirds of the steps: warm),
// and the profiled run's own tokens_per_s (the profiler slows each kernel a little).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");

function parseArgs(argv) {
  const opts = { tokens: 32, threads: 1, promptIds: "1", data: null, ort: "ort.wasm.min.mjs", eos: "",
                 chromium: process.env.CHROMIUM || "/usr/bin/chromium", timeoutS: 600, profile: false, prepack: true };
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i]; };
    if (a === "--tokens") opts.tokens = Number(next());
    else if (a === "--threads") opts.threads = Number(next());
    else if (a === "--prompt-ids") opts.promptIds = next();
    else if (a === "--data") opts.data = next();
    else if (a === "--ort") opts.ort = next();
    else if (a === "--eos") opts.eos = next();
    else if (a === "--chromium") opts.chromium = next();
    else if (a === "--timeout-s") opts.timeoutS = Number(next());
    else if (a === "--profile") opts.profile = true;
    else if (a === "--no-prepack") opts.prepack = false;
    else if (a === "-h" || a === "--help") { console.log("usage: node bench/browser/bare_loop.mjs MODEL_DIR FILE [--tokens N] [--threads T] [--prompt-ids 1,2,3] [--data a.data] [--ort ort.wasm.min.mjs] [--profile] [--no-prepack]"); process.exit(0); }
    else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else pos.push(a);
  }
  if (pos.length !== 2) throw new Error("usage: bare_loop.mjs MODEL_DIR FILE [options]");
  if (!(Number.isInteger(opts.tokens) && opts.tokens >= 2)) throw new Error(`--tokens: expected a whole number >= 2, got ${opts.tokens}`);
  if (!(Number.isInteger(opts.threads) && opts.threads >= 1)) throw new Error(`--threads: expected a whole number >= 1, got ${opts.threads}`);
  [opts.modelDir, opts.file] = pos;
  if (!existsSync(path.join(opts.modelDir, opts.file))) throw new Error(`no ${opts.file} in ${opts.modelDir}`);
  if (opts.data === null) opts.data = existsSync(path.join(opts.modelDir, opts.file + ".data")) ? opts.file + ".data" : "";
  return opts;
}

function startServer(modelDir) {
  const python = process.env.PYTHON || (existsSync(path.join(root, ".venv/bin/python")) ? path.join(root, ".venv/bin/python") : "python3");
  const proc = spawn(python, [path.join(here, "serve.py"), "--port", "0",
    "--mount", `/ort=${path.join(root, "node_modules/onnxruntime-web/dist")}`,
    "--mount", `/model=${path.resolve(modelDir)}`,
    "--mount", `/bench=${here}`], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let buf = "";
    proc.stdout.on("data", (chunk) => {
      buf += chunk;
      const m = buf.match(/PORT (\d+)/);
      if (m) resolve({ proc, port: Number(m[1]) });
    });
    proc.on("exit", (code) => reject(new Error(`server exited (${code})`)));
  });
}

/** Each op type's kernel milliseconds per warm decode step (median), from the profiler's events:
 * the runs after the prefill, the last two thirds of them. */
function opsPerStep(events) {
  const runs = events.filter((e) => e.name === "model_run").sort((a, b) => a.ts - b.ts).slice(1);
  if (runs.length === 0) throw new Error("the profiler printed no model_run event (no profile on the console)");
  const warm = runs.slice(Math.floor(runs.length / 3));
  const nodes = events.filter((e) => e.cat === "Node" && String(e.name).endsWith("_kernel_time"));
  const perRun = warm.map((run) => {
    const ops = {};
    for (const e of nodes) {
      if (e.ts >= run.ts && e.ts <= run.ts + run.dur) {
        const op = e.args?.op_name ?? "?";
        ops[op] = (ops[op] ?? 0) + e.dur / 1000;
      }
    }
    ops["(whole run)"] = run.dur / 1000;
    return ops;
  });
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const names = new Set(perRun.flatMap((ops) => Object.keys(ops)));
  return Object.fromEntries([...names].map((n) => [n, Number(median(perRun.map((ops) => ops[n] ?? 0)).toFixed(3))])
    .sort((a, b) => b[1] - a[1]));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { proc, port } = await startServer(opts.modelDir);
  const profile = mkdtempSync(path.join(tmpdir(), "onnxpipe-bare-loop-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: opts.chromium,
      headless: true,
      args: ["--headless=new", "--no-sandbox", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    await context.route("**/*", (route) => {
      const host = new URL(route.request().url()).hostname;
      return host === "127.0.0.1" ? route.continue() : route.abort();
    });
    const page = context.pages()[0] || await context.newPage();
    const events = [];   // the profiler's, one JSON object per console line
    page.on("console", (m) => {
      const text = m.text();
      if (opts.profile && text.startsWith('{"cat"')) events.push(JSON.parse(text.trim().replace(/,$/, "")));
      else if (m.type() === "error") process.stderr.write(`[page] ${text}\n`);
    });
    page.on("pageerror", (e) => process.stderr.write(`[page] ${e}\n`));
    const query = new URLSearchParams({ file: opts.file, data: opts.data, tokens: String(opts.tokens),
      threads: String(opts.threads), prompt: opts.promptIds, ort: opts.ort, eos: opts.eos,
      profile: opts.profile ? "1" : "0", prepack: opts.prepack ? "1" : "0" });
    await page.goto(`http://127.0.0.1:${port}/bench/bare_loop.html?${query}`);
    await page.waitForFunction(() => window.__result || window.__error, null, { timeout: opts.timeoutS * 1000, polling: 250 });
    const error = await page.evaluate(() => window.__error);
    if (error) throw new Error(`page: ${error}`);
    const result = await page.evaluate(() => window.__result);
    const profiled = opts.profile ? { ops_ms_per_step: opsPerStep(events) } : {};
    console.log(JSON.stringify({ file: opts.file, prepack: opts.prepack, ...result, ...profiled }));
  } finally {
    if (context) await context.close().catch(() => {});
    proc.kill();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(String(e && e.message || e)); process.exit(1); });
