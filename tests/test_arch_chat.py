"""Chat paths on models without a chat template, in the real engine: a family's built-in template, completion mode, and a stop on template markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from arch_models import arch_model, write_arch_gguf
from real_engine import ROOMY
from workbench.core.config.chat_mode import BUILTIN_TEMPLATE, COMPLETION, MODEL_TEMPLATE, choose_chat_mode
from workbench.core.engine.chat_turn import TEMPLATE_MARKER_STOP
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.core.config.preset import Preset

PRESET = Preset("tiny", ctx_size=512, batch_size=256, ubatch_size=256, threads=1)
GREEDY = Sampling(temperature=0.0, seed=1, max_tokens=12)


@pytest.fixture(scope="module")
def engine():
    client = EngineClient()
    yield client
    client.close()


def _finish(client: EngineClient, messages) -> TurnFinished:
    events = list(client.chat(messages, GREEDY))
    finished = [event for event in events if isinstance(event, TurnFinished)]
    assert finished, events[-1]
    return finished[0]


def test_the_choice_is_pure_and_ordered():
    tokens = {"<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>"}
    assert choose_chat_mode(True, "", tokens.__contains__).kind == MODEL_TEMPLATE
    gemma = choose_chat_mode(False, "", tokens.__contains__)
    assert (gemma.kind, gemma.template) == (BUILTIN_TEMPLATE, "gemma")  # gemma's tokens win over ChatML's
    assert "gemma" in gemma.notice and "no chat template" in gemma.notice
    base = choose_chat_mode(False, "", set().__contains__)
    assert base.kind == COMPLETION
    assert "completion mode" in base.notice and 'chat_template = "chatml"' in base.notice  # says how to force one
    forced = choose_chat_mode(True, "completion", tokens.__contains__)
    assert forced.kind == COMPLETION


@pytest.mark.parametrize(("arch", "template", "opener"), [
    ("gemma3", "gemma", "<start_of_turn>user\n"),
    ("llama", "llama3", "<|start_header_id|>"),
    ("phi3", "phi3", "<|user|>"),
    ("qwen2", "chatml", "<|im_start|>user\n"),
])
def test_a_model_without_template_uses_its_familys_builtin_one(engine, tmp_path: Path, arch, template, opener):
    model = arch_model(arch, n_vocab=4096) if arch == "gemma3" else arch_model(arch)
    path = write_arch_gguf(tmp_path / f"{arch}.gguf", model)
    loaded = engine.load_blocking(path, PRESET, device=ROOMY)
    assert loaded.chat_mode == BUILTIN_TEMPLATE
    assert f"built-in {template!r} template" in loaded.chat_notice
    assert loaded.chat_notice in loaded.warnings  # the same line the CLI prints and the app shows
    finished = _finish(engine, [ChatMessage("user", "hello")])
    assert finished.prompt_tokens > 2


def test_a_base_model_runs_in_completion_mode(engine, tmp_path: Path):
    path = write_arch_gguf(tmp_path / "base.gguf", arch_model("llama", turn_tokens=""))
    loaded = engine.load_blocking(path, PRESET, device=ROOMY)
    assert loaded.chat_mode == COMPLETION
    assert "completion mode" in loaded.chat_notice
    text = "abc abc"
    finished = _finish(engine, [ChatMessage("user", text)])
    # the prompt is the text itself (plus BOS): no template around it. By hand: "<s>" + "▁abc", "▁abc"
    # with single-letter pieces: <s> ▁a b c ▁a b c = 7 tokens.
    assert finished.prompt_tokens == 7


def test_a_template_the_model_answers_with_markers_stops_and_says_so(engine, tmp_path: Path):
    """A model that writes a turn opener instead of its end token: stopped at once, not run to max_tokens."""
    model = arch_model("qwen2", output_bias_token="<|im_start|>")
    path = write_arch_gguf(tmp_path / "flood.gguf", model)
    loaded = engine.load_blocking(path, PRESET, device=ROOMY)
    assert loaded.chat_mode == BUILTIN_TEMPLATE
    finished = _finish(engine, [ChatMessage("user", "hello")])
    assert finished.stop_reason == TEMPLATE_MARKER_STOP
    assert finished.generated_tokens == 1
    assert finished.text == ""
