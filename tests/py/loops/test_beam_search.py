"""Beam search and min-length masking against transformers' ``generate``, token for token.

transformers is the reference, run at test time on the very weights the fixtures were exported
from (``hf_decoders._random_model`` rebuilds them from their seed; its greedy tokens are checked
against expected.json first). Each case adds an extra end id the model does emit early
(``greedy_tokens[2]``), so beams finish at different lengths and the min-length masks change
tokens. Three fixtures cover both KV layouts beam search reorders: torch_llama (separate
past/present tensors), genai_llama (GroupQueryAttention with a shared buffer) and genai_qwen2.
"""

from __future__ import annotations

import functools
import json

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError, InputError
from tests.fixtures import tiny_models
from tests.py.search.test_speculative import bundle_with

FIXTURES = ["torch_llama", "genai_llama", "genai_qwen2"]
NEW = 12
CASES = {
    "2 beams, 2 returned": dict(num_beams=2, num_return_sequences=2, early_stopping=False),
    "4 beams, length_penalty 0.5, early_stopping, no_repeat_ngram 2":
        dict(num_beams=4, num_return_sequences=3, length_penalty=0.5, early_stopping=True, no_repeat_ngram_size=2),
    "4 beams, length_penalty 1.3, never": dict(num_beams=4, num_return_sequences=4, length_penalty=1.3,
                                              early_stopping="never"),
    "3 beams, min_new_tokens, repetition_penalty": dict(num_beams=3, min_new_tokens=5, repetition_penalty=1.3,
                                                        early_stopping=False),
    "4 beams, min_length, length_penalty -0.5": dict(num_beams=4, num_return_sequences=2, length_penalty=-0.5,
                                                    early_stopping=False, min_length=8 + 4),
    "greedy, min_new_tokens": dict(min_new_tokens=5),
    "greedy, min_length, no_repeat_ngram 1": dict(min_length=8 + 4, no_repeat_ngram_size=1),
    "greedy, no_repeat_ngram 2": dict(no_repeat_ngram_size=2),
}


@functools.lru_cache(maxsize=None)
def reference_model(name: str):
    pytest.importorskip("transformers")
    from tests.fixtures import hf_decoders

    spec = hf_decoders.GENAI_SPECS.get(name) or hf_decoders.TORCH_SPEC
    model = hf_decoders._random_model(spec, spec.get("attn"))
    expected = tiny_models.load_expected(tiny_models.ensure(name))
    greedy, _ = transformers_generate(model, expected["input_ids"], [expected["eos_token_id"]], max_new_tokens=8)
    assert greedy[0] == expected["greedy_tokens"][:8], "the rebuilt weights are not the fixture's"
    return model


def transformers_generate(model, prompt, eos, **search):
    """transformers' returned sequences (new tokens, each cut at its own end) and their scores."""
    import torch

    beams = search.get("num_beams", 1) > 1
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), do_sample=False, eos_token_id=eos, pad_token_id=0,
                             return_dict_in_generate=True, output_scores=True, **search)
    sequences = []
    for i in range(out.sequences.shape[0]):
        new = int((out.beam_indices[i] != -1).sum()) if beams else out.sequences.shape[1] - len(prompt)
        sequences.append(out.sequences[i, len(prompt):len(prompt) + new].tolist())
    return sequences, out.sequences_scores.tolist() if beams else None


@functools.lru_cache(maxsize=None)
def pipeline(name: str):
    return onnxpipe.load(tiny_models.ensure(name))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", FIXTURES)
def test_equal_to_transformers(name, case):
    search = CASES[case]
    expected = tiny_models.load_expected(tiny_models.ensure(name))
    prompt, end = expected["input_ids"], expected["greedy_tokens"][2]
    assert len(prompt) == 8   # min_length above counts it
    want, scores = transformers_generate(reference_model(name), prompt, [expected["eos_token_id"], end],
                                         max_new_tokens=NEW, **search)
    got = pipeline(name).generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=[end], **search)
    if search.get("num_beams", 1) == 1:
        assert got.sequences is None and [got.tokens] == want
        assert got.finish_reason == ("stop" if want[0][-1] == end else "length")
        return
    assert [s["tokens"] for s in got.sequences] == want
    assert [s["score"] for s in got.sequences] == pytest.approx(scores, abs=2e-5)
    assert got.tokens == want[0] and got.text == got.sequences[0]["text"]
    assert [s["finish_reason"] for s in got.sequences] == ["stop" if w[-1] == end else "length" for w in want]


def test_min_length_masking_actually_changes_tokens():
    """Without the mask the extra end id stops greedy at the third token (what the cases rely on)."""
    expected = tiny_models.load_expected(tiny_models.ensure("torch_llama"))
    prompt, end = expected["input_ids"], expected["greedy_tokens"][2]
    plain = pipeline("torch_llama").generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=[end])
    assert plain.tokens == expected["greedy_tokens"][:3] and plain.finish_reason == "stop"
    masked = pipeline("torch_llama").generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=[end],
                                              min_new_tokens=5)
    assert len(masked.tokens) >= 6 and end not in masked.tokens[:5]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampling_never_ends_before_min_new_tokens(seed):
    expected = tiny_models.load_expected(tiny_models.ensure("genai_llama"))
    prompt, ends = expected["input_ids"], expected["greedy_tokens"][:6]   # many likely end ids
    got = pipeline("genai_llama").generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=ends,
                                           min_new_tokens=4, do_sample=True, random_seed=seed)
    assert len(got.tokens) >= 5 and not set(got.tokens[:4]) & set(ends)


def test_speculative_with_min_new_tokens_gives_the_plain_tokens():
    expected = tiny_models.load_expected(tiny_models.ensure("torch_llama"))
    prompt, end = expected["input_ids"], expected["greedy_tokens"][2]
    pipe = pipeline("torch_llama")
    plain = pipe.generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=[end], min_new_tokens=6)
    drafted = pipe.generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=[end], min_new_tokens=6,
                            speculative={"method": "prompt_lookup", "ngram": 1})
    assert drafted.tokens == plain.tokens


def test_after_beam_search_the_state_is_empty_and_a_chat_starts_over():
    pipe = pipeline("torch_llama")
    expected = tiny_models.load_expected(tiny_models.ensure("torch_llama"))
    pipe.generate(input_ids=expected["input_ids"], max_new_tokens=4, num_beams=3)
    assert pipe.executor.length == 0 and pipe.history == []
    again = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=8, do_sample=False, ignore_eos=True)
    assert again.tokens == expected["greedy_tokens"][:8]


@pytest.mark.parametrize("search, message", [
    (dict(num_beams=2, do_sample=True), "beam sampling (num_beams > 1 with do_sample) is not supported"),
    (dict(num_beams=2, speculative={"method": "prompt_lookup"}), "beam search with speculative decoding"),
    (dict(num_beams=2, stop_strings=["x"]), "stop_strings with beam search are not supported"),
    (dict(num_beams=2, num_return_sequences=3), "num_return_sequences must be in 1..num_beams (2), found 3"),
    (dict(num_return_sequences=2), "num_return_sequences must be in 1..num_beams (1), found 2"),
    (dict(early_stopping="sometimes"), 'early_stopping must be true, false or "never"'),
    (dict(min_new_tokens=-1), "min_new_tokens must be >= 0"),
    (dict(no_repeat_ngram_size=2, speculative={"method": "prompt_lookup"}), "no_repeat_ngram_size with speculative"),
])
def test_unsupported_calls_are_refused(search, message):
    with pytest.raises(InputError) as error:
        pipeline("torch_llama").generate(input_ids=[1, 2, 3], max_new_tokens=4, **search)
    assert message in str(error.value)


@pytest.mark.parametrize("name, generation, path, message", [
    ("torch_llama", {"sampling": {"num_beams": 2, "do_sample": True}}, "$.generation.sampling.do_sample",
     "beam sampling"),
    ("torch_llama", {"sampling": {"num_beams": 0}}, "$.generation.sampling.num_beams", "num_beams must be >= 1"),
    ("torch_llama", {"sampling": {"num_beams": 2, "num_return_sequences": 4}},
     "$.generation.sampling.num_return_sequences", "1..num_beams"),
    ("torch_llama", {"sampling": {"early_stopping": "always"}}, "$.generation.sampling.early_stopping", '"never"'),
    ("torch_llama", {"sampling": {"num_beams": 2}, "speculative": {"method": "prompt_lookup"}},
     "$.generation.speculative", "beam search with speculative"),
    ("torch_llama", {"min_new_tokens": -2}, "$.generation.min_new_tokens", "must be >= 0"),
    ("novel_recurrent", {"sampling": {"num_beams": 2}}, "$.generation.sampling.num_beams",
     "Recurrent keeps per-sequence values"),
])
def test_unsupported_pipeline_json_fails_at_load(tmp_path, name, generation, path, message):
    with pytest.raises(ConfigError) as error:
        onnxpipe.load(bundle_with(tmp_path, name, generation))
    assert path in str(error.value) and message in str(error.value)


def test_pipeline_json_beams_are_the_default(tmp_path):
    pipe = onnxpipe.load(bundle_with(tmp_path, "torch_llama", {
        "sampling": {"num_beams": 3, "num_return_sequences": 2, "length_penalty": 0.7}, "min_new_tokens": 2}))
    expected = tiny_models.load_expected(tiny_models.ensure("torch_llama"))
    default = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=6)
    called = pipeline("torch_llama").generate(input_ids=expected["input_ids"], max_new_tokens=6, num_beams=3,
                                              num_return_sequences=2, length_penalty=0.7, min_new_tokens=2)
    assert len(default.sequences) == 2 and default.sequences == called.sequences


def test_cli_flags_run_the_same_search():
    import json
    import os
    import subprocess
    import sys

    bundle = tiny_models.ensure("torch_llama")
    prompt = tiny_models.load_expected(bundle)["input_ids"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = subprocess.run(
        [sys.executable, "-m", "onnxpipe", "run", str(bundle), "--input-ids", ",".join(map(str, prompt)),
         "--max-new-tokens", "8", "--num-beams", "3", "--num-return-sequences", "2", "--length-penalty", "0.8",
         "--early-stopping", "never", "--no-repeat-ngram-size", "2", "--min-new-tokens", "3", "--json"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.path.join(root, "py")}, check=True)
    got = json.loads(out.stdout)
    want = pipeline("torch_llama").generate(input_ids=prompt, max_new_tokens=8, num_beams=3, num_return_sequences=2,
                                            length_penalty=0.8, early_stopping="never", no_repeat_ngram_size=2,
                                            min_new_tokens=3)
    assert got["sequences"] == want.sequences and got["tokens"] == want.tokens


def test_tokens_pad_fills_the_returned_sequences_as_transformers_does(tmp_path):
    """transformers returns beams as one tensor padded with pad_token_id; ``padded`` is that."""
    import torch

    name, pad = "torch_llama", 5
    expected = tiny_models.load_expected(tiny_models.ensure(name))
    prompt, end = expected["input_ids"], expected["greedy_tokens"][2]
    search = CASES["4 beams, length_penalty 0.5, early_stopping, no_repeat_ngram 2"]   # lengths 3, 10, 12
    with torch.no_grad():
        out = reference_model(name).generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=NEW,
                                             eos_token_id=[expected["eos_token_id"], end], pad_token_id=pad,
                                             **search)
    want = out[:, len(prompt):].tolist()
    assert len({len([t for t in row if t != pad]) for row in want}) > 1, "beams of one length pad nothing"
    folder = bundle_with(tmp_path, name, {})
    doc = json.loads((folder / "pipeline.json").read_text())
    doc["tokens"]["pad"] = pad
    (folder / "pipeline.json").write_text(json.dumps(doc))
    got = onnxpipe.load(folder).generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=[end], **search)
    assert got.padded == want
    assert got.to_dict()["padded"] == want
    del doc["tokens"]["pad"]
    (folder / "pipeline.json").write_text(json.dumps(doc))
    plain = onnxpipe.load(folder).generate(input_ids=prompt, max_new_tokens=NEW, stop_token_ids=[end], **search)
    assert plain.padded is None and [s["tokens"] for s in plain.sequences] == [s["tokens"] for s in got.sequences]
