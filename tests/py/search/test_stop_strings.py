"""generation.stop.strings (and the per-call ``stop``): the tokens end where transformers'
``generate(stop_strings=...)`` ends them (at the token that completes a stop string), and the
text stops just before the string, never showing part of it."""

from __future__ import annotations

import json
import shutil

import pytest

import onnxpipe
from tests.fixtures import hf_decoders

PROMPT = hf_decoders.PROMPT


@pytest.fixture(scope="module")
def bundle(tiny_bundles):
    return tiny_bundles["torch_llama"]


def _stop_after(pipe, tokens: int) -> tuple[str, str]:
    """A stop string that the greedy text completes at new token ``tokens``: (the text before it, it)."""
    def text(n):
        return pipe.generate(input_ids=PROMPT, max_new_tokens=n, do_sample=False, ignore_eos=True).text
    before, upto = text(tokens - 1), text(tokens)
    assert upto.startswith(before) and len(upto) > len(before)
    stop = upto[-2:] if len(upto) - len(before) < 2 else upto[len(before):]
    return upto[:len(upto) - len(stop)], stop


def test_tokens_end_like_transformers_and_text_stops_before_the_string(bundle, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pipe = onnxpipe.load(bundle)
    want_text, stop = _stop_after(pipe, 12)
    if want_text.find(stop) >= 0:
        pytest.skip("the chosen string occurs earlier in the text")
    got = pipe.generate(input_ids=PROMPT, max_new_tokens=30, do_sample=False, ignore_eos=True, stop=[stop])

    model = hf_decoders._random_model(hf_decoders.TORCH_SPEC, attn_implementation="eager")
    model.generation_config.eos_token_id = None
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(bundle))
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=30, do_sample=False, pad_token_id=0,
                             stop_strings=[stop], tokenizer=tokenizer)
    theirs = out[0, len(PROMPT):].tolist()
    assert got.tokens == theirs
    assert got.finish_reason == "stop"
    assert got.text == want_text and stop not in got.text


def test_the_bundle_default_applies_and_a_call_can_override_it(bundle, tmp_path):
    folder = tmp_path / "b"
    shutil.copytree(bundle, folder)
    pipe = onnxpipe.load(bundle)
    want_text, stop = _stop_after(pipe, 9)
    doc = json.loads((folder / "pipeline.json").read_text())
    doc["generation"]["stop"] = {"strings": [stop]}
    (folder / "pipeline.json").write_text(json.dumps(doc))
    pipe = onnxpipe.load(folder)
    got = pipe.generate(input_ids=PROMPT, max_new_tokens=30, do_sample=False, ignore_eos=True)
    assert got.finish_reason == "stop" and got.text == want_text
    free = pipe.generate(input_ids=PROMPT, max_new_tokens=30, do_sample=False, ignore_eos=True, stop=[])
    assert len(free.tokens) == 30 and free.finish_reason == "length"
