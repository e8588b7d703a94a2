"""The widget's part of tools/serve.py (docs/widget.md).

- ``widget_headers``: headers that replace the defaults for the two files other sites use:
  widget.js (a cross-origin module script: CORS + CORP cross-origin) and embed.html (a frame
  other sites show: CORP cross-origin, so a cross-origin isolated host can frame it, and the
  site's Content-Security-Policy with ``frame-ancestors <allow-list>``, so only listed sites can);
- ``serve_host_page``: the example host page on a second origin (another port), with
  ``%ONNXPIPE_ORIGIN%`` in its .html files replaced by onnxpipe's origin.
"""
from __future__ import annotations

import http.server
import re
import threading
import urllib.parse
from pathlib import Path

try:
    from tools import csp
    from tools.quiet_server import QuietServer
except ImportError:   # run as a script: tools/ is on sys.path
    import csp  # type: ignore[no-redef]
    from quiet_server import QuietServer  # type: ignore[no-redef]

WIDGET_SCRIPT = "/widget.js"
EMBED_PAGE = "/embed.html"
PLACEHOLDER = b"%ONNXPIPE_ORIGIN%"

# one frame-ancestors source: *, 'self', 'none', a scheme ("https:") or scheme://host[:port]
_SOURCE = re.compile(r"^(\*|'self'|'none'|[a-z][a-z0-9+.-]*:|[a-z][a-z0-9+.-]*://(\*\.)?[a-z0-9.-]+(:(\d+|\*))?)$",
                     re.IGNORECASE)


def parse_frame_ancestors(text: str) -> str:
    """Validate a space-separated frame-ancestors allow-list; returns it normalised."""
    sources = text.split()
    if not sources:
        raise ValueError("--frame-ancestors: expected at least one source (e.g. '*' or 'https://example.com')")
    for source in sources:
        if not _SOURCE.match(source):
            raise ValueError(f"--frame-ancestors: {source!r} is not a CSP source "
                             "(expected *, 'self', 'none', https: or scheme://host[:port])")
    return " ".join(sources)


def widget_headers(url_path: str, frame_ancestors: str) -> dict[str, str]:
    """Headers for ``url_path`` that replace serve.py's defaults (empty for every other file)."""
    if url_path == WIDGET_SCRIPT:
        return {"Access-Control-Allow-Origin": "*", "Cross-Origin-Resource-Policy": "cross-origin"}
    if url_path == EMBED_PAGE:
        return {"Content-Security-Policy": csp.policy(frame_ancestors),
                "Cross-Origin-Resource-Policy": "cross-origin"}
    return {}


def make_host_handler(directory: Path, onnxpipe_origin: str, isolated: bool, quiet: bool):
    origin = onnxpipe_origin.encode()

    class HostPageHandler(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(directory), **kwargs)

        def do_GET(self) -> None:
            path = Path(self.translate_path(self.path))
            if path.is_dir():
                path = path / "index.html"
            if path.suffix != ".html" or not path.is_file():
                return super().do_GET()
            body = path.read_bytes().replace(PLACEHOLDER, origin)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def end_headers(self) -> None:
            self.send_header("Cache-Control", "no-cache")
            if isolated:   # lets the widget's frame use threads (docs/widget.md, "Threads")
                self.send_header("Cross-Origin-Opener-Policy", "same-origin")
                self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            super().end_headers()

        def list_directory(self, path):
            self.send_error(404, "not found")
            return None

        def log_message(self, fmt: str, *args) -> None:
            if not quiet:
                super().log_message(fmt, *args)

    return HostPageHandler


def serve_host_page(host: str, port: int, directory: Path, onnxpipe_origin: str, *, isolated: bool = False,
                    quiet: bool = False) -> QuietServer:
    """Start the example host page server in a daemon thread; returns it (server_address has the port)."""
    if not (directory / "index.html").is_file():
        raise FileNotFoundError(f"--host-page-dir {directory}: no index.html")
    server = QuietServer((host, port), make_host_handler(directory, onnxpipe_origin, isolated, quiet))
    threading.Thread(target=server.serve_forever, name="host-page", daemon=True).start()
    return server


def origin_of(host: str, port: int) -> str:
    return urllib.parse.urlunsplit(("http", f"{host}:{port}", "", "", ""))
