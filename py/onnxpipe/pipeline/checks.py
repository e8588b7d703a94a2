"""Checks of a caller's text that every text job (generate, chat) makes the same way."""

from __future__ import annotations

from ..errors import InputError


def check_unicode(name: str, text: str) -> None:
    """Text a tokenizer can take: no lone surrogates (they have no UTF-8 form); ``name`` is
    the argument's name in the error."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{name}: not valid Unicode text ({exc.reason} at character {exc.start})") from None
