"""RPC node addresses: every part checked before it becomes a socket address or a profile path."""

from __future__ import annotations

import pytest

from workbench.core.errors import WorkbenchError
from workbench.core.config.rpc_endpoints import parse_endpoint, parse_endpoints, parse_rpc_option


def test_host_port_and_profile():
    node = parse_endpoint("192.168.1.20:50052@rk3588-8gb")
    assert (node.host, node.port, node.profile, node.address) == ("192.168.1.20", 50052, "rk3588-8gb", "192.168.1.20:50052")
    assert parse_endpoint("board2.local:7000").profile == ""
    assert parse_endpoint("127.0.0.1:1").is_loopback
    assert not parse_endpoint("10.0.0.2:1").is_loopback


def test_the_option_takes_a_comma_list_in_device_order():
    nodes = parse_rpc_option("127.0.0.1:5001,127.0.0.1:5002@host")
    assert [n.address for n in nodes] == ["127.0.0.1:5001", "127.0.0.1:5002"]
    assert [n.profile for n in nodes] == ["", "host"]


@pytest.mark.parametrize(("text", "words"), [
    ("127.0.0.1", "is not host:port"),
    (":50052", "is not host:port"),
    ("host:0", "port"),
    ("host:65536", "port"),
    ("host:5x", "port"),
    ("host:-1", "port"),
    ("::1:50052", "IPv6"),
    ("a b:50052", "not a host name"),
    ("host;rm -rf:50052", "not a host name"),
    ("999.1.1.1:50052", "not a host name"),
    ("host:50052@my board", "not a device profile"),
    ("host:50052@a;b", "not a device profile"),
    ("host:50052@", "not a device profile"),
])
def test_bad_nodes_are_one_line_errors(text, words):
    with pytest.raises(WorkbenchError) as caught:
        parse_rpc_option(text)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.where == "--rpc"


def test_a_node_twice_an_empty_entry_and_too_many_nodes_are_refused():
    with pytest.raises(WorkbenchError, match="listed twice"):
        parse_rpc_option("127.0.0.1:5001,127.0.0.1:5001@host")
    with pytest.raises(WorkbenchError, match="empty entry"):
        parse_rpc_option("127.0.0.1:5001,,127.0.0.1:5002")
    with pytest.raises(WorkbenchError, match="limit of 16"):
        parse_endpoints([f"127.0.0.1:{5000 + i}" for i in range(17)])


def test_a_preset_list_takes_no_profile():
    with pytest.raises(WorkbenchError, match="only --rpc takes"):
        parse_endpoints(["127.0.0.1:5001@host"], allow_profile=False)
