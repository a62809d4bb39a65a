"""A TCP relay on 127.0.0.1 that behaves like a slower link: bandwidth and one-way delay per direction.

Used by benchmarks/split_speed.py to put an RPC node "behind" a 1 Gb/s or 100 Mb/s link
without leaving the machine. Each direction is a queue: a chunk read from one side is
delivered to the other no earlier than when the link would have finished serialising it
(size / bandwidth after the previous chunk) plus the one-way delay, as a real link with
a deep buffer would.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from dataclasses import dataclass

_CHUNK = 64 * 1024


@dataclass(frozen=True)
class LinkSpec:
    name: str
    bytes_per_s: float  # 0 = unlimited
    one_way_delay_s: float = 0.0

    @property
    def round_trip_added_s(self) -> float:
        return 2 * self.one_way_delay_s


class _Direction:
    """One direction of one connection: read, schedule, deliver."""

    def __init__(self, source: socket.socket, target: socket.socket, link: LinkSpec) -> None:
        self.source, self.target, self.link = source, target, link
        self.queue: deque[tuple[float, bytes]] = deque()
        self.ready = threading.Condition()
        self.closed = False
        self.link_free_at = 0.0

    def read(self) -> None:
        try:
            while True:
                data = self.source.recv(_CHUNK)
                if not data:
                    break
                now = time.monotonic()
                start = max(now, self.link_free_at)
                serialise = len(data) / self.link.bytes_per_s if self.link.bytes_per_s else 0.0
                self.link_free_at = start + serialise
                with self.ready:
                    self.queue.append((self.link_free_at + self.link.one_way_delay_s, data))
                    self.ready.notify()
        except OSError:
            pass
        with self.ready:
            self.closed = True
            self.ready.notify()

    def deliver(self) -> None:
        try:
            while True:
                with self.ready:
                    while not self.queue and not self.closed:
                        self.ready.wait()
                    if not self.queue:
                        break
                    due, data = self.queue.popleft()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                self.target.sendall(data)
        except OSError:
            pass
        finally:
            try:
                self.target.shutdown(socket.SHUT_WR)
            except OSError:
                pass


class LinkShaper:
    """Listens on 127.0.0.1:<port>; every connection is relayed to `target` through `link`."""

    def __init__(self, target_host: str, target_port: int, link: LinkSpec) -> None:
        self.target = (target_host, target_port)
        self.link = link
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sockets.append(sock)
            for source, target in ((client, upstream), (upstream, client)):
                direction = _Direction(source, target, self.link)
                for job in (direction.read, direction.deliver):
                    thread = threading.Thread(target=job, daemon=True)
                    thread.start()
                    self._threads.append(thread)

    def close(self) -> None:
        self.server.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass
        self._accepting.join(timeout=5)
