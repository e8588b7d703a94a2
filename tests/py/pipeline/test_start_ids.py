"""tokens.bos / tokens.decoder_start / tokens.decoder_prefix: where a token loop starts when the
caller gives no prompt, as transformers' ``generate()`` without inputs does (it starts from
``[[bos_token_id]]``); decoder_start and decoder_prefix (fed at every start) checked against the
vocabulary at load, bos where it is fed (a prompt's tokens come from the tokenizer instead)."""

from __future__ import annotations

import json
import shutil

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError, InputError
from tests.fixtures import hf_decoders


def _bundle(tmp_path, torch_llama, tokens: dict):
    out = tmp_path / "b"
    shutil.copytree(torch_llama, out)
    doc = json.loads((out / "pipeline.json").read_text())
    doc["tokens"] = {**doc["tokens"], **tokens}
    doc["tokens"] = {k: v for k, v in doc["tokens"].items() if v is not None}
    (out / "pipeline.json").write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def torch_llama(tiny_bundles):
    return tiny_bundles["torch_llama"]


def test_no_prompt_starts_from_bos_like_transformers(tmp_path, torch_llama):
    torch = pytest.importorskip("torch")
    bos = 7
    pipe = onnxpipe.load(_bundle(tmp_path, torch_llama, {"bos": bos}))
    ours = pipe.generate(max_new_tokens=8, do_sample=False, ignore_eos=True).tokens
    model = hf_decoders._random_model(hf_decoders.TORCH_SPEC, attn_implementation="eager")
    model.generation_config.eos_token_id = None
    with torch.no_grad():   # no inputs at all: transformers starts from bos_token_id
        theirs = model.generate(max_new_tokens=8, do_sample=False, bos_token_id=bos, pad_token_id=0)
    assert theirs[0, 0].item() == bos
    assert ours == theirs[0, 1:].tolist()


def test_decoder_start_then_prefix_take_precedence(tmp_path, torch_llama):
    pipe = onnxpipe.load(_bundle(tmp_path, torch_llama, {"bos": 7, "decoder_start": 9}))
    assert pipe.loaded.start_ids == (9,)
    got = pipe.generate(max_new_tokens=4, do_sample=False, ignore_eos=True).tokens
    assert got == pipe.generate(input_ids=[9], max_new_tokens=4, do_sample=False, ignore_eos=True).tokens
    pipe = onnxpipe.load(_bundle(tmp_path / "p", torch_llama, {"bos": 7, "decoder_start": 9,
                                                                 "decoder_prefix": [9, 11]}))
    assert pipe.loaded.start_ids == (9, 11)


def test_without_any_start_a_prompt_is_required(tmp_path, torch_llama):
    pipe = onnxpipe.load(_bundle(tmp_path, torch_llama, {"bos": None}))
    with pytest.raises(InputError, match="exactly one of prompt"):
        pipe.generate(max_new_tokens=2)


@pytest.mark.parametrize("key", ["decoder_start"])
def test_ids_outside_the_vocabulary_are_refused_at_load(tmp_path, torch_llama, key):
    with pytest.raises(ConfigError, match="outside the vocabulary") as info:
        onnxpipe.load(_bundle(tmp_path, torch_llama, {key: 100000}))
    assert info.value.path == f"$.tokens.{key}"


def test_bos_outside_the_vocabulary_is_refused_only_where_it_is_fed(tmp_path, torch_llama):
    """onnxruntime-genai never feeds bos_token_id itself; onnxpipe feeds it only as the start of a
    call without a prompt, and refuses it there."""
    pipe = onnxpipe.load(_bundle(tmp_path, torch_llama, {"bos": 100000}))
    assert len(pipe.generate(input_ids=[5, 6], max_new_tokens=2, ignore_eos=True).tokens) == 2
    with pytest.raises(ConfigError, match=r"ids \[100000\] are outside the vocabulary \(0\.\.383\) and "
                                          "would be fed to the model") as info:
        pipe.generate(max_new_tokens=2)
    assert info.value.path == "$.tokens.bos" and info.value.file.endswith("pipeline.json")
