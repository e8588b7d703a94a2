// The margin rule of tests/agreement.py for the browser tests: the browser's greedy tokens may
// leave the native reference's only at a step whose native top-2 logit margin is below twice
// the logit tolerance between the two engines' kernels (a near tie); anywhere else a split is a bug.
//
//   const native = await nativeGreedy(BUNDLE_DIR, ['--chat', 'Hi', '--max-new-tokens', '24', '--variant', 'wasm']);
//   const agreed = assertGreedyAgrees(browser.tokens, native.tokens, native.margins, WASM_VS_NATIVE);
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT, python } from './browser.mjs';
import { TIMEOUTS } from './timeouts.mjs';

/**
 * Logit tolerance between onnxruntime-web's WASM kernels and native onnxruntime's on the same
 * fp32-compute file. Measured natively, fp32 paths that differ only in kernel order agree within
 * 4e-5 on SmolLM2 (a continued state vs a fresh prefill); this leaves 250x room.
 */
export const WASM_VS_NATIVE = 1e-2;

/** {agreed, split, margin}: split is the first differing step (null if none). */
export function assertGreedyAgrees(got, want, wantMargins, logitTolerance, what = 'tokens') {
  const n = Math.min(got.length, want.length);
  let split = 0;
  while (split < n && got[split] === want[split]) split += 1;
  if (split === n) return { agreed: n, split: null, margin: null };
  assert.ok(split < wantMargins.length, `${what}: no reference margin for step ${split}`);
  const margin = wantMargins[split];
  assert.ok(margin < 2 * logitTolerance,
    `${what}: step ${split} gives ${got[split]} where the reference gives ${want[split]}, yet the reference's ` +
    `top-2 margin there is ${margin.toFixed(4)}, not below 2 x ${logitTolerance}: not a near tie, a real difference\n` +
    `  got  ${JSON.stringify(got)}\n  want ${JSON.stringify(want)}`);
  return { agreed: split, split, margin };
}

/**
 * `python -m tests.agreement greedy BUNDLE ...` (CPython, onnxruntime): a native greedy run with
 * the top-2 margin of every step: {prompt_ids, tokens, text, finish_reason, margins}.
 */
export function nativeGreedy(bundleDir, args, options = {}) {
  return nativeAgreement(['greedy', bundleDir, ...args], options);
}

/**
 * `python -m tests.agreement transcribe BUNDLE --audio WAV`: a native transcription with the
 * top-2 margin of every kept token: {tokens, text, windows, margins}.
 */
export function nativeTranscription(bundleDir, wav, options = {}) {
  return nativeAgreement(['transcribe', bundleDir, '--audio', wav], options);
}

function nativeAgreement(args, { timeout = TIMEOUTS.native } = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(python(), ['-m', 'tests.agreement', ...args], {
      cwd: ROOT,
      env: { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeout);
    proc.stdout.on('data', (c) => (out += c));
    proc.stderr.on('data', (c) => (err += c));
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`python -m tests.agreement failed (${code ?? signal}): ${err.trim()}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()));
      } catch {
        reject(new Error(`python -m tests.agreement: no JSON in its output: ${out.slice(0, 500)}`));
      }
    });
  });
}

/** Logit tolerance between fp32 kernels on the tiny fixtures (FP32_KERNELS in tests/agreement.py). */
export const SMALL_FP32 = 1e-3;

/**
 * A tiny fixture's expected.json: every greedy step wins by at least 2 x SMALL_FP32, so the
 * margin rule leaves no step where two engines may differ and its tokens must match exactly.
 * Checks that precondition of the exact comparisons.
 */
export function assertDecisive(expected, name) {
  assert.ok(expected.min_logit_margin >= 2 * SMALL_FP32,
    `${name}: its smallest greedy margin ${expected.min_logit_margin} is below 2 x ${SMALL_FP32}: compare it with assertGreedyAgrees`);
}
