"""The soak's small version (tests/soak/soak_native.py): the real chat, voice and speech
recognition bundles in this one process, 30 generations mixed (transcription, the slow one,
once in ten), RSS sampled every 3; memory must stay within the growth rule of
tests/soak/growth.py. `make soak` runs the full 1,000."""

from __future__ import annotations

import pytest

from tests.soak.growth import growth
from tests.soak.soak_native import MODELS, Mix, soak

BUNDLES = {"chat": MODELS / "smollm2-135m-instruct" / "model.onnx",
           "voice": MODELS / "piper-en-us-joe" / "en_US-joe-medium.onnx",
           "asr": MODELS / "whisper-base" / "decoder.onnx"}
MISSING = [str(p.parent) for p in BUNDLES.values() if not p.exists()]


@pytest.mark.skipif(bool(MISSING), reason=f"not built: {MISSING}: run `make models`")
def test_native_soak_small_stays_within_noise():
    mix = Mix(*(p.parent for p in BUNDLES.values()), mix="cscscscsct")
    out = soak(mix, generations=30, every=3)
    assert out["counts"] == {"chat": 15, "speech": 12, "transcription": 3}
    assert len(out["rss_samples"]) == 11
    r = out["rss_bytes"]
    assert r["ok"], f"RSS grew {r['growth'] / 2**20:.1f} MiB (limit {r['limit'] / 2**20:.1f} MiB): {out['rss_samples']}"


def test_growth_rule_flags_a_leak_and_passes_noise():
    mib = 1 << 20
    noisy = [500 * mib + (i % 3) * mib for i in range(11)]
    assert growth(noisy, "rss_bytes")["ok"]
    leaking = [500 * mib + i * 8 * mib for i in range(11)]   # 8 MiB per sample: +40 MiB tail - baseline
    check = growth(leaking, "rss_bytes")
    assert not check["ok"] and check["growth"] == 40 * mib
    with pytest.raises(ValueError, match="at least 10 samples, found 3"):
        growth(noisy[:3], "rss_bytes")
