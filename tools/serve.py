"""Serve the built site (dist/) the way the Vite dev server does (docs/browser-runtime.md).

    python tools/serve.py [--port 8080] [--host 127.0.0.1] [--root dist]
                          [--mount /models/=public/models] [--mount /e2e/=tests/e2e/fixtures]
                          [--frame-ancestors "*"] [--host-page-port 8081] [--no-csp]

- every response carries COOP: same-origin, COEP: require-corp, CORP: same-origin
  (cross-origin isolation, so onnxruntime-web can use threads) and the site's
  Content-Security-Policy (tools/csp.json; docs/security.md), unless `--no-csp` (benchmarks
  that put other runtimes' pages, with inline scripts and their own hosts, beside the site);
- .wasm is application/wasm (Pyodide hangs otherwise), .mjs text/javascript,
  .onnx/.data application/octet-stream;
- /models/ is served in place from public/models (hundreds of MB are never copied into dist/);
  more prefixes can be mounted with --mount PREFIX=DIR;
- widget.js and embed.html carry the widget's cross-origin headers, embed.html a
  `frame-ancestors` allow-list (`--frame-ancestors`); `--host-page-port` also serves the example
  host page on a second origin (tools/embed_server.py, docs/widget.md);
- `--port 0` picks a free port; the first line printed is always `serving http://HOST:PORT/`.
"""
from __future__ import annotations

import argparse
import http.server
import os
import posixpath
import sys
import urllib.parse
from pathlib import Path

try:
    from tools.http_range import RangeMixin
except ImportError:   # run as a script: tools/ is on sys.path, not the repo root
    from http_range import RangeMixin  # type: ignore[no-redef]
try:
    from tools import csp, embed_server
    from tools.quiet_server import QuietServer
except ImportError:
    import csp  # type: ignore[no-redef]
    import embed_server  # type: ignore[no-redef]
    from quiet_server import QuietServer  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent

HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
}
ISOLATION_HEADERS = frozenset(HEADERS)  # cross-origin isolation: what threads (SharedArrayBuffer) need

MIME = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".zip": "application/zip",
    ".whl": "application/zip",
    ".onnx": "application/octet-stream",
    ".data": "application/octet-stream",
    ".bin": "application/octet-stream",
    ".jinja": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".wav": "audio/wav",
}


def make_handler(root: Path, mounts: list[tuple[str, Path]], quiet: bool, frame_ancestors: str = "*",
                 content_security_policy: bool = True, isolated: bool = True, cors: bool = False):
    class Handler(RangeMixin, http.server.SimpleHTTPRequestHandler):  # Range: tools/http_range.py
        protocol_version = "HTTP/1.1"  # keep-alive: the page fetches dozens of files
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME}

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def translate_path(self, path: str) -> str:
            url_path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
            for prefix, base in mounts:
                if url_path.startswith(prefix):
                    rel = url_path[len(prefix):]
                    break
            else:
                base, rel = root, url_path
            parts = [p for p in posixpath.normpath("/" + rel).split("/") if p and p not in (".", "..")]
            return str(base.joinpath(*parts)) if parts else str(base) + os.sep

        def list_directory(self, path):  # no directory listings
            self.send_error(404, "not found")
            return None

        def end_headers(self) -> None:
            # widget.js and embed.html are used by other sites: tools/embed_server.py
            url_path = urllib.parse.urlsplit(self.path).path
            own = {**HEADERS, "Content-Security-Policy": csp.policy()}
            for k, v in {**own, **embed_server.widget_headers(url_path, frame_ancestors)}.items():
                if k == "Content-Security-Policy" and not content_security_policy:
                    continue
                if k in ISOLATION_HEADERS and not isolated:
                    continue
                if k == "Cross-Origin-Resource-Policy" and cors:
                    v = "cross-origin"
                self.send_header(k, v)
            if cors:
                self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Cache-Control", "no-cache")
            super().end_headers()

        def log_message(self, fmt: str, *args) -> None:
            if not quiet:
                super().log_message(fmt, *args)

    return Handler


def parse_mount(text: str) -> tuple[str, Path]:
    prefix, sep, directory = text.partition("=")
    if not sep or not prefix.startswith("/"):
        raise argparse.ArgumentTypeError(f"--mount wants /PREFIX/=DIR, got {text!r}")
    if not prefix.endswith("/"):
        prefix += "/"
    return prefix, (ROOT / directory).resolve()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve dist/ with COOP/COEP and /models/ from public/models.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8080)))
    ap.add_argument("--root", type=Path, default=ROOT / "dist", help="built site (default dist/)")
    ap.add_argument("--models", type=Path, default=ROOT / "public" / "models",
                    help="served at /models/ (default public/models)")
    ap.add_argument("--mount", type=parse_mount, action="append", default=[],
                    help="extra PREFIX=DIR to serve, e.g. /e2e/=tests/e2e/fixtures")
    ap.add_argument("--quiet", action="store_true", help="no request log")
    ap.add_argument("--frame-ancestors", default="*",
                    help="sites allowed to embed the widget (embed.html's CSP frame-ancestors), "
                         "space-separated, e.g. \"https://a.example https://b.example\" (default *: any)")
    ap.add_argument("--no-csp", action="store_true",
                    help="send no Content-Security-Policy (for benchmark pages of other runtimes only; "
                         "docs/security.md)")
    ap.add_argument("--no-isolation", action="store_true",
                    help="send no COOP/COEP/CORP (a page that is not cross-origin isolated: one WASM thread)")
    ap.add_argument("--cors", action="store_true",
                    help="let any origin read these files (Access-Control-Allow-Origin: *, "
                         "Cross-Origin-Resource-Policy: cross-origin), as a CDN would")
    ap.add_argument("--host-page-port", type=int, default=None,
                    help="also serve the example host page (--host-page-dir) on this port: a second "
                         "origin that embeds the widget from this one (0: a free port)")
    ap.add_argument("--host-page-dir", type=Path, default=ROOT / "examples" / "embed",
                    help="the host page's files (default examples/embed)")
    ap.add_argument("--host-page-isolated", action="store_true",
                    help="serve the host page with COOP/COEP, so the widget's frame can use threads")
    args = ap.parse_args(argv)
    try:
        frame_ancestors = embed_server.parse_frame_ancestors(args.frame_ancestors)
    except ValueError as e:
        ap.error(str(e))

    root = args.root.resolve()
    if not (root / "index.html").is_file():
        sys.exit(f"{root}/index.html not found: build the site first (make web)")
    mounts = sorted([("/models/", args.models.resolve()), *args.mount], key=lambda m: -len(m[0]))
    server = QuietServer((args.host, args.port), make_handler(root, mounts, args.quiet, frame_ancestors, not args.no_csp,
                                                                  not args.no_isolation, args.cors))
    host, port = server.server_address[:2]
    print(f"serving http://{host}:{port}/", flush=True)
    print(f"  / from {root}; " + "; ".join(f"{p} from {d}" for p, d in mounts), flush=True)
    if args.host_page_port is not None:
        host_page = embed_server.serve_host_page(
            args.host, args.host_page_port, args.host_page_dir.resolve(), embed_server.origin_of(host, port),
            isolated=args.host_page_isolated, quiet=args.quiet)
        print(f"host page http://{host}:{host_page.server_address[1]}/ "
              f"(embeds the widget from http://{host}:{port}/widget.js)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
