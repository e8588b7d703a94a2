"""The one HTTP server class of tools/serve.py and its host page (tools/embed_server.py).

A browser drops connections mid-response all the time (a cancelled fetch, a closed page, a
worker replaced): http.server prints a traceback for each, which buries real errors in the log.
"""

from __future__ import annotations

import http.server
import sys

DROPPED = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], DROPPED):   # the client went away: nothing to report
            return
        super().handle_error(request, client_address)
