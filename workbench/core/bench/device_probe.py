"""`workbench devices probe`: this machine's decode and prefill rates, measured with llama.cpp on generated models."""

from __future__ import annotations

import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import tomli_w

from workbench.core.bench.probe_models import FIXED_COST_MODELS, RATE_MODELS, ProbeModel, write_probe_model
from workbench.core.config.preset import DeviceProfile, Preset, ThreadRates
from workbench.core.engine.client import EngineClient
from workbench.core.engine.measured import RatesMeasured
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.speed_costs import ModelCosts, model_costs

DEPTH = 1024  # the attention terms: the same model at this depth and at 0
PROMPT = 256  # prompt tokens per timed prefill: one ubatch, as a chat prompt is
N_GEN = 24  # decodes per run (the median counts)


@dataclass(frozen=True)
class DeviceProbe:
    """What the probe measured, per thread count, and how."""

    rates: tuple[ThreadRates, ...]
    runs: tuple[tuple[str, RatesMeasured], ...]  # (probe model, one run)
    llama_cpp: str
    measured_at: str
    seconds: float

    @property
    def method(self) -> str:
        fixed = " and ".join(m.name for m in FIXED_COST_MODELS)
        wide = ", ".join(m.weight_type for m in RATE_MODELS)
        return (f"measured by `workbench devices probe` at {self.measured_at} with llama-cpp-python {self.llama_cpp} "
                f"in {self.seconds:.0f} s: fixed costs per token and per layer from {fixed} (2 vs 16 layers of "
                f"64 wide), read rate and prefill FLOP/s per weight type from 8 x 512 x 2048 random-weight "
                f"models ({wide}), attention from the Q8_0 one at depth {DEPTH} vs 0; decode = median of "
                f"{N_GEN} tokens, prefill = best of 2 x {PROMPT} tokens")


def _positive(value: float) -> float | None:
    return value if value > 0 else None


def _solve(threads: int, fixed: Sequence[tuple[ModelCosts, RatesMeasured]],
           wide: Sequence[tuple[str, ModelCosts, RatesMeasured, RatesMeasured | None]]) -> ThreadRates:
    """Fixed costs from the two tiny models, then each type's rates from its wide model after those."""
    (small, small_run), (deep, deep_run) = fixed
    layers = deep.n_layer - small.n_layer
    layer_s = max(0.0, (deep_run.decode_seconds_per_token - small_run.decode_seconds_per_token) / layers)
    token_s = max(0.0, small_run.decode_seconds_per_token - small.n_layer * layer_s)
    p_small, p_deep = small_run.prefill_seconds / small_run.n_prompt, deep_run.prefill_seconds / deep_run.n_prompt
    p_layer_s = max(0.0, (p_deep - p_small) / layers)
    p_token_s = max(0.0, p_small - small.n_layer * p_layer_s)
    kv_read = prefill_attn = None
    for _kind, costs, run, deep_run_at in wide:
        if deep_run_at is None:
            continue
        # A decoded token's attention reads the cached K and V (memory-bound); a prompt's is compute.
        extra = deep_run_at.decode_seconds_per_token - run.decode_seconds_per_token
        added = costs.kv_bytes(DEPTH + 1) - costs.kv_bytes(1)
        kv_read = _positive(added / extra / 1e9) if extra > 0 else None
        # Without flash attention a prompt's queries meet every cell of the KV view (speed.py).
        p_extra = deep_run_at.prefill_seconds - run.prefill_seconds
        p_added = (costs.attn_flops(DEPTH + run.n_prompt) - costs.attn_flops(run.n_prompt)) * run.n_prompt
        prefill_attn = _positive(p_added / p_extra / 1e9) if p_extra > 0 else None
    read: dict[str, float] = {}
    gflops: dict[str, float] = {}
    for kind, costs, run, _deep in wide:
        own = dict(costs.decode_bytes).get(kind, 0)
        other = costs.decode_bytes_total - own  # the Q8_0 embedding row and output layer, the F32 norms
        spent = run.decode_seconds_per_token - token_s - costs.n_layer * layer_s
        spent -= costs.kv_bytes(1) / (kv_read * 1e9) if kv_read else 0
        spent -= other / (read["Q8_0"] * 1e9) if "Q8_0" in read else 0
        read[kind] = own / (spent if spent > 0 else run.decode_seconds_per_token) / 1e9
        flops = dict(costs.prefill_flops).get(kind, 0) * run.n_prompt
        p_spent = run.prefill_seconds - run.n_prompt * (p_token_s + costs.n_layer * p_layer_s)
        p_spent -= costs.attn_flops(run.n_prompt) * run.n_prompt / (prefill_attn * 1e9) if prefill_attn else 0
        gflops[kind] = flops / (p_spent if p_spent > 0 else run.prefill_seconds) / 1e9
    return ThreadRates(threads=threads, token_us=token_s * 1e6, layer_us=layer_s * 1e6,
                       read_gbs=tuple((k, round(v, 3)) for k, v in read.items()), kv_read_gbs=kv_read,
                       prefill_token_us=p_token_s * 1e6, prefill_layer_us=p_layer_s * 1e6,
                       prefill_gflops=tuple((k, round(v, 3)) for k, v in gflops.items()),
                       prefill_attn_gflops=prefill_attn)


def probe_device(threads: Sequence[int], *, progress: Callable[[str], None] = lambda _line: None,
                 workdir: Path | None = None) -> DeviceProbe:
    """Write the probe models, time each at every thread count in one engine, and solve for the rates."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries (only for its version)

    started = time.perf_counter()
    runs: list[tuple[str, RatesMeasured]] = []
    measured: dict[tuple[str, int, int], RatesMeasured] = {}
    costs: dict[str, ModelCosts] = {}
    with tempfile.TemporaryDirectory(prefix="workbench-probe-", dir=workdir) as folder, EngineClient() as engine:
        for model in FIXED_COST_MODELS + RATE_MODELS:
            path = write_probe_model(Path(folder) / f"{model.name}.gguf", model)
            costs[model.name] = model_costs(read_gguf(path))
            depths = (0, DEPTH) if model is RATE_MODELS[0] else (0,)
            preset = Preset(name="probe", ctx_size=DEPTH + PROMPT + 256, threads=max(threads))
            engine.load_blocking(path, preset, allow_overbudget=True)
            for count in threads:
                for depth in depths:
                    run = engine.run_op("rates", threads=count, depth=depth, n_prompt=PROMPT, n_gen=N_GEN)
                    measured[(model.name, count, depth)] = run
                    runs.append((model.name, run))
                    progress(f"{model.name}: {count} threads, depth {depth}: decode "
                             f"{1 / run.decode_seconds_per_token:,.0f} tok/s, prefill "
                             f"{run.n_prompt / run.prefill_seconds:,.0f} tok/s")
            engine.unload()
    rates = []
    for count in threads:
        fixed = [(costs[m.name], measured[(m.name, count, 0)]) for m in FIXED_COST_MODELS]
        wide = [(m.weight_type, costs[m.name], measured[(m.name, count, 0)], measured.get((m.name, count, DEPTH)))
                for m in RATE_MODELS]
        rates.append(_solve(count, fixed, wide))
    return DeviceProbe(rates=tuple(rates), runs=tuple(runs), llama_cpp=str(llama_cpp.__version__),
                       measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       seconds=time.perf_counter() - started)


def probe_model_names() -> tuple[ProbeModel, ...]:
    return FIXED_COST_MODELS + RATE_MODELS


def default_profile_name() -> str:
    """A user profile name for this machine: its host name, lowercased to the profile name's form."""
    node = "".join(c if c.isalnum() else "-" for c in platform.node().lower()).strip("-") or "machine"
    return f"{node[:40]}-probed"


def _rates_table(rates: ThreadRates) -> dict:
    table: dict = {"token_us": round(rates.token_us, 2), "layer_us": round(rates.layer_us, 3),
                   "read_gbs": dict(rates.read_gbs)}
    if rates.kv_read_gbs:
        table["kv_read_gbs"] = round(rates.kv_read_gbs, 3)
    table.update({"prefill_token_us": round(rates.prefill_token_us, 3),
                  "prefill_layer_us": round(rates.prefill_layer_us, 3), "prefill_gflops": dict(rates.prefill_gflops)})
    if rates.prefill_attn_gflops:
        table["prefill_attn_gflops"] = round(rates.prefill_attn_gflops, 3)
    return table


def probed_profile(probe: DeviceProbe, host: DeviceProfile, name: str) -> dict:
    """The user device profile for this machine: the host's detected budget plus the measured rates, with sources."""
    notes = {figure: text for figure, text in host.notes}
    notes["speed"] = probe.method
    notes["accelerator"] = "the probe measures the CPU backend only"
    data: dict = {
        "name": name,
        "description": f"this machine ({platform.node()}), rates measured by `workbench devices probe` at "
                       f"{probe.measured_at}",
        "ram_total_mb": host.ram_total_mb,
        "mem_bandwidth_gbs": host.mem_bandwidth_gbs,
        "cores": host.cores,
        "accelerator": "none",
        "reserves_mb": dict(host.reserves_mb),
        "notes": {key: notes[key] for key in notes if key != "power_limit_w"},
        "speed": {f"t{rates.threads}": _rates_table(rates) for rates in probe.rates},
    }
    return data


def write_probed_profile(probe: DeviceProbe, host: DeviceProfile, name: str, folder: Path) -> Path:
    """Write the profile as `folder/name.toml` (replacing an older probe's) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    temporary = path.with_suffix(".toml.tmp")
    header = "# Written by `workbench devices probe`; run it again to measure anew.\n"
    temporary.write_text(header + tomli_w.dumps(probed_profile(probe, host, name)), encoding="utf-8")
    temporary.replace(path)
    return path
