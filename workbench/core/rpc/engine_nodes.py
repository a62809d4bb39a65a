"""Inside the engine process only: register RPC nodes with llama.cpp, each probed first.

`ggml_backend_rpc_add_server` aborts the whole process when it cannot reach a node, so
every node is first checked over a plain Python socket (rpc.wire), and a node that does
not answer refuses the load with its name instead. Registered devices stay in llama.cpp's
registry for the life of the process: the client starts a fresh engine when the set of
nodes changes (EngineClient.load).
"""

from __future__ import annotations

from workbench.core.config.rpc_endpoints import parse_endpoint
from workbench.core.errors import WorkbenchError
from workbench.core.rpc.library import ggml_rpc
from workbench.core.rpc.wire import check_reachable

_registered: list[str] = []  # endpoints registered in this process, in device order


class NodesRefused(Exception):
    """A node cannot take part in the load; `message` is one line naming it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def registered_nodes() -> tuple[str, ...]:
    return tuple(_registered)


def attach_nodes(addresses: tuple[str, ...], *, timeout_s: float = 10.0) -> None:
    """Make llama.cpp's device list hold exactly these nodes, in this order, or raise NodesRefused."""
    if tuple(_registered) == addresses:
        reports = [check_reachable(parse_endpoint(address), timeout_s) for address in addresses]
        _refuse_unreachable(reports)
        return
    if _registered:
        raise NodesRefused(f"this engine process already holds RPC nodes {', '.join(_registered)}; "
                           "a different set needs a fresh engine (the client restarts it)")
    try:
        lib = ggml_rpc()
    except WorkbenchError as error:
        raise NodesRefused(str(error)) from None
    reports = [check_reachable(parse_endpoint(address), timeout_s) for address in addresses]
    _refuse_unreachable(reports)
    for address in addresses:
        reg = lib.add_server(address.encode())
        if not reg:
            raise NodesRefused(f"RPC node {address} reports no devices")
        lib.register(reg)
        _registered.append(address)


def _refuse_unreachable(reports: list) -> None:
    for report in reports:
        if not report.reachable:
            raise NodesRefused(f"RPC node {report.address} is unreachable: {report.reason}. "
                               "Nothing was loaded; start the node (`workbench node serve`) or drop it from --rpc")
