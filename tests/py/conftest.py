"""Shared pytest fixtures: the tiny generated model bundles of tests/fixtures/.

Each fixture returns the bundle folder (a Path) and builds it on first use; builds are cached
under tests/fixtures/.cache/ and guarded by a file lock, so parallel workers are safe. Every
bundle holds expected.json: `input_ids`, `max_new_tokens` (64), `greedy_tokens` (new ids only)
and the `oracles` that agreed on them.

    def test_v1_bundle(genai_llama): ...                  # one bundle
    def test_every_bundle(tiny_bundle): ...               # parametrized over all bundles
    def test_v1(genai_bundle): ...                        # over genai_config.json bundles
    def test_v2(pipeline_bundle): ...                     # over pipeline.json bundles
    def test_some(tiny_bundles): tiny_bundles["novel_recurrent"], tiny_bundles.expected(name)

Names for `@pytest.mark.parametrize`: `from tests.fixtures import NAMES, GENAI_BUNDLES, PIPELINE_BUNDLES`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT / "py", ROOT):  # the repo root makes `tests.fixtures` importable without PYTHONPATH
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from tests.fixtures import tiny_models  # noqa: E402


class TinyBundles(Mapping[str, Path]):
    """All fixture bundles by name; a bundle is built only when first looked up."""

    def __getitem__(self, name: str) -> Path:
        return tiny_models.ensure(name)

    def __iter__(self) -> Iterator[str]:
        return iter(tiny_models.NAMES)

    def __len__(self) -> int:
        return len(tiny_models.NAMES)

    def expected(self, name: str) -> dict:
        """The bundle's expected.json."""
        return tiny_models.load_expected(name)


@pytest.fixture(scope="session")
def tiny_bundles() -> TinyBundles:
    return TinyBundles()


@pytest.fixture(scope="session", params=tiny_models.NAMES)
def tiny_bundle(request) -> Path:
    """Each bundle in turn (test ids are the fixture names)."""
    return tiny_models.ensure(request.param)


@pytest.fixture(scope="session", params=tiny_models.GENAI_BUNDLES)
def genai_bundle(request) -> Path:
    """Each onnxruntime-genai v1 bundle (genai_config.json, no pipeline.json)."""
    return tiny_models.ensure(request.param)


@pytest.fixture(scope="session", params=tiny_models.PIPELINE_BUNDLES)
def pipeline_bundle(request) -> Path:
    """Each pipeline.json v2 bundle."""
    return tiny_models.ensure(request.param)


@pytest.fixture(scope="session", params=tiny_models.TJS_BUNDLES)
def tjs_bundle(request) -> Path:
    """Each transformers.js folder (config.json + onnx/model*.onnx, no pipeline.json)."""
    return tiny_models.ensure(request.param)


@pytest.fixture(scope="session")
def genai_llama() -> Path:
    """onnxruntime-genai builder, llama (GQA 4/2), past_present_share_buffer true (builder default)."""
    return tiny_models.ensure("genai_llama")


@pytest.fixture(scope="session")
def genai_llama_noshare() -> Path:
    """The genai_llama weights and tokens, built with past_present_share_buffer false."""
    return tiny_models.ensure("genai_llama_noshare")


@pytest.fixture(scope="session")
def genai_qwen2() -> Path:
    """onnxruntime-genai builder, qwen2 (q/k/v bias), past_present_share_buffer true."""
    return tiny_models.ensure("genai_qwen2")


@pytest.fixture(scope="session")
def genai_whisper() -> Path:
    """onnxruntime-genai builder, Whisper (model.encoder + model.decoder), with audio.wav."""
    return tiny_models.ensure("genai_whisper")


@pytest.fixture(scope="session")
def genai_qwen3() -> Path:
    """onnxruntime-genai builder, qwen3 (q/k norm, tied embeddings), past_present_share_buffer true."""
    return tiny_models.ensure("genai_qwen3")


@pytest.fixture(scope="session")
def genai_lfm2() -> Path:
    """onnxruntime-genai builder, LFM2: conv layers 0 and 2 (past.%d.conv), attention layers 1 and 3."""
    return tiny_models.ensure("genai_lfm2")


@pytest.fixture(scope="session")
def genai_qwen35() -> Path:
    """onnxruntime-genai builder, Qwen3.5 text: Gated DeltaNet layers 0 and 2 (past.%d.conv and
    past.%d.recurrent), gated attention layers 1 and 3, interleaved mRoPE."""
    return tiny_models.ensure("genai_qwen35")


@pytest.fixture(scope="session")
def torch_llama() -> Path:
    """Legacy torch.onnx.export of a llama with past/present I/O, plus pipeline.json v2."""
    return tiny_models.ensure("torch_llama")


@pytest.fixture(scope="session")
def novel_recurrent() -> Path:
    """onnx.helper RNN (`tok`, `h` -> `scores`, `h_next`) driven only by its pipeline.json."""
    return tiny_models.ensure("novel_recurrent")


@pytest.fixture(scope="session")
def novel_two_stage() -> Path:
    """onnx.helper embed + attention core with `cache.{layer}.k` style names and pipeline.json."""
    return tiny_models.ensure("novel_two_stage")
