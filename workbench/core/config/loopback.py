"""Whether an address a user gave stays on this machine: the one check behind every `--allow-remote`."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and loopback IP literals (`127.0.0.0/8`, `::1`, `[::1]`).

    Any other name counts as remote without being resolved: a name can point anywhere (and
    change), so a server bound to it gets the same explicit opt-in as a LAN address.
    """
    name = host.strip().rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False
