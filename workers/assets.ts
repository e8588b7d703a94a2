// The asset URLs the page gave this worker ('configure', before anything else): where
// onnxruntime-web, Pyodide, the wheel and espeak-ng are (web/src/runtime-assets.ts).

import { type RuntimeAssets, badAssets } from '../web/src/runtime-assets';
import { CallError } from './call';

let configured: RuntimeAssets | null = null;

/** Keep the page's map (sent once, first); a bad one is refused as an input error naming the field. */
export function configureAssets(value: unknown): void {
  const problem = badAssets(value);
  if (problem) throw new CallError('input', `configure: ${problem}`);
  configured = value as RuntimeAssets;
}

/** The map; the page always sends one first, so its absence is the page's bug. */
export function assets(): RuntimeAssets {
  if (!configured) throw new Error("the runtime worker was given no asset URLs (the page sends 'configure' first)");
  return configured;
}
