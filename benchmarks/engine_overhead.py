"""Engine overhead: the same model, preset, prompt and seed through bare llama-cpp-python in
this process and through the workbench's engine process, alternating runs.

Prints per-run figures, then the decode tok/s ratio (engine / bare; target >= 0.98) and the
TTFT difference (engine - bare; target within 5 ms). Both sides are timed the same way, by
wall clock as their caller sees tokens arrive: for the engine that includes the pipe.

    python benchmarks/engine_overhead.py [--runs 5] [--max-tokens 64] [--preset as-is] [--model bundled]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@dataclass(frozen=True)
class Run:
    side: str
    ttft_s: float
    decode_tps: float
    tokens: int


def prompt_messages(index: int):
    from workbench.core.engine.events import ChatMessage

    return [
        ChatMessage("system", "You are a helpful assistant."),
        ChatMessage("user", f"Request {index}: write a long, detailed story about a lighthouse keeper and the sea."),
    ]


def figures(side: str, started: float, arrivals: list[float]) -> Run:
    decode = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else float("nan")
    return Run(side, arrivals[0] - started, decode, len(arrivals))


def run_bare(llama, template, index: int, sampling) -> Run:
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    started = time.monotonic()
    tokens = template.tokenize(prompt_messages(index))
    llama.set_seed(sampling.seed)
    arrivals: list[float] = []
    stream = llama.generate(tokens, top_k=sampling.top_k, top_p=sampling.top_p, min_p=sampling.min_p,
                            temp=sampling.temperature, repeat_penalty=sampling.repeat_penalty)
    for token in stream:
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            break
        llama.detokenize([token])
        arrivals.append(time.monotonic())
        if len(arrivals) >= sampling.max_tokens:
            break
    stream.close()
    return figures("bare", started, arrivals)


def run_engine(client, index: int, sampling) -> Run:
    from workbench.core.engine.events import EngineFailed, TokenChunk

    started = time.monotonic()
    arrivals: list[float] = []
    for event in client.chat(prompt_messages(index), sampling):
        if isinstance(event, TokenChunk) and event.n_tokens:
            arrivals.append(time.monotonic())
        elif isinstance(event, EngineFailed):
            raise SystemExit(f"engine failed: {event.message}")
    return figures("engine", started, arrivals)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per side (after one warm-up each)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--preset", default="as-is")
    parser.add_argument("--model", default="bundled")
    args = parser.parse_args()

    import contextlib
    import io

    from llama_cpp import Llama

    from workbench.core.engine.chat_template import ChatTemplate
    from workbench.core.engine.client import EngineClient
    from workbench.core.engine.events import Sampling
    from workbench.core.engine.model_runner import llama_kwargs
    from workbench.core.model_ref import resolve_model
    from workbench.core.presets import load_preset, resolve_threads

    model_path = resolve_model(args.model)
    preset = load_preset(args.preset)
    sampling = Sampling(temperature=0.0, seed=42, max_tokens=args.max_tokens)
    with contextlib.redirect_stderr(io.StringIO()):
        llama = Llama(model_path=str(model_path), verbose=False, **llama_kwargs(preset))
    template = ChatTemplate(llama)
    client = EngineClient()
    loaded = client.load_blocking(model_path, preset, allow_overbudget=True)
    print(f"model {model_path.name}, preset {preset.name} (threads {resolve_threads(preset)}, ctx {loaded.n_ctx}), "
          f"greedy, seed {sampling.seed}, up to {args.max_tokens} tokens, {args.runs} runs per side after a warm-up")

    run_bare(llama, template, 0, sampling)
    run_engine(client, 0, sampling)
    runs: list[Run] = []
    for index in range(1, args.runs + 1):
        # ABBA order, so that a machine getting slower or faster over time hits both sides alike
        order = ("bare", "engine") if index % 2 else ("engine", "bare")
        for side in order:
            run = run_bare(llama, template, index, sampling) if side == "bare" else run_engine(client, index, sampling)
            runs.append(run)
            print(f"  run {index} {side:<6}  ttft {run.ttft_s * 1000:8.2f} ms  decode {run.decode_tps:7.2f} tok/s  "
                  f"({run.tokens} tokens)")
    client.close()
    llama.close()

    def median(side: str, attribute: str) -> float:
        return statistics.median(getattr(run, attribute) for run in runs if run.side == side)

    ratio = median("engine", "decode_tps") / median("bare", "decode_tps")
    ttft_difference_ms = (median("engine", "ttft_s") - median("bare", "ttft_s")) * 1000
    print(f"median decode: bare {median('bare', 'decode_tps'):.2f} tok/s, engine {median('engine', 'decode_tps'):.2f} tok/s")
    print(f"median TTFT:   bare {median('bare', 'ttft_s') * 1000:.2f} ms, engine {median('engine', 'ttft_s') * 1000:.2f} ms")
    print(f"decode tok/s ratio (engine / bare): {ratio:.3f}   target >= 0.98   {'met' if ratio >= 0.98 else 'NOT met'}")
    print(f"TTFT difference (engine - bare): {ttft_difference_ms:+.2f} ms   target within 5 ms   "
          f"{'met' if abs(ttft_difference_ms) <= 5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
