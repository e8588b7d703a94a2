"""What every generation loop strategy declares: the pipeline inputs it supplies itself and
the pipeline outputs it reads. Assembly plans the flow from these declarations, and callers
pick a surface (tokens or one pass) from ``makes_tokens``; nobody names a loop literally.
"""

from __future__ import annotations

from typing import ClassVar


class LoopStrategy:
    #: the ``generation.loop`` value that selects this strategy
    name: ClassVar[str]
    #: pipeline inputs the loop feeds on its own (the caller never gives them)
    supplies: ClassVar[tuple[str, ...]] = ()
    #: pipeline outputs the loop consumes; the flow must produce them
    reads: ClassVar[tuple[str, ...]] = ()
    #: True when the loop generates token ids (generate / chat); False for one-pass results
    makes_tokens: ClassVar[bool] = False
    #: True when the loop runs once per chunk of a streamed input (detect_speech, not run)
    streams: ClassVar[bool] = False
    #: per-call options ``run()`` takes beside the pipeline inputs (the denoising loop's seed, ...)
    options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def create(cls, loaded, **options):
        """The loop for one run of ``loaded`` (a LoadedPipeline) with per-call ``options``."""
        return cls(loaded.executor)

    @classmethod
    def io(cls, spec) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(pipeline inputs it supplies, pipeline outputs it reads) for this bundle's config."""
        return cls.supplies, cls.reads

    @classmethod
    def check_plan(cls, spec, plan, file: str) -> None:
        """Load-time checks of the planned flow that only this loop knows to make."""
