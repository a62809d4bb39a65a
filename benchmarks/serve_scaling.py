"""Serving scaling: `workbench api` under 1, 4 and 8 concurrent clients beside llama.cpp's own batched decode.

In one run, on the same model, preset and threads:

- the server: N clients streaming chat completions from `workbench api --parallel 8`
  (started here on 127.0.0.1). Aggregate decode tok/s = tokens that arrived while all N
  were decoding (after the latest first token, up to the earliest last one) / that span.
- bare llama.cpp's batched decode of the same sequences: a llama_decode loop in this process, as
  llama.cpp's batched-bench does it (a prompt per sequence, then one batch of N tokens per step,
  no sampling), on a context made like the server's. Its prompt is the server's: the clients'
  message through the model's chat template (workbench's ChatTemplate, as the server renders it),
  checked against the prompt tokens the server reports in each answer's usage, so both attend over
  the same cells. The clients' aggregate / this is the
  target (>= 0.9): what the server, its scheduler and HTTP cost against llama.cpp alone. It runs
  seconds apart from the server, so a neighbour on this 2-core machine moves it between rounds.
- beside it, not instead: llama.cpp's time inside the server, over the same seconds. The
  server's engine books every llama_decode call that held N next tokens (no prompt) in
  /metrics (workbench_api_decode_step_seconds{sequences="N"}); N x steps / that time is what
  llama.cpp did with the very batches the clients were served from, so the clients' aggregate
  / this cancels the machine's second-to-second speed; and it / the bare loop says whether the
  engine's llama.cpp is configured as fast as llama.cpp can be.

Each round measures every level; the rounds are repeated and the medians are printed: of each side's
tok/s, and of each round's quotient (the target's ratio), so the ratio is a median of paired rounds. Then the
slowest client's TTFT at 4 clients / one client's TTFT (no client waits for another's answer:
what is left is the 4 prompts' prefill, batched together).

    python benchmarks/serve_scaling.py [--tokens 64] [--levels 1,4,8] [--rounds 5] [--threads 1] [--model bundled]
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
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


def _silence_llama() -> None:
    import llama_cpp

    global _QUIET
    _QUIET = _QUIET or _make_quiet()  # kept referenced: llama.cpp calls it later
    llama_cpp.llama_log_set(_QUIET, None)


def served_prompt(model_path: str) -> list[int]:
    """The prompt tokens the server decodes for the clients' message: the model's chat template, as the
    server's engine renders and tokenizes it."""
    import llama_cpp

    from workbench.core.engine.chat_template import ChatTemplate
    from workbench.core.engine.events import ChatMessage

    _silence_llama()
    vocab = llama_cpp.Llama(model_path, vocab_only=True, verbose=False)
    return ChatTemplate(vocab, "", Path(model_path).name).tokenize([ChatMessage("user", PROMPT)])


def reference_tps(model_path: str, prompt: list[int], n_seq: int, steps: int, threads: int, ctx: int,
                  slots: int) -> float:
    """llama.cpp decoding n_seq sequences of `prompt` together for `steps` steps: tokens / llama.cpp's eval time.

    Its context is the server's: the same cells, `slots` sequences in one unified cache, and the
    preset's flash attention (off); only the number of sequences decoding differs.
    """
    import llama_cpp

    llama_cpp.llama_backend_init()
    _silence_llama()
    model_params = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), model_params)
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = ctx, 512, 512
    params.n_threads = params.n_threads_batch = threads
    params.n_seq_max, params.kv_unified = slots, True
    params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # the preset's flash_attn = false
    params.no_perf = False  # llama.cpp's default context keeps no timings
    ctx_p = llama_cpp.llama_init_from_model(model, params)
    try:
        tokens, n_prompt = prompt, len(prompt)
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
    usage = prompt_tokens = None
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": PROMPT}], max_tokens=tokens,
                                            temperature=0.8, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            usage, prompt_tokens = chunk.usage.completion_tokens, chunk.usage.prompt_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.monotonic())
    results.append((sent, stamps, usage or len(stamps), prompt_tokens))


def decode_steps(url: str, sequences: int) -> tuple[float, float]:
    """(steps, seconds) of the server's next-token-only llama_decode calls of `sequences` sequences so far."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    found = {"workbench_api_decode_steps": 0.0, "workbench_api_decode_step_seconds": 0.0}
    text = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=60).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in found and sample.labels.get("sequences") == str(sequences):
                found[sample.name] = sample.value
    return found["workbench_api_decode_steps"], found["workbench_api_decode_step_seconds"]


def wait_for_booked_steps(url: str, sequences: int, before: tuple[float, float], decoded: int) -> tuple[float, float]:
    """The engine's figures once its status after the level reached /metrics (it follows the last token)."""
    deadline = time.monotonic() + 30
    while True:
        now = decode_steps(url, sequences)
        if sequences * (now[0] - before[0]) >= decoded or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def server_level(url: str, clients: int, tokens: int, prompt: list[int]) -> tuple[float, float, float]:
    """(aggregate decode tok/s, slowest TTFT, llama.cpp's tok/s in the server's N-sequence steps)."""
    before = decode_steps(url, clients)
    results: list = []
    barrier = threading.Barrier(clients)
    threads = [threading.Thread(target=client_run, args=(url, tokens, results, barrier)) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    served = {prompt_tokens for *_rest, prompt_tokens in results}
    if served != {len(prompt)}:
        raise SystemExit(f"the server decoded prompts of {sorted(served, key=str)} tokens, the bare loop's has "
                         f"{len(prompt)}: not the same sequences")
    answered = [(sent, stamps) for sent, stamps, _n, _p in results if len(stamps) > 1]
    if len(answered) < clients:
        raise SystemExit(f"{clients - len(answered)} of {clients} clients got fewer than 2 tokens: no rate to measure")
    start = max(stamps[0] for _sent, stamps in answered)  # from here all `clients` decode together ...
    end = min(stamps[-1] for _sent, stamps in answered)  # ... until the first answer ends
    decoded = sum(start < stamp <= end for _sent, stamps in answered for stamp in stamps)
    slowest_ttft = max(stamps[0] - sent for sent, stamps in answered)
    steps, seconds = (after - earlier for after, earlier in zip(wait_for_booked_steps(url, clients, before, decoded), before))
    llama = clients * steps / seconds if seconds > 0 else float("nan")
    return (decoded / (end - start) if end > start else float("nan")), slowest_ttft, llama


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--levels", default="1,4,8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="bundled")
    args = parser.parse_args()
    from workbench.core.files.model_ref import resolve_model

    levels = [int(level) for level in args.levels.split(",")]
    model_path = str(resolve_model(args.model))
    slots = max(levels)
    ctx = 256 * slots  # every slot holds the prompt and the answer
    prompt = served_prompt(model_path)
    with tempfile.TemporaryDirectory() as folder:
        preset_path = Path(folder) / "serve-scaling.toml"
        preset_path.write_text(PRESET.format(ctx=ctx, threads=args.threads))
        process, url = start_server(args.model, preset_path, slots)
        rounds = []  # per round: {level: (server tok/s, slowest TTFT, llama.cpp in the server, bare loop)}
        try:
            for _ in range(args.rounds):
                measured = {}
                for level in levels:
                    served = server_level(url, level, args.tokens, prompt)
                    measured[level] = (*served, reference_tps(model_path, prompt, level, args.tokens, args.threads,
                                                              ctx, slots))
                rounds.append(measured)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(60)
    print(f"model {Path(model_path).name}, {args.threads} thread(s), a prompt of {len(prompt)} tokens (the server's, "
          f"as each answer's usage reported) and {args.tokens} tokens per answer, {args.rounds} rounds (medians)")
    print(f"{'clients':>8} {'server tok/s':>13} {'bare llama.cpp':>15} {'ratio':>6}  (target >= 0.9)  "
          f"{'llama.cpp in the server':>24} {'server/inside':>14} {'inside/bare':>12}")
    verdicts = []
    for level in levels:
        ours = statistics.median(measured[level][0] for measured in rounds)
        inside = statistics.median(measured[level][2] for measured in rounds)
        bare = statistics.median(measured[level][3] for measured in rounds)
        ratio = statistics.median(measured[level][0] / measured[level][3] for measured in rounds)
        same_seconds = statistics.median(measured[level][0] / measured[level][2] for measured in rounds)
        parity = statistics.median(measured[level][2] / measured[level][3] for measured in rounds)
        verdicts.append(ratio >= 0.9)
        print(f"{level:>8} {ours:>13.1f} {bare:>15.1f} {ratio:>6.2f}  {'met' if ratio >= 0.9 else 'NOT MET':<15} "
              f"{inside:>24.1f} {same_seconds:>14.2f} {parity:>12.2f}")
    print(f"target (server / bare llama.cpp >= 0.9 at every level): {'MET' if all(verdicts) else 'NOT MET'}")
    print("ratio, server/inside and inside/bare: the median of each round's quotient (a round measures both sides "
          "seconds apart); the tok/s columns: each side's own median, so their quotient can differ")
    for name, index in (("server / bare llama.cpp", 3), ("server / llama.cpp in the server", 2)):
        print(f"per round, {name}: "
              + "; ".join(f"{level}: " + " ".join(f"{measured[level][0] / measured[level][index]:.2f}"
                                                  for measured in rounds) for level in levels))
    if 1 in levels and 4 in levels:
        one = statistics.median(measured[1][1] for measured in rounds)
        four = statistics.median(measured[4][1] for measured in rounds)
        print(f"slowest TTFT at 4 clients / TTFT at 1: {four * 1000:.0f} ms / {one * 1000:.0f} ms = {four / one:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
