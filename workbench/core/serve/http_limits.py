"""uvicorn for the API with what it lacks: a deadline to read each request, and a cap on open connections.

uvicorn closes an idle keep-alive connection only after it has answered a request on it; a
connection that never sends a whole request head (idle, or a slowloris sending a byte at a
time) stays open for ever, and nothing bounds how many there are.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_READ_TIMEOUT_S = 10.0  # a request head and body on a board's Wi-Fi take well under this
SPARE_CONNECTIONS = 32  # beyond the slots and the queue: /health, /metrics, keep-alive clients
KEEP_ALIVE_S = 5  # uvicorn's default, named here
GRACEFUL_SHUTDOWN_S = 5  # uvicorn waits this long for open requests, then cancels them (tracebacks)
STOP_GRACE_S = 2.0  # at a stop, an engine silent this long is killed: well inside GRACEFUL_SHUTDOWN_S


def max_connections(n_slots: int, queue_limit: int) -> int:
    """Connections open at once: one per slot and queue place, and some to spare."""
    return n_slots + queue_limit + SPARE_CONNECTIONS


def limited_protocol(read_timeout_s: float, connection_limit: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol that closes a connection whose request is not read whole within
    `read_timeout_s` (from the connection or the previous answer) and refuses connections past
    `connection_limit` by closing them at once."""

    class LimitedH11Protocol(H11Protocol):
        _read_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > connection_limit:
                transport.close()  # connection_lost follows and forgets it
                return
            self._arm_read_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_read_deadline()  # the next request on this connection gets the same time

        def connection_lost(self, exc: Exception | None) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
            super().connection_lost(exc)

        def _arm_read_deadline(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
            self._read_deadline = self.loop.call_later(read_timeout_s, self._read_deadline_passed)

        def _read_deadline_passed(self) -> None:
            self._read_deadline = None
            # IDLE: no whole request head yet; SEND_BODY: the body is still coming. DONE means the
            # request is read and the answer (maybe a long stream) is the server's to finish.
            if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                self.transport.close()

    return LimitedH11Protocol


def server_config(app: Any, *, connection_limit: int, read_timeout_s: float = REQUEST_READ_TIMEOUT_S) -> uvicorn.Config:
    """The uvicorn config every API server uses (the CLI's and the app's Serve switch)."""
    return uvicorn.Config(app, http=limited_protocol(read_timeout_s, connection_limit), log_level="warning",
                          access_log=False, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                          timeout_keep_alive=KEEP_ALIVE_S)


class StoppingServer(uvicorn.Server):
    """uvicorn that, asked to stop, ends the engine's open requests first: they answer 503 at once
    instead of waiting on the engine (a stuck one is killed within STOP_GRACE_S, in one line), so
    uvicorn never has to cancel them with a CancelledError traceback each."""

    report_to_stderr = True  # the CLI's line; the app's Serve switch reads `killed` instead

    def __init__(self, config: uvicorn.Config, host: Any) -> None:
        super().__init__(config)
        self._host = host
        self.stopper: threading.Thread | None = None
        self.killed = ""  # why the engine had to be killed at the stop ("" when it stopped when asked)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.should_exit
        super().handle_exit(sig, frame)
        if first:
            self.stopper = threading.Thread(target=self._stop_engine, name="engine-stop", daemon=True)
            self.stopper.start()

    def _stop_engine(self) -> None:
        killed = self.killed = self._host.close(grace_s=STOP_GRACE_S)
        if killed and self.report_to_stderr:
            print(f"stopping: {killed}", file=sys.stderr, flush=True)
