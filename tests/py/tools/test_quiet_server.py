"""tools/quiet_server.py: a client that goes away is not logged; any other handler error is."""

import http.server
import socket
import threading

from tools.quiet_server import QuietServer


class Failing(http.server.BaseHTTPRequestHandler):
    error: BaseException = ConnectionResetError(104, "Connection reset by peer")

    def do_GET(self):
        raise Failing.error

    def log_message(self, *args):
        pass


class Joined(QuietServer):
    daemon_threads = False   # server_close() then waits for the request's thread (and its log)


def serve_once(error: BaseException, capsys) -> str:
    Failing.error = error
    server = Joined(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.handle_request)
    thread.start()
    with socket.create_connection(server.server_address) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(1)
    thread.join(10)
    server.server_close()
    return capsys.readouterr().err


def test_a_dropped_connection_is_not_logged(capsys):
    assert serve_once(ConnectionResetError(104, "Connection reset by peer"), capsys) == ""
    assert serve_once(BrokenPipeError(32, "Broken pipe"), capsys) == ""


def test_other_errors_are_logged(capsys):
    err = serve_once(ValueError("a real bug"), capsys)
    assert "ValueError: a real bug" in err
