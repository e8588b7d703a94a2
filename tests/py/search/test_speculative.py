"""Prompt-lookup drafts and the speculative search option: settings checked, drafts as specified."""

from __future__ import annotations

import json

import pytest

import onnxpipe
from onnxpipe.config.load import resolve_document
from onnxpipe.config.schema import SPECULATIVE_METHODS, Speculative
from onnxpipe.errors import ConfigError, InputError
from onnxpipe.config.validate import validate_spec
from onnxpipe.search.options import SearchOptions, resolve
from onnxpipe.search.speculative import DRAFTERS, PromptLookup
from tests.fixtures import tiny_models


def lookup(ngram=3):
    return PromptLookup(Speculative(method="prompt_lookup", ngram=ngram))


def test_the_schema_lists_every_drafter():
    assert SPECULATIVE_METHODS is DRAFTERS and list(DRAFTERS) == ["prompt_lookup"]


def test_copies_what_followed_the_latest_earlier_occurrence():
    ids = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3]
    assert lookup().propose(ids, 2) == [7, 8]          # the later of two earlier matches
    assert lookup().propose(ids, 10) == [7, 8, 5, 1, 2, 3]   # up to the end of the ids


def test_falls_back_to_shorter_ngrams_and_may_find_nothing():
    assert lookup(3).propose([4, 5, 6, 0, 6], 3) == [0, 6]     # only the last id matches
    assert lookup(3).propose([1, 2, 3, 4], 3) == []
    assert lookup(1).propose([5, 6, 5], 4) == [6, 5]
    assert lookup(3).propose([7], 4) == []
    assert lookup(2).propose([1, 2, 1, 2], 0) == []


def test_a_match_at_the_very_end_has_nothing_to_copy():
    # [3, 3] occurs only as the tail itself and overlapping it: shorter n-grams are tried
    assert lookup(2).propose([1, 3, 3], 2) == [3]


@pytest.mark.parametrize("value, message", [
    ({"method": "lookup"}, 'unknown speculative method "lookup"'),
    ({"max_draft": 3}, "method"),
    ({"method": "prompt_lookup", "max_draft": 0}, "expected max_draft in 1..32, found 0"),
    ({"method": "prompt_lookup", "max_draft": 33}, "expected max_draft in 1..32, found 33"),
    ({"method": "prompt_lookup", "ngram": 0}, "expected ngram >= 1, found 0"),
    ({"method": "prompt_lookup", "ngram": "3"}, "expected an integer"),
    ({"method": "prompt_lookup", "draft": 3}, "draft"),
    ("prompt_lookup", "expected an object"),
    (4, "expected an object"),
])
def test_bad_call_settings_are_input_errors(value, message):
    with pytest.raises(InputError, match="speculative") as error:
        resolve(SearchOptions(), {"speculative": value})
    assert message in str(error.value)


def test_call_settings_parse_and_can_turn_it_off():
    on = resolve(SearchOptions(), {"speculative": {"method": "prompt_lookup", "max_draft": 6}})
    assert on.speculative == Speculative("prompt_lookup", max_draft=6, ngram=3)
    for off in (None, False):
        assert resolve(on, {"speculative": off}).speculative is None


def bundle_with(tmp_path, name: str, generation: dict):
    """A copy of a tiny pipeline.json fixture with ``generation`` merged in."""
    import shutil

    source = tiny_models.ensure(name)
    target = tmp_path / name
    shutil.copytree(source, target)
    doc = json.loads((target / "pipeline.json").read_text())
    doc.setdefault("generation", {}).update(generation)
    (target / "pipeline.json").write_text(json.dumps(doc))
    return target


@pytest.mark.parametrize("name, generation, path, message", [
    ("torch_llama", {"speculative": {"method": "prompt_lookup", "max_draft": 0}},
     "$.generation.speculative.max_draft", "expected max_draft in 1..32"),
    ("torch_llama", {"speculative": {"method": "n_gram"}}, "$.generation.speculative.method", "n_gram"),
    ("torch_llama", {"speculative": {"method": "prompt_lookup", "ngram": 0}},
     "$.generation.speculative.ngram", "expected ngram >= 1"),
    ("torch_llama", {"speculative": {"method": "prompt_lookup", "window": 4}}, "$.generation.speculative", "window"),
    ("novel_recurrent", {"speculative": {"method": "prompt_lookup"}}, "$.generation.speculative",
     "can't be cut back"),
])
def test_bad_pipeline_json_settings_fail_at_load(tmp_path, name, generation, path, message):
    with pytest.raises(ConfigError) as error:
        onnxpipe.load(bundle_with(tmp_path, name, generation))
    assert path in str(error.value) and message in str(error.value)


def test_pipeline_json_settings_are_the_default_and_a_call_overrides_them(tmp_path):
    pipe = onnxpipe.load(bundle_with(tmp_path, "torch_llama",
                                     {"speculative": {"method": "prompt_lookup", "max_draft": 2, "ngram": 1}}))
    expected = tiny_models.load_expected(tiny_models.ensure("torch_llama"))
    ids = expected["input_ids"]
    on = pipe.generate(input_ids=ids, max_new_tokens=16, do_sample=False, ignore_eos=True)
    off = pipe.generate(input_ids=ids, max_new_tokens=16, do_sample=False, ignore_eos=True, speculative=None)
    assert on.speculative is not None and on.speculative["passes"] > 0
    assert off.speculative is None
    assert on.tokens == off.tokens == expected["greedy_tokens"][:16]


def test_a_state_that_cant_go_back_refuses_a_call():
    pipe = onnxpipe.load(tiny_models.ensure("novel_recurrent"))
    ids = tiny_models.load_expected(tiny_models.ensure("novel_recurrent"))["input_ids"]
    with pytest.raises(InputError, match="can't be cut back"):
        pipe.generate(input_ids=ids, max_new_tokens=4, speculative={"method": "prompt_lookup"})
    assert pipe.generate(input_ids=ids, max_new_tokens=4).tokens   # still usable


def test_speculation_is_only_for_the_autoregressive_loop():
    document = {"version": 2,
                "pipeline": {"sessions": {"voice": {"file": "voice.onnx"}}, "flow": [{"run": "voice", "when": "init"}],
                             "output": {"session": "voice", "name": "audio"}},
                "generation": {"loop": "single_pass", "speculative": {"method": "prompt_lookup"}}}
    with pytest.raises(ConfigError) as error:
        validate_spec(resolve_document(document, "b/pipeline.json"), "b/pipeline.json")
    assert "$.generation.speculative" in str(error.value) and '"single_pass"' in str(error.value)


def test_the_draft_window_grows_on_success_and_backs_off_on_failure():
    from onnxpipe.search.speculative import DraftWindow

    window = DraftWindow(max_draft=3)
    sizes = []
    for drafted_accepted in [None, (1, 1), None, (2, 2), None, (3, 3), None, (3, 3), None, (3, 1), None, (1, 0)]:
        if drafted_accepted is None:
            sizes.append(window.limit())
        else:
            window.update(*drafted_accepted)
    assert sizes == [1, 2, 3, 3, 3, 1]          # grows to max_draft, falls back to what held
    assert [window.limit() for _ in range(2)] == [0, 1]   # a rejected one-token draft: pause one step
    window.update(1, 0)                                   # a second miss in a row: pause for 2
    assert [window.limit() for _ in range(3)] == [0, 0, 1]
    window.update(1, 1)                                   # an accepted draft ends the back-off
    window.update(2, 0)
    assert window.limit() == 1
