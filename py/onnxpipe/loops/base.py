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
