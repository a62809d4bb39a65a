"""The engine process's life: killed mid-answer, bad files and presets refused, unload and reload."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from gguf_factory import copy_with_u32_field
from real_engine import ROOMY
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import (
    ChatMessage,
    EngineFailed,
    Loaded,
    LoadProgressed,
    Sampling,
    TokenChunk,
    TurnFinished,
)
from workbench.core.errors import EngineError
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import DeviceProfile, Preset

PRESET = Preset(name="test-256", ctx_size=256, batch_size=128, ubatch_size=128, threads=1)
HELLO = [ChatMessage("user", "Tell me a story about a lighthouse keeper.")]


@pytest.fixture
def client():
    """A client of its own, for a test that kills its engine or needs one not yet started."""
    engine = EngineClient()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def engine():
    """One engine for the tests that only load, fail to load, chat and unload: each loads what it needs."""
    shared = EngineClient()
    yield shared
    shared.close()


def final(events):
    events = list(events)
    assert events, "no events"
    return events[-1]


def test_sigkill_mid_answer_is_reported_with_signal_log_and_prediction_and_a_new_engine_starts(client):
    client.load_blocking(bundled_model_path(), PRESET, device=ROOMY)
    killed_pid = client.pid
    events = []
    for event in client.chat(HELLO, Sampling(temperature=0.0, max_tokens=200)):
        events.append(event)
        if len(events) == 2:
            os.kill(killed_pid, signal.SIGKILL)
    failed = events[-1]
    assert isinstance(failed, EngineFailed) and failed.kind == "crash"
    assert failed.exit_signal == "SIGKILL" and failed.exit_code == -signal.SIGKILL
    assert "SIGKILL" in failed.message
    assert any("buffer size" in line for line in failed.log_tail)  # llama.cpp's own lines, read after death
    assert failed.prediction.startswith("ledger for test-roomy")
    assert all(isinstance(event, TokenChunk) for event in events[:-1])
    assert not client.alive and client.loaded is None
    # the caller's conversation is untouched; a new engine takes it from here
    client.start()
    assert client.pid != killed_pid
    client.load_blocking(bundled_model_path(), PRESET, device=ROOMY)
    assert isinstance(final(client.chat(HELLO, Sampling(temperature=0.0, max_tokens=3))), TurnFinished)


def test_a_truncated_gguf_is_refused_by_the_reader_before_llama_cpp_sees_it(client, tmp_path):
    truncated = tmp_path / "truncated.gguf"
    with open(bundled_model_path(), "rb") as source:
        truncated.write_bytes(source.read(2 * 1024 * 1024))
    failed = final(client.load(truncated, PRESET, device=ROOMY))
    assert isinstance(failed, EngineFailed) and failed.kind == "load"
    assert "truncated.gguf" in failed.message and failed.log_tail == ()
    assert client.pid is None  # no engine process was needed to say no


def test_a_gguf_llama_cpp_rejects_fails_cleanly_with_llama_cpp_s_own_words(engine, tmp_path):
    # A valid header whose metadata contradicts the tensors: a feed-forward width of 1024,
    # but ffn_gate is shaped for SmolLM2's 1536. The header reader checks the attention
    # shapes the ledger sizes the KV cache by (a wrong head_count_kv is refused before the
    # engine sees it), not this one; llama.cpp checks every shape.
    broken = copy_with_u32_field(bundled_model_path(), "llama.feed_forward_length", 1024, tmp_path / "wrong-shape.gguf")
    failed = final(engine.load(broken, PRESET, device=ROOMY))
    assert isinstance(failed, EngineFailed) and failed.kind == "load"
    assert "wrong shape" in failed.message and "ffn_gate" in failed.message
    assert any("wrong shape" in line for line in failed.log_tail)
    # the engine survived its failed load and loads a good model next
    assert engine.alive
    assert isinstance(final(engine.load(bundled_model_path(), PRESET, device=ROOMY)), Loaded)


def test_a_preset_the_model_cannot_run_is_refused_before_loading(engine):
    bad = Preset(name="bad-v-cache", ctx_size=256, cache_type_v="q8_0", flash_attn=False)
    failed = final(engine.load(bundled_model_path(), bad, device=ROOMY))
    assert isinstance(failed, EngineFailed) and failed.kind == "refused"
    assert "bad-v-cache" in failed.message and "flash_attn" in failed.message
    with pytest.raises(EngineError, match="flash_attn"):
        engine.load_blocking(bundled_model_path(), bad, device=ROOMY)


def test_a_preset_over_the_device_budget_is_refused_unless_overridden(engine):
    tiny = DeviceProfile(name="test-tiny", ram_total_mb=96, reserves_mb=(("os", 32),))
    failed = final(engine.load(bundled_model_path(), PRESET, device=tiny))
    assert isinstance(failed, EngineFailed) and failed.kind == "refused"
    assert "does not fit test-tiny" in failed.message and "weights" in failed.message and "KV" in failed.message
    loaded = engine.load_blocking(bundled_model_path(), PRESET, device=tiny, allow_overbudget=True)
    assert "does not fit" in loaded.prediction


def test_prompt_lookup_drafting_reports_proposed_and_accepted_tokens(engine):
    drafting = Preset(name="test-draft", ctx_size=512, batch_size=128, ubatch_size=128, threads=1,
                      draft_prompt_lookup=4)
    loaded = engine.load_blocking(bundled_model_path(), drafting, device=ROOMY)
    assert any("logits" in warning for warning in loaded.warnings)
    text = "one two three four five six seven eight nine ten"
    messages = [ChatMessage("user", f"Repeat exactly: {text}. Again: {text}. Again:")]
    finished = final(engine.chat(messages, Sampling(temperature=0.0, max_tokens=24)))
    assert isinstance(finished, TurnFinished)
    assert finished.draft_proposed > 0
    assert 0 <= finished.draft_accepted <= min(finished.draft_proposed, finished.generated_tokens)


def test_twenty_load_unload_cycles_keep_the_client_s_memory_flat_and_return_the_engine_s(engine):
    me = psutil.Process()
    for cycle in range(20):
        loaded = engine.load_blocking(bundled_model_path(), PRESET, device=ROOMY)
        assert final(engine.chat(HELLO, Sampling(temperature=0.0, max_tokens=1))).generated_tokens == 1
        engine.unload()
        assert engine.loaded is None
        if cycle == 2:
            warmed_up = me.memory_info().rss
    grown = me.memory_info().rss - warmed_up
    assert grown < 8 * 1024 * 1024, f"client RSS grew {grown / 2**20:.1f} MiB over 17 cycles"
    # the engine process gave the model back: its ~92 MiB of mapped weights are gone
    engine_now = psutil.Process(engine.pid).memory_info().rss
    assert engine_now < loaded.rss_bytes - 50 * 1024 * 1024
    assert isinstance(final(engine.chat(HELLO, Sampling(max_tokens=1))), EngineFailed)


def test_an_engine_killed_while_re_quantizing_is_a_load_failure_that_leaves_no_partial_file(client, tmp_path,
                                                                                             monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    preset = Preset(name="test-q5", weights="Q5_0", ctx_size=256, batch_size=128, ubatch_size=128, threads=1)
    events, killed = [], False
    for event in client.load(bundled_model_path(), preset, device=ROOMY):
        events.append(event)
        if not killed and isinstance(event, LoadProgressed) and event.stage == "quantizing" and event.fraction > 0:
            assert any((tmp_path / "cache" / "quantized").glob("*.part-*"))  # half a file is on disk
            os.kill(client.pid, signal.SIGKILL)
            killed = True
    failed = events[-1]
    assert isinstance(failed, EngineFailed) and failed.kind == "load"
    assert failed.exit_signal == "SIGKILL" and "while loading the model" in failed.message
    assert list((tmp_path / "cache" / "quantized").iterdir()) == []
    assert isinstance(final(client.load(bundled_model_path(), PRESET, device=ROOMY)), Loaded)


def test_a_script_without_a_main_guard_can_start_an_engine_at_module_level(tmp_path):
    # multiprocessing's spawn re-ran such a script in the engine process, which then died
    # while bootstrapping ("exit code 1") before it could load anything.
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from workbench.core.engine.client import EngineClient\n"
        "from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished\n"
        "from workbench.core.paths import bundled_model_path\n"
        "from workbench.core.config.preset import DeviceProfile, Preset\n"
        "client = EngineClient()\n"
        "loaded = client.load_blocking(bundled_model_path(), Preset(name='script', ctx_size=256, batch_size=128,\n"
        "    ubatch_size=128, threads=1), device=DeviceProfile(name='roomy', ram_total_mb=65536, cores=2))\n"
        "events = list(client.chat([ChatMessage('user', 'Hi')], Sampling(temperature=0.0, max_tokens=3)))\n"
        "print('n_ctx', loaded.n_ctx, 'finished', isinstance(events[-1], TurnFinished))\n"
        "client.close()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "n_ctx 256 finished True"
    assert "bootstrapping" not in done.stderr
