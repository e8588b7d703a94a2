"""tools/serve.py answers single byte ranges (206/416) so model downloads can resume."""

from __future__ import annotations

import email.utils
import http.client
import http.server
import os
import threading

import pytest

from tools.http_range import parse_range
from tools.serve import make_handler

DATA = bytes(range(256)) * 40   # 10240 bytes, each offset's value known


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<p>hi</p>")
    models = tmp_path_factory.mktemp("models")
    (models / "w.data").write_bytes(DATA)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(root, [("/models/", models)], True))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], models / "w.data"
    httpd.shutdown()
    httpd.server_close()


def get(port: int, headers: dict[str, str], method: str = "GET", path: str = "/models/w.data"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response, body


def test_whole_file_says_it_accepts_ranges(server):
    response, body = get(server[0], {})
    assert response.status == 200
    assert response.getheader("Accept-Ranges") == "bytes"
    assert body == DATA
    assert response.getheader("Cross-Origin-Embedder-Policy") == "require-corp"


def test_open_ended_range_is_206_with_the_tail(server):
    response, body = get(server[0], {"Range": "bytes=5000-"})
    assert response.status == 206
    assert response.getheader("Content-Range") == f"bytes 5000-{len(DATA) - 1}/{len(DATA)}"
    assert int(response.getheader("Content-Length")) == len(DATA) - 5000
    assert body == DATA[5000:]


def test_closed_and_suffix_ranges(server):
    response, body = get(server[0], {"Range": "bytes=10-19"})
    assert (response.status, body) == (206, DATA[10:20])
    assert response.getheader("Content-Range") == f"bytes 10-19/{len(DATA)}"
    response, body = get(server[0], {"Range": "bytes=-100"})
    assert (response.status, body) == (206, DATA[-100:])
    response, body = get(server[0], {"Range": f"bytes=10000-999999"})   # end clamped to the file
    assert (response.status, body) == (206, DATA[10000:])


def test_start_past_the_end_is_416(server):
    response, body = get(server[0], {"Range": f"bytes={len(DATA)}-"})
    assert response.status == 416
    assert response.getheader("Content-Range") == f"bytes */{len(DATA)}"
    assert body == b""


def test_keep_alive_survives_a_range(server):
    conn = http.client.HTTPConnection("127.0.0.1", server[0], timeout=10)
    for first in (0, 4096, 8192):
        conn.request("GET", "/models/w.data", headers={"Range": f"bytes={first}-"})
        response = conn.getresponse()
        assert (response.status, response.read()) == (206, DATA[first:])
    conn.close()


def test_several_ranges_or_garbage_send_the_whole_file(server):
    for header in ("bytes=0-1,5-6", "items=0-5", "bytes=9-3", "bytes=-"):
        response, body = get(server[0], {"Range": header})
        assert (response.status, body) == (200, DATA), header


def test_if_range(server):
    port, path = server
    modified = email.utils.formatdate(os.path.getmtime(path), usegmt=True)
    response, body = get(port, {"Range": "bytes=100-", "If-Range": modified})
    assert (response.status, body) == (206, DATA[100:])
    response, body = get(port, {"Range": "bytes=100-", "If-Range": "Mon, 01 Jan 2001 00:00:00 GMT"})
    assert (response.status, body) == (200, DATA), "a changed file is sent whole, never spliced"
    response, body = get(port, {"Range": "bytes=100-", "If-Range": '"some-etag"'})
    assert (response.status, body) == (200, DATA)


def test_head_with_range(server):
    response, body = get(server[0], {"Range": "bytes=100-"}, method="HEAD")
    assert response.status == 206 and body == b""
    assert int(response.getheader("Content-Length")) == len(DATA) - 100


def test_parse_range_edges():
    assert parse_range(None, 10) is None
    assert parse_range("bytes=0-", 10) == (0, 9)
    assert parse_range("bytes=0-", 0) == "unsatisfiable"
    assert parse_range("bytes=-0", 10) == "unsatisfiable"
    assert parse_range("bytes=-20", 10) == (0, 9)
    assert parse_range(" bytes=3-4 ", 10) == (3, 4)
