"""Idle and slowloris connections against the API's HTTP server: plain uvicorn beside the workbench's limits.

Opens 300 connections that send nothing and 200 that send a request head one byte a second
(the issue's figures), to plain uvicorn (the configuration before) and to the server
`workbench api` runs (a read deadline of REQUEST_READ_TIMEOUT_S, at most slots + queue + 32
connections), both in this process on 127.0.0.1, and prints how many are still open at once and
after the deadline, and whether a normal request is answered meanwhile.
"""

from __future__ import annotations

import resource
import socket
import threading
import time
import urllib.request

import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from workbench.core.serve.http_limits import (
    REQUEST_READ_TIMEOUT_S,
    max_connections,
    server_config,
)
from workbench.core.serve.listen import listen

IDLE, SLOW = 300, 200
HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Pad: " + b"a" * 200


def _app() -> Starlette:
    return Starlette(routes=[Route("/health", lambda _request: PlainTextResponse("ok"))])


def _open(sockets: list[socket.socket]) -> int:
    count = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            count += sock.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            count += 1
        except OSError:
            pass
    return count


def _attack(port: int, wait_s: float) -> tuple[int, int, str]:
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(IDLE)]
    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(SLOW)]
    time.sleep(0.5)
    at_once = _open(idle + slow)
    stop = time.monotonic() + wait_s
    sent = 0
    while time.monotonic() < stop:
        for sock in slow:
            try:
                sock.setblocking(True)
                sock.send(HEAD[sent : sent + 1])
            except OSError:
                pass
        sent += 1
        time.sleep(1.0)
    try:
        answered = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).read().decode()
    except OSError as error:
        answered = f"failed ({error})"
    after = _open(idle + slow)
    for sock in idle + slow:
        sock.close()
    return at_once, after, answered


def _run(config: uvicorn.Config, listener: socket.socket, wait_s: float) -> tuple[int, int, str]:
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        return _attack(listener.getsockname()[1], wait_s)
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


def main() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))
    wait_s = REQUEST_READ_TIMEOUT_S + 2
    limit = max_connections(4, 16)  # `workbench api`'s defaults: --parallel 4 --queue 16
    print(f"{IDLE} idle + {SLOW} slowloris connections; open at once and after {wait_s:.0f} s; a normal request meanwhile")
    plain = uvicorn.Config(_app(), log_level="critical", access_log=False)
    for name, config in (("plain uvicorn", plain), (f"workbench (limit {limit})", server_config(_app(), connection_limit=limit))):
        at_once, after, answered = _run(config, listen("127.0.0.1", 0), wait_s)
        print(f"{name:<24} open at once {at_once:>4}  after {after:>4}  /health: {answered}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
