"""The pure-Python part of what the runtime worker imports, imported before it snapshots
Pyodide's memory (workers/python-boot.ts): a later visit restores these modules instead of
importing them again (docs/quick-start.md).

Only modules that touch no JavaScript object belong here (a heap snapshot cannot hold a
reference to one): not ``js``, ``ort``, ``onnxpipe_js``, nor anything importing them
(``backends.web``, ``text.web``, ``phonemes.web``, ``web_entry``).
"""

from __future__ import annotations

import hashlib  # noqa: F401  (backends.web)
import posixpath  # noqa: F401

from . import api, errors, web_protocol  # noqa: F401
from .backends import base, half  # noqa: F401
from .config import load, transformers_js  # noqa: F401
from .engine import build, controls  # noqa: F401
from .heap import bundle_fit, fit, plan  # noqa: F401  (web_entry: what fits the heap, load-time rewrites)
from .text import base as text_base, chat_template  # noqa: F401
