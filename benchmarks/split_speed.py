"""Decode speed of the bundled model split over local llama.cpp RPC nodes, measured against the ledger's predicted split rate.

Settings: 0, 1 and 2 nodes on 127.0.0.1, one node reached on llama.cpp's own port behind its
checks, then one node behind a shaped link (a Python
TCP relay on 127.0.0.1 with a bandwidth and a one-way delay: workbench/core/rpc/link_shaper.py).
For each, the engine loads the model with every layer on the nodes, generates --n-gen
tokens greedily, and the table's headline is llama.cpp's measured decode tok/s over the
ledger's predicted split rate (the speed model's cost per token on each device, from the
host's probed figures, since a local node runs llama.cpp's CPU backend on this machine, at its
read rate from llama.cpp's own memory where a node holds the weights, plus activations / link +
round trips x latency, with the link figures from `node probe` through the same relay): within
25% on every setting is the target. The engine reads a copy of the model written in this run:
new in the page cache, as the probe's files are. Extra views beside it: the bound
(per-device bytes / bandwidth + the link terms) and "with link" (the 0-node run's measured
rate plus the link term). What the
node's message checks cost is measured apart: two loaded engines, one through a node's checks
and one on another node's llama.cpp port, take turns, and each round divides their decode tok/s.
All traffic stays on this machine. The prediction needs this machine's speed figures: by default
the run measures them first with `workbench devices probe`'s measurement at --threads (it writes no
profile), so figures and runs come from the same minutes of a machine whose speed drifts; --stored
uses the host profile's [speed] tables instead (the HOSTNAME-probed profile `devices probe` writes).

    python benchmarks/split_speed.py              # every setting
    python benchmarks/split_speed.py --smallest   # 0 and 1 node, one shaped link, 16 tokens, 4 rounds of the checks' cost
    python benchmarks/split_speed.py --stored     # the host profile's probed figures, no probe in this run
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

from workbench.core.bench.device_probe import probe_device
from workbench.core.bench.probe_models import fresh_copy
from workbench.core.config.devices import load_device
from workbench.core.config.preset import Preset
from workbench.core.config.rpc_endpoints import parse_endpoint
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.split import predict_split
from workbench.core.paths import bundled_model_path
from workbench.core.rpc.link_shaper import LinkShaper, LinkSpec
from workbench.core.rpc.local_nodes import LocalNode
from workbench.core.rpc.nodes import probe_nodes, rpc_device

LINKS = (
    LinkSpec("1 Gb/s", 1e9 / 8),
    LinkSpec("100 Mb/s", 100e6 / 8),
    LinkSpec("100 Mb/s +2 ms", 100e6 / 8, 0.002),
)
TARGET = 0.25  # the target: measured within 25% of the predicted split rate
PROMPT = (ChatMessage("user", "Write a short story about a lighthouse keeper."),)


def _tps(value):
    return f"{value:.1f}" if value else "n/a"


def _bound(model, preset, host, addresses, host_bandwidth):
    endpoints = [parse_endpoint(address) for address in addresses]
    reports = probe_nodes(endpoints, measure_link=True, timeout_s=30)
    for report in reports:
        if not report.reachable:
            raise SystemExit(f"split_speed: node {report.address} unreachable: {report.reason}")
    devices = []
    for index, (endpoint, report) in enumerate(zip(endpoints, reports)):
        device = rpc_device(index, endpoint, report, None)
        # A local node reads its memory as fast as the host does: the same RAM.
        devices.append(dataclasses.replace(device, bandwidth_bytes_per_s=host_bandwidth,
                                           bandwidth_source="host bandwidth (local node)",
                                           speed_profile=host, speed_source="local node: the host's figures"))
    split = predict_split(model, preset, devices, host_budget_bytes=host.budget_mb << 20,
                          host_bandwidth_bytes_per_s=host_bandwidth, host_profile=host)
    return split, reports


def _measure(client, path, preset, n_gen):
    client.load_blocking(path, preset, device=None, allow_overbudget=True)
    return _turn(client, n_gen)


def _turn(client, n_gen):
    finished = None
    for event in client.chat(PROMPT, Sampling(temperature=0.0, seed=1, max_tokens=n_gen)):
        if isinstance(event, TurnFinished):
            finished = event
    if finished is None or finished.generated_tokens < 2:
        raise SystemExit("split_speed: the turn did not finish")
    return finished.decode_tps


def _guard_cost(path, base, guarded: str, direct: str, n_gen: int, rounds: int) -> list[float]:
    """Decode tok/s through a node's checks over tok/s on a llama.cpp port directly, per round.

    Two engines stay loaded (one per node, as a node serves one client) and take turns in the
    order ABBA..., so each ratio divides figures taken over the same seconds of a noisy machine.
    """
    clients = [EngineClient(), EngineClient()]
    try:
        for client, address in zip(clients, (guarded, direct)):
            client.load_blocking(path, dataclasses.replace(base, rpc=(address,), gpu_layers=-1),
                                 device=None, allow_overbudget=True)
        ratios = []
        for index in range(rounds):
            order = (0, 1) if index % 2 == 0 else (1, 0)
            speeds = {which: _turn(clients[which], n_gen) for which in order}
            ratios.append(speeds[0] / speeds[1])
        return ratios
    finally:
        for client in clients:
            client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-gen", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads on the host and on each node")
    parser.add_argument("--smallest", action="store_true", help="0 and 1 node and one shaped link, 16 tokens")
    parser.add_argument("--stored", action="store_true", help="the host profile's probed figures (no probe now)")
    args = parser.parse_args()
    n_gen = 16 if args.smallest else args.n_gen
    model = read_gguf(bundled_model_path())
    host = load_device("host")
    host_bandwidth = host.mem_bandwidth_gbs * 1e9
    if not host_bandwidth:
        raise SystemExit("split_speed: the host profile has no memory bandwidth; run `workbench devices` once to measure it")
    if not args.stored:
        probe = probe_device((args.threads,))
        host = dataclasses.replace(host, thread_rates=probe.rates, notes=(("speed", probe.method),) + host.notes)
        print(f"host speed figures: {probe.method}", file=sys.stderr, flush=True)
    if not host.thread_rates:
        raise SystemExit("split_speed: the host profile has no measured speed figures, so the ledger cannot predict a "
                         "split's rate; run `workbench devices probe` first (about a minute), or drop --stored")
    base = Preset(name="split-speed", ctx_size=512, batch_size=256, ubatch_size=256, threads=args.threads)
    folder = tempfile.TemporaryDirectory(prefix="split-speed-")
    path = fresh_copy(bundled_model_path(), Path(folder.name))  # new in the page cache, as the probe's files are
    nodes = [LocalNode(threads=args.threads) for _ in range(2)]  # --smallest: the second only for the checks' cost
    shapers: list[LinkShaper] = []
    rows = []
    last_basis = ""
    guard_ratios: list[float] = []
    try:
        settings = [("0 nodes", ())] + [(f"{n} node{'s' if n > 1 else ''} (loopback)", tuple(x.address for x in nodes[:n]))
                                         for n in range(1, 2 if args.smallest else len(nodes) + 1)]
        if nodes[0].server_address:  # the same node's llama.cpp port, skipping the node's message checks
            settings.append(("1 node, checks skipped", (nodes[0].server_address,)))
            guard_ratios = _guard_cost(path, base, nodes[0].address, nodes[1].server_address, n_gen, 4 if args.smallest else 8)
        for link in LINKS[-1:] if args.smallest else LINKS:
            shaper = LinkShaper("127.0.0.1", nodes[0].port, link)
            shapers.append(shaper)
            settings.append((f"1 node over {link.name}", (shaper.address,)))
        for label, addresses in settings:
            preset = dataclasses.replace(base, rpc=addresses, gpu_layers=-1 if addresses else 0)
            if addresses:
                split, reports = _bound(model, preset, host, addresses, host_bandwidth)
            else:
                split = predict_split(model, preset, (), host_budget_bytes=host.budget_mb << 20,
                                      host_bandwidth_bytes_per_s=host_bandwidth, host_profile=host)
                reports = ()
            bound, rate = split.decode_empty, split.rate_empty
            last_basis = rate.basis
            client = EngineClient()
            try:
                started = time.monotonic()
                measured = _measure(client, path, preset, n_gen)
                seconds = time.monotonic() - started
            finally:
                client.close()
            predicted = bound.tokens_per_s
            rows.append((label, measured, rate.tokens_per_s, predicted, bound.network_seconds * 1000, bound.dominant(),
                         seconds, ", ".join(f"{r.latency_s * 1000:.2f} ms / {r.link_bytes_per_s * 8 / 1e6:,.0f} Mb/s"
                                            for r in reports if r.latency_s and r.link_bytes_per_s),
                         rate.missing))
            print(f"  {label}: {measured:.1f} tok/s measured, predicted {_tps(rate.tokens_per_s)}, bound "
                  f"{_tps(predicted)}", file=sys.stderr, flush=True)
    finally:
        for shaper in shapers:
            shaper.close()
        for node in nodes:
            node.stop()
        folder.cleanup()
    print(f"\nbundled model, {n_gen} generated tokens, {args.threads} thread(s); host bandwidth "
          f"{host.mem_bandwidth_gbs:g} GB/s ({host.name} profile)\n")
    # The headline: measured over the ledger's own predicted split rate (the speed model per device
    # plus the link terms), within TARGET on every setting.
    print(f"{'setting':<28} {'measured':>9} {'predicted':>9} {'meas/pred':>9}  {'within 25%':<10}")
    met = True
    for label, measured, rate_tps, _bound_tps, _network_ms, _dominant, _seconds, _probe, missing in rows:
        within = rate_tps is not None and abs(measured / rate_tps - 1) <= TARGET
        met = met and within
        ratio = f"{measured / rate_tps:.2f}" if rate_tps else "n/a"
        verdict = ("yes" if within else "no") if rate_tps else f"n/a ({', '.join(missing) or 'no figures'})"
        print(f"{label:<28} {measured:>9.1f} {_tps(rate_tps):>9} {ratio:>9}  {verdict:<10}")
    print(f"\ntarget (measured within 25% of the ledger's predicted split rate on every setting): "
          f"{'MET' if met else 'NOT MET'}")
    print(f"prediction basis ({rows[-1][0]}): {last_basis}")
    # Extra views: the bandwidth bound, and "with link" = the 0-node run's measured time per token
    # plus the ledger's network term for the setting (what the link adds on top of what this host achieves).
    local_s = 1.0 / rows[0][1]
    print("\nextra views, not the target: the bandwidth bound, and the 0-node measured rate plus the link term")
    print(f"{'setting':<28} {'bound':>8} {'meas/bound':>10} {'with link':>9} "
          f"{'meas/with':>9} {'net ms/tok':>10}  probe (rtt / link)  dominant")
    for label, measured, _rate_tps, predicted, network_ms, dominant, _seconds, probe, _missing in rows:
        ratio = f"{measured / predicted:.2f}" if predicted else "n/a"
        with_link = 1.0 / (local_s + network_ms / 1000)
        print(f"{label:<28} {_tps(predicted):>8} {ratio:>10} {with_link:>9.1f} "
              f"{measured / with_link:>9.2f} {network_ms:>10.3f}  {probe or '-':<18}  {dominant}")
    if guard_ratios:
        print(f"\nthe node's message checks (rpc.node_proxy): decode through them / on llama.cpp's port, "
              f"alternating turns: median {statistics.median(guard_ratios):.3f} over {len(guard_ratios)} rounds "
              f"({', '.join(f'{r:.3f}' for r in guard_ratios)})")
    print("\nThe bound is an upper limit from memory bandwidth and the link; on a CPU-only host decode is often "
          "compute-bound, so meas/bound well under 1 says how far from the bandwidth limit each setting runs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
