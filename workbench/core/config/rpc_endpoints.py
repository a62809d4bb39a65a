"""RPC node addresses: `host:port` with an optional `@profile`, checked before anything connects."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from workbench.core.config.loopback import is_loopback_host
from workbench.core.errors import WorkbenchError

DEFAULT_PORT = 50052  # llama.cpp's rpc-server default
MAX_NODES = 16  # GGML_RPC_MAX_SERVERS in ggml-rpc.h
# A DNS name as RFC 1123 allows it (labels of letters, digits and '-', dots between); IPv6 is
# left out on purpose: ggml-rpc splits the endpoint at the first ':' and would misread it.
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_PROFILE = re.compile(r"^[A-Za-z0-9/~.][A-Za-z0-9._/~-]{0,1023}$")  # a profile name or a .toml path
_EXAMPLE = "e.g. 192.168.1.20:50052 or board2.local:50052@rk3588-8gb"


@dataclass(frozen=True)
class RpcEndpoint:
    """One RPC node: where it listens and, optionally, the device profile that gives its budget."""

    host: str
    port: int
    profile: str = ""  # device profile name or TOML path; "" = use what the node reports

    @property
    def address(self) -> str:
        """`host:port`, as llama.cpp's ggml_backend_rpc_add_server takes it."""
        return f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        return is_loopback_host(self.host)


def check_host(host: str, where: str = "") -> str:
    """`host` if it is an IPv4 address or a DNS name; WorkbenchError otherwise."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if _HOSTNAME.match(host) and not host.replace(".", "").isdigit():
            return host
        raise WorkbenchError(f'"{host}" is not a host name or IPv4 address', where=where,
                             fix=f"Write a node as host:port, {_EXAMPLE}") from None
    if address.version != 4:
        raise WorkbenchError(f'"{host}" is an IPv6 address; llama.cpp\'s RPC endpoints are host:port with one colon',
                             where=where, fix="Use the node's IPv4 address or a host name that resolves to it")
    return host


def check_port(text: str, where: str = "") -> int:
    if not text.isdigit() or len(text) > 5 or not 1 <= int(text) <= 65535:
        raise WorkbenchError(f'port "{text}" is not a number from 1 to 65535', where=where,
                             fix=f"Write a node as host:port, {_EXAMPLE}")
    return int(text)


def parse_endpoint(text: str, where: str = "", *, allow_profile: bool = True) -> RpcEndpoint:
    """One `host:port[@profile]`; every part is checked (it becomes a socket address and a file name)."""
    spec = text.strip()
    profile = ""
    if "@" in spec:
        if not allow_profile:
            raise WorkbenchError(f'"{text}" names a device profile, which only --rpc takes', where=where,
                                 fix='Write the node as "host:port"; give its profile with --rpc host:port@profile')
        spec, profile = spec.split("@", 1)
        if not _PROFILE.match(profile):
            raise WorkbenchError(f'"{profile}" is not a device profile name or path', where=where,
                                 fix=f"After @ give a profile from `workbench devices` or a .toml path, {_EXAMPLE}")
    host, colon, port = spec.rpartition(":")
    if not colon or not host:
        raise WorkbenchError(f'"{text}" is not host:port', where=where, fix=f"Write a node as host:port, {_EXAMPLE}")
    return RpcEndpoint(check_host(host, where), check_port(port, where), profile)


def parse_endpoints(items: Iterable[str], where: str = "", *, allow_profile: bool = True) -> tuple[RpcEndpoint, ...]:
    """A list of nodes, each checked, none twice, at most MAX_NODES."""
    endpoints: list[RpcEndpoint] = []
    for item in items:
        if not item.strip():
            raise WorkbenchError("an empty entry in the list of RPC nodes", where=where,
                                 fix=f"Separate nodes with single commas, {_EXAMPLE}")
        endpoint = parse_endpoint(item, where, allow_profile=allow_profile)
        if any(known.address == endpoint.address for known in endpoints):
            raise WorkbenchError(f"RPC node {endpoint.address} is listed twice", where=where,
                                 fix="Name each node once (llama.cpp would count it as two devices)")
        endpoints.append(endpoint)
    if len(endpoints) > MAX_NODES:
        raise WorkbenchError(f"{len(endpoints)} RPC nodes is more than llama.cpp's limit of {MAX_NODES}", where=where,
                             fix=f"Use at most {MAX_NODES} nodes")
    return tuple(endpoints)


def parse_rpc_option(text: str) -> tuple[RpcEndpoint, ...]:
    """The `--rpc host:port[@profile],...` option of ledger, chat, bench and the app."""
    return parse_endpoints(text.split(","), "--rpc")
