"""Incremental detokenizing: turn a stream of token ids into a stream of finished text.

Decoding token by token is wrong for most tokenizers: byte-level tokens can split a UTF-8
character, and SentencePiece-style decoders drop the leading space of the first token. So each
push decodes a small window twice — the already-emitted tail (prefix_offset:read_offset) and
the same tail plus the new tokens (prefix_offset:) — and emits the difference once it does not
end in U+FFFD (an incomplete character). The window then slides forward, so a push costs
O(window), not O(sequence). (The technique of text-generation-inference and vLLM.)

Exactness: the concatenation of push() results and flush() equals decode(all ids) whenever the
decoder is prefix-stable at the cut points, which holds for byte-level BPE (GPT-2 style), for
WordPiece, and for byte-fallback decoders on valid UTF-8. A byte-fallback decoder (Llama-style
<0xNN> tokens) fed bytes that form invalid UTF-8 replaces the whole byte run with one U+FFFD per
byte, so a later byte can change text already emitted; pass those ids as `hold_ids` to never cut
the window after one (exact for any sequence, at the cost of holding byte-spelled characters
until the next ordinary token).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .stopping import StopStrings

REPLACEMENT_CHAR = "\ufffd"


class IncrementalDetokenizer:
    """Streams text from token ids, never ending a chunk inside a character.

    `decode` maps ids to text (without skipping special tokens: ids listed in
    `skip_special_tokens_ids` are dropped here before they reach it). `hold_ids`: ids after
    which no text is emitted until a later id (see the module docstring).
    """

    def __init__(
        self,
        decode: Callable[[list[int]], str],
        skip_special_tokens_ids: Iterable[int] = frozenset(),
        hold_ids: Iterable[int] = frozenset(),
    ):
        self._decode = decode
        self._skip = frozenset(skip_special_tokens_ids)
        self._hold = frozenset(hold_ids)
        self._ids: list[int] = []  # the window: ids from prefix_offset on
        self._read = 0  # window index of the first id whose text is not yet emitted
        self._chunks: list[str] = []
        self._text_cache: str | None = ""

    @property
    def text(self) -> str:
        """All text emitted so far (the concatenation of push() and flush() results)."""
        if self._text_cache is None:
            self._text_cache = "".join(self._chunks)
            self._chunks = [self._text_cache]
        return self._text_cache

    def push(self, token_id: int) -> str:
        """Add one id; return the text it completes ("" while a character is still partial)."""
        if token_id in self._skip:
            return ""
        self._ids.append(int(token_id))
        return self._advance(final=False)

    def flush(self) -> str:
        """Emit whatever is held back (an incomplete character decodes as U+FFFD)."""
        return self._advance(final=True)

    def _advance(self, final: bool) -> str:
        if self._read >= len(self._ids) or (not final and self._ids[-1] in self._hold):
            return ""
        prefix_text = self._decode(self._ids[: self._read]) if self._read else ""
        new_text = self._decode(self._ids)
        if len(new_text) <= len(prefix_text) and not final:
            return ""  # nothing new yet (e.g. tokens that decode to nothing on their own)
        if new_text.endswith(REPLACEMENT_CHAR) and not final:
            return ""  # a character is split across tokens: wait for the rest
        delta = new_text[len(prefix_text) :]
        # slide: the emitted-but-kept tail becomes the ids just read, so the window stays small
        self._ids = self._ids[self._read :]
        self._read = len(self._ids)
        if delta:
            self._chunks.append(delta)
            self._text_cache = None
        return delta


class TextStream:
    """One sequence's text: ids detokenized as they come, stop strings found and held back."""

    def __init__(self, detokenizer: IncrementalDetokenizer, stop_strings: tuple[str, ...] = ()):
        self.detokenizer = detokenizer
        self.stops = StopStrings(stop_strings)

    def push(self, token_id: int, last: bool) -> tuple[str, bool]:
        """(text safe to show after ``token_id``, whether a stop string was hit); ``last``: the
        sequence ends with this id, so nothing is held back unless a stop string cut it."""
        delta = self.detokenizer.push(token_id)
        if last:
            delta += self.detokenizer.flush()
        out, hit = self.stops.push(delta)
        if last and not hit:
            out += self.stops.flush()
        return out, hit
