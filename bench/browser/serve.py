"""Tiny static server for the browser benchmarks: 127.0.0.1 only, COOP/COEP headers.

    python bench/browser/serve.py --port 0 --mount /ort=node_modules/onnxruntime-web/dist --mount /model=DIR

Prints "PORT <n>" on stdout once listening. Paths are served only from the mounted folders.
"""

from __future__ import annotations

import argparse
import http.server
import os
import posixpath
import sys
import urllib.parse

TYPES = {".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript",
         ".html": "text/html", ".json": "application/json", ".onnx": "application/octet-stream",
         ".data": "application/octet-stream"}


def make_handler(mounts: dict[str, str]):
    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **TYPES}

        def translate_path(self, path: str) -> str:
            path = posixpath.normpath(urllib.parse.unquote(urllib.parse.urlsplit(path).path))
            for prefix in sorted(mounts, key=len, reverse=True):
                if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                    rest = path[len(prefix):].lstrip("/")
                    if ".." in rest.split("/"):
                        break
                    return os.path.join(mounts[prefix], *rest.split("/")) if rest else mounts[prefix]
            return "/nonexistent/"

        def end_headers(self) -> None:
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, *args) -> None:  # quiet
            pass

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--mount", action="append", default=[], help="/prefix=folder")
    args = parser.parse_args()
    mounts = {}
    for spec in args.mount:
        prefix, folder = spec.split("=", 1)
        mounts["/" + prefix.strip("/")] = os.path.abspath(folder)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(mounts))
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
