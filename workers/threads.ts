// How many WASM threads onnxruntime-web runs with, and why: fixed when the worker starts it.
//
// Rule, from measurements on a 2-core machine in headless Chromium (docs/quick-start.md):
// SmolLM2-135M's wasm file decodes ~1.3-1.6x faster on 2 threads than on 1, Piper speaks ~1.7x
// faster; 4 threads on 2 cores were slower than 1. So: one thread per core, never more, and at
// most MAX_THREADS (the widget's cap too: web/src/embed/threads.ts), where the page may share
// memory with threads at all (cross-origin isolated).

import type { ThreadChoice } from '../web/src/protocol';

export const MAX_THREADS = 4;

export function chooseThreads(requested: number | undefined, isolated: boolean, cores: number): ThreadChoice {
  if (requested !== undefined) {
    if (!Number.isInteger(requested) || requested < 1) {
      throw new RangeError(`threads: expected a whole number >= 1, found ${requested}`);
    }
    if (!isolated) return { threads: 1, reason: 'not isolated' };   // threads need SharedArrayBuffer
    return { threads: Math.min(requested, Math.max(1, cores)), reason: 'explicit' };
  }
  if (!isolated) return { threads: 1, reason: 'not isolated' };
  return { threads: Math.max(1, Math.min(cores || 1, MAX_THREADS)), reason: 'rule' };
}
