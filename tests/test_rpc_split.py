"""The bundled model split over real llama.cpp RPC nodes on 127.0.0.1, checked against llama.cpp's own report.

The nodes are `workbench node serve` subprocesses; llama.cpp places layers on them as
it would on a board's GPU. Expected values are llama.cpp's buffer lines from the load
(model, KV and compute buffer per device), never the ledger's own formula.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest
from real_engine import ROOMY

from workbench.core.ledger.split import predict_split
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, EngineFailed, Loaded, Sampling, TokenChunk, TurnFinished
from workbench.core.gguf.reader import read_gguf
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset
from workbench.core.config.rpc_endpoints import parse_endpoint
from workbench.core.rpc.local_nodes import LocalNode as RpcNode
from workbench.core.rpc.nodes import probe_nodes, split_devices
from workbench.core.rpc.wire import probe_node

PRESET = Preset(name="test-split", ctx_size=1024, batch_size=256, ubatch_size=256, threads=1)
HOST = dataclasses.replace(ROOMY, mem_bandwidth_gbs=10)  # the split's speed bound reads the host's bandwidth
GREEDY = Sampling(temperature=0.0, seed=7, max_tokens=8)
QUESTION = (ChatMessage("user", "Name three colours."),)


@pytest.fixture(scope="module")
def nodes():
    started = [RpcNode(), RpcNode()]
    yield started
    for node in started:
        node.stop()


@pytest.fixture(scope="module")
def node_reports(nodes):
    """Each node's probe, taken once while no engine holds it: a node serves one client at a time, so a probe
    of a node the module's engine is connected to would wait out its timeout and find it unreachable."""
    reports = probe_nodes([parse_endpoint(node.address) for node in nodes], measure_link=False)
    assert all(report.reachable for report in reports), [report.reason for report in reports]
    return {node.address: report for node, report in zip(nodes, reports)}


@pytest.fixture(scope="module")
def client():
    engine = EngineClient()
    yield engine
    engine.close()


def _load(client: EngineClient, preset: Preset) -> Loaded:
    return client.load_blocking(bundled_model_path(), preset, device=HOST)


def _predicted(preset: Preset, node_reports):
    model = read_gguf(bundled_model_path())
    endpoints = [parse_endpoint(address) for address in preset.rpc]
    reports = [node_reports[address] for address in preset.rpc]
    devices = split_devices(HOST, endpoints, reports, [None] * len(endpoints))
    return predict_split(model, preset, devices, host_budget_bytes=HOST.budget_mb << 20)


def _check_within_2_percent(loaded: Loaded, preset: Preset, node_reports) -> None:
    predicted = {d.endpoint or d.name: d for d in _predicted(preset, node_reports).devices}
    reported = {d.endpoint or d.name: d for d in loaded.devices}
    assert set(reported) == set(predicted) or set(reported) <= set(predicted)
    for key, device in reported.items():
        ledger = predicted[key]
        for line, want, got in (("model", device.model_bytes, ledger.weights_bytes),
                                ("KV", device.kv_bytes, ledger.kv_bytes),
                                ("compute", device.compute_bytes, ledger.compute_bytes)):
            assert got == pytest.approx(want, rel=0.02, abs=0.02 * (1 << 20)), f"{key} {line}: predicted {got}, llama.cpp {want}"


def test_node_serve_listens_and_probe_reads_its_memory_and_link(nodes):
    report = probe_node(parse_endpoint(nodes[0].address), timeout_s=30)
    assert report.reachable, report.reason
    assert report.protocol.startswith("7.")
    assert report.total_bytes and 0 < report.free_bytes <= report.total_bytes
    assert report.latency_s is not None and report.latency_s > 0
    assert report.upload_bytes_per_s and report.download_bytes_per_s


@pytest.mark.parametrize(("n_nodes", "gpu_layers", "tensor_split", "other"), [
    (1, -1, (), {}),
    (1, 10, (), {}),
    (2, -1, (1.0, 1.0), {}),
    (2, -1, (3.0, 1.0), {}),
    (2, 20, (1.0, 2.0), {}),
    (2, -1, (), {"ctx_size": 2048, "flash_attn": True, "batch_size": 512, "ubatch_size": 512}),
])
def test_per_device_prediction_matches_llama_cpp(nodes, node_reports, client, n_nodes, gpu_layers, tensor_split, other):
    preset = dataclasses.replace(PRESET, gpu_layers=gpu_layers, tensor_split=tensor_split,
                                 rpc=tuple(node.address for node in nodes[:n_nodes]), **other)
    loaded = _load(client, preset)
    names = [device.name for device in loaded.devices]
    assert names == ["CPU"] + [f"RPC{i}" for i in range(n_nodes)]
    assert all(device.model_bytes > 0 for device in loaded.devices[1:])
    _check_within_2_percent(loaded, preset, node_reports)


def test_chat_over_two_nodes(nodes, client):
    preset = dataclasses.replace(PRESET, gpu_layers=-1, rpc=(nodes[0].address, nodes[1].address))
    _load(client, preset)
    events = list(client.chat(QUESTION, GREEDY))
    finished = events[-1]
    assert isinstance(finished, TurnFinished), finished
    assert finished.generated_tokens > 0 and finished.text.strip()


def test_an_unreachable_node_refuses_the_load_by_name(client):
    dead = RpcNode()
    address = dead.address
    dead.stop()
    preset = dataclasses.replace(PRESET, gpu_layers=-1, rpc=(address,))
    events = list(client.load(bundled_model_path(), preset, device=HOST))
    failure = events[-1]
    assert isinstance(failure, EngineFailed) and failure.kind == "refused"
    assert f"RPC node {address} is unreachable" in failure.message
    assert "connection refused" in failure.message


def test_a_node_killed_mid_answer_is_named_and_the_conversation_goes_on():
    first, second = RpcNode(), RpcNode()
    client = EngineClient()
    try:
        preset = dataclasses.replace(PRESET, gpu_layers=-1, rpc=(first.address, second.address))
        _load(client, preset)
        conversation = list(QUESTION)
        killed = threading.Event()
        failure = None
        for event in client.chat(conversation, dataclasses.replace(GREEDY, max_tokens=400)):
            if isinstance(event, TokenChunk) and not killed.is_set():
                second.kill()  # the board holding the last layers loses power mid-answer
                killed.set()
            if isinstance(event, EngineFailed):
                failure = event
        assert killed.is_set(), "no token arrived before the end of the answer"
        assert failure is not None, "the answer finished although a node holding layers was killed"
        assert failure.kind == "crash"
        assert f"RPC node {second.address} is unreachable" in failure.message
        assert first.address not in failure.message  # the living node is not blamed
        # The client is alive: reload on the surviving node (and a fresh one) and go on with the same conversation.
        third = RpcNode()
        try:
            reloaded = _load(client, dataclasses.replace(preset, rpc=(first.address, third.address)))
            assert [d.endpoint for d in reloaded.devices[1:]] == [first.address, third.address]
            events = list(client.chat(conversation, GREEDY))
            assert isinstance(events[-1], TurnFinished), events[-1]
        finally:
            third.stop()
    finally:
        client.close()
        first.stop()
        second.stop()


def test_chat_cli_with_rpc_prints_each_devices_buffers(nodes, client, cli):
    client.close()  # a node serves one client at a time: the module's engine lets go of it first
    result = cli("chat", "bundled", "--rpc", nodes[0].address, "--max-tokens", "4", "--temp", "0", "--no-stats",
                 stdin="Say hi.\n")
    assert result.returncode == 0, result.stderr
    assert "llama.cpp buffers per device:" in result.stderr
    assert f"RPC0 [{nodes[0].address}]: model " in result.stderr and "  CPU: model " in result.stderr
    assert result.stdout.strip()  # the answer
