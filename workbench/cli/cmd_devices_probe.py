"""`workbench devices probe`: measure this machine's decode and prefill rates with llama.cpp and write a user device profile."""

from __future__ import annotations

import argparse
import os
import re
import sys

from workbench.cli.json_output import write_json
from workbench.cli.speed_text import rates_line
from workbench.core.bench.device_probe import probe_device
from workbench.core.bench.probe_passes import moved_figures
from workbench.core.bench.probed_profile import write_probed_profile
from workbench.core.config.cpu_topology import parse_cpu_list
from workbench.core.config.devices import user_devices_dir
from workbench.core.config.host import detect_host, probed_profile_name
from workbench.core.errors import WorkbenchError
from workbench.core.units import threads_text

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def add_probe_parser(actions: argparse._SubParsersAction) -> None:
    probe = actions.add_parser(
        "probe", help="measure this machine's decode and prefill rates with llama.cpp (under a minute)",
        description="Time llama.cpp on generated random-weight models (two tiny ones for the fixed costs per "
        "token and per layer, one wide one per weight type for the read rate and prefill FLOP/s, the Q8_0 "
        "one at depth 1024 for attention) at each thread count, and write a user device profile with the "
        "figures and how they were measured. `workbench ledger --device NAME` then predicts from them.")
    probe.add_argument("--threads", default="", help="thread counts to measure, e.g. 1,2,4 (default: 1 and all cores)")
    probe.add_argument("--name", default="", help="profile name (default: HOSTNAME-probed)")
    probe.add_argument("--cpu-cores", default="", help="pin the engine to these CPUs, e.g. 4-7 (one probe per "
                       "core type on a board whose cores differ, each with its own --name)")
    probe.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the rates as JSON")
    probe.set_defaults(func=run_probe)


def _thread_counts(text: str) -> tuple[int, ...]:
    cores = os.cpu_count() or 1
    if not text:
        return tuple(sorted({1, cores}))
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise WorkbenchError(f"--threads {text!r} is not a list of numbers", fix="Write it like --threads 1,2,4") from None
    if not counts or counts[0] < 1 or counts[-1] > 4096 or len(counts) > 16:
        raise WorkbenchError(f"--threads {text!r}: use 1 to 16 counts from 1 to 4096", fix="e.g. --threads 1,4")
    return tuple(counts)


def run_probe(args: argparse.Namespace) -> int:
    name = args.name or probed_profile_name()
    if not _NAME.match(name) or name == "host":
        raise WorkbenchError(f"--name {name!r} is not a profile name",
                             fix="Use lowercase letters, digits, '.', '_' and '-' (not 'host'), e.g. --name my-board")
    threads = _thread_counts(args.threads)
    try:
        cpu_cores = parse_cpu_list(args.cpu_cores) if args.cpu_cores else ()
    except ValueError as error:
        raise WorkbenchError(f"--cpu-cores {args.cpu_cores!r}: {error}", fix="Write it like --cpu-cores 4-7") from None
    as_json = getattr(args, "json", False)
    progress = (lambda line: None) if as_json else (lambda line: sys.stderr.write(line + "\n"))
    probe = probe_device(threads, progress=progress, cpu_cores=cpu_cores)
    path = write_probed_profile(probe, detect_host(), name, user_devices_dir())
    moved = moved_figures(probe.rates, probe.kept_disturbed)
    if as_json:
        write_json({"profile": name, "path": str(path), "seconds": round(probe.seconds, 1), "method": probe.method,
                    "bounded": list(probe.bounded), "moved": list(moved),
                    "rates": [{"threads": r.threads, "token_us": r.token_us, "layer_us": r.layer_us, "node_us": r.node_us,
                               "read_gbs": dict(r.read_gbs), "kv_read_gbs": r.kv_read_gbs,
                               "prefill_token_us": r.prefill_token_us, "prefill_layer_us": r.prefill_layer_us,
                               "prefill_element_ns": r.prefill_element_ns,
                               "prefill_gflops": dict(r.prefill_gflops),
                               "attn_gflops": r.attn_gflops, "prefill_attn_points": r.prefill_attn_points,
                               "cached_read_gbs": dict(r.cached_read_gbs), "cache_mb": r.cache_mb,
                               "row_ns": r.row_ns, "node_us_range": r.node_us_range or None,
                               "read_gbs_range": r.read_gbs_range or None,
                               "cached_read_gbs_range": r.cached_read_gbs_range or None,
                               "unmapped_read_gbs": r.unmapped_read_gbs}
                              for r in probe.rates]})
        return 0
    for rates in probe.rates:
        flops = ", ".join(f"{kind} {g:.0f}" for kind, g in rates.prefill_gflops)
        sys.stdout.write(f"{threads_text(rates.threads)}: {rates_line(rates)}; "
                         f"prefill GFLOP/s {flops} + {rates.prefill_element_ns:.3f} ns/elementwise element\n")
    for line in probe.bounded:
        sys.stdout.write(f"prefill FLOP/s past linear scaling (the machine moved while it was measured): {line}\n")
    if moved:
        sys.stdout.write("the machine moved while it was probed (each range widens the predictions' band; a probe "
                         "on a quiet machine may land elsewhere): " + "; ".join(moved) + "\n")
    sys.stdout.write(f"measured in {probe.seconds:.0f} s; wrote {path}\n"
                     f"predict with it: workbench ledger MODEL --device {name}"
                     + (" (or --device host: the host takes this machine's probed figures)" if not args.name else "")
                     + "\n")
    return 0
