"""The API server on a thread of its own (for the app's Serve switch): start, address, stop."""

from __future__ import annotations

import signal
import socket
import threading
from typing import Any

DEFAULT_CONNECTION_LIMIT = 64  # an app that is not the API (tests' stand-in servers)


class ApiServerThread:
    """uvicorn serving `app` on an already bound `listener`, on a daemon thread; `stop()` ends it.

    With the engine `host` given, the server is the CLI's StoppingServer: a stop ends the
    engine's open requests first (503, a stuck engine killed within STOP_GRACE_S), so uvicorn
    never cancels them with a CancelledError traceback; `killed` then says why the engine died.
    """

    def __init__(self, app: Any, listener: socket.socket, *, connection_limit: int | None = None,
                 read_timeout_s: float | None = None, host: Any = None) -> None:
        import uvicorn  # deferred: importing the ASGI stack costs start-up time

        from workbench.core.serve import http_limits  # deferred: it imports uvicorn

        self._listener = listener
        timeout = http_limits.REQUEST_READ_TIMEOUT_S if read_timeout_s is None else read_timeout_s
        if connection_limit is None:  # the API app knows its slots and queue; another app gets the default
            admission = getattr(getattr(app, "state", None), "admission", None)
            connection_limit = (http_limits.max_connections(admission.n_slots, admission.queue_limit)
                                if admission is not None else DEFAULT_CONNECTION_LIMIT)
        config = http_limits.server_config(app, connection_limit=connection_limit, read_timeout_s=timeout)
        if host is None:
            self._server = uvicorn.Server(config)
        else:
            self._server = http_limits.StoppingServer(config, host)
            self._server.report_to_stderr = False
        self._thread = threading.Thread(target=self._run, name="api-server", daemon=True)
        self.failure = ""  # why the server stopped on its own, one line

    @property
    def address(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            # Signal handlers are the main thread's: uvicorn only installs them there.
            self._server.run(sockets=[self._listener])
        except Exception as error:  # noqa: BLE001 - reported by the owner
            self.failure = f"the API server stopped: {error}"

    @property
    def killed(self) -> str:
        """Why the engine had to be killed at the stop; "" when it stopped when asked (or no host)."""
        return getattr(self._server, "killed", "")

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._server.handle_exit(signal.SIGINT, None)  # as Ctrl-C does to `workbench api`
        else:
            self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        stopper = getattr(self._server, "stopper", None)
        if stopper is not None:
            stopper.join(timeout)
        self._listener.close()
