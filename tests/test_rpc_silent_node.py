"""A node that goes silent mid-answer (a pulled cable: no reset, packets go nowhere) is named within a bound.

The scenario runs in a private network namespace (`unshare -n`), so taking its loopback down
cuts only this test's link: this file, run as a script under `unshare -n`, is the driver. It
starts a real `workbench node serve` on 127.0.0.1, loads the bundled model split onto it, takes
`lo` down at the first token and reports what the client saw. Without keepalive on llama.cpp's
node socket the engine would wait in recv() for ever (the test's hang guard would fail it). Then
`lo` comes back and the model reloads on the same node, which dropped the silent engine itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BOUND_S = 60  # generous against a loaded machine; the keepalive deadline is SILENT_NODE_DEADLINE_S (10 s)
HANG_GUARD_S = 300  # whole driver: two node starts, two loads, the cut; far beyond any healthy run


@contextlib.contextmanager
def _node_and_engine():
    """Inside the namespace: `lo` up, a real node on it, an engine client; both stopped after."""
    from workbench.core.engine.client import EngineClient
    from workbench.core.rpc.local_nodes import LocalNode

    # ggml's abort otherwise runs gdb for a backtrace that pushes llama.cpp's own last words out of the log tail.
    os.environ["GGML_NO_BACKTRACE"] = "1"
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    node = LocalNode()
    client = EngineClient()
    try:
        yield node, client
    finally:
        client.close()
        node.stop()


def _preset(name: str, node_address: str):
    from workbench.core.config.preset import DeviceProfile, Preset

    roomy = DeviceProfile(name="test-roomy", ram_total_mb=65536, cores=2, mem_bandwidth_gbs=10)
    return Preset(name=name, ctx_size=1024, batch_size=256, ubatch_size=256, threads=1, gpu_layers=-1,
                  rpc=(node_address,)), roomy


def _drive_load_cut() -> dict:
    """Inside the namespace: the cable is pulled while the weights stream to the node, as a dict to judge.

    `lo` is rate-limited (tbf, 40 Mbit/s) so the upload of the bundled model's weights takes
    seconds, and it is taken down 1.5 s after the engine's first connection to the node appears.
    """
    import threading

    from workbench.core.errors import EngineError
    from workbench.core.paths import bundled_model_path
    from workbench.core.rpc.keepalive import _endpoint

    result: dict = {}
    with _node_and_engine() as (node, client):
        port = int(node.address.rsplit(":", 1)[1])
        result["node"] = node.address
        subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "40mbit", "burst", "32kbit",
                        "latency", "400ms"], check=True)
        preset, roomy = _preset("test-silent-load", node.address)
        outcome: dict = {}

        def load() -> None:
            try:
                outcome["loaded"] = client.load_blocking(bundled_model_path(), preset, device=roomy)
            except EngineError as error:
                outcome["error"] = str(error)
            outcome["at"] = time.monotonic()

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        while loader.is_alive():  # the engine's connection to the node (the namespace's table shows every process's)
            rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
            if any(_endpoint(row.split()[2]) == ("127.0.0.1", port) for row in rows):
                break
            time.sleep(0.02)
        time.sleep(1.5)  # into the upload: ~100 MB of weights at 40 Mbit/s take about 20 s
        result["cut_during_load"] = loader.is_alive()
        subprocess.run(["ip", "link", "set", "lo", "down"], check=True)  # the cable is pulled mid-upload
        cut_at = time.monotonic()
        loader.join(HANG_GUARD_S)
        result["load_returned"] = not loader.is_alive()
        result["loaded"] = "loaded" in outcome
        result["error"] = outcome.get("error", "")
        result["seconds"] = outcome["at"] - cut_at if "at" in outcome else None
    return result


def _drive() -> dict:
    """Inside the namespace: the cut and the recovery, as a dict for the test to judge."""
    from workbench.core.engine.events import ChatMessage, EngineFailed, Sampling, TokenChunk, TurnFinished
    from workbench.core.errors import EngineError
    from workbench.core.paths import bundled_model_path

    result: dict = {}
    with _node_and_engine() as (node, client):
        preset, roomy = _preset("test-silent", node.address)
        client.load_blocking(bundled_model_path(), preset, device=roomy)
        result["node"] = node.address
        result["log_after_load"] = list(client.log_tail())
        # a long answer: a short one can end on a token already computed while `ip` is still taking the link down
        conversation = [ChatMessage("user", "Write a long story about a robot who learns to cook.")]
        cut_at = failed_at = None
        for event in client.chat(conversation, Sampling(temperature=0.0, seed=7, max_tokens=400)):
            if isinstance(event, TokenChunk) and cut_at is None:
                subprocess.run(["ip", "link", "set", "lo", "down"], check=True)  # the cable is pulled
                cut_at = time.monotonic()
            elif isinstance(event, EngineFailed):
                failed_at = time.monotonic()
                result.update(kind=event.kind, message=event.message, log_tail=list(event.log_tail))
            elif isinstance(event, TurnFinished):
                result["finished"] = event.text
        result["cut"] = cut_at is not None
        result["seconds"] = failed_at - cut_at if cut_at is not None and failed_at is not None else None
        result["client_alive"] = True  # the chat iterator returned instead of raising or hanging
        # The cable is back: reload on the SAME node (it dropped the silent engine by keepalive of its own,
        # else it would refuse every client as "serving another") and go on with the same conversation.
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        result["node_output"] = list(node.output)
        # The node lets the dead connection go when its own keepalive finds the client gone (within
        # SILENT_NODE_DEADLINE_S of the link's return); until then it says it serves another client.
        deadline = time.monotonic() + BOUND_S
        while True:
            try:
                reloaded = client.load_blocking(bundled_model_path(), dataclasses.replace(preset, rpc=(node.address,)),
                                                device=roomy)
                break
            except EngineError as error:
                if "serving another client" not in str(error) or time.monotonic() > deadline:
                    raise
                result["reload_retries"] = result.get("reload_retries", 0) + 1
        result["reloaded_on"] = [device.endpoint for device in reloaded.devices[1:]]
        events = list(client.chat(conversation, Sampling(temperature=0.0, seed=7, max_tokens=8)))
        result["after"] = type(events[-1]).__name__
    return result


def _run_driver(scenario: str = "answer") -> dict:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs util-linux `unshare` and iproute2 `ip`")
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"`unshare -n` was refused here (a private network namespace needs root): {probe.stderr.strip()}")
    process = subprocess.Popen(["unshare", "-n", sys.executable, str(Path(__file__).resolve()), scenario],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    try:
        out, err = process.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the driver, its engine and its node
        out, err = process.communicate()
        pytest.fail(f"the driver hung for {HANG_GUARD_S} s (a silent node was never declared dead?)\n{err[-3000:]}")
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, f"driver failed ({process.returncode}):\n{err[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.skipif(sys.byteorder != "little", reason="the rows below are as a little-endian kernel prints them")
def test_proc_net_tcp_rows_read_as_the_kernel_prints_them():
    from workbench.core.rpc.keepalive import _endpoint

    # 127.0.0.1 is the bytes 7F 00 00 01; the kernel prints the 32-bit word natively: 0x0100007F. 0x1F90 = 8080.
    assert _endpoint("0100007F:1F90") == ("127.0.0.1", 8080)
    # ::ffff:192.168.7.2 (C0 A8 07 02 in the last word -> 0x0207A8C0), port 0xC364 = 50020
    assert _endpoint("0000000000000000FFFF00000207A8C0:C364") == ("192.168.7.2", 50020)
    assert _endpoint("00000000000000000000000001000000:0050") == ("::1", 80)


def test_only_the_connection_to_the_node_is_tuned():
    import socket

    from workbench.core.rpc.keepalive import SILENT_NODE_DEADLINE_S, watch_node_sockets

    with socket.create_server(("127.0.0.1", 0)) as listener:
        node = f"127.0.0.1:{listener.getsockname()[1]}"
        with socket.create_connection(listener.getsockname()) as ours:
            theirs, _ = listener.accept()  # the node's end: its remote is our ephemeral port, not a node
            with theirs:
                notes: list[str] = []
                assert watch_node_sockets((node,), notes.append) == []
                assert len(notes) == 1 and f"fd {ours.fileno()} " in notes[0] and f"-> {node}" in notes[0], notes
                assert ours.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                assert ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == SILENT_NODE_DEADLINE_S * 1000
                assert theirs.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
                assert listener.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
                ours.sendall(b"x")  # the duplicate was closed, the original still works
                assert theirs.recv(1) == b"x"


def test_a_silent_node_is_named_within_the_bound_and_the_client_goes_on():
    result = _run_driver()
    print({key: value for key, value in result.items() if not key.startswith(("log", "node_output"))})
    node = result["node"]
    # The engine log says which socket it tuned: the one to the node.
    assert any("RPC node sockets tuned" in line and f"-> {node}" in line for line in result["log_after_load"]), \
        result["log_after_load"]
    assert result["cut"], "no token arrived before the end of the answer"
    assert "finished" not in result, "the answer finished although the only node holding the layers went silent"
    assert result["kind"] == "crash"
    assert f"RPC node {node} is unreachable" in result["message"] and "stopped answering" in result["message"], \
        result["message"]
    # llama.cpp's own words: its recv on the node socket failed (the kernel gave up on the peer), then it aborted.
    assert any("Remote RPC server crashed" in line for line in result["log_tail"]), result["log_tail"][-10:]
    assert result["seconds"] is not None and result["seconds"] < BOUND_S, result["seconds"]
    print(f"silent node named {result['seconds']:.1f} s after the cut")
    assert result["client_alive"]
    assert result["reloaded_on"] == [node]
    # The node's side: it tuned the engine's connection (so it could drop the engine when it went silent).
    assert any(line.startswith("client 127.0.0.1:") and "keepalive" in line for line in result["node_output"]), \
        result["node_output"]
    assert result["after"] == "TurnFinished"


def test_a_node_silent_while_the_weights_stream_to_it_fails_the_load_within_the_bound():
    if shutil.which("tc") is None:
        pytest.skip("needs iproute2 `tc` to slow the namespace's loopback")
    result = _run_driver("load")
    print({key: value for key, value in result.items() if key != "log_tail"})
    node = result["node"]
    assert result["cut_during_load"], "the load finished before the cut: the upload was not slowed down"
    assert result["load_returned"] and not result["loaded"]
    assert f"RPC node {node}" in result["error"], result["error"]
    assert result["seconds"] is not None and result["seconds"] < BOUND_S, result["seconds"]
    print(f"silent node during the load named {result['seconds']:.1f} s after the cut")


if __name__ == "__main__":
    drive = _drive_load_cut if sys.argv[1:] == ["load"] else _drive
    print("RESULT " + json.dumps(drive()), flush=True)
