"""The denoising loop (diffusion): init once, the denoiser ``num_steps`` times, final once.

``init`` (a text encoder, or nothing when the caller gives the embeddings) runs once. The
latents start as seeded noise (diffusion/noise.py) times the scheduler's ``init_noise_sigma``.
Each step gives the denoiser the latents divided by the scheduler's input divisor
(``generation.denoising.latent_input``) and the timestep (``timestep_input``), reads its
prediction (``output``) and runs the scheduler's update graph. ``final`` (a VAE decoder) gets the
latents divided by ``latent_scale`` (``final_input``). Latents never leave the engine.

Classifier-free guidance (``guidance_scale`` > 1) runs the denoiser on [unconditional,
conditional]: as one batch of 2 when the denoiser's latent input has a free batch dim, as two
calls when it is fixed to 1 (each of its inputs fixed to batch 1 then gets one row of the
2-row conditioning). The caller (or the init phase) gives the conditioning with the
unconditional rows first, as diffusers' pipelines stack it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ..config.registry import register_check
from ..diffusion import SCHEDULERS, input_graph, make_scheduler
from ..diffusion.noise import initial_latents
from ..errors import ConfigError, InputError
from ..ops import tensor as tensor_ops
from .base import LoopStrategy

SETTINGS = "$.generation.denoising"


class Denoising(LoopStrategy):
    name = "denoising"
    options = ("seed", "num_steps", "guidance_scale", "scheduler")

    @classmethod
    def io(cls, spec) -> tuple[tuple[str, ...], tuple[str, ...]]:
        d = spec.generation.denoising
        final = (d.final_input,) if d.final_input else ()
        return (d.latent_input, d.timestep_input) + final, (d.output,)

    @classmethod
    def check_plan(cls, spec, plan, file: str) -> None:
        d = spec.generation.denoising
        fed = {phase: {key for p in plans for _, kind, key in p.feeds if kind == "pipeline"}
               for phase, plans in plan.phases.items()}
        wanted = {"latent_input": ("step", d.latent_input), "timestep_input": ("step", d.timestep_input)}
        if d.final_input:
            wanted["final_input"] = ("final", d.final_input)
        for key, (phase, name) in wanted.items():
            others = [p for p in fed if p != phase and name in fed[p]]
            if name not in fed[phase] or others:
                where = f"feeds the {others[0]} phase" if others else f"feeds no session of the {phase} phase"
                raise ConfigError(f'input "{name}" {where}; it must feed the {phase} phase only: wire it, '
                                  f'e.g. {{"from": "inputs.{name}", "to": "SESSION.INPUT"}}',
                                  file=file, path=f"{SETTINGS}.{key}")
        if plan.phases["final"] and not d.final_input:
            raise ConfigError('the flow has a final phase: name the pipeline input that gets the denoised '
                              'latents, e.g. "final_input": "latent_sample"', file=file,
                              path=f"{SETTINGS}.final_input")
        info = feed_info(plan, d.latent_input)
        if info.dtype != "float32":
            raise ConfigError(f'the denoiser\'s latent input is {info.dtype}; this loop makes float32 latents',
                              file=file, path=f"{SETTINGS}.latent_input")
        shape = tuple(d.latent_shape)
        dims = tuple(info.shape)
        if dims and (len(dims) != len(shape) or any(isinstance(a, int) and a != b for a, b in
                                                     zip(dims[1:], shape[1:]))):
            raise ConfigError(f"latent_shape {list(shape)} does not fit the denoiser's latent input "
                              f"{list(dims)}", file=file, path=f"{SETTINGS}.latent_shape")
        if dims and isinstance(dims[0], int) and dims[0] not in (shape[0], 2 * shape[0]):
            raise ConfigError(f"the denoiser's batch is fixed to {dims[0]}; latent_shape's is {shape[0]}",
                              file=file, path=f"{SETTINGS}.latent_shape")
        steps = {p.step.run for p in plan.phases["step"]}
        if plan.pipeline_outputs[d.output][0] not in steps:
            raise ConfigError(f'output "{d.output}" is read every step, so a step-phase session must make it',
                              file=file, path=f"{SETTINGS}.output")

    @classmethod
    def create(cls, loaded, **options) -> "Denoising":
        return cls(loaded.executor, loaded.spec, loaded.config.file, loaded.config.bundle_dir, **options)

    def __init__(self, executor, spec, file: str, bundle_dir: str, seed: int | None = None,
                 num_steps: int | None = None, guidance_scale: float | None = None,
                 scheduler: str | None = None, on_step=None, cancel=None):
        """``on_step(done, total)`` after each step; ``cancel()`` returning True before a step
        stops the run there (no final phase: the outputs then hold only ``latents``)."""
        gen, d = spec.generation, spec.generation.denoising
        self.on_step, self.cancel = on_step, cancel
        self.executor, self.backend, self.settings = executor, executor.backend, d
        self.seed = _option_int("seed", d.seed if seed is None else seed, -1)
        if self.seed < 0:
            self.seed = int.from_bytes(os.urandom(4), "little")
        self.num_steps = _option_int("num_steps", gen.num_steps if num_steps is None else num_steps, 1)
        scale = gen.guidance_scale if guidance_scale is None else guidance_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise InputError(f"guidance_scale: expected a number, found {scale!r}")
        self.guidance_scale = float(scale)
        settings, where, path = load_scheduler_settings(d.scheduler_config, bundle_dir, file)
        if scheduler is not None and scheduler != gen.scheduler:
            if scheduler not in SCHEDULERS:
                raise InputError(f'scheduler: "{scheduler}" is not one of {", ".join(SCHEDULERS)}')
            # another scheduler on the same training schedule: the settings it knows, as
            # diffusers' from_config(other.config) takes them
            keys = SCHEDULERS[scheduler].KEYS
            settings = {k: v for k, v in (settings or {}).items() if k in keys}
        self.scheduler = make_scheduler(scheduler or gen.scheduler, settings, file, "$.generation.scheduler",
                                        path, where)
        self.latent = feed_info(executor.plan, d.latent_input)
        self.timestep = feed_info(executor.plan, d.timestep_input)
        source = executor.plan.pipeline_outputs[d.output]
        self.output_source = source
        self._originals: dict = {}   # executor values swapped out for two-call guidance
        self.provider = next(p.session.provider for p in executor.plan.phases["step"]
                             if p.step.run == source[0])

    # ---- running --------------------------------------------------------------------------

    def run(self, inputs: dict) -> tuple[dict[str, Any], float]:
        """(pipeline outputs, seconds): ``latents`` and what the final phase made."""
        start = time.perf_counter()
        backend, executor, d = self.backend, self.executor, self.settings
        if executor.has_phase("init"):
            executor.run_phase("init", inputs)
        plan = self.scheduler.plan(self.num_steps)
        mode = self._guidance_mode()
        rows = 2 * d.latent_shape[0] if mode == "batched" else d.latent_shape[0]   # per denoiser call
        made: list = []            # tensors this run owns until it ends
        count = 1
        for n in d.latent_shape:
            count *= n
        step_graph = backend.open_graph(self.scheduler.step_graph(mode), self.provider)
        scale_graph = backend.open_graph(input_graph(mode == "batched"), self.provider)
        latents = backend.tensor(initial_latents(self.seed, count, plan.init_noise_sigma), "float32",
                                 tuple(d.latent_shape))
        made.append(backend.tensor([self.guidance_scale], "float32", ()))
        try:
            calls = self._calls(inputs, mode, made)
            for done, (t, divisor, coefficients) in enumerate(plan.steps):
                if self.cancel is not None and self.cancel():
                    return {"latents": latents}, time.perf_counter() - start
                step_made = [backend.tensor([divisor], "float32", ()),
                             backend.tensor(coefficients, "float32", (len(coefficients),))]
                model_in = backend.run(scale_graph, {"x": latents, "d": step_made[0]}, ["y"])["y"]
                step_made += [model_in, self._timestep_tensor(t, rows)]
                preds = [self._predict(dict(call, **{d.latent_input: model_in, d.timestep_input: step_made[3]}),
                                       swap) for call, swap in calls]
                step_made += preds
                feeds = {"x": latents, "c": step_made[1]}
                if mode == "two_calls":
                    feeds.update(m_uncond=preds[0], m_cond=preds[1])
                else:
                    feeds["m"] = preds[0]
                if mode != "none":
                    feeds["g"] = made[0]
                new = backend.run(step_graph, feeds, ["y"])["y"]
                backend.dispose_many(step_made + [latents])
                latents = new
                if self.on_step is not None:
                    self.on_step(done + 1, len(plan.steps))
            outputs: dict[str, Any] = {"latents": latents}
            if executor.has_phase("final"):
                scale = backend.tensor([d.latent_scale], "float32", ())
                final_graph = backend.open_graph(input_graph(False), self.provider)
                z = backend.run(final_graph, {"x": latents, "d": scale}, ["y"])["y"]
                made += [scale, z]
                outputs.update(executor.run_phase("final", dict(inputs, **{d.final_input: z})))
        except BaseException:
            backend.dispose(latents)
            raise
        finally:
            self.executor.values.update(self._originals)
            backend.dispose_many(made)
        return outputs, time.perf_counter() - start

    def _guidance_mode(self) -> str:
        if self.guidance_scale <= 1.0:   # diffusers: do_classifier_free_guidance = scale > 1
            return "none"
        batch = self.latent.shape[0] if self.latent.shape else None
        return "two_calls" if isinstance(batch, int) and batch == self.settings.latent_shape[0] else "batched"

    def _predict(self, feeds: dict, swap: dict) -> Any:
        """One denoiser pass; the prediction is ours (the executor would free it next pass)."""
        values = self.executor.values
        values.update(swap)
        out = self.executor.run_phase("step", feeds)[self.settings.output]
        if values.get(self.output_source) is out:
            del values[self.output_source]
        return out

    def _timestep_tensor(self, t: float, rows: int):
        info = self.timestep
        if info.dtype.startswith(("int", "uint")):
            if t != int(t):
                raise InputError(f"timestep {t} is not a whole number, but the denoiser's timestep input is "
                                 f"{info.dtype}: use a scheduler setting that gives whole timesteps "
                                 f'(e.g. timestep_spacing "leading")')
            t = int(t)
        if not info.shape:
            return self.backend.tensor([t], info.dtype, ())
        n = info.shape[0] if isinstance(info.shape[0], int) else rows
        return self.backend.tensor([t] * n, info.dtype, (n,) + (1,) * (len(info.shape) - 1))

    def _calls(self, inputs: dict, mode: str, made: list) -> list[tuple[dict, dict]]:
        """(pipeline inputs, executor values to swap in) per denoiser call of a step; checks the
        conditioning's batch against the call's."""
        backend, executor, d = self.backend, self.executor, self.settings
        own = {d.latent_input, d.timestep_input}
        batch_dim = self.latent.shape[0] if self.latent.shape else None
        calls = [(dict(inputs), {}), (dict(inputs), {})] if mode == "two_calls" else [(dict(inputs), {})]
        for p in executor.plan.phases["step"]:
            for name, kind, key in p.feeds:
                if kind == "pipeline" and key in own:
                    continue
                info = p.session.inputs[name]
                dim = info.shape[0] if info.shape else None
                value = executor.values.get(key) if kind == "session" else inputs.get(key)
                if value is None:
                    continue
                have = value[1][0] if isinstance(value, tuple) else backend.shape(value)[0]
                want = 2 * d.latent_shape[0] if mode != "none" else d.latent_shape[0]
                shared = dim is not None and (dim == batch_dim if isinstance(dim, str) else mode == "two_calls"
                                              and dim == d.latent_shape[0])
                if not shared:
                    continue
                if have != want:
                    what = ("[unconditional, conditional] rows (unconditional first)" if mode != "none"
                            else "one row per image")
                    raise InputError(f'input "{name}" of session "{p.step.run}" has batch {have}; guidance_scale '
                                     f"{self.guidance_scale:g} needs {want}: {what}")
                if mode != "two_calls":
                    continue
                for r, (call, swap) in enumerate(calls):
                    half = self._rows(value, info.dtype, r, want // 2, made)
                    if kind == "session":
                        self._originals[key] = value
                        swap[key] = half
                    else:
                        call[key] = half
        return calls

    def _rows(self, value, dtype: str, r: int, n: int, made: list):
        """Rows r*n .. (r+1)*n of a host value or an engine tensor."""
        if isinstance(value, tuple):
            flat, shape = value
            size = len(flat) // shape[0] * n
            return flat[r * size:(r + 1) * size], (n,) + tuple(shape[1:])
        backend = self.backend
        shape = backend.shape(value)
        graph = backend.open_graph(tensor_ops.slice_graph(dtype, len(shape)), self.provider)
        bounds = {k: backend.tensor(v, "int64", (1,)) for k, v in
                  (("starts", [r * n]), ("ends", [(r + 1) * n]), ("axes", [0]))}
        out = backend.run(graph, dict(bounds, x=value), ["y"])["y"]
        backend.dispose_many(list(bounds.values()))
        made.append(out)
        return out


def feed_info(plan, name: str):
    """The session input (TensorInfo) the pipeline input ``name`` feeds."""
    for plans in plan.phases.values():
        for p in plans:
            for input_name, kind, key in p.feeds:
                if kind == "pipeline" and key == name:
                    return p.session.inputs[input_name]
    raise ConfigError(f'pipeline input "{name}" feeds no session')   # check_plan refused this at load


def _option_int(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InputError(f"{name}: expected an integer >= {least}, found {value!r}")
    return value


def load_scheduler_settings(value, bundle_dir: str | None, file: str) -> tuple[dict | None, str, str]:
    """(settings, file, JSON path) of generation.denoising.scheduler_config: inline, or a JSON file
    in the bundle (its errors then name that file)."""
    path = f"{SETTINGS}.scheduler_config"
    if value is None or isinstance(value, dict):
        return value, file, path
    if not isinstance(value, str):
        raise ConfigError(f"expected an object or a file name, found {value!r}", file=file, path=path)
    if not value or os.path.isabs(value) or ".." in value.replace("\\", "/").split("/"):
        raise ConfigError(f'expected a path inside the bundle, found "{value}"', file=file, path=path)
    if bundle_dir is None:
        return None, file, path
    full = os.path.join(bundle_dir, value)
    try:
        with open(full, encoding="utf-8") as f:
            loaded = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f'file "{value}" does not exist in {bundle_dir}', file=file, path=path) from None
    except OSError as exc:   # a folder, unreadable
        raise ConfigError(f'cannot read "{value}": {exc.strerror}', file=file, path=path) from None
    except ValueError as exc:
        raise ConfigError(f"not JSON: {exc}", file=full, path="$") from None
    return loaded, full, "$"


def check_config(spec, file: str, bundle_dir: str | None = None) -> None:
    """Load-time checks of the denoising keys that need no sessions."""
    gen = spec.generation
    if gen.loop != "denoising":
        for key, default in (("denoising", None), ("num_steps", 0), ("scheduler", None), ("guidance_scale", 1.0)):
            if getattr(gen, key) != default:
                raise ConfigError(f'"{key}" is for generation.loop "denoising", found "{gen.loop}": remove it',
                                  file=file, path=f"$.generation.{key}")
        return
    d = gen.denoising
    if d is None:
        raise ConfigError('a denoising pipeline needs "denoising", e.g. "denoising": {"latent_input": "sample", '
                          '"timestep_input": "timestep", "output": "out_sample", "latent_shape": [1, 4, 64, 64], '
                          '"final_input": "latent_sample"}', file=file, path=SETTINGS)
    if gen.num_steps < 1:
        raise ConfigError(f"expected num_steps >= 1, found {gen.num_steps}", file=file, path="$.generation.num_steps")
    if len(d.latent_shape) < 1 or any(n < 1 for n in d.latent_shape):
        raise ConfigError(f"expected a shape of positive sizes, found {list(d.latent_shape)}", file=file,
                          path=f"{SETTINGS}.latent_shape")
    if d.latent_scale == 0:
        raise ConfigError("latent_scale divides the latents: it can't be 0", file=file, path=f"{SETTINGS}.latent_scale")
    if d.seed < -1:
        raise ConfigError(f"expected seed >= -1, found {d.seed}", file=file, path=f"{SETTINGS}.seed")
    names = [n for n in (d.latent_input, d.timestep_input, d.final_input) if n]
    if len(set(names)) != len(names):
        raise ConfigError(f"latent_input, timestep_input and final_input must differ, found {names}",
                          file=file, path=SETTINGS)
    for key in ("latent_input", "timestep_input", "final_input"):
        name = getattr(d, key)
        if name is not None and name in spec.pipeline.inputs:
            raise ConfigError(f'"{name}" is given by the loop, so it can\'t also be a caller input in '
                              f"pipeline.inputs: rename one", file=file, path=f"{SETTINGS}.{key}")
    for name in Denoising.options:
        if name in spec.pipeline.inputs:
            raise ConfigError(f'"{name}" is a per-call option of the denoising loop: rename this input',
                              file=file, path=f"$.pipeline.inputs.{name}")
    settings, where, path = load_scheduler_settings(d.scheduler_config, bundle_dir, file)
    scheduler = make_scheduler(gen.scheduler, settings, file, "$.generation.scheduler", path, where)
    if gen.num_steps > scheduler.settings["num_train_timesteps"]:
        raise ConfigError(f"num_steps {gen.num_steps} is more than the scheduler's num_train_timesteps "
                          f"{scheduler.settings['num_train_timesteps']}", file=file, path="$.generation.num_steps")


register_check("denoising", check_config, order=30)
