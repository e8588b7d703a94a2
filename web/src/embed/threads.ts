// WASM threads for a widget's runtime.

/**
 * Threads need SharedArrayBuffer, so 1 unless this frame is cross-origin isolated (the host
 * page sent COOP/COEP and framed us with allow="cross-origin-isolated"). Isolated, the default
 * is half the cores, at least 2 and at most 4: the widget shares the machine with the page
 * that embeds it; 2 threads made SmolLM2 34 vs 21-28 tokens/s and the Piper voice well above
 * real time on 2 cores, while more threads than cores made things slower
 * (BROWSER-FACTS.md in the design notes). A `threads` attribute overrides it, still capped at
 * the core count (the runtime worker caps it the same way: workers/runtime.worker.ts).
 */
export function widgetThreads(requested: number | null, isolated = self.crossOriginIsolated, cores = navigator.hardwareConcurrency || 1): number {
  if (!isolated) return 1;
  const wanted = requested ?? Math.max(2, Math.min(4, Math.floor(cores / 2)));
  return Math.max(1, Math.min(wanted, cores));
}
