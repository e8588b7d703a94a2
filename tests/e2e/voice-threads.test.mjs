// The voice page's WASM threads per model (web/src/voice/threads.ts): ?threads=N through the
// plan, ?<role>_threads=M over it, and every bad value refused with its parameter named.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { runnerImport } from 'vite';
import { ROOT } from './lib/browser.mjs';

const { module: m } = await runnerImport(path.join(ROOT, 'web', 'src', 'voice', 'threads.ts'));

test('the plan: the VAD on one thread whatever N, one thread each by default', () => {
  assert.deepEqual(m.threadsFromQuery(''), { vad: 1, asr: 1, llm: 1, voice: 1 });
  for (const n of [1, 2, 4]) {
    const plan = m.threadsFromQuery(`?threads=${n}`);
    assert.equal(plan.vad, 1);
    for (const role of ['asr', 'llm', 'voice']) assert.equal(plan[role], m.THREAD_PLAN[role](n), `${role} at ${n}`);
  }
  assert.deepEqual(m.threadsFromQuery('?threads=2'), { vad: 1, asr: 2, llm: 2, voice: 2 }, 'the VAD alone on one thread');
});

test('one model overridden in the address', () => {
  const plan = m.threadsFromQuery('?threads=2&asr_threads=1&vad_threads=2&other=x');
  assert.deepEqual(plan, { ...m.threadsFromQuery('?threads=2'), asr: 1, vad: 2 });
  assert.equal(m.threadsFromQuery('?llm_threads=3').llm, 3, 'without threads=: over the plan for 1');
});

test('a bad value or an unknown model is refused, naming the parameter', () => {
  for (const [query, said] of [
    ['?threads=0', /threads=0: expected a whole number from 1 to 16/],
    ['?threads=1.5', /threads=1\.5: expected a whole number/],
    ['?asr_threads=two', /asr_threads=two: expected a whole number from 1 to 16/],
    ['?voice_threads=', /voice_threads=: expected a whole number/],
    ['?llm_threads=17', /llm_threads=17: expected/],
    ['?whisper_threads=2', /whisper_threads=2: no model is called "whisper" \(expected one of vad_threads, asr_threads, llm_threads, voice_threads\)/],
  ]) assert.throws(() => m.threadsFromQuery(query), said, query);
});
