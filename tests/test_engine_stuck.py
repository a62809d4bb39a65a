"""A stuck engine (a stopped process: it never answers) is killed after the cancel grace, reported, and replaced."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import pytest

from real_engine import ROOMY
from workbench.core.config.preset import Preset
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, EngineFailed, Sampling, TurnFinished
from workbench.core.paths import bundled_model_path

PRESET = Preset("tiny", ctx_size=512, batch_size=256, ubatch_size=256, threads=1)
QUESTION = (ChatMessage("user", "Say hello."),)
LIVENESS_S = 120  # only a bound for a broken build to fail rather than hang; no timing is asserted


def _until(condition, what: str):
    deadline = time.monotonic() + LIVENESS_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"not within {LIVENESS_S} s: {what}")


def test_a_cancel_the_engine_never_answers_kills_it_and_a_fresh_engine_loads_and_chats():
    client = EngineClient()
    client.cancel_grace_s = 0.5
    try:
        client.load_blocking(bundled_model_path(), PRESET, device=ROOMY)
        stuck_pid = client.pid
        os.kill(stuck_pid, signal.SIGSTOP)  # from here on the engine never answers
        events: list[object] = []
        turn = threading.Thread(target=lambda: events.extend(client.chat(QUESTION, Sampling(max_tokens=64))), daemon=True)
        turn.start()
        deadline = time.monotonic() + LIVENESS_S
        while turn.is_alive() and time.monotonic() < deadline:
            client.cancel()  # again and again: a cancel made before the request is sent is cleared by it
            turn.join(0.1)
        assert not turn.is_alive(), "the chat did not end after the cancel"
        failure = events[-1]
        assert isinstance(failure, EngineFailed) and failure.kind == "crash", events[-3:]
        assert "did not answer a cancel within 0.5 s" in failure.message
        assert failure.exit_signal == "SIGKILL"
        assert not client.alive
        with pytest.raises(ProcessLookupError):
            os.kill(stuck_pid, 0)  # reaped: the stopped process is gone, not a zombie left behind

        client.load_blocking(bundled_model_path(), PRESET, device=ROOMY)  # what the CLI and the app do next
        assert client.pid != stuck_pid
        answer = list(client.chat(QUESTION, Sampling(max_tokens=4, temperature=0.0)))
        assert isinstance(answer[-1], TurnFinished), answer[-1]
    finally:
        client.close()


def _raw_chat(address: tuple[str, int]) -> socket.socket:
    """A chat request sent on a raw socket, left open (closing it is the client leaving)."""
    body = json.dumps({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8}).encode()
    sock = socket.create_connection(address, timeout=LIVENESS_S)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return sock


def test_the_api_reports_a_stuck_engine_replaces_it_when_its_client_leaves_and_stops_in_one_line(capfd, caplog):
    import httpx

    from workbench.core.serve.http_limits import STOP_GRACE_S

    from workbench.core.config.web_boundary import WebBoundary
    from workbench.core.serve.app import ServerConfig, create_app
    from workbench.core.serve.engine_host import ServingEngine
    from workbench.core.serve.listen import listen
    from workbench.core.serve.server_thread import ApiServerThread

    engine = ServingEngine(bundled_model_path(), PRESET, 2, device=ROOMY)
    engine.stuck_after_s = 0.5
    engine._client.cancel_grace_s = 0.5
    engine.start()
    listener = listen("127.0.0.1", 0)
    address = listener.getsockname()[:2]
    # host=: the Serve switch's server, the CLI's StoppingServer on a thread
    server = ApiServerThread(create_app(engine, ServerConfig("m", None, 2, WebBoundary.serving("127.0.0.1"))), listener,
                             host=engine)
    server.start()
    base = server.address.removesuffix("/v1")
    try:
        assert httpx.get(base + "/health", timeout=LIVENESS_S).json()["status"] == "ok"  # idle and silent is not stuck
        first_pid = engine.pid
        os.kill(first_pid, signal.SIGSTOP)
        leaving = _raw_chat(address)
        stuck = _until(lambda: (r := httpx.get(base + "/health", timeout=LIVENESS_S)).status_code == 503 and r,
                       "/health reporting the stuck engine")
        assert stuck.json()["status"] == "stuck"
        assert "has not answered" in stuck.json()["reason"] and "1 request(s) in flight" in stuck.json()["reason"]

        leaving.close()  # the client leaves: its cancel goes unanswered, so the engine is killed and started again
        _until(lambda: engine.restarts == 1 and engine.state == "ready", "a fresh engine after the unanswered cancel")
        assert engine.pid != first_pid and "did not answer a cancel" in engine.last_failure
        answered = httpx.post(base + "/v1/chat/completions", timeout=LIVENESS_S,
                              json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        assert answered.status_code == 200, answered.text

        os.kill(engine.pid, signal.SIGSTOP)
        waiting = _raw_chat(address)
        _until(lambda: httpx.get(base + "/health", timeout=LIVENESS_S).status_code == 503, "stuck again")
        server.stop()  # as Ctrl-C stops `workbench api`: the engine's open requests end before uvicorn waits for them
        assert f"did not answer a cancel within {STOP_GRACE_S:g} s while serving" in server.killed
        reply = waiting.recv(65536).decode("latin-1")
        assert reply.startswith("HTTP/1.1 503"), reply[:200]  # the waiting request is answered, not cancelled
        waiting.close()
        printed = capfd.readouterr()
        logged = caplog.text
        assert "CancelledError" not in printed.err + printed.out + logged
        assert "Traceback" not in printed.err + logged
    finally:
        server.stop()
        engine.close()
