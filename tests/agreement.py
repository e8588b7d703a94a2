"""The margin rule: how two numerically different runs of one greedy decode must agree.

Two computations of the same distribution (a continued KV state vs a fresh prefill, browser vs
native kernels, our run vs onnxruntime-genai's, fp16-stored vs fp32 weights) agree on logits
only within some tolerance T. If both runs have seen the same ids, their logits differ by at most
T, so greedy can pick differently only where the top two logits of either run are within 2T of
each other. Hence the rule every such test uses:

- tokens are equal up to the first mismatch;
- at the first mismatch, the reference's top-1 minus top-2 logit margin is below 2T (a near tie
  that the two computations may break differently). A split anywhere else is a real bug.

Tokens after a split are not compared: from there the two runs condition on different ids.
Where a test can, it also compares the logits themselves, step by step, within T.

Natively the logits never reach Python (the sampler runs as an ONNX graph), so ``LogitsProbe``,
a NativeBackend, copies every logits tensor it hands the sampler graph: exactly what greedy saw.

    python -m tests.agreement greedy BUNDLE --chat TEXT --max-new-tokens 24 [--variant wasm] [--dtype D]

prints one JSON object {prompt_ids, tokens, text, finish_reason, margins}: a native greedy run
with the margin of every step, for the browser tests (tests/e2e/lib/agreement.mjs).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "py") not in sys.path:
    sys.path.insert(0, str(ROOT / "py"))

from onnxpipe.backends.native import NativeBackend  # noqa: E402

# Logit tolerance between two fp32 computations of the same small model (numpy, torch,
# onnxruntime, onnxruntime-web; other kernel order, other shapes): measured <= 1.4e-5 between
# transformers and onnxruntime on the tiny fixtures. The fixtures refuse any greedy step whose
# margin is below 2x this, so under the margin rule their tokens must match exactly.
FP32_KERNELS = 1e-3


class LogitsProbe(NativeBackend):
    """onnxruntime, plus a float32 copy of each logits tensor fed to the sampler graph."""

    def __init__(self, threads: int | None = None):
        super().__init__(threads)
        self.seen: list[np.ndarray] = []    # one [..., seq, vocab] array per sampler call

    def run(self, session, feeds, outputs, bound=None):
        if "logits" in feeds and "next_tokens" in outputs:
            self.seen.append(np.array(feeds["logits"].numpy(), dtype=np.float32))
        return super().run(session, feeds, outputs, bound)

    def step_logits(self) -> np.ndarray:
        """[steps, vocab]: the last position's logits at every sampler call so far."""
        return np.stack([s.reshape(-1, s.shape[-1])[-1] for s in self.seen])

    def clear(self) -> None:
        self.seen.clear()


def margins(step_logits) -> list[float]:
    """Top-1 minus top-2 logit at each step ([steps, vocab] -> steps floats)."""
    top2 = np.sort(np.asarray(step_logits, dtype=np.float64), axis=-1)[..., -2:]
    return (top2[..., 1] - top2[..., 0]).tolist()


def first_mismatch(got: list[int], want: list[int]) -> int | None:
    """The first index where the two differ, counting a length difference; None if equal."""
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return i
    return None if len(got) == len(want) else min(len(got), len(want))


@dataclass(frozen=True)
class Agreement:
    agreed: int                  # leading tokens equal
    split: int | None            # first mismatch, or None
    margin: float | None         # the reference's margin there

    @property
    def shared_steps(self) -> int:
        """Steps both runs took from the same ids (the split step included): where their
        logits can be compared."""
        return self.agreed + (self.split is not None)


def assert_greedy_agrees(got: list[int], want: list[int], want_margins: list[float],
                         logit_tolerance: float, what: str = "tokens") -> Agreement:
    """The margin rule above: ``got`` may leave ``want`` only where ``want``'s margin < 2T.

    A split only in length (one run stopped, the other went on) is not judged here: compare
    lengths and finish reasons where they matter.
    """
    split = first_mismatch(got, want)
    if split is None or split >= min(len(got), len(want)):
        return Agreement(min(len(got), len(want)), None, None)
    if split >= len(want_margins):
        raise AssertionError(f"{what}: no reference margin for step {split} (have {len(want_margins)})")
    margin = want_margins[split]
    if not margin < 2 * logit_tolerance:
        raise AssertionError(
            f"{what}: step {split} gives {got[split]} where the reference gives {want[split]}, yet the "
            f"reference's top-2 margin there is {margin:.4f}, not below 2 x {logit_tolerance} (logit "
            f"tolerance): not a near tie, a real difference\n  got  {got}\n  want {want}")
    return Agreement(split, split, margin)


def max_logit_difference(a, b, top: int | None = None) -> float:
    """Largest |a - b| per step ([steps, vocab] each), over the whole vocabulary or over the
    reference ``b``'s ``top`` highest logits of each step (where greedy decides)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if top is None:
        return float(np.abs(a - b).max())
    idx = np.argsort(-b, axis=-1)[..., :top]
    return float(np.abs(np.take_along_axis(a, idx, -1) - np.take_along_axis(b, idx, -1)).max())


def teacher_forced_logits(bundle, prompt_ids: list[int], tokens: list[int], variant: str | None = None
                          ) -> np.ndarray:
    """[len(tokens), vocab]: the logits that predicted each of ``tokens``, from ONE fresh prefill of
    prompt + tokens (all but the last) through onnxpipe. Needs a decoder whose logits cover every
    position, as onnxruntime-genai exports and transformers.js folders do."""
    import onnxpipe

    probe = LogitsProbe()
    pipe = onnxpipe.load(bundle, backend=probe, variant=variant)
    pipe.generate(input_ids=list(prompt_ids) + list(tokens[:-1]), max_new_tokens=1, do_sample=False)
    full = probe.seen[0].reshape(-1, probe.seen[0].shape[-1])
    if full.shape[0] < len(prompt_ids) + len(tokens) - 1:
        raise ValueError(f"{bundle}: its logits cover {full.shape[0]} positions, not every one")
    return full[len(prompt_ids) - 1:]


def greedy_with_margins(bundle, max_new_tokens: int, prompt_ids: list[int] | None = None,
                        chat: str | None = None, variant: str | None = None, dtype: str | None = None,
                        **search):
    """A native greedy run of ``bundle`` from ids or one chat message: (prompt ids, result, the
    top-2 margin of each step)."""
    import onnxpipe

    probe = LogitsProbe()
    pipe = onnxpipe.load(bundle, backend=probe, variant=variant, dtype=dtype)
    if chat is not None:
        prompt_ids = pipe.chat_prompt_ids([{"role": "user", "content": chat}])
    result = pipe.generate(input_ids=prompt_ids, max_new_tokens=max_new_tokens, do_sample=False, **search)
    return prompt_ids, result, margins(probe.step_logits())


def transcribe_with_margins(bundle, audio_path: str):
    """A native transcription of a WAV with the top-2 margin of each kept token (ids the bundle
    suppresses left out of the margin, as the sampler graph leaves them out of the choice)."""
    import onnxpipe
    from onnxpipe.cli import _mono_wav

    probe = LogitsProbe()
    pipe = onnxpipe.load(bundle, backend=probe)
    suppress = pipe.spec.generation.suppress_tokens
    ends = []
    samples, rate = _mono_wav(audio_path, "transcribe")
    result = pipe.transcribe(samples, rate, on_text=lambda window: ends.append(len(probe.seen)))
    steps = probe.step_logits().astype(np.float64)
    if suppress is not None:
        steps[:, list(suppress.always)] = -np.inf
    kept, start = [], 0
    for window, end in zip(result.windows, ends):
        part = steps[start:end].copy()
        if suppress is not None and len(part):
            part[0, list(suppress.at_start)] = -np.inf   # the window's first step
        kept += margins(part)[:len(window.tokens)]
        start = end
    return result, kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.agreement", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    greedy = sub.add_parser("greedy", help="a native greedy run with the top-2 margin of every step, as JSON")
    greedy.add_argument("bundle")
    source = greedy.add_mutually_exclusive_group(required=True)
    source.add_argument("--chat", metavar="TEXT", help="one user message, through the chat template")
    source.add_argument("--input-ids", metavar="IDS", help="comma-separated prompt ids")
    greedy.add_argument("--max-new-tokens", type=int, required=True)
    greedy.add_argument("--variant", help="the execution provider whose files to run (e.g. wasm)")
    greedy.add_argument("--dtype", help="a transformers.js folder's precision (fp32, fp16, q8, q4, q4f16, ...)")
    greedy.add_argument("--ignore-eos", action="store_true")
    heard = sub.add_parser("transcribe", help="a native transcription with the top-2 margin of every token, as JSON")
    heard.add_argument("bundle")
    heard.add_argument("--audio", required=True, help="a WAV file")
    args = parser.parse_args(argv)
    if args.command == "transcribe":
        result, steps = transcribe_with_margins(args.bundle, args.audio)
        print(json.dumps({"tokens": result.tokens, "text": result.text, "windows": len(result.windows),
                          "margins": [round(m, 6) for m in steps]}))
        return 0

    ids = [int(i) for i in args.input_ids.split(",")] if args.input_ids else None
    ids, result, steps = greedy_with_margins(args.bundle, args.max_new_tokens, ids, args.chat, args.variant,
                                             args.dtype, ignore_eos=args.ignore_eos)
    print(json.dumps({"prompt_ids": ids, "tokens": result.tokens, "text": result.text,
                      "finish_reason": result.finish_reason, "margins": [round(m, 6) for m in steps]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
