"""Constrained generation end to end on the tiny random decoders that have a transformers
reference (tests/fixtures/hf_decoders.py): greedy tokens under a grammar equal transformers'
logits masked by XGrammar's own matcher, step by step (the margin rule of tests/agreement.py);
every output is accepted by the engine's matcher and, where JSON, validates with jsonschema;
sampling, repetition penalty and min_new_tokens never leave the grammar; prompt-lookup drafts
change nothing; beams and stop strings are refused; a schema the engine can't compile names its
field and leaves the pipeline usable; compiled grammars are cached."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.grammar.formats import GrammarError, constraint_from
from tests.agreement import FP32_KERNELS, assert_greedy_agrees, margins
from tests.fixtures import tiny_models

xgr = pytest.importorskip("xgrammar")
jsonschema = pytest.importorskip("jsonschema")
torch = pytest.importorskip("torch")

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "ok"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                         "ok": {"type": "boolean"}}}
# What XGrammar 0.1.27 gets wrong (its grammar, printed by xgr.Grammar.from_json_schema):
# "maximum": 120 becomes ("1" [0-2] [0-9]), taking 121..129; a string with minLength/maxLength
# becomes [^"\\\r\n]{m,n}, taking raw control characters (invalid JSON).
GAPS = {"range": {"type": "object", "required": ["age"], "additionalProperties": False,
                  "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 120}}},
        "bounded_string": {"type": "object", "required": ["name"], "additionalProperties": False,
                           "properties": {"name": {"type": "string", "maxLength": 6}}}}
COLOURS = {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3}
COUNT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}   # may run to length
FORMATS = {
    "json_object": {"type": "json_object"},
    "person": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
    "colours": {"type": "json_schema", "json_schema": {"name": "colours", "schema": COLOURS}},
    "count": {"type": "json_schema", "json_schema": {"name": "count", "schema": COUNT}},
    "regex": {"type": "regex", "regex": "[a-f]{3}(x|yz)"},
    "grammar": {"type": "grammar", "grammar": 'root ::= "yes" | "no" | ("maybe" [0-9])'},
}
SEPARATORS = (", ", ": ")
BUNDLES = ["torch_llama", "genai_qwen2"]
MAX_NEW = 40


class Reference:
    """A fixture bundle's torch model and XGrammar built from its transformers tokenizer."""

    def __init__(self, name: str):
        from transformers import PreTrainedTokenizerFast

        from tests.fixtures.hf_decoders import GENAI_SPECS, TORCH_SPEC, _random_model

        self.bundle = tiny_models.ensure(name)
        self.expected = tiny_models.load_expected(name)
        self.prompt = self.expected["input_ids"]
        self.eos = self.expected["eos_token_id"]
        spec = TORCH_SPEC if name == "torch_llama" else GENAI_SPECS[name]
        self.model = _random_model(spec, attn_implementation="eager" if name == "torch_llama" else spec.get("attn"))
        self.vocab = spec["vocab_size"]
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(self.bundle / "tokenizer.json"))
        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=self.vocab, stop_token_ids=[self.eos])
        self.compiler = xgr.GrammarCompiler(self.info)
        self.pipe = onnxpipe.load(str(self.bundle))

    def compile(self, response_format):
        c = constraint_from(response_format)
        if c.kind == "json_object":
            return self.compiler.compile_json_schema('{"type": "object"}', any_whitespace=False, indent=None,
                                                     separators=SEPARATORS, strict_mode=False)
        if c.kind == "json_schema":
            return self.compiler.compile_json_schema(c.source, any_whitespace=False, indent=None,
                                                     separators=SEPARATORS, strict_mode=c.strict)
        if c.kind == "regex":
            return self.compiler.compile_regex(c.source)
        return self.compiler.compile_grammar(c.source)

    def greedy(self, response_format, max_new: int) -> tuple[list[int], list[float]]:
        """transformers' logits, masked by XGrammar's matcher, argmax, step by step."""
        matcher = xgr.GrammarMatcher(self.compile(response_format))
        bitmask = xgr.allocate_token_bitmask(1, self.vocab)
        ids, tokens, masked = list(self.prompt), [], []
        with torch.no_grad():
            for _ in range(max_new):
                logits = self.model(torch.tensor([ids])).logits[0, -1:].float().clone()
                matcher.fill_next_token_bitmask(bitmask)
                xgr.apply_token_bitmask_inplace(logits, bitmask)
                token = int(torch.argmax(logits[0]))
                masked.append(logits[0].numpy())
                assert matcher.accept_token(token)
                tokens.append(token)
                ids.append(token)
                if matcher.is_terminated():
                    break
        return tokens, margins(np.stack(masked))

    def replay(self, response_format, tokens: list[int]):
        """A fresh XGrammar matcher fed ``tokens``: every one must be accepted."""
        matcher = xgr.GrammarMatcher(self.compile(response_format))
        for i, token in enumerate(tokens):
            assert matcher.accept_token(token), f"token {i} ({token}) refused by the grammar: {tokens}"
        return matcher


@pytest.fixture(scope="module", params=BUNDLES)
def ref(request) -> Reference:
    return Reference(request.param)


@pytest.fixture(scope="module")
def llama() -> Reference:
    return Reference("torch_llama")


def _check_output(ref: Reference, response_format, result) -> None:
    """Accepted by the engine's matcher; complete exactly when it stopped at an end id; a
    complete JSON output validates."""
    matcher = ref.replay(response_format, result.tokens)
    assert result.grammar["complete"] == (result.finish_reason == "stop") == matcher.is_terminated()
    if result.finish_reason != "stop":
        assert result.finish_reason == "length"
        return
    c = constraint_from(response_format)
    if c.kind in ("json_object", "json_schema"):
        value = json.loads(result.text)
        jsonschema.validate(value, c.schema if c.kind == "json_schema" else {"type": "object"})
    elif c.kind == "regex":
        assert re.fullmatch(c.source, result.text), result.text


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_greedy_constrained_tokens_equal_the_masked_transformers_reference(ref, fmt):
    rf = FORMATS[fmt]
    want, want_margins = ref.greedy(rf, MAX_NEW)
    got = ref.pipe.generate(input_ids=ref.prompt, max_new_tokens=MAX_NEW, do_sample=False, response_format=rf)
    agreed = assert_greedy_agrees(got.tokens, want, want_margins, FP32_KERNELS, f"{fmt} tokens")
    if agreed.split is None:
        assert got.tokens == want
    _check_output(ref, rf, got)
    assert got.grammar["kind"] == constraint_from(rf).kind


@pytest.mark.parametrize("seed", range(6))
def test_a_random_model_sampling_under_a_schema_gives_valid_json_or_length(llama, seed):
    for fmt in ("person", "colours", "count", "json_object"):
        rf = FORMATS[fmt]
        got = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=48, do_sample=True, temperature=1.5,
                                  top_k=0, seed=seed, response_format=rf)
        _check_output(llama, rf, got)


@pytest.mark.parametrize("gap", list(GAPS))
def test_output_the_engine_lets_through_is_never_claimed_valid(llama, gap):
    """Over several seeds, an output reported valid validates with jsonschema, and one that
    doesn't (XGrammar 0.1.27 takes 121..129 under maximum 120 and raw control characters in
    strings with minLength/maxLength: GAPS) is reported invalid with the reason."""
    rf = {"type": "json_schema", "json_schema": {"name": gap, "schema": GAPS[gap]}}
    for seed in range(8):
        got = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=48, do_sample=True, temperature=1.5,
                                  top_k=0, seed=seed, response_format=rf)
        llama.replay(rf, got.tokens)   # the engine itself takes every token
        if not got.grammar["complete"]:
            assert "valid" not in got.grammar
            continue
        try:
            jsonschema.validate(json.loads(got.text), GAPS[gap])
            truly_valid = True
        except (ValueError, jsonschema.ValidationError):
            truly_valid = False
        assert got.grammar["valid"] is truly_valid, (got.text, got.grammar)
        assert truly_valid or got.grammar["error"]


def test_the_engine_gaps_are_xgrammars_own():
    """The grammar XGrammar itself makes for GAPS takes what the schema forbids: the failure above
    is the engine's, not the vocabulary's or the sampler's."""
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([chr(c) for c in range(32, 127)] + ["\x03"]))
    def takes(schema, text):
        matcher = xgr.GrammarMatcher(compiler.compile_json_schema(json.dumps(schema), any_whitespace=False))
        return matcher.accept_string(text)

    assert takes(GAPS["range"], '{"age": 125}')
    assert takes(GAPS["bounded_string"], '{"name": "\x03"}')
    assert not takes(GAPS["range"], '{"age": 130}')
    assert not takes({"type": "object", "properties": {"name": {"type": "string"}}}, '{"name": "\x03"}')


@pytest.mark.parametrize("search", [
    dict(do_sample=True, temperature=1.2, top_k=20, top_p=0.9, seed=3),
    dict(do_sample=True, temperature=0.8, min_p=0.05, repetition_penalty=1.6, seed=4),
    dict(do_sample=False, repetition_penalty=2.0),
    dict(do_sample=False, min_new_tokens=12),             # the end ids masked past the grammar's end
    dict(do_sample=True, min_new_tokens=6, repetition_penalty=1.3, seed=5),
], ids=["sampling", "penalty-sampling", "penalty-greedy", "min-new-tokens", "all"])
def test_search_options_compose_with_the_grammar(llama, search):
    for fmt in ("person", "regex", "grammar", "colours"):
        rf = FORMATS[fmt]
        got = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=MAX_NEW, response_format=rf, **search)
        _check_output(llama, rf, got)


def test_min_new_tokens_never_pushes_past_the_grammars_end(llama):
    """The grammar can only end: the end id is picked though min_new_tokens masks it."""
    rf = FORMATS["grammar"]
    got = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=MAX_NEW, do_sample=False,
                              min_new_tokens=30, response_format=rf)
    assert got.finish_reason == "stop" and len(got.tokens) < 30 and got.tokens[-1] == llama.eos
    assert got.text in ("yes", "no") or re.fullmatch("maybe[0-9]", got.text)


@pytest.mark.parametrize("fmt", ["count", "person", "json_object", "regex"])
@pytest.mark.parametrize("max_draft", [1, 5])
def test_prompt_lookup_under_a_grammar_gives_the_same_tokens(llama, fmt, max_draft):
    rf = FORMATS[fmt]
    plain = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=MAX_NEW, do_sample=False, response_format=rf)
    fast = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=MAX_NEW, do_sample=False, response_format=rf,
                               speculative={"method": "prompt_lookup", "max_draft": max_draft, "ngram": 1})
    assert fast.tokens == plain.tokens and fast.finish_reason == plain.finish_reason
    _check_output(llama, rf, fast)


def test_beams_and_stop_strings_are_refused_and_the_pipeline_goes_on(llama):
    rf = FORMATS["person"]
    with pytest.raises(InputError, match=r"^num_beams: .*response_format"):
        llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=8, num_beams=2, response_format=rf)
    with pytest.raises(InputError, match=r"^stop: .*response_format"):
        llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=8, stop=["}"], response_format=rf)
    got = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=8, do_sample=False)
    assert got.tokens == llama.expected["greedy_tokens"][:8] and got.grammar is None


@pytest.mark.parametrize("schema, says", [
    ({"type": "string", "pattern": "(?<=a)b"}, "Lookbehind"),
    ({"$ref": "#/definitions/missing"}, "definitions"),
    ({"type": "integer", "minimum": 5, "maximum": 1}, "minimum greater than maximum"),
    ({"type": "frob"}, "frob"),
])
def test_a_schema_the_engine_cannot_compile_names_its_field(llama, schema, says):
    rf = {"type": "json_schema", "json_schema": {"name": "bad", "schema": schema}}
    with pytest.raises(GrammarError, match=r"^response_format\.json_schema\.schema: the grammar engine "
                                           rf"\(XGrammar\) cannot compile it: .*{re.escape(says)}"):
        llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=4, response_format=rf)
    got = llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=8, do_sample=False)
    assert got.tokens == llama.expected["greedy_tokens"][:8]
    _check_output(llama, FORMATS["regex"], llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=MAX_NEW,
                                                               do_sample=False, response_format=FORMATS["regex"]))


def test_a_bad_regex_or_grammar_names_its_field(llama):
    for rf in ({"type": "regex", "regex": "(unclosed"}, {"type": "grammar", "grammar": "root ::= undefined_rule"}):
        with pytest.raises(GrammarError, match=r"^response_format: the grammar engine \(XGrammar\) cannot compile"):
            llama.pipe.generate(input_ids=llama.prompt, max_new_tokens=4, response_format=rf)


def test_the_second_compile_of_a_constraint_is_cached():
    pipe = onnxpipe.load(str(tiny_models.ensure("torch_llama")))
    prompt = tiny_models.load_expected("torch_llama")["input_ids"]
    schema = {"type": "object", "properties": {"k": {"enum": [1, 2]}}, "required": ["k"]}
    first = pipe.generate(input_ids=prompt, max_new_tokens=12, response_format={
        "type": "json_schema", "json_schema": {"name": "a", "schema": schema}}).grammar
    assert first["cached"] is False and first["compile_ms"] > 0 and first["vocabulary_ms"] > 0
    # the same schema under another name: the same grammar (key order is kept: it orders the output)
    again = pipe.generate(input_ids=prompt, max_new_tokens=12, response_format={
        "type": "json_schema", "json_schema": {"name": "b", "schema": schema}}).grammar
    assert {k: again[k] for k in ("kind", "compile_ms", "cached", "vocabulary_ms")} == {
        "kind": "json_schema", "compile_ms": 0.0, "cached": True, "vocabulary_ms": 0.0}
    strict = pipe.generate(input_ids=prompt, max_new_tokens=12, response_format={
        "type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}}).grammar
    assert strict["cached"] is False and strict["vocabulary_ms"] == 0.0
    assert pipe.generate(input_ids=prompt, max_new_tokens=4).to_dict().get("grammar") is None
