"""The single-pass loop: every phase once, no tokens; the result is the pipeline's outputs.

For pipelines such as non-autoregressive TTS (text -> ids -> waveform) whose result is a
tensor named by ``pipeline.output`` (or any ``outputs.X`` wire).
"""

from __future__ import annotations

import time
from typing import Any

from ..config.schema import FLOW_PHASES
from .base import LoopStrategy


class SinglePass(LoopStrategy):
    name = "single_pass"

    def __init__(self, executor):
        self.executor = executor

    def run(self, inputs: dict[str, tuple[list, tuple[int, ...]]]) -> tuple[dict[str, Any], float]:
        """(pipeline outputs, seconds it took) after running init, step and final once each."""
        start = time.perf_counter()
        outputs: dict[str, Any] = {}
        for phase in FLOW_PHASES:
            if self.executor.has_phase(phase):
                outputs.update(self.executor.run_phase(phase, inputs))
        return outputs, time.perf_counter() - start
