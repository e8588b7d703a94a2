"""The soak's "growth within noise" rule, one definition for the native driver (the browser
driver's twin is growth.mjs, the same numbers).

Samples are taken after warm-up (sample 1: one generation of each kind done) and then every
``every`` generations. Baseline: the mean of samples 2-6 (the first is left out, it can still
hold warm-up allocations); tail: the mean of the last 5. The run passes when the tail is no more
than ``max(rel * baseline, abs_bytes)`` above the baseline: a leak of a few hundred kB per
generation over a thousand generations is far over that, GC and allocator noise is not.
"""

from __future__ import annotations

# (relative, absolute bytes) per measure: wasm heaps only grow in 64 KiB pages and hold their
# peak; a JS heap after a forced GC moves by a few hundred kB; RSS moves with the allocator
LIMITS = {
    "wasm_bytes": (0.05, 8 << 20),
    "js_heap_bytes": (0.10, 4 << 20),
    "rss_bytes": (0.05, 32 << 20),
}
MIN_SAMPLES = 10   # baseline and tail do not overlap


def growth(samples: list[int], name: str) -> dict:
    """{first, last, max, baseline, tail, growth, limit, ok} of one measure's samples."""
    if len(samples) < MIN_SAMPLES:
        raise ValueError(f"{name}: the growth rule needs at least {MIN_SAMPLES} samples, found {len(samples)}")
    rel, absolute = LIMITS[name]
    baseline = sum(samples[1:6]) / 5
    tail = sum(samples[-5:]) / 5
    limit = max(rel * baseline, absolute)
    return {"first": samples[0], "last": samples[-1], "max": max(samples), "baseline": baseline,
            "tail": tail, "growth": tail - baseline, "limit": limit, "ok": tail - baseline <= limit}
