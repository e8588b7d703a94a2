"""Single-pass runs: every phase once on the caller's inputs; the result is engine tensors."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import InputError


@dataclass
class RunResult:
    """What a single-pass run made: engine tensors by pipeline output name."""

    outputs: dict
    compute_seconds: float
    backend: object = field(repr=False, default=None)

    def read(self, name: str = "output") -> tuple[list, tuple[int, ...]]:
        """(flat values, shape) of one output, copied out of the engine."""
        if name not in self.outputs:
            raise InputError(f'no output "{name}"; this pipeline made {", ".join(self.outputs) or "none"}')
        tensor = self.outputs[name]
        return self.backend.to_list(tensor), self.backend.shape(tensor)


class OnePass:
    def __init__(self, loaded):
        self.loaded = loaded

    def run(self, inputs=None, **controls) -> RunResult:
        """Run the flow once on ``inputs`` (name -> (flat values, shape) or an array) and
        ``controls`` (pipeline.inputs by name)."""
        loaded = self.loaded
        loaded.require_loop(False, "generate() or chat()")
        options = {k: controls.pop(k) for k in loaded.loop.options if k in controls}
        return self.run_values(loaded.inputs(inputs, controls), **options)

    def call_options(self, options: dict, name=None) -> dict:
        """A front end's one-pass options checked against the loop's (``loop.options``), with a
        seed chosen where the bundle asks for a random one (generation.denoising.seed < 0) and
        the call names none: the front end reports it, so the result can be made again.
        ``name(option)`` spells an option as the front end takes it (default: options: "name")."""
        loop = self.loaded.loop
        unknown = sorted(set(options) - set(loop.options))
        if unknown:
            spelled = name(unknown[0]) if name is not None else f'options: "{unknown[0]}"'
            raise InputError(f"{spelled} is not an option of the {loop.name} loop; it takes "
                             f"{', '.join(loop.options) or 'none'}")
        options = dict(options)
        denoising = self.loaded.spec.generation.denoising
        if "seed" in loop.options and denoising is not None and options.get("seed") is None and denoising.seed < 0:
            options["seed"] = int.from_bytes(os.urandom(4), "little")
        return options

    def run_values(self, values: dict, **options) -> RunResult:
        """Run on already resolved host values (a front end's or ``LoadedPipeline.inputs``);
        ``options`` are the loop's per-call options (``loop.options``)."""
        loaded = self.loaded
        loaded.reset()
        outputs, seconds = loaded.loop.create(loaded, **options).run(values)
        return RunResult(outputs, seconds, loaded.backend)
