"""tools/serve.py's widget part (tools/embed_server.py): the headers of widget.js and embed.html,
the frame-ancestors allow-list, and the example host page on a second origin."""

from __future__ import annotations

import http.client
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tools.csp import policy
from tools.embed_server import parse_frame_ancestors, serve_host_page, widget_headers
from tools.serve import make_handler

ROOT = Path(__file__).resolve().parents[3]


def get(port: int, path: str):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response, body


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<p>app</p>")
    (root / "embed.html").write_text("<p>frame</p>")
    (root / "widget.js").write_text("export {};")
    handler = make_handler(root, [], True, "http://127.0.0.1:8081 https://a.example")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_widget_js_is_a_cross_origin_module_script(site):
    response, _ = get(site, "/widget.js")
    assert response.status == 200
    assert response.getheader("Access-Control-Allow-Origin") == "*"
    assert response.getheader("Cross-Origin-Resource-Policy") == "cross-origin"
    assert response.getheader("Content-Type").startswith("text/javascript")
    assert response.getheader("Content-Security-Policy") == policy("'self'")


def test_embed_html_names_its_allowed_ancestors(site):
    response, _ = get(site, "/embed.html?kind=chat")
    csp = response.getheader("Content-Security-Policy")
    assert csp == policy("http://127.0.0.1:8081 https://a.example")
    assert csp.endswith("; frame-ancestors http://127.0.0.1:8081 https://a.example")
    assert response.getheader("Cross-Origin-Resource-Policy") == "cross-origin"
    # it still is cross-origin isolated itself (COEP), so an isolated host may frame it
    assert response.getheader("Cross-Origin-Embedder-Policy") == "require-corp"
    assert response.getheader("Access-Control-Allow-Origin") is None


def test_other_files_keep_same_origin_headers(site):
    response, _ = get(site, "/index.html")
    assert response.getheader("Cross-Origin-Resource-Policy") == "same-origin"
    assert response.getheader("Content-Security-Policy") == policy("'self'")
    assert widget_headers("/assets/widget.js", "*") == {}


@pytest.mark.parametrize("text, expected", [
    ("*", "*"),
    ("  http://127.0.0.1:8081   https://*.example.com ", "http://127.0.0.1:8081 https://*.example.com"),
    ("'self' https:", "'self' https:"),
])
def test_frame_ancestors_accepts_csp_sources(text, expected):
    assert parse_frame_ancestors(text) == expected


@pytest.mark.parametrize("text", ["", "http://a.example; script-src *", "http://a.example,http://b.example", "self"])
def test_frame_ancestors_rejects_what_is_not_a_source(text):
    with pytest.raises(ValueError, match="--frame-ancestors"):
        parse_frame_ancestors(text)


def test_host_page_gets_onnxpipe_origin_filled_in(tmp_path):
    (tmp_path / "index.html").write_text('<script type="module" src="%ONNXPIPE_ORIGIN%/widget.js"></script>')
    (tmp_path / "style.css").write_text("/* %ONNXPIPE_ORIGIN% stays in non-HTML files */")
    plain = serve_host_page("127.0.0.1", 0, tmp_path, "http://127.0.0.1:8080", quiet=True)
    isolated = serve_host_page("127.0.0.1", 0, tmp_path, "http://127.0.0.1:8080", isolated=True, quiet=True)
    try:
        response, body = get(plain.server_address[1], "/")
        assert body == b'<script type="module" src="http://127.0.0.1:8080/widget.js"></script>'
        assert response.getheader("Cross-Origin-Embedder-Policy") is None
        _, css = get(plain.server_address[1], "/style.css")
        assert b"%ONNXPIPE_ORIGIN%" in css
        response, _ = get(isolated.server_address[1], "/index.html")
        assert response.getheader("Cross-Origin-Opener-Policy") == "same-origin"
        assert response.getheader("Cross-Origin-Embedder-Policy") == "require-corp"
    finally:
        for server in (plain, isolated):
            server.shutdown()
            server.server_close()


def test_serve_prints_the_host_page_url(tmp_path):
    (tmp_path / "index.html").write_text("<p>app</p>")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "serve.py"), "--root", str(tmp_path), "--port", "0",
         "--host-page-port", "0", "--quiet"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        serving = proc.stdout.readline()
        proc.stdout.readline()   # what is served from where
        host_line = proc.stdout.readline()
        assert serving.startswith("serving http://127.0.0.1:")
        port = serving.split(":")[2].rstrip("/\n")
        assert host_line.startswith("host page http://127.0.0.1:")
        assert f"(embeds the widget from http://127.0.0.1:{port}/widget.js)" in host_line
        host_port = int(host_line.split(":")[2].split("/")[0])
        _, body = get(host_port, "/")
        assert f"http://127.0.0.1:{port}/widget.js".encode() in body   # examples/embed/index.html
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_serve_refuses_a_bad_allow_list(tmp_path):
    (tmp_path / "index.html").write_text("<p>app</p>")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "serve.py"), "--root", str(tmp_path), "--port", "0",
         "--frame-ancestors", "http://a.example; default-src *"],
        capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert result.returncode == 2
    assert "is not a CSP source" in result.stderr
