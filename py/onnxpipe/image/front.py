"""The image front end of a vision-language bundle: images + prompt ids -> the pipeline inputs.

Each image becomes one item of the ``pixel_values`` and ``image_grid_thw`` inputs (names from
preprocessing.image), which a ``loop: per_image`` flow step runs the vision session on one by
one; each image token in the prompt is expanded to as many tokens as the image has merged
patches. ``attach`` wires what the runtime reads beside them: the rows a flow step's ``merge``
writes over the embeddings, and the grids mRoPE positions are laid out from.
"""

from __future__ import annotations

import re

from ..backends.base import Items
from ..config.schema import PipelineSpec
from ..errors import ConfigError, InputError
from ..state.positions import PositionIds
from .config import ImageProcessorConfig, load_processor_config
from . import gemma4, pixtral
from .processor import Image, ImageProcessor, hd_tokens
from .tokens import expand_image_tokens, tokens_per_image

SPEC_PATH = "$.preprocessing.image"
BOI, SOFT, EOI = "<start_of_image>", "<image_soft_token>", "<end_of_image>"   # Gemma 3's markers
TAG = re.compile(r"<\|image_(\d+)\|>")   # Phi-3-vision's image tags
PHI4_IMAGE = "<|endoftext10|>"   # what onnxruntime-genai's phi_multimodal_processor puts for each tag
MADE = {"pixel_values": (2, "float32"), "grid_thw": (2, "int64")}   # rank and dtype of each output


def front_end_inputs(spec: PipelineSpec) -> tuple[str, ...]:
    """The pipeline inputs the image (and speech) front ends supply (none without preprocessing.image
    or preprocessing.speech)."""
    image, speech = spec.preprocessing.image, spec.preprocessing.speech
    made = ((image.pixel_values, image.grid_thw) + ((image.attention_mask,) if image.attention_mask else ())
            if image is not None else ())
    if speech is not None:   # the clips' inputs (audio/phi4_features.py)
        made += (speech.audio_embeds, speech.audio_sizes, speech.projection_mode, speech.attention_mask)
    return made


def load_config(config) -> ImageProcessorConfig | None:
    image = config.spec.preprocessing.image
    if image is None:
        return None
    try:
        return load_processor_config(config.bundle_dir, image.config, f"{SPEC_PATH}.config")[0]
    except ConfigError as exc:
        if exc.file is None:   # the reference itself is wrong: name pipeline.json
            raise ConfigError(exc.message.split(": ", 1)[-1], file=config.file,
                              path=f"{SPEC_PATH}.config") from None
        raise


def attach(config, plan, sessions: dict, components: list, executor) -> None:
    """Load-time wiring of the vision-language keys onto the planned flow."""
    spec, file = config.spec, config.file
    processor = load_config(config)
    for plans in plan.phases.values():
        for p in plans:
            fed: dict[str, str] = {}   # input -> the entry that feeds it
            for merge, path in p.step.merges(p.index):
                if merge.into in p.session.inputs:
                    _check_fed_rows(p, merge.into, file, f"{path}.into")
                    if merge.into in fed:
                        raise ConfigError(f'input "{merge.into}" of session "{p.step.run}" is fed by {fed[merge.into]} '
                                          "already: each source's rows go to their own input", file=file,
                                          path=f"{path}.into")
                    fed[merge.into] = path
                elif merge.into not in p.session.outputs:
                    raise ConfigError(f'session "{p.step.run}" has no output or input "{merge.into}" '
                                      f'(outputs: {", ".join(p.session.outputs)}; inputs: '
                                      f'{", ".join(p.session.inputs)})', file=file, path=f"{path}.into")
                if "input_ids" not in plan.pipeline_inputs:
                    raise ConfigError("merge places rows at token positions: it needs a token loop "
                                      "(the input_ids pipeline input)", file=file, path=path)
                source, output = merge.from_.split(".", 1)
                if source in sessions:
                    if output not in sessions[source].outputs:
                        raise ConfigError(f'session "{source}" has no output "{output}" (outputs: '
                                          f'{", ".join(sessions[source].outputs)})', file=file,
                                          path=f"{path}.from")
                    _keep(plan, source, output)
                p.merges.append((merge, (source, output), spec.tokens.extra.get(merge.token)))
    positions = spec.pipeline.state.position_ids
    if positions.grid_source:
        source, output = positions.grid_source.split(".", 1)
        if source in sessions:
            if output not in sessions[source].outputs:
                raise ConfigError(f'session "{source}" has no output "{output}" (outputs: '
                                  f'{", ".join(sessions[source].outputs)})', file=file,
                                  path="$.pipeline.state.position_ids.grid_source")
            _keep(plan, source, output)
    token = spec.tokens.extra.get("image_token")
    for comp in components:
        if isinstance(comp, PositionIds):
            comp.values = executor.values
            comp.image_token = token if isinstance(token, int) and not isinstance(token, bool) else None
            comp.merge = positions.spatial_merge_size or (processor.merge_size if processor else None)
            comp.grid_input = spec.preprocessing.image.grid_thw if spec.preprocessing.image else None
            if comp.image_token is not None and 3 in comp.rank.values() and comp.merge is None:
                raise ConfigError("mrope_3d positions of image tokens need the grid cells merged per "
                                  "token: set position_ids.spatial_merge_size or preprocessing.image",
                                  file=file, path="$.pipeline.state.position_ids.spatial_merge_size")
    if processor is not None:
        masks = spec.preprocessing.image.attention_mask
        if bool(masks) != processor.dynamic_hd_crops:   # only Phi-4's processor makes crop masks
            said = "makes no crop masks" if masks else "makes crop masks: name the pipeline input they go to"
            raise ConfigError(f"the {processor.image_processor_type} processor {said}", file=file,
                              path=f"{SPEC_PATH}.attention_mask")
        if processor.pixtral:
            for key in ("image_break", "image_end"):
                value = spec.tokens.extra.get(key)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ConfigError(f"the {processor.image_processor_type} processor ends each row of "
                                      f"image tokens with a marker: expected tokens.{key} (an id), found "
                                      f"{value!r}", file=file, path=f"$.tokens.{key}")
        check_expected(spec, plan, sessions, file, processor.fixed or processor.pixtral,
                       processor.hd or processor.dynamic_hd_crops, processor.gemma4)


def _check_fed_rows(p, into: str, file: str, path: str) -> None:
    """A merge into an input is fed [0, dims...] on runs without the token: dims after the
    first must be fixed."""
    shape = p.session.inputs[into].shape
    if len(shape) < 2 or not all(isinstance(d, int) for d in shape[1:]):
        raise ConfigError(f'input "{into}" of session "{p.step.run}" takes the rows, so it '
                          f"needs the shape [rows, fixed dims...] (fed with 0 rows when the ids hold no "
                          f"placeholder); found {list(shape)}", file=file, path=path)


def _keep(plan, session: str, name: str) -> None:
    for plans in plan.phases.values():
        for p in plans:
            if p.step.run == session:
                for names in (p.outputs, p.keep):
                    if name not in names:
                        names.append(name)


def check_expected(spec: PipelineSpec, plan, sessions: dict, file: str, fixed: bool = False,
                   hd: bool = False, gemma4_rows: bool = False) -> None:
    """``expected_outputs``: each names an output of the image front end, with the rank and
    dtype it has; every session input it feeds must have them too."""
    image = spec.preprocessing.image
    made = ({image.pixel_values: (4, "float32")} if fixed   # Gemma 3: [1, 3, h, w], no grid
            else {image.pixel_values: (3, "float32"), image.grid_thw: (3, "int64")} if gemma4_rows
            else {image.pixel_values: (5, "float32"), image.grid_thw: (2, "int64")} if hd   # Phi-3-V
            else {image.pixel_values: MADE["pixel_values"], image.grid_thw: MADE["grid_thw"]})
    if hd and image.attention_mask:   # Phi-4-multimodal: the crop masks beside them
        made[image.attention_mask] = (4, "float32")
    for name, expected in image.expected_outputs.items():
        path = f"{SPEC_PATH}.expected_outputs.{name}"
        if name not in made:
            raise ConfigError(f'"{name}" is not an output of the image preprocessing (it makes '
                              f'{", ".join(made)})', file=file, path=path)
        rank, dtype = made[name]
        for key, want, have in (("rank", expected.rank, rank), ("dtype", expected.dtype, dtype)):
            if want is not None and want != have:
                raise ConfigError(f'the image preprocessing makes "{name}" with {key} {have}, not {want}',
                                  file=file, path=f"{path}.{key}")
        for plans in plan.phases.values():
            for p in plans:
                for input_name, kind, key in p.feeds:
                    if kind != "pipeline" or key != name:
                        continue
                    info = p.session.inputs[input_name]
                    if expected.rank is not None and info.shape is not None and len(info.shape) != expected.rank:
                        raise ConfigError(f'session "{p.step.run}" input "{input_name}" has rank '
                                          f"{len(info.shape)}, expected {expected.rank}", file=file,
                                          path=f"{path}.rank")
                    if expected.dtype is not None and info.dtype != expected.dtype:
                        raise ConfigError(f'session "{p.step.run}" input "{input_name}" is {info.dtype}, '
                                          f"expected {expected.dtype}", file=file, path=f"{path}.dtype")


class ImageFrontEnd:
    def __init__(self, loaded):
        spec = loaded.spec
        self.spec = spec.preprocessing.image
        self.config = load_config(loaded.config)
        # pixels are read back to the host at once: run where the host is
        provider = "wasm" if "wasm" in loaded.backend.providers else "cpu"
        self.processor = ImageProcessor(loaded.backend, self.config, provider)
        token = spec.tokens.extra.get("image_token")
        self.token = token if isinstance(token, int) and not isinstance(token, bool) else None
        # Mistral 3: the row markers and [INST] (tokens.extra image_break / image_end / image_inst)
        self.marks = tuple(spec.tokens.extra.get(k) for k in ("image_break", "image_end", "image_inst"))

    def expand_prompt(self, text: str, images: list) -> str:
        """A fixed-size (Gemma 3) processor's text rule, as onnxruntime-genai's
        gemma_image_processor and transformers' Gemma3Processor apply it before tokenizing: each
        "<start_of_image>" becomes "\\n\\n<start_of_image>", image_seq_length "<image_soft_token>"
        and "<end_of_image>\\n\\n"; an empty prompt is one "<start_of_image>" per image. A prompt
        that already holds soft tokens, or any prompt of another processor, is kept. Gemma 4's
        rule (a count per image, from its size): image/gemma4.py."""
        if self.config.gemma4 and gemma4.EOI not in text:   # not expanded yet
            if not all(isinstance(i, Image) for i in images):
                return text   # prepare() names the item that is no Image
            return gemma4.expand_prompt(text, [gemma4.soft_tokens(i.height, i.width, self.config)
                                               for i in images])
        if not self.config.fixed or SOFT in text:
            return text
        count = len(images)
        if not text:
            text = " ".join([BOI] * count)
        found = text.count(BOI)
        if found != count:
            raise InputError(f"the prompt has {found} {BOI} for {count} image(s): put one {BOI} per "
                             "image where it goes")
        return text.replace(BOI, f"\n\n{BOI}{SOFT * self.config.image_seq_length}{EOI}\n\n")

    def tagged_ids(self, text: str, count: int, tokenizer) -> list[int] | None:
        """Phi-3-vision's prompt rule (onnxruntime-genai's phi_image_processor): the text split at
        each "<|image_N|>" tag, each piece tokenized on its own, one placeholder id (the image
        token, -1) where each tag was, expanded by ``prepare``; None for other processors. The
        tags must be <|image_1|> .. <|image_count|>, in order, once each.

        Phi-4-multimodal's rule (onnxruntime-genai's phi_multimodal_processor): each tag, whatever
        its number, becomes <|endoftext10|> and the whole text is tokenized; ``prepare`` expands
        each of those ids and checks there is one per image."""
        if self.config.dynamic_hd_crops:
            return tokenizer.encode(self.phi4_text(text), add_special_tokens=True)
        if not self.config.hd:
            return None
        tags = [int(n) for n in TAG.findall(text)]
        if tags != list(range(1, count + 1)):
            raise InputError(f"the prompt has the image tags {['<|image_%d|>' % n for n in tags]} for "
                             f"{count} image(s): put <|image_1|> .. <|image_{count}|> in order, once "
                             "each, where the images go")
        ids: list[int] = []
        for i, piece in enumerate(TAG.split(text)[::2]):
            if i:
                ids.append(self.token)
            ids.extend(tokenizer.encode(piece, add_special_tokens=True))   # empty ones too, as genai
        return ids

    def phi4_text(self, text: str) -> str:
        """Phi-4-multimodal's prompt text with each <|image_N|> tag made <|endoftext10|>, as
        onnxruntime-genai's phi_multimodal_processor does before tokenizing (with its
        <|audio_N|> tags, audio/phi4_features.py); the text unchanged for other processors."""
        return TAG.sub(PHI4_IMAGE, text) if self.config.dynamic_hd_crops else text

    def prepare(self, ids: list[int], images) -> tuple[list[int], dict]:
        """(the ids with each image token expanded, the per-image pipeline inputs)."""
        images = list(images or ())
        if not images:
            return ids, {}
        if self.token is None:
            raise InputError("this bundle names no tokens.extra.image_token: it can't place images in a prompt")
        for i, image in enumerate(images):
            if not isinstance(image, Image):
                raise InputError(f"images[{i}]: expected onnxpipe.image.Image (RGB bytes, width, height), "
                                 f"found {type(image).__name__}")
        done = []
        for i, image in enumerate(images):
            try:
                done.append(self.processor.process(image))
            except InputError as exc:   # say which image
                raise InputError(f"images[{i}]: {exc.message}") from None
        if self.config.hd:   # Phi-3-vision: a count per HD size, image_sizes beside the pixels
            ids = _expand_tags(ids, self.token, [hd_tokens(*d.hd_size) for d in done])
            return ids, {self.spec.pixel_values: Items(d.pixel_values for d in done),
                         self.spec.grid_thw: Items((list(d.hd_size), (1, 2)) for d in done)}
        if self.config.dynamic_hd_crops:   # Phi-4-multimodal: a count per image, sizes and masks beside
            counts = [d.tokens for d in done]
            expand = _expand_tags if ids.count(self.token) == len(counts) else expand_image_tokens
            return expand(ids, self.token, counts), {
                self.spec.pixel_values: Items(d.pixel_values for d in done),
                self.spec.grid_thw: Items((list(d.hd_size), (1, 2)) for d in done),
                self.spec.attention_mask: Items(d.masks for d in done)}
        if self.config.gemma4:   # pixel_position_ids beside the pixels (preprocessing.image.grid_thw)
            ids = expand_image_tokens(ids, self.token, [d.pixel_values[1][1] // self.config.pooling_kernel_size ** 2
                                                        for d in done])
            return ids, {self.spec.pixel_values: Items(d.pixel_values for d in done),
                         self.spec.grid_thw: Items(d.positions for d in done)}
        if self.config.pixtral:   # Mistral 3: [IMG] rows, [IMG_BREAK] / [IMG_END] (image/pixtral.py)
            brk, end, inst = self.marks
            sequences = [pixtral.image_tokens(*d.pixel_values[1][2:], self.config.factor, self.token, brk, end)
                         for d in done]
            return (pixtral.expand(ids, sequences, self.token, brk, end, inst),
                    {self.spec.pixel_values: Items(d.pixel_values for d in done)})
        if self.config.fixed:   # Gemma 3: image_seq_length soft tokens per image, no grid
            ids = expand_image_tokens(ids, self.token, [self.config.image_seq_length] * len(done))
            return ids, {self.spec.pixel_values: Items(d.pixel_values for d in done)}
        counts = [tokens_per_image(d.grid, self.config.merge_size) for d in done]
        ids = expand_image_tokens(ids, self.token, counts)
        return ids, {self.spec.pixel_values: Items(d.pixel_values for d in done),
                     self.spec.grid_thw: Items((list(d.grid), (1, 3)) for d in done)}


def _expand_tags(ids: list[int], token: int, counts: list[int]) -> list[int]:
    """Each placeholder ``token`` (one per <|image_N|> tag, adjacent ones included) repeated
    ``counts[i]`` times; the ids must come from a tagged prompt."""
    found = ids.count(token)
    if found != len(counts):
        raise InputError(f"the prompt has {found} image placeholder(s) (id {token}) for {len(counts)} "
                         "image(s): give the prompt as text with <|image_1|> .. <|image_N|> tags")
    out: list[int] = []
    images = iter(counts)
    for i in ids:
        out.extend([i] * next(images) if i == token else [i])
    return out
