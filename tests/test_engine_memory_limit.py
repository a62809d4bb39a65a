"""The engine's address-space limit follows the ledger: a load the ledger under-predicts fails in the engine
alone, named in one line, and the same client loads and chats next."""

from __future__ import annotations

from real_engine import ROOMY
from workbench.core.config.preset import Preset
from workbench.core.engine import client as client_module
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, EngineFailed, Loaded, LoadProgressed, Sampling, TurnFinished
from workbench.core.engine.load_plan import plan_load
from workbench.core.engine.memory_limit import out_of_limit
from workbench.core.paths import bundled_model_path
from workbench.core.units import MIB

SMALL = Preset("tiny", ctx_size=512, batch_size=256, ubatch_size=256, threads=1)
# SmolLM2-135M's KV cache at 65,536 tokens is about 1.4 GiB (30 layers x 3 KV heads x 64 x 2 x f16),
# far past a limit sized from the 512-token ledger (the model file, a few hundred MiB of margin).
HUGE = Preset("huge", ctx_size=65536, batch_size=256, ubatch_size=256, threads=1)


def test_a_load_past_the_limit_fails_in_the_engine_in_one_line_and_the_client_loads_next(monkeypatch):
    # The ledger of the small context stands in for one that under-predicts the huge context.
    monkeypatch.setattr(client_module, "plan_load",
                        lambda path, preset, device, **kw: plan_load(path, SMALL, device, **kw))
    client = EngineClient()
    try:
        events = list(client.load(bundled_model_path(), HUGE, device=ROOMY))
        limits = [e.memory_limit_bytes for e in events if isinstance(e, LoadProgressed) and e.memory_limit_bytes]
        assert len(limits) == 1 and limits[0] > 100 * MIB
        failure = events[-1]
        assert isinstance(failure, EngineFailed), failure
        assert failure.message.startswith(f"the engine ran out of its memory limit ({limits[0] / MIB:,.0f} MiB)")
        assert "\n" not in failure.message
        assert client.alive  # only the load failed, in the engine

        monkeypatch.undo()
        loaded = client.load_blocking(bundled_model_path(), SMALL, device=ROOMY)
        assert isinstance(loaded, Loaded)
        answer = list(client.chat((ChatMessage("user", "Hi"),), Sampling(max_tokens=2, temperature=0.0)))
        assert isinstance(answer[-1], TurnFinished), answer[-1]
    finally:
        client.close()


def test_only_allocation_failures_under_a_limit_are_named_as_the_limit():
    assert out_of_limit("llama.cpp could not load m.gguf: failed to allocate buffer", (), 0) == ""  # no limit set
    assert out_of_limit("llama.cpp could not load m.gguf: unknown model architecture", (), 512 * MIB) == ""
    named = out_of_limit("the engine process died while generating (SIGABRT)",
                         ("terminate called after throwing an instance of 'std::bad_alloc'",), 512 * MIB)
    assert named == "the engine ran out of its memory limit (512 MiB): the engine process died while generating (SIGABRT)"
