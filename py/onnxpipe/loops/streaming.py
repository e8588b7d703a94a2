"""The streaming loop: a streamed input cut into fixed-size chunks, the step flow once per chunk.

``init`` runs once when a stream starts. Then every ``chunk_size`` samples of the streamed
pipeline input (``generation.streaming.input``) run the step flow, with the ``context``
samples of audio before the chunk put in front of it (zeros before the first); state declared
in ``pipeline.state.recurrent`` is carried chunk to chunk by its component. The pipeline
output is read once per chunk: one number. ``finish`` zero-pads the last partial chunk, runs
it, then runs ``final`` (if declared) once.

Samples arrive in any lengths; they cross into the engine one chunk at a time as one block
(``array('f')``), so no Python runs per sample.
"""

from __future__ import annotations

import time
from array import array

from ..config.registry import register_check
from ..errors import ConfigError, EngineError, InputError
from .base import LoopStrategy

OUTPUT = "output"   # the pipeline output read per chunk (pipeline.output)


def as_float32(samples) -> array:
    """``samples`` (an array('f'), a list of numbers, bytes of float32, a numpy array) as array('f')."""
    if isinstance(samples, array) and samples.typecode == "f":
        return samples
    if isinstance(samples, (bytes, bytearray, memoryview)):
        out = array("f")
        if len(samples) % 4:
            raise InputError(f"samples: {len(samples)} bytes are not whole float32 values")
        out.frombytes(bytes(samples))
        return out
    if hasattr(samples, "dtype") and hasattr(samples, "astype"):   # numpy, without importing it
        out = array("f")
        out.frombytes(samples.astype("float32").reshape(-1).tobytes())
        return out
    try:
        return array("f", samples)
    except TypeError:
        raise InputError(f"samples: expected numbers (a list, array('f') or float32 bytes), found "
                         f"{type(samples).__name__}") from None


class Streaming(LoopStrategy):
    name = "streaming"
    streams = True

    @classmethod
    def io(cls, spec) -> tuple[tuple[str, ...], tuple[str, ...]]:
        s = spec.generation.streaming
        return (s.input,) + ((s.sample_rate_input,) if s.sample_rate_input else ()), ()

    @classmethod
    def check_plan(cls, spec, plan, file: str) -> None:
        s = spec.generation.streaming
        base = "$.generation.streaming"
        fed = {phase: {key for p in plans for _, kind, key in p.feeds if kind == "pipeline"}
               for phase, plans in plan.phases.items()}
        steps = [p.step.run for p in plan.phases["step"]]
        if s.input not in fed["step"]:
            target = steps[0] if steps else "session"
            raise ConfigError(f'input "{s.input}" feeds no session of the step phase, which runs once per '
                              f'chunk: wire it, e.g. {{"from": "inputs.{s.input}", "to": "{target}.input"}}',
                              file=file, path=f"{base}.input")
        for phase in ("init", "final"):
            if s.input in fed[phase]:
                raise ConfigError(f'input "{s.input}" feeds a session of the {phase} phase, which runs once: '
                                  f"the chunk changes every step", file=file, path=f"{base}.input")
        if s.sample_rate_input and not any(s.sample_rate_input in names for names in fed.values()):
            raise ConfigError(f'sample_rate_input "{s.sample_rate_input}" feeds no session input: wire it, '
                              f'e.g. {{"from": "inputs.{s.sample_rate_input}", "to": "SESSION.sr"}}',
                              file=file, path=f"{base}.sample_rate_input")
        for name in filter(None, (s.input, s.sample_rate_input)):
            types = {p.session.inputs[n].dtype for plans in plan.phases.values() for p in plans
                     for n, kind, key in p.feeds if kind == "pipeline" and key == name}
            if len(types) > 1:
                raise ConfigError(f'input "{name}" feeds session inputs of different types '
                                  f"({', '.join(sorted(types))}); the loop makes one tensor",
                                  file=file, path=base)
        out = spec.pipeline.output
        if out.session not in steps:
            raise ConfigError(f'the output is read once per chunk, so session "{out.session}" must run in '
                              f"the step phase (step sessions: {', '.join(steps) or 'none'})",
                              file=file, path="$.pipeline.output.session")

    def __init__(self, executor, settings, extra: dict | None = None):
        """``settings`` is generation.streaming; ``extra`` holds the other pipeline inputs."""
        self.executor = executor
        self.backend = executor.backend
        self.settings = settings
        self.extra = dict(extra or {})
        self.chunk_dtype, _ = _input_info(executor.plan, settings.input)
        self.pending = array("f")                      # samples not yet in a chunk
        self.context = array("f", bytes(4 * settings.context))
        self.samples = 0                               # samples taken in
        self.chunks = 0                                # chunks run
        self.seconds = 0.0                             # compute time
        self.final_outputs: dict = {}
        self.started = False
        self._made: list = []                          # tensors made once per stream

    def start(self) -> None:
        """A fresh stream: empty state, then the init flow once."""
        executor, s = self.executor, self.settings
        t0 = time.perf_counter()
        self.close()
        executor.reset()
        if s.sample_rate_input:
            dtype, shape = _input_info(executor.plan, s.sample_rate_input)
            rate = self.backend.tensor([s.sample_rate], dtype, (1,) * len(shape))
            self._made.append(rate)
            self.extra[s.sample_rate_input] = rate
        if executor.has_phase("init"):
            executor.run_phase("init", self.extra)
        self.started = True
        self.seconds += time.perf_counter() - t0

    def feed(self, samples) -> array:
        """Take ``samples`` (any length); the output value of every chunk they completed."""
        if not self.started:
            self.start()
        t0 = time.perf_counter()
        self.pending.extend(as_float32(samples))
        size = self.settings.chunk_size
        out = array("f")
        taken = 0
        while len(self.pending) - taken >= size:
            out.append(self._run(self.pending[taken:taken + size]))
            taken += size
        if taken:
            del self.pending[:taken]
        self.samples += taken
        self.seconds += time.perf_counter() - t0
        return out

    def finish(self) -> array:
        """End of the stream: the last partial chunk, zero-padded, then the final flow."""
        if not self.started:
            self.start()
        t0 = time.perf_counter()
        out = array("f")
        if self.pending:
            self.samples += len(self.pending)
            chunk = self.pending + array("f", bytes(4 * (self.settings.chunk_size - len(self.pending))))
            self.pending = array("f")
            out.append(self._run(chunk))
        if self.executor.has_phase("final"):
            self.final_outputs = self.executor.run_phase("final", self.extra)
        self.seconds += time.perf_counter() - t0
        return out

    def close(self) -> None:
        """Free the tensors made for this stream."""
        if self._made:
            self.backend.dispose_many(self._made)
            self._made = []

    def _run(self, chunk: array) -> float:
        s, backend = self.settings, self.backend
        window = self.context + chunk if s.context else chunk
        tensor = backend.tensor(window, self.chunk_dtype, (1, len(window)))
        try:
            outs = self.executor.run_phase("step", {**self.extra, s.input: tensor})
        finally:
            backend.dispose(tensor)
        if s.context:
            self.context = window[len(window) - s.context:]
        self.chunks += 1
        values = backend.to_list(outs[OUTPUT])
        if len(values) != 1:
            raise EngineError(f"the pipeline output should be one number per chunk; chunk {self.chunks} "
                              f"made {len(values)} (shape {list(backend.shape(outs[OUTPUT]))})")
        return float(values[0])


def _input_info(plan, name: str) -> tuple[str, tuple]:
    """(dtype, shape) of the session input the pipeline input ``name`` feeds."""
    for plans in plan.phases.values():
        for p in plans:
            for input_name, kind, key in p.feeds:
                if kind == "pipeline" and key == name:
                    info = p.session.inputs[input_name]
                    return info.dtype, info.shape
    raise ConfigError(f'pipeline input "{name}" feeds no session')   # check_plan refused this at load


def check_config(spec, file: str, bundle_dir: str | None = None) -> None:
    """Load-time checks of generation.streaming that need no sessions."""
    s = spec.generation.streaming
    loop = spec.generation.loop
    base = "$.generation.streaming"
    if loop != "streaming":
        if s is not None:
            raise ConfigError(f'"streaming" is for generation.loop "streaming", found "{loop}": remove it or '
                              f'set the loop', file=file, path=base)
        return
    if s is None:
        raise ConfigError('a streaming pipeline needs "streaming", e.g. "streaming": {"input": "audio", '
                          '"chunk_size": 512, "sample_rate": 16000}', file=file, path=base)
    for key, least in (("chunk_size", 1), ("context", 0), ("sample_rate", 1)):
        if getattr(s, key) < least:
            raise ConfigError(f"expected {key} >= {least}, found {getattr(s, key)}", file=file,
                              path=f"{base}.{key}")
    for key in ("input", "sample_rate_input"):
        name = getattr(s, key)
        if name is not None and name in spec.pipeline.inputs:
            raise ConfigError(f'"{name}" is given by the loop, so it can\'t also be a caller input in '
                              f"pipeline.inputs: rename one", file=file, path=f"{base}.{key}")
    if s.input == s.sample_rate_input:
        raise ConfigError(f'input and sample_rate_input are both "{s.input}"', file=file,
                          path=f"{base}.sample_rate_input")
    out = spec.pipeline.output
    if out is None or out.segments is None:
        raise ConfigError('a streaming pipeline reads one speech probability per chunk: it needs "output" '
                          'with "segments", e.g. "output": {"session": "vad", "name": "output", "segments": '
                          '{...}}', file=file, path="$.pipeline.output")


register_check("streaming", check_config, order=20)
