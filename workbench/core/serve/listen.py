"""The server's listening socket, bound before anything is loaded: a taken port is one line, at once."""

from __future__ import annotations

import socket

from workbench.core.errors import WorkbenchError


def listen(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket on host:port (0 = any free port); WorkbenchError when it cannot be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise WorkbenchError(f"--host {host} is not an address this machine can listen on: {error.strerror}") from None
    family, kind, proto, _name, address = infos[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
        listener.listen(128)
    except OSError as error:
        listener.close()
        raise WorkbenchError(f"cannot listen on {host}:{port}: {error.strerror}",
                             fix="Choose another port (or stop what holds this one)") from None
    return listener
