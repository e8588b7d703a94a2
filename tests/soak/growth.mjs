// The soak's "growth within noise" rule for the browser driver: the same rule and limits as
// tests/soak/growth.py (read there why). Baseline: mean of samples 2-6; tail: mean of the last
// 5; ok when tail - baseline <= max(rel * baseline, abs).
export const LIMITS = {
  wasm_bytes: [0.05, 8 * 2 ** 20],
  js_heap_bytes: [0.10, 4 * 2 ** 20],
  rss_bytes: [0.05, 32 * 2 ** 20],
};
export const MIN_SAMPLES = 10;

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** {first, last, max, baseline, tail, growth, limit, ok} of one measure's samples. */
export function growth(samples, name) {
  if (samples.length < MIN_SAMPLES) throw new Error(`${name}: the growth rule needs at least ${MIN_SAMPLES} samples, found ${samples.length}`);
  const [rel, abs] = LIMITS[name];
  const baseline = mean(samples.slice(1, 6));
  const tail = mean(samples.slice(-5));
  const limit = Math.max(rel * baseline, abs);
  return { first: samples[0], last: samples.at(-1), max: Math.max(...samples), baseline, tail, growth: tail - baseline, limit, ok: tail - baseline <= limit };
}
