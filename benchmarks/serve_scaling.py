"""Serving scaling: `workbench api` under 1, 4 and 8 concurrent clients beside llama.cpp's own batched decode.

In one run, on the same model, preset and threads:

- the reference: N sequences decoded together by a bare llama_decode loop in this process
  (what llama.cpp's batched-bench does: a prompt per sequence, then one batch of N tokens
  per step, no sampling), timed by llama.cpp's perf counters: N x steps / t_eval.
- the server: N clients streaming chat completions from `workbench api --parallel 8`
  (started here on 127.0.0.1). Aggregate decode tok/s = all answers' tokens after their
  first / (last token anywhere - latest first token), i.e. the span where all N decode.

Printed per N: server tok/s, reference tok/s, and their ratio (target >= 0.9: the server and
HTTP cost under 10%); then the slowest client's TTFT at 4 clients / one client's TTFT
(target: close to 1, no client waits for another's answer beyond the shared prefill).

    python benchmarks/serve_scaling.py [--tokens 64] [--levels 1,4,8] [--threads 1] [--model bundled]
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PRESET = """name = "serve-scaling"
description = "serve_scaling benchmark"
weights = "keep"
ctx_size = {ctx}
batch_size = 512
ubatch_size = 512
threads = {threads}
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = false
mlock = false
mmap = true
"""
PROMPT = "Write a long, detailed story about a lighthouse keeper and the sea."


def _quiet_log(_level, _text, _data):  # llama.cpp's load log would bury the table
    return None


def _make_quiet():
    import llama_cpp

    return llama_cpp.llama_log_callback(_quiet_log)


_QUIET = None


def reference_tps(model_path: str, n_seq: int, steps: int, threads: int, ctx: int) -> float:
    """llama.cpp decoding n_seq sequences together for `steps` steps: tokens / llama.cpp's eval time."""
    import llama_cpp

    global _QUIET
    _QUIET = _QUIET or _make_quiet()  # kept referenced: llama.cpp calls it later
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(_QUIET, None)
    model_params = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), model_params)
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = ctx, 512, 512
    params.n_threads = params.n_threads_batch = threads
    params.n_seq_max, params.kv_unified = max(n_seq, 1), True
    params.no_perf = False  # llama.cpp's default context keeps no timings
    ctx_p = llama_cpp.llama_init_from_model(model, params)
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        text = PROMPT.encode()
        tokens = (llama_cpp.llama_token * 256)()
        n_prompt = llama_cpp.llama_tokenize(vocab, text, len(text), tokens, 256, True, True)
        batch = llama_cpp.llama_batch_init(512, 0, 1)
        try:
            def decode(entries):
                for i, (token, pos, seq, logits) in enumerate(entries):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
                    batch.seq_id[i][0], batch.logits[i] = seq, int(logits)
                batch.n_tokens = len(entries)
                if llama_cpp.llama_decode(ctx_p, batch) != 0:
                    raise RuntimeError("llama_decode failed")
                llama_cpp.llama_synchronize(ctx_p)  # llama.cpp books a batch's time when it synchronises

            for seq in range(n_seq):
                decode([(tokens[i], i, seq, i == n_prompt - 1) for i in range(n_prompt)])
            llama_cpp.llama_perf_context_reset(ctx_p)
            for step in range(steps):
                decode([(tokens[0], n_prompt + step, seq, True) for seq in range(n_seq)])
            perf = llama_cpp.llama_perf_context(ctx_p)
            seconds = (perf.t_eval_ms + perf.t_p_eval_ms) / 1000.0  # a batch of one books as eval, more as p_eval
            return n_seq * steps / seconds
        finally:
            llama_cpp.llama_batch_free(batch)
    finally:
        llama_cpp.llama_free(ctx_p)
        llama_cpp.llama_model_free(model)


def start_server(model: str, preset_path: Path, slots: int) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "workbench", "api", model, "--preset", str(preset_path), "--port", "0",
                                "--parallel", str(slots), "--queue", "0", "--no-telemetry"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        match = re.search(r"on (http://127\.0\.0\.1:\d+/v1)", line)
        if match:
            threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
            return process, match.group(1)
    raise SystemExit("the server did not start")


def client_run(url: str, tokens: int, results: list, barrier: threading.Barrier) -> None:
    import openai

    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
    barrier.wait()
    sent = time.monotonic()
    stamps = []
    usage = None
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": PROMPT}], max_tokens=tokens,
                                            temperature=0.8, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.monotonic())
    results.append((sent, stamps, usage or len(stamps)))


def server_level(url: str, clients: int, tokens: int) -> tuple[float, float]:
    """(aggregate decode tok/s, slowest TTFT) of `clients` concurrent streams."""
    results: list = []
    barrier = threading.Barrier(clients)
    threads = [threading.Thread(target=client_run, args=(url, tokens, results, barrier)) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    firsts = [stamps[0] for _sent, stamps, _n in results if stamps]
    lasts = [stamps[-1] for _sent, stamps, _n in results if stamps]
    span = max(lasts) - max(firsts)
    decoded = sum(n - 1 for _sent, stamps, n in results if stamps)
    slowest_ttft = max(stamps[0] - sent for sent, stamps, _n in results if stamps)
    return (decoded / span if span > 0 else float("nan")), slowest_ttft


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--levels", default="1,4,8")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="bundled")
    args = parser.parse_args()
    from workbench.core.model_ref import resolve_model

    levels = [int(level) for level in args.levels.split(",")]
    model_path = str(resolve_model(args.model))
    slots = max(levels)
    ctx = 256 * slots  # every slot holds the prompt and the answer
    with tempfile.TemporaryDirectory() as folder:
        preset_path = Path(folder) / "serve-scaling.toml"
        preset_path.write_text(PRESET.format(ctx=ctx, threads=args.threads))
        process, url = start_server(args.model, preset_path, slots)
        try:
            server = {level: server_level(url, level, args.tokens) for level in levels}
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(60)
    print(f"model {Path(model_path).name}, {args.threads} thread(s), {args.tokens} tokens per answer")
    print(f"{'clients':>8} {'server tok/s':>13} {'llama.cpp tok/s':>16} {'ratio':>6}  (target >= 0.9)")
    for level in levels:
        reference = reference_tps(model_path, level, args.tokens, args.threads, ctx)
        ours = server[level][0]
        print(f"{level:>8} {ours:>13.1f} {reference:>16.1f} {ours / reference:>6.2f}")
    if 1 in server and 4 in server:
        print(f"slowest TTFT at 4 clients / TTFT at 1: {server[4][1] * 1000:.0f} ms / {server[1][1] * 1000:.0f} ms "
              f"= {server[4][1] / server[1][1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
