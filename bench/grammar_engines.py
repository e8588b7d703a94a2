"""XGrammar 0.1.27 vs LLGuidance 1.9.1 on SmolLM2's vocabulary: schema compile time and the
time to fill one token's mask along a known-valid answer (docs/structured-output.md, "Why
XGrammar"). LLGuidance is not a dependency: install it aside first,
    .venv/bin/python -m pip install --target /tmp/llg llguidance==1.9.1
then run: .venv/bin/python bench/grammar_engines.py [/tmp/llg]
"""
import json, sys, time, statistics
sys.path.append(sys.argv[1] if len(sys.argv) > 1 else "/tmp/llg")
import numpy as np
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained("public/models/smollm2-135m-instruct")
schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"type": "string"}}, "address": {"type": "object",
          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}, "required": ["street", "city"]}},
          "required": ["name", "age", "tags", "address"], "additionalProperties": False}
text = json.dumps({"name": "John Smith", "age": 42, "tags": ["a", "bc", "def"], "address": {"street": "1 Main St", "city": "Springfield"}})
ids = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
V = 49152
import xgrammar as xgr
info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V)
comp = xgr.GrammarCompiler(info, cache_enabled=False)
t = time.perf_counter(); cg = comp.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(", ", ": ")); xc = time.perf_counter() - t
m = xgr.GrammarMatcher(cg); bm = xgr.allocate_token_bitmask(1, V); xs = []
for i in ids:
    t = time.perf_counter(); m.fill_next_token_bitmask(bm); xs.append(time.perf_counter() - t)
    assert m.accept_token(i), i
import llguidance, llguidance.hf
from llguidance import LLMatcher, LLTokenizer
lt = llguidance.hf.from_tokenizer(tok, n_vocab=V)
t = time.perf_counter(); g = LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults={"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}); lm = LLMatcher(lt, g); lc = time.perf_counter() - t
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask
lb = allocate_token_bitmask(1, V); ls = []
for i in ids:
    t = time.perf_counter(); fill_next_token_bitmask(lm, lb, 0); ls.append(time.perf_counter() - t)
    assert lm.consume_token(i), (i, lm.get_error())
print(f"tokens {len(ids)}")
for name, c, s in (("xgrammar 0.1.27", xc, xs), ("llguidance 1.9.1", lc, ls)):
    print(f"{name}: compile {c*1000:.1f} ms, mask median {statistics.median(s)*1e6:.0f} us, p90 {sorted(s)[int(len(s)*0.9)]*1e6:.0f} us, max {max(s)*1e6:.0f} us")
