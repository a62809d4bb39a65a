"""`workbench devices`: list device profiles and their budgets; `devices show NAME`: each figure's source."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from workbench.cli import text_table
from workbench.cli.cmd_devices_probe import add_probe_parser
from workbench.cli.json_output import write_json
from workbench.cli.speed_text import rates_line
from workbench.cli.text_table import format_table
from workbench.core.config.bandwidth import host_bandwidth
from workbench.core.config.cpu_topology import host_cpu_topology
from workbench.core.config.devices import device_catalog, device_origin, load_device, user_devices_dir
from workbench.core.config.host import detect_host
from workbench.core.config.preset import Preset
from workbench.core.config.preset_cores import core_choice

UNKNOWN = "unknown"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "devices",
        help="list device profiles: RAM, reserves, budget, bandwidth, power, cores",
        description="List the shipped and user device profiles and `host` (this machine, detected; its "
        "memory bandwidth is measured once and cached). `workbench devices show NAME` prints where "
        "each figure comes from.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-host", action="store_true", help="leave out the detected host")
    parser.add_argument("--remeasure", action="store_true",
                        help="probe the host's memory bandwidth again instead of using the cached figure")
    parser.set_defaults(func=run)
    actions = parser.add_subparsers(dest="devices_action", metavar="show|probe")
    show = actions.add_parser("show", help="print a device's figures with their sources")
    show.add_argument("device", help="device name, 'host', or path to a TOML file")
    show.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    show.set_defaults(func=run_show)
    add_probe_parser(actions)


def _record(device) -> dict:
    return {
        "name": device.name,
        "description": device.description,
        "ram_total_mb": device.ram_total_mb,
        "reserves_mb": dict(device.reserves_mb),
        "reserved_mb": device.reserved_mb,
        "budget_mb": device.budget_mb,
        "mem_bandwidth_gbs": device.mem_bandwidth_gbs or None,  # unknown is null, never 0
        "power_limit_w": device.power_limit_w,
        "cores": device.cores,
        "effective_bandwidth_gbs": device.effective_bandwidth_gbs,
        "effective_gflops": device.effective_gflops,
        "effective_backend": device.effective_backend,
        "speed": {f"t{r.threads}": dataclasses.asdict(r) for r in device.thread_rates},
        "notes": dict(device.notes),
        "origin": device_origin(device),
        "source": device.source,
    } | ({"cpu_cores": _host_cores()} if _is_host(device) else {})


def _is_host(device) -> bool:
    return device.name == "host" and device.source == "detected"


def _host_cores() -> dict:
    """Which of this machine's CPUs threads = 0 runs on, and why (from /sys/devices/system/cpu)."""
    topology = host_cpu_topology()
    choice = core_choice(Preset(name="threads-0"))
    return {"cpus": list(topology.all_cpus), "fast_cpus": list(topology.fast),
            "big_little": topology.heterogeneous, "basis": topology.basis or None,
            "threads_0": choice.threads, "pinned_cpus": list(choice.cpus), "why": choice.reason,
            "problems": list(topology.problems)}


def _cores_line() -> str:
    return f"Host cores: {core_choice(Preset(name='threads-0')).reason}.\n"


def _number(value: float | None, unit: str = "") -> str:
    if not value:
        return UNKNOWN
    text = f"{value:g}"
    return f"{text} {unit}" if unit else text


def _reserves(device) -> str:
    if not device.reserves_mb:
        return "0"
    parts = ", ".join(f"{name} {mb}" for name, mb in device.reserves_mb)
    return f"{device.reserved_mb} ({parts})"


def devices_table(devices, width: int | None = None) -> str:
    """The device table; on a terminal narrower than it, reserves as one total and short headers
    (an 80-column SSH session otherwise wraps every row; `devices show` itemises the reserves)."""

    rows = [
        (d.name, d.ram_total_mb, _reserves(d), d.budget_mb, _number(d.mem_bandwidth_gbs), _number(d.power_limit_w),
         d.cores, device_origin(d))
        for d in devices
    ]
    headers = ("NAME", "RAM MiB", "RESERVES MiB", "BUDGET MiB", "BANDWIDTH GB/s", "POWER W", "CORES", "SOURCE")
    table = format_table(headers, rows, right=(1, 3, 4, 5, 6))
    if width is None or max(len(line) for line in table.splitlines()) <= width:
        return table
    rows = [(name, ram, str(d.reserved_mb), *rest) for d, (name, ram, _, *rest) in zip(devices, rows)]
    return format_table(("NAME", "RAM MiB", "RESERVED", "BUDGET", "GB/s", "POWER W", "CORES", "SOURCE"), rows,
                        right=(1, 2, 3, 4, 5, 6))


def run(args: argparse.Namespace) -> int:
    catalog = device_catalog()
    devices = catalog.entries
    # A malformed file is named on a line of its own; the others are listed all the same.
    broken = "".join(f"{file.line}\n" for file in catalog.broken)
    if not args.no_host:

        devices += (detect_host(bandwidth=host_bandwidth(refresh=args.remeasure)),)
    if args.json:
        write_json([_record(d) for d in devices])
        sys.stderr.write(broken)
        return 0
    sys.stdout.write(devices_table(devices, text_table.terminal_width()) + broken)
    if not args.no_host:
        sys.stdout.write("\n" + _cores_line())
    sys.stdout.write("\nBudget = RAM minus reserves: what is left for the model.\n"
                     "`workbench devices show NAME` itemises the reserves and gives each figure's source.\n"
                     f"User devices live in {user_devices_dir()}.\n")
    return 0


def run_show(args: argparse.Namespace) -> int:
    device = load_device(args.device)
    if getattr(args, "json", False):
        write_json(_record(device))
        return 0
    notes = dict(device.notes)
    lines = [
        # the profile's *_mb figures are MiB: the ledger multiplies them by 2**20, as llama.cpp counts
        ("ram_total_mb", f"{device.ram_total_mb:,} MiB"),
        *((f"reserves_mb.{name}", f"{mb:,} MiB") for name, mb in device.reserves_mb),
        ("budget", f"{device.budget_mb:,} MiB (RAM minus reserves)"),
        ("mem_bandwidth_gbs", _number(device.mem_bandwidth_gbs, "GB/s")),
        ("power_limit_w", _number(device.power_limit_w, "W")),
        ("cores", str(device.cores)),
        ("effective_bandwidth_gbs", _number(device.effective_bandwidth_gbs, "GB/s")
         + (f" ({device.effective_backend.upper()})" if device.effective_bandwidth_gbs else "")),
        ("effective_gflops", _number(device.effective_gflops, "GFLOP/s")),
        *(("speed", f"[speed.t{rates.threads}] {rates_line(rates)}") for rates in device.thread_rates),
    ]
    origin = device_origin(device)
    where = f": {device.source}" if origin in ("shipped", "user", "file") else ""
    sys.stdout.write(f"{device.name} ({origin}{where})\n")
    if device.description:
        sys.stdout.write(f"{device.description}\n")
    width = max(len(key) for key, _ in lines)
    for key, value in lines:
        source = notes.get(key, "" if key == "budget" else "no source given")
        sys.stdout.write(f"  {key.ljust(width)}  {value}" + (f"\n  {'':{width}}  source: {source}" if source else "") + "\n")
    if _is_host(device):
        sys.stdout.write(_cores_line())
    return 0
