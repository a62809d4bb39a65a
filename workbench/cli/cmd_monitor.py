"""`workbench monitor`: headless telemetry for SSH sessions and scripts: lines, a block, or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from workbench.core.errors import WorkbenchError
from workbench.core.telemetry.metrics import MetricsServer
from workbench.core.telemetry.sample_log import SampleLog, sample_record
from workbench.core.telemetry.sampler import Sampler
from workbench.core.units import MIB

if TYPE_CHECKING:
    from workbench.core.telemetry.detect import BoardInfo
    from workbench.core.telemetry.sample import TelemetrySample

_GIB = 1024**3
_CLEAR = "\x1b[H\x1b[2J"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "monitor",
        help="print memory, CPU, temperatures, clocks, throttling, power and energy",
        description="Headless telemetry: one line per sample (a refreshing block on a terminal), or JSON "
        "lines with --json. Sources that this machine does not expose are named, never shown as 0.",
    )
    parser.add_argument("--once", action="store_true", help="print one sample and exit")
    parser.add_argument("--json", action="store_true", help="one JSON object per sample (JSON lines)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="seconds between samples (default 1; at least 0.1)")
    parser.add_argument("--count", type=int, metavar="N", help="stop after N samples")
    parser.add_argument("--root", default="/", metavar="PATH",
                        help="filesystem root to read /sys from, e.g. a recorded tree (default /)")
    parser.add_argument("--tegrastats", metavar="FILE",
                        help="a recorded tegrastats log to replay, or 'live' to run tegrastats")
    parser.add_argument("--pid", type=int, help="also show this process's RSS/USS (e.g. llama-server)")
    parser.add_argument("--log", metavar="FILE", help="append one row per sample to FILE.csv (a spreadsheet: header "
                        "once, a column per figure and its source) or FILE.jsonl")
    parser.add_argument("--log-max-mb", type=float, default=10.0, metavar="MB",
                        help="start a new log file past this size; the old one becomes FILE.1.csv (default 10)")
    parser.add_argument("--log-keep", type=int, default=5, metavar="N",
                        help="rotated log files to keep (default 5)")
    parser.add_argument("--prometheus", type=int, metavar="PORT",
                        help="serve the figures as Prometheus metrics on http://127.0.0.1:PORT/metrics")
    parser.add_argument("--prometheus-host", default="127.0.0.1", metavar="HOST",
                        help="address to serve metrics on (default 127.0.0.1; another needs --allow-remote)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow --prometheus-host to be reachable from other machines (no authentication)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="another name scrapers reach the metrics by (the Host header); other names get 421")
    parser.add_argument("--quiet", action="store_true", help="print nothing per sample (with --log or --prometheus)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.interval >= 0.1:
        raise WorkbenchError(f"--interval {args.interval} is too short", fix="give 0.1 seconds or more (0.5 = 2 Hz)")
    if args.count is not None and args.count < 1:
        raise WorkbenchError(f"--count {args.count} must be at least 1")
    if not Path(args.root).is_dir():
        raise WorkbenchError("no such folder", where=args.root, fix="give the root of a /sys tree, or leave out --root")
    if args.pid is not None:
        # A PID that was never there is a typo, not a source that is "not available here".
        if args.pid <= 0 or not psutil.pid_exists(args.pid):
            raise WorkbenchError(f"no running process {args.pid}", where="--pid",
                                 fix="give the PID of a running process, e.g. from `pgrep llama-server`")
    count = 1 if args.once else args.count
    block = sys.stdout.isatty() and not args.json and not args.once
    log = _open_log(args)
    metrics = _serve_metrics(args)
    try:
        _monitor(args, count, block, log, metrics)
    finally:
        if metrics is not None:
            metrics.close()
    return 0


def _open_log(args: argparse.Namespace):
    if not args.log:
        return None

    if not args.log_max_mb > 0:
        raise WorkbenchError(f"--log-max-mb {args.log_max_mb} must be more than 0", fix="e.g. --log-max-mb 10")
    return SampleLog(args.log, max_bytes=int(args.log_max_mb * MIB), keep=args.log_keep)


def _serve_metrics(args: argparse.Namespace):
    if args.prometheus is None:
        return None

    server = MetricsServer(args.prometheus, args.prometheus_host, allow_remote=args.allow_remote,
                           allow_hosts=tuple(args.allow_host))
    if server.remote:
        print(f"workbench: WARNING: metrics on {server.url} are readable by any machine that reaches this address "
              "(no authentication)", file=sys.stderr)
    print(f"workbench: Prometheus metrics on {server.url}", file=sys.stderr, flush=True)
    return server


def _monitor(args: argparse.Namespace, count: int | None, block: bool, log, metrics) -> None:
    with Sampler(args.root, args.pid, tegrastats=args.tegrastats) as sampler:
        try:
            # CPU load and RAPL power are differences: give the first sample a window to measure.
            time.sleep(min(args.interval, 0.5))
            shown = 0
            while count is None or shown < count:
                started = time.monotonic()
                sample = sampler.sample()
                if log is not None:
                    log.write(sample)
                if metrics is not None:
                    metrics.update(sample)
                if not args.quiet:
                    if args.json:
                        text = sample_json(sample, sampler.board)
                    elif block:
                        text = _CLEAR + format_block(sample, sampler.board)
                    else:
                        text = format_line(sample)
                    print(text, flush=True)
                shown += 1
                if sampler.finished or (count is not None and shown >= count):
                    break
                time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a monitor is stopped


def sample_json(sample: TelemetrySample, board: BoardInfo) -> str:

    data = sample_record(sample)
    data["board"] = asdict(board)
    # `timestamp` is the sampler's monotonic clock (for rates); a log needs the wall time too,
    # to line samples up with tegrastats, dmesg or a bench run.
    data["time"] = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    return json.dumps(data, separators=(",", ":"))


def _memory(sample: TelemetrySample) -> str:
    used = sample.mem_total_bytes - sample.mem_available_bytes
    text = f"mem {used / _GIB:.1f}/{sample.mem_total_bytes / _GIB:.1f} GiB"
    if sample.swap_total_bytes:
        text += f" swap {sample.swap_used_bytes / _GIB:.1f}/{sample.swap_total_bytes / _GIB:.1f} GiB"
    else:
        text += " swap none"
    if sample.engine_rss_bytes is not None:
        text += f" engine rss {sample.engine_rss_bytes / _GIB:.2f} GiB"
        if sample.engine_uss_bytes is not None:
            text += f" uss {sample.engine_uss_bytes / _GIB:.2f} GiB"
    return text


def _cpu(sample: TelemetrySample) -> str:
    loads = sample.cpu_percent
    average = sum(loads) / len(loads) if loads else 0.0
    return f"cpu {average:.0f}% [{' '.join(f'{load:.0f}' for load in loads)}]"


def _temperatures(sample: TelemetrySample) -> str:
    return " ".join(f"{t.name} {t.celsius:.1f}°C" for t in sample.temperatures)


def _clocks(sample: TelemetrySample) -> str:
    return ", ".join(
        f"cpus {c.cpus} {c.cur_khz // 1000}/{c.max_khz // 1000} MHz {c.governor}"
        + (f" (capped, hw {c.hw_max_khz // 1000})" if c.capped else "")
        for c in sample.clocks
    )


def _loads(sample: TelemetrySample) -> str:
    clocks = dict(sample.device_clocks_mhz)
    parts = [f"{name} {value:.0f}%" + (f" @{clocks[name]:.0f} MHz" if name in clocks else "") for name, value in sample.loads]
    return " ".join(parts)


def _throttle(sample: TelemetrySample) -> str:
    throttle = sample.throttle
    if throttle is None:
        return ""
    text = f"throttle: {throttle.cause}" if throttle.active else "throttle: no"
    return text + (f" ({throttle.history})" if throttle.history else "")


def _power(sample: TelemetrySample) -> str:
    if sample.total_power_w is None:
        return ""
    text = f"power {sample.total_power_w:.2f} W [{sample.total_power_source}]"
    others = [rail for rail in sample.power if not sample.total_power_source.startswith(rail.name)]
    if others:
        text += " (" + ", ".join(f"{rail.name} {rail.watts:.2f} W" for rail in others) + ")"
    if sample.energy_j is not None:
        kind = "measured" if sample.energy_source.startswith("counter") else "integrated"
        text += f" energy {sample.energy_j:.1f} J {kind}"
    return text


def _unavailable(sample: TelemetrySample) -> str:
    return "; ".join(f"{item.what}: {item.why}" for item in sample.unavailable)


def format_line(sample: TelemetrySample) -> str:
    """One line per sample: what is present, then what is not available and why."""
    parts = [time.strftime("%H:%M:%S"), _memory(sample), _cpu(sample)]
    parts += [part for part in (_temperatures(sample), _clocks(sample), _loads(sample), _throttle(sample),
                                _power(sample)) if part]
    if sample.unavailable:
        parts.append("n/a: " + _unavailable(sample))
    return " | ".join(parts)


def format_block(sample: TelemetrySample, board: BoardInfo) -> str:
    """A small block for a terminal, redrawn in place each sample."""
    rows = [
        ("board", f"{board.model} · suggested profile {board.profile} · {time.strftime('%H:%M:%S')}"),
        ("memory", _memory(sample) + f" [{sample.memory_source}]"),
        ("cpu", _cpu(sample)),
        ("temps", _temperatures(sample)),
        ("clocks", _clocks(sample)),
        ("loads", _loads(sample)),
        ("throttle", _throttle(sample).removeprefix("throttle: ")),
        ("power", _power(sample).removeprefix("power ")),
    ]
    # One unavailable source per line: joined, they made one 200-character line that an
    # 80-column terminal wraps into the next redraw.
    rows += [("n/a" if index == 0 else "", f"{item.what}: {item.why}") for index, item in enumerate(sample.unavailable)]
    return "\n".join(f"{label:<9}{value}".rstrip() for label, value in rows if value)
