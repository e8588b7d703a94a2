// WASM threads per model on the voice page (kept apart from models.ts, which builds DOM, so the
// browser-free tests can import it).

import type { Role } from './models';

const ROLES: readonly Role[] = ['vad', 'asr', 'llm', 'voice'];

/** WASM threads per model for the page's thread count N (``?threads=N``, 1 by default): the
 * one place that decides it (docs/voice.md "Threads per model"). The VAD always gets 1: it makes
 * 31 tiny runs a second, where more threads only add synchronisation. Whisper runs alone, between
 * the end of speech and the transcript: N. The chat model and the voice run at the same time
 * during a reply: N each too, which measured fastest once the VAD was on 1 (docs/voice.md). */
export const THREAD_PLAN: Record<Role, (n: number) => number> = {
  vad: () => 1,
  asr: (n) => n,
  llm: (n) => n,
  voice: (n) => n,
};
const MAX_THREADS = 16;

/** The threads each model gets for the page address's query ``search``: ``threads=N`` (a whole
 * number from 1 to 16, default 1) through THREAD_PLAN, then ``<role>_threads=M`` for one model
 * (``?threads=2&asr_threads=1``; roles: vad, asr, llm, voice). A value that is no whole number
 * from 1 to 16, or a ``*_threads`` parameter naming no role, is refused (an Error naming the
 * parameter, what was expected and what was found); other parameters are not this function's. */
export function threadsFromQuery(search: string): Record<Role, number> {
  const params = new URLSearchParams(search);
  const count = (name: string, raw: string): number => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isInteger(n) || n < 1 || n > MAX_THREADS) {
      throw new Error(`the address's ${name}=${raw}: expected a whole number from 1 to ${MAX_THREADS}`);
    }
    return n;
  };
  const raw = params.get('threads');
  const n = raw === null ? 1 : count('threads', raw);
  const plan = Object.fromEntries(ROLES.map((r) => [r, THREAD_PLAN[r](n)])) as Record<Role, number>;
  for (const [name, value] of params) {
    if (!name.endsWith('_threads')) continue;
    const role = name.slice(0, -'_threads'.length);
    if (!(ROLES as string[]).includes(role)) {
      throw new Error(`the address's ${name}=${value}: no model is called "${role}" (expected one of ${ROLES.map((r) => `${r}_threads`).join(', ')})`);
    }
    plan[role as Role] = count(name, value);
  }
  return plan;
}
