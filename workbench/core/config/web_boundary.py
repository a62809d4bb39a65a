"""Which Host and Origin headers a local web server answers: its own addresses, never a page from elsewhere.

One rule for `workbench serve` (the app in a browser), `workbench api` and `monitor --prometheus`.
A page on a foreign site can make a browser send requests to 127.0.0.1; with DNS rebinding
(`rebind.evil.example` resolving to 127.0.0.1) the browser even lets that page read the answers,
but its requests still carry `Host: rebind.evil.example` and `Origin: http://rebind.evil.example`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from workbench.core.config.loopback import is_loopback_host

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
# Bound to one of these, the server answers on every address of the machine.
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})
MAX_HEADER_SHOWN = 100  # characters of a refused header quoted back


def host_name(value: str) -> str:
    """`value` as a Host header spells it: lowercased, an IPv6 literal in brackets, no port."""
    name = value.strip().lower()
    if ":" in name and not name.startswith("["):
        try:
            return f"[{ipaddress.IPv6Address(name)}]"  # "::1" as given to --host
        except ValueError:
            pass
    return name


def served_names(host: str, extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The names a server listening on `host` is reached by: the host itself, every loopback
    spelling when it is loopback (or every address), and the names added by the user."""
    names = {host_name(host), *(host_name(name) for name in extra)}
    if is_loopback_host(host) or host.strip() in WILDCARD_HOSTS:
        names |= LOOPBACK_NAMES
    return frozenset(names - {""})


def allowed_origins(host: str, port: int, extra: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> frozenset[str]:
    """The page origins a request may come from: the served address (any of its names) and
    the origins added by the user (`--allow-origin`, e.g. the https URL of a reverse proxy)."""
    served = served_names(host, names)
    origins = {f"http://{name}:{port}" for name in served}
    if port == 80:
        origins |= {f"http://{name}" for name in served}
    return frozenset(origins | {origin.strip().rstrip("/").lower() for origin in extra})


def _split_host_header(value: str) -> str | None:
    """The name of a Host header (`name`, `name:port`, `[v6]:port`), None when it is malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[: end + 1], value[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name
    name, colon, port = value.partition(":")
    if not name or (colon and not port.isdigit()):
        return None
    return name


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class WebBoundary:
    """What a server on `host` answers: Host names (`names`), page origins beyond its own
    (`extra_origins`), and whether any IP literal is its address (bound to every address)."""

    host: str = "127.0.0.1"
    names: frozenset[str] = LOOPBACK_NAMES
    extra_origins: tuple[str, ...] = ()
    any_ip: bool = False

    @classmethod
    def serving(cls, host: str, *, extra_names: tuple[str, ...] = (), origins: tuple[str, ...] = ()) -> WebBoundary:
        """The boundary of a server bound to `host`, with `--allow-host` names and `--allow-origin` origins."""
        extra_origins = tuple(origin.strip().rstrip("/").lower() for origin in origins)
        return cls(host, served_names(host, extra_names), extra_origins, host.strip() in WILDCARD_HOSTS)

    def host_refusal(self, value: str | None) -> str | None:
        """Why a request with this Host header is refused, None when it is one of ours.

        An IP literal cannot be rebound, so on a server bound to every address any IP is ours;
        a name must be one the server was given.
        """
        if value is None:
            return "a request without a Host header is refused"
        name = _split_host_header(value)
        if name is not None and (name in self.names or (self.any_ip and _is_ip_literal(name))):
            return None
        return (f"Host {value[:MAX_HEADER_SHOWN]!r} is not an address of this server (a page using DNS rebinding "
                f"sends its own name); answered: {', '.join(sorted(self.names))}")

    def origin_refusal(self, origin: str | None, port: int) -> str | None:
        """Why a request from this page Origin is refused, None when there is none or it is allowed."""
        if origin is None:
            return None  # not sent by a page's script (browsers send Origin on cross-site requests)
        allowed = allowed_origins(self.host, port, self.extra_origins, tuple(self.names))
        if origin.strip().rstrip("/").lower() in allowed:
            return None
        return (f"requests from the web page origin {origin[:MAX_HEADER_SHOWN]!r} are refused: only this server's own "
                "address, or an origin named with --allow-origin")
