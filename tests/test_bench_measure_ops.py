"""The engine-side measurement ops, run in-process on a real llama_cpp.Llama (they are engine code)."""

from __future__ import annotations

import math
from pathlib import Path

import llama_cpp
import pytest

from workbench.core.engine.measured import PERF_COUNTERS, WALL_CLOCK
from workbench.core.bench.sweep import shipped_eval_text
from workbench.core.engine.measure_ops import OPS
from workbench.core.gguf.reader import read_gguf
from workbench.core.paths import bundled_model_path


def _llama(path: Path, **kwargs) -> "llama_cpp.Llama":
    options = dict(n_ctx=256, n_batch=128, n_threads=1, n_threads_batch=1, verbose=False)
    options.update(kwargs)
    return llama_cpp.Llama(str(path), **options)


@pytest.fixture(scope="module")
def llama():
    model = _llama(bundled_model_path(), logits_all=True)  # logits_all: for the hand computation
    yield model
    model.close()


def _hand_perplexity(llama, tokens: list[int]) -> float:
    """exp(mean -log softmax(logits[j])[tokens[j+1]]), in plain Python from llama-cpp-python's scores."""
    llama.reset()
    llama._ctx.kv_cache_clear()
    llama.eval(tokens)
    total = 0.0
    for j in range(len(tokens) - 1):
        row = [float(x) for x in llama.scores[j]]
        top = max(row)
        log_norm = top + math.log(sum(math.exp(x - top) for x in row))
        total += log_norm - row[tokens[j + 1]]
    llama.reset()
    llama._ctx.kv_cache_clear()
    return math.exp(total / (len(tokens) - 1))


def _text_of_tokens(llama, n_tokens: int) -> tuple[str, list[int]]:
    """A prefix of the shipped text that tokenizes to itself (so both sides see the same tokens)."""
    tokens = llama.tokenize(shipped_eval_text().encode(), add_bos=True)[:n_tokens]
    text = llama.detokenize(tokens).decode()
    return text, llama.tokenize(text.encode(), add_bos=True)


def test_perplexity_matches_a_hand_computation_on_a_few_tokens(llama):
    text, tokens = _text_of_tokens(llama, 12)
    measured = OPS["perplexity"](llama, text, n_ctx=len(tokens))
    assert measured.n_tokens_scored == len(tokens) - 1
    assert measured.n_windows == 1
    assert measured.ppl == pytest.approx(_hand_perplexity(llama, tokens), rel=1e-6)


def test_perplexity_windows_score_every_token_once_with_half_the_window_as_context(llama):
    text, tokens = _text_of_tokens(llama, 40)
    measured = OPS["perplexity"](llama, text, n_ctx=16)
    assert measured.n_tokens_text == len(tokens)
    assert measured.n_tokens_scored == len(tokens) - 1
    # windows start every 8 tokens; the first scores 15 targets, each later one 8 new ones
    assert measured.n_windows == 1 + math.ceil((len(tokens) - 16) / 8)
    # the windows see less context than one long pass, so the figure differs
    whole = OPS["perplexity"](llama, text, n_ctx=len(tokens))
    assert whole.n_windows == 1
    assert measured.ppl != whole.ppl


def test_perplexity_refuses_a_window_larger_than_the_context(llama):
    with pytest.raises(ValueError, match="context size"):
        OPS["perplexity"](llama, "a short text", n_ctx=100_000)


def test_speed_counts_its_tokens_and_leaves_the_cache_empty(llama):
    speed = OPS["bench"](llama, n_prompt=16, n_gen=4, seed=3)
    assert (speed.n_prompt, speed.n_gen) == (16, 4)
    assert speed.timing_source == PERF_COUNTERS
    assert speed.prefill_tps == pytest.approx(16 / speed.prefill_seconds)
    assert speed.decode_tps == pytest.approx(4 / speed.decode_seconds)
    assert speed.ttft_seconds > 0 and speed.finished_at > speed.started_at
    assert llama.n_tokens == 0
    memory = llama_cpp.llama_get_memory(llama.ctx)
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == -1  # nothing left in the KV cache


def test_speed_with_a_one_token_prompt_falls_back_to_the_wall_clock(llama):
    # llama.cpp counts a one-token batch as a decode, so its counters cannot tell prefill apart
    speed = OPS["bench"](llama, n_prompt=1, n_gen=2, seed=0)
    assert speed.timing_source == WALL_CLOCK
    assert speed.prefill_seconds > 0 and speed.decode_seconds > 0


def test_speed_refuses_more_tokens_than_the_context(llama):
    with pytest.raises(ValueError, match="does not fit"):
        OPS["bench"](llama, n_prompt=250, n_gen=10, seed=0)


def test_rates_time_a_prompt_and_decodes_after_a_depth_and_leave_the_cache_empty(llama):
    rates = OPS["rates"](llama, threads=1, depth=64, n_prompt=32, n_gen=5, repeats=2)
    assert (rates.threads, rates.depth, rates.n_prompt, rates.n_gen) == (1, 64, 32, 5)
    assert 0 < rates.decode_best_seconds_per_token <= rates.decode_seconds_per_token
    assert rates.prefill_seconds > 0 and rates.finished_at > rates.started_at
    memory = llama_cpp.llama_get_memory(llama.ctx)
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == -1  # the depth and the prompt are gone
    assert llama_cpp.llama_n_threads(llama.ctx) == llama.n_threads  # the load's threads are back
    with pytest.raises(ValueError, match="do not fit the context"):
        OPS["rates"](llama, threads=1, depth=200, n_prompt=100, n_gen=2)
    with pytest.raises(ValueError, match="1 <= threads"):
        OPS["rates"](llama, threads=0)


def test_engine_facts_agree_with_the_gguf_header(llama):
    facts = OPS["system_info"](llama)
    info = read_gguf(bundled_model_path())
    assert facts.llama_cpp_version == llama_cpp.__version__
    assert facts.model_n_params == info.n_params
    assert facts.model_size_bytes == info.weights_bytes
    assert facts.model_type.startswith(info.architecture)
    assert (facts.n_ctx, facts.n_batch, facts.n_threads) == (256, 128, 1)
    assert "CPU" in facts.system_info


@pytest.fixture(scope="module")
def f16_variants(tmp_path_factory):
    """Q8_0 and Q4_0 re-quantized from one F16 copy of the bundled model (llama.cpp's quantizer)."""
    from workbench.core.engine.quantize import quantize

    folder = tmp_path_factory.mktemp("variants")
    f16 = quantize(bundled_model_path(), "F16", out=folder / "smollm2-f16.gguf")
    return {
        "Q8_0": quantize(f16, "Q8_0", out=folder / "smollm2-q8_0.gguf"),
        "Q4_0": quantize(f16, "Q4_0", out=folder / "smollm2-q4_0.gguf"),
    }


def test_perplexity_of_q8_0_is_not_worse_than_q4_0_of_the_same_source(f16_variants):
    text = shipped_eval_text()[:1500]
    ppl = {}
    for weights, path in f16_variants.items():
        model = _llama(path)
        try:
            ppl[weights] = OPS["perplexity"](model, text, n_ctx=128)
        finally:
            model.close()
    assert read_gguf(f16_variants["Q8_0"]).file_type == "Q8_0"
    assert ppl["Q8_0"].n_tokens_scored == ppl["Q4_0"].n_tokens_scored > 200
    assert ppl["Q8_0"].ppl <= ppl["Q4_0"].ppl
