// The asset URLs the page gave this worker ('configure', before anything else): where
// onnxruntime-web, Pyodide, the wheel and espeak-ng are (web/src/runtime-assets.ts).

import { type RuntimeAssets, badAssets } from '../web/src/runtime-assets';

let configured: RuntimeAssets | null = null;

/** Keep the page's map; a bad one is refused with the field named. Fixed once booting began. */
export function configureAssets(value: unknown): void {
  const problem = badAssets(value);
  if (problem) throw new TypeError(problem);
  configured = value as RuntimeAssets;
}

/** The map; the page always sends one first, so its absence is the page's bug. */
export function assets(): RuntimeAssets {
  if (!configured) throw new Error("the runtime worker was given no asset URLs (the page sends 'configure' first)");
  return configured;
}
