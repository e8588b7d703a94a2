"""The real SmolLM2-135M-Instruct bundle from `make models`, natively."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import onnxpipe

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "smollm2-135m-instruct"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
# onnxruntime-genai 0.18's greedy tokens for QUESTION on this very file (40 new tokens)
GENAI_TOKENS = [504, 3575, 282, 4649, 314, 7042, 28, 3575, 282, 260, 3432, 1789, 28, 2517, 28, 284,
                2517, 30, 657, 506, 253, 2240, 338, 506, 38128, 281, 1463, 28, 2517, 28, 284, 2517,
                2581, 30, 378, 3575, 282, 4649, 314, 7042]

pytestmark = pytest.mark.skipif(not (BUNDLE / "model.onnx").exists(),
                                reason="run `make models` first (make test does)")


@pytest.fixture(scope="module")
def pipe():
    return onnxpipe.load(BUNDLE)


def test_answers_the_capital_of_france(pipe):
    result = pipe.chat(QUESTION, max_new_tokens=40, do_sample=False)
    assert "Paris" in result.text
    assert result.tokens == GENAI_TOKENS


def test_v1_genai_config_gives_the_same_tokens(pipe):
    v1 = onnxpipe.load(BUNDLE / "genai_config.json")
    ids = pipe.chat_prompt_ids(QUESTION)
    assert v1.generate(input_ids=ids, max_new_tokens=40).tokens == GENAI_TOKENS


def test_multi_turn_chat_appends_to_the_state(pipe):
    pipe.reset()
    first = pipe.chat(QUESTION, max_new_tokens=24)
    held = len(pipe.history)
    messages = QUESTION + [{"role": "assistant", "content": first.text},
                           {"role": "user", "content": "And of Italy?"}]
    full = pipe.chat_prompt_ids(messages)
    second = pipe.chat(messages, max_new_tokens=24)
    # the second turn ran only what the state had not seen: the first turn's prompt and reply
    assert second.prompt_tokens == len(full)
    assert second.cached_tokens >= held - 1 > 30
    assert len(pipe.history) == len(full) + len(second.tokens) - 1
    assert "Rome" in second.text
    fresh = onnxpipe.load(BUNDLE).chat(messages, max_new_tokens=24)
    assert fresh.cached_tokens == 0 and fresh.tokens == second.tokens


def test_cli_run_json_shape():
    out = subprocess.run([sys.executable, "-m", "onnxpipe", "run", str(BUNDLE), "--chat",
                          "What is the capital of France?", "--max-new-tokens", "12", "--greedy",
                          "--json"], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    result = json.loads(out.stdout)
    assert set(result) >= {"tokens", "text", "finish_reason", "prefill_ms", "decode_tokens_per_s"}
    assert result["tokens"] == GENAI_TOKENS[:12]
    assert result["finish_reason"] == "length"
    assert result["prefill_ms"] > 0 and result["decode_tokens_per_s"] > 0


def test_cli_chat_streams_two_turns_from_stdin():
    out = subprocess.run([sys.executable, "-m", "onnxpipe", "chat", str(BUNDLE), "--max-new-tokens", "16",
                          "--greedy"], input="What is the capital of France?\nAnd of Italy?\n/quit\n",
                         capture_output=True, text=True, check=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    replies = [line for line in out.stdout.splitlines() if line.strip()]
    assert len(replies) == 2, out.stdout
    assert "Paris" in replies[0] and "Rome" in replies[1]
