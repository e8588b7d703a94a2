"""The Content-Security-Policy header onnxpipe's servers send (docs/security.md).

The policy itself is data, tools/csp.json, read by tools/serve.py and vite.config.ts alike so
the two servers cannot drift apart; ``policy(frame_ancestors)`` adds the one directive that
differs per response: ``'self'`` for the site, the ``--frame-ancestors`` allow-list for the
widget's frame (embed.html).
"""
from __future__ import annotations

import json
from pathlib import Path

POLICY_FILE = Path(__file__).resolve().parent / "csp.json"


def _directives() -> dict[str, list[str]]:
    doc = json.loads(POLICY_FILE.read_text())
    directives = doc.get("policy")
    if not isinstance(directives, dict) or not all(isinstance(v, list) and v for v in directives.values()):
        raise ValueError(f'{POLICY_FILE}: expected "policy": {{directive: [source, ...]}}, found {directives!r}')
    return directives


DIRECTIVES = _directives()


def policy(frame_ancestors: str = "'self'") -> str:
    """The header value: csp.json's directives, then ``frame-ancestors``."""
    parts = [" ".join([name, *sources]) for name, sources in DIRECTIVES.items()]
    return "; ".join([*parts, f"frame-ancestors {frame_ancestors}"])
