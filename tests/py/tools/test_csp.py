"""The site's Content-Security-Policy (tools/csp.json, tools/csp.py; docs/security.md): what it
allows, and that tools/serve.py sends it on every response. The browser side (inline script
refused, the site still working under it): tests/e2e/security.test.mjs."""

from __future__ import annotations

import http.server
import threading

import pytest

from tools.csp import DIRECTIVES, policy
from tools.serve import make_handler
from tests.py.tools.test_embed_server import get


def parsed(header: str) -> dict[str, list[str]]:
    return {name: sources for name, *sources in (part.split() for part in header.split(";"))}


def test_the_policy_allows_no_inline_script_no_eval_and_only_this_origin():
    csp = parsed(policy())
    assert csp["script-src"] == ["'self'", "'wasm-unsafe-eval'"]     # WebAssembly, never JS eval
    assert not any("unsafe-inline" in s or s == "'unsafe-eval'" for sources in csp.values() for s in sources)
    assert csp["connect-src"] == ["'self'"] and csp["default-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'none'"]
    assert csp["frame-ancestors"] == ["'self'"]
    assert parsed(policy("https://a.example"))["frame-ancestors"] == ["https://a.example"]
    assert list(csp)[:-1] == list(DIRECTIVES)


def test_vite_reads_the_same_policy_file():
    source = open("vite.config.ts").read()
    assert "'tools', 'csp.json'" in source and "'Content-Security-Policy': contentSecurityPolicy()" in source


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<p>app</p>")
    (root / "sw.js").write_text("")
    (root / "assets").mkdir()
    (root / "assets" / "runtime.worker-x.js").write_text("")
    models = tmp_path_factory.mktemp("models")
    (models / "b").mkdir()
    (models / "b" / "model.onnx").write_bytes(b"\0" * 10)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(root, [("/models/", models)], True))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("path", ["/", "/index.html", "/sw.js", "/assets/runtime.worker-x.js",
                                  "/models/b/model.onnx", "/missing.html"])
def test_serve_py_sends_it_on_every_response(site, path):
    response, _ = get(site, path)
    assert response.status in (200, 404)
    assert response.getheader("Content-Security-Policy") == policy(), path


def test_no_csp_leaves_it_out_and_keeps_the_rest(tmp_path):
    (tmp_path / "index.html").write_text("<script>inline()</script>")   # a benchmark peer's page
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(tmp_path, [], True, "*", False))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        response, _ = get(httpd.server_address[1], "/index.html")
        assert response.getheader("Content-Security-Policy") is None
        assert response.getheader("Cross-Origin-Embedder-Policy") == "require-corp"
    finally:
        httpd.shutdown()
        httpd.server_close()
