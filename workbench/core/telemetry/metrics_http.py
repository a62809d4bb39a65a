"""The HTTP server of `monitor --prometheus`: prometheus_client's WSGI app behind the Host and Origin rule.

prometheus_client's own start_http_server answers any Host, so a page using DNS rebinding can
read the machine's sensors and processes; and it waits for a request head for ever.
"""

from __future__ import annotations

import socket
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from workbench.core.config.web_boundary import WebBoundary

READ_TIMEOUT_S = 10.0  # each read of a request: a scrape sends a few hundred bytes at once


class _QuietHandler(WSGIRequestHandler):
    """No access log (a scrape every few seconds), and a socket timeout so a silent client is dropped."""

    timeout = READ_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        return


def guarded_app(app: Any, boundary: WebBoundary, port: int) -> Any:
    """A WSGI app that answers 421 to a foreign Host and 403 to a foreign page Origin, else `app`."""

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        refusal = boundary.host_refusal(environ.get("HTTP_HOST"))
        status = "421 Misdirected Request"
        if refusal is None:
            refusal = boundary.origin_refusal(environ.get("HTTP_ORIGIN"), port)
            status = "403 Forbidden"
        if refusal is None:
            return app(environ, start_response)
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [(refusal + "\n").encode("utf-8")]

    return guarded


def start_metrics_server(registry: Any, host: str, port: int, boundary: WebBoundary) -> tuple[WSGIServer, threading.Thread]:
    """Serve `registry` on host:port (0 = any free port) on a daemon thread; OSError when it cannot listen."""

    class Server(ThreadingWSGIServer):
        address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

    server = make_server(host.strip("[]"), port, make_wsgi_app(registry), Server, handler_class=_QuietHandler)
    server.set_app(guarded_app(make_wsgi_app(registry), boundary, int(server.server_port)))
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return server, thread
