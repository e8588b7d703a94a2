"""Single-range HTTP support for tools/serve.py (RFC 9110 section 14): resumable downloads.

`Range: bytes=N-`, `bytes=N-M` and `bytes=-S` on a regular file answer 206 with
Content-Range; a start past the end answers 416 with `Content-Range: bytes */SIZE`; several
ranges, a malformed header or an If-Range that no longer matches answer the whole file (200),
as the RFC allows. Every file response says `Accept-Ranges: bytes`.
"""
from __future__ import annotations

import email.utils
import os
import re

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """(first, last) inclusive for a satisfiable single range; None to send the whole file;
    "unsatisfiable" when the range starts past the end (or asks for an empty suffix)."""
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if not m or (not m.group(1) and not m.group(2)):
        return None   # several ranges or not bytes: ignored, the whole file is sent
    if not m.group(1):   # suffix: the last S bytes
        suffix = int(m.group(2))
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    first = int(m.group(1))
    if m.group(2) and int(m.group(2)) < first:
        return None   # syntactically invalid: ignored
    if first >= size:
        return "unsatisfiable"
    return first, min(int(m.group(2)) if m.group(2) else size - 1, size - 1)


class _Slice:
    """The part of an open file that a 206 sends (copyfile reads it like a file)."""

    def __init__(self, handle, length: int):
        self.handle, self.left = handle, length

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.handle.read(n) if n > 0 else b""
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.handle.close()


class RangeMixin:
    """Mix into a SimpleHTTPRequestHandler subclass (before it in the bases)."""

    _accept_ranges = False

    def end_headers(self) -> None:
        if self._accept_ranges:
            self.send_header("Accept-Ranges", "bytes")
        super().end_headers()  # type: ignore[misc]

    def send_head(self):
        path = self.translate_path(self.path)  # type: ignore[attr-defined]
        self._accept_ranges = os.path.isfile(path)
        header = self.headers.get("Range")  # type: ignore[attr-defined]
        if not self._accept_ranges or not header or not self._if_range_matches(path):
            return super().send_head()  # type: ignore[misc]
        size = os.path.getsize(path)
        wanted = parse_range(header, size)
        if wanted is None:
            return super().send_head()  # type: ignore[misc]
        if wanted == "unsatisfiable":
            self.send_response(416)  # type: ignore[attr-defined]
            self.send_header("Content-Range", f"bytes */{size}")  # type: ignore[attr-defined]
            self.send_header("Content-Length", "0")  # type: ignore[attr-defined]
            self.end_headers()
            return None
        first, last = wanted
        handle = open(path, "rb")
        handle.seek(first)
        self.send_response(206)  # type: ignore[attr-defined]
        self.send_header("Content-Type", self.guess_type(path))  # type: ignore[attr-defined]
        self.send_header("Content-Range", f"bytes {first}-{last}/{size}")  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(last - first + 1))  # type: ignore[attr-defined]
        self.send_header("Last-Modified", self._last_modified(path))  # type: ignore[attr-defined]
        self.end_headers()
        return _Slice(handle, last - first + 1)

    @staticmethod
    def _last_modified(path: str) -> str:
        return email.utils.formatdate(os.path.getmtime(path), usegmt=True)

    def _if_range_matches(self, path: str) -> bool:
        """No If-Range, or one naming this file's Last-Modified exactly (we send no ETags)."""
        condition = self.headers.get("If-Range")  # type: ignore[attr-defined]
        if condition is None:
            return True
        sent = email.utils.parsedate_to_datetime(condition) if not condition.startswith(('"', "W/")) else None
        if sent is None:
            return False
        return int(sent.timestamp()) == int(os.path.getmtime(path))
