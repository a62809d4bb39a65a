"""`workbench chat`: a terminal chat driven through a pipe, with per-turn stats on stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest


@pytest.fixture
def preset_file(tmp_path):
    path = tmp_path / "test-chat.toml"
    path.write_text('name = "test-chat"\nctx_size = 512\nbatch_size = 128\nubatch_size = 128\nthreads = 1\n')
    return path


def test_piped_questions_get_streamed_answers_and_ollama_style_stats(preset_file, cli):
    done = cli("chat", "bundled", "--preset", str(preset_file), "--device", "host", "--system", "Be brief.",
               "--temp", "0", "--seed", "3", "--max-tokens", "12", stdin="What is the capital of France?\nAnd of Italy?\n")
    assert done.returncode == 0, done.stderr
    answers = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(answers) >= 2
    err = done.stderr
    assert "loaded test-chat" in err and "context 512 tokens" in err and "KV 11.2 MiB" in err
    for label in ("prompt eval count:", "prompt eval rate:", "eval count:", "eval rate:", "time to first token:",
                  "reused from cache:", "context used:", "stop reason:"):
        assert sum(line.startswith(label) for line in err.splitlines()) == 2, label
    reused = [int(line.split()[3]) for line in err.splitlines() if line.startswith("reused from cache:")]
    assert reused[0] == 0 and reused[1] > 0  # the second question builds on the first turn's cache


def test_an_unknown_preset_is_one_line_and_exit_code_2(cli):
    done = cli("chat", "bundled", "--preset", "no-such-preset", stdin="hi\n")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no-such-preset" in done.stderr and "Traceback" not in done.stderr


def _read_until(fd: int, seen: bytearray, marker: bytes) -> str:
    """Read the pipe `fd` into `seen` until `marker` is in it (the process writes it or the test fails)."""
    while marker not in seen:
        chunk = os.read(fd, 4096)
        assert chunk, f"the pipe closed before {marker!r}: {bytes(seen)[-2000:]!r}"
        seen += chunk
    return seen.decode(errors="replace")


def _drain(fd: int) -> None:
    """Read what the pipe holds now (all of it was written before the marker the test saw on stderr)."""
    import select

    while select.select([fd], [], [], 0)[0] and os.read(fd, 65536):
        pass


def test_ctrl_c_stops_the_answer_and_the_chat_goes_on_and_an_engine_that_does_not_stop_is_restarted(preset_file):
    import time

    process = subprocess.Popen(
        [sys.executable, "-m", "workbench", "chat", "bundled", "--preset", str(preset_file), "--device", "host",
         "--temp", "0", "--max-tokens", "400"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
    )
    out, err = process.stdout.fileno(), process.stderr.fileno()
    seen = bytearray()
    try:
        engine_pid = _engine_child(process.pid, time.monotonic() + 120)
        process.stdin.write(b"Write a very long story about a dragon.\n")
        assert os.read(out, 1)  # the answer has started: Ctrl-C now means "stop it"
        process.send_signal(signal.SIGINT)
        first = _read_until(err, seen, b"stop reason:")  # the stopped answer's stats follow "[stopped]"
        assert "[stopping the answer; an engine that does not stop within 5 s is restarted" in first, first
        assert "[stopped]" in first and "restarting" not in first

        _drain(out)  # the first answer's text: print(flush=True) wrote it before "[stopped]"
        process.stdin.write(b"Write a very long story about a dragon.\n")
        assert os.read(out, 1)  # the second answer has started
        os.kill(engine_pid, signal.SIGSTOP)  # from here on the engine never answers
        process.send_signal(signal.SIGINT)  # the first Ctrl-C of this answer: the cancel goes unanswered
        _read_until(err, seen, b"the conversation is kept]")
        process.stdin.write(b"Say hi.\n")
        process.stdin.close()  # EOF ends the chat after that answer
        rest = process.stderr.read()
        assert process.wait(timeout=300) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = seen.decode(errors="replace") + rest.decode(errors="replace")
    assert stderr.count("[stopping the answer") == 2, stderr
    assert "the engine did not answer a cancel within 5 s while generating, so it was killed" in stderr
    assert "[the engine was restarted after it did not stop; the conversation is kept]" in stderr
    assert stderr.count("loaded test-chat") == 2, stderr  # the restart loaded the model again
    stop_reasons = [line.split(":", 1)[1].strip() for line in stderr.splitlines() if line.startswith("stop reason:")]
    # the first answer was cut short, the killed one has no stats, the third question was answered
    assert stop_reasons[0] == "cancelled" and stop_reasons[1] in ("stop", "length") and len(stop_reasons) == 2
    assert "Traceback" not in stderr


def test_a_truncated_model_names_the_file_once(tmp_path, cli):
    from workbench.core.paths import bundled_model_path

    truncated = tmp_path / "t.gguf"
    truncated.write_bytes(bundled_model_path().read_bytes()[:5_000_000])
    done = cli("chat", str(truncated), stdin="hi\n")
    assert done.returncode == 2
    error = [line for line in done.stderr.splitlines() if line.startswith("workbench:")]
    assert len(error) == 1 and error[0].count("t.gguf") == 1, done.stderr
    assert "file ends at 5 MiB" in error[0] and "Traceback" not in done.stderr


def test_out_of_range_sampling_flags_are_one_line_and_exit_code_2_before_loading(cli):
    done = cli("chat", "bundled", "--temp", "-1", "--max-tokens", "0", stdin="hi\n")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "--temp -1 must be 0 to 2 (0 = greedy)" in done.stderr and "--max-tokens 0 must be at least 1" in done.stderr


def test_stats_of_an_answer_stopped_in_the_prompt_do_not_claim_the_prompt_was_evaluated():
    from workbench.cli.cmd_chat import format_turn_stats
    from workbench.core.engine.events import TurnFinished

    stopped = TurnFinished(text="", stop_reason="cancelled", prompt_tokens=850, reused_tokens=0, generated_tokens=0,
                           ttft_s=0.0, prefill_tps=0.0, decode_tps=0.0, kv_cells_used=0, n_ctx=2048,
                           context_shifts=0, started_at=10.0, finished_at=14.0)
    lines = dict(line.split(":", 1) for line in format_turn_stats(stopped).splitlines())
    assert lines["prompt eval count"].strip() == "stopped before the end of 850 token(s)"
    assert lines["prompt eval rate"].strip() == "n/a" and lines["stop reason"].strip() == "cancelled"
    finished = TurnFinished(text="hi", stop_reason="stop", prompt_tokens=850, reused_tokens=50, generated_tokens=2,
                            ttft_s=0.5, prefill_tps=0.0, decode_tps=0.0, kv_cells_used=852, n_ctx=2048,
                            context_shifts=0, started_at=10.0, finished_at=11.0, prefill_s=0.5, decode_s=0.1)
    assert dict(line.split(":", 1) for line in format_turn_stats(finished).splitlines())["prompt eval count"].strip() \
        == "800 token(s)"


def _engine_child(parent_pid: int, deadline: float) -> int:
    """The chat process's engine: its one Python child that is not the resource tracker."""
    import time

    import psutil

    while time.monotonic() < deadline:
        for child in psutil.Process(parent_pid).children():
            if "workbench.core.engine.process" in " ".join(child.cmdline()):
                return child.pid
        time.sleep(0.1)
    raise AssertionError("the chat process started no engine")


@pytest.mark.parametrize("crash_signal", [signal.SIGKILL, signal.SIGSEGV])
def test_chat_restarts_a_crashed_engine_and_keeps_the_conversation(preset_file, crash_signal):
    """Issue 10 item 4: after a crash the restart ran inside the chat generator that still held
    the one-request lock, so the reload said "the engine is busy" and chat exited 2."""
    import time

    chat = subprocess.Popen(
        [sys.executable, "-m", "workbench", "chat", "bundled", "--preset", str(preset_file), "--device", "host",
         "--temp", "0", "--seed", "1", "--max-tokens", "400", "--no-stats"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        engine_pid = _engine_child(chat.pid, time.monotonic() + 120)
        chat.stdin.write("Write a long story about a lighthouse keeper.\n")
        chat.stdin.flush()
        first = chat.stdout.read(1)  # the answer has started streaming: the engine is mid-answer
        assert first
        os.kill(engine_pid, crash_signal)
        chat.stdin.write("What is the capital of France?\n")
        chat.stdin.flush()
        out, err = chat.communicate(timeout=300)  # closes stdin: EOF ends the chat after that answer
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    assert chat.returncode == 0, err
    assert "the engine process died while generating" in err
    assert signal.Signals(crash_signal).name in err
    assert "restarting the engine; the conversation is kept" in err
    assert "busy" not in err
    assert err.count("loaded test-chat") == 2  # the restart loaded the model again
    assert out.strip()  # and the second question was answered
