"""After the engine died with RPC nodes: which node stopped answering, in words for the error line."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.core.config.rpc_endpoints import parse_endpoint
from workbench.core.rpc.nodes import probe_nodes


def unreachable_nodes(addresses: Sequence[str], timeout_s: float = 3.0) -> str:
    """"RPC node H:P is unreachable (connection refused); " for each dead node, "" when all answer.

    llama.cpp aborts the engine process when a node's connection breaks ("Remote RPC server
    crashed or returned malformed response"); this names the node from outside.
    """
    reports = probe_nodes([parse_endpoint(address) for address in addresses], measure_link=False, timeout_s=timeout_s)
    dead = [report for report in reports if not report.reachable]
    # "stopped answering": it answered when the load began; a silent one is found by keepalive (rpc.keepalive).
    return "".join(f"RPC node {report.address} is unreachable ({report.reason}): it stopped answering; " for report in dead)
