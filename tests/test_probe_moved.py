"""The probe names the figures that moved between its passes, so a user knows to probe again on a quiet machine."""

from __future__ import annotations

import json

from workbench.core.bench.device_probe import DeviceProbe
from workbench.core.bench.probe_passes import moved_figures
from workbench.core.config.preset import ThreadRates


def _rates(threads: int, node=(), read=(), cached=()) -> ThreadRates:
    return ThreadRates(threads=threads, token_us=10, layer_us=1, read_gbs=(("Q8_0", 16.0),), kv_read_gbs=None,
                       prefill_token_us=1, prefill_layer_us=1, prefill_gflops=(("Q8_0", 100.0),),
                       node_us_range=node, read_gbs_range=read, cached_read_gbs_range=cached)


# Ranges from two probes on this machine: one in a steady minute, one through a slow spell.
STEADY = (_rates(1, node=(0.18, 0.19), read=(15.9, 16.7), cached=(20.0, 20.9)),
          _rates(2, node=(0.45, 0.50), read=(25.9, 27.9), cached=(31.9, 35.3)))
UNSTEADY = (_rates(1, node=(0.09, 0.58), read=(10.0, 14.6), cached=(15.9, 19.1)),
            _rates(2, node=(0.59, 1.20), read=(22.8, 28.7), cached=(13.5, 36.7)))


def test_figures_that_moved_past_the_ratio_are_named_with_their_range():
    assert moved_figures(STEADY) == ()
    assert moved_figures(UNSTEADY, kept_disturbed=3) == (
        "cost per graph op at 1 thread: 0.09-0.58 us (6.44x) between passes",
        "Q8_0 read rate at 1 thread: 10.00-14.60 GB/s (1.46x) between passes",
        "cost per graph op at 2 threads: 0.59-1.20 us (2.03x) between passes",
        "read rate from the cache at 2 threads: 13.50-36.70 GB/s (2.72x) between passes",
        "3 runs were kept disturbed (other processes over 10% of a core, or the median token over 1.25x the "
        "fastest) once the time for measuring again was spent",
    )
    # 1.3x apart is the most a figure may move unnamed; unknown ranges name nothing
    assert moved_figures([_rates(2, node=(1.0, 1.3))]) == ()
    assert moved_figures([_rates(2, node=(1.0, 1.32))]) == (
        "cost per graph op at 2 threads: 1.00-1.32 us (1.32x) between passes",)
    assert moved_figures([_rates(1)], kept_disturbed=1) == (
        "1 run was kept disturbed (other processes over 10% of a core, or the median token over 1.25x the fastest) "
        "once the time for measuring again was spent",)


def _probe(rates, kept_disturbed=0) -> DeviceProbe:
    return DeviceProbe(rates=rates, runs=(), llama_cpp="0", measured_at="now", seconds=1.0,
                       kept_disturbed=kept_disturbed)


def test_devices_probe_says_what_moved_and_a_steady_probe_says_nothing(cli, monkeypatch):
    import workbench.cli.cmd_devices_probe as command

    monkeypatch.setattr(command, "probe_device", lambda *args, **kwargs: _probe(UNSTEADY, 3))  # the minute of timing
    code, out, _ = cli("devices", "probe", "--threads", "1,2", "--name", "box")
    assert code == 0
    moved = [line for line in out.splitlines() if line.startswith("the machine moved while it was probed")]
    assert len(moved) == 1 and "a probe on a quiet machine may land elsewhere" in moved[0]
    assert "cost per graph op at 2 threads: 0.59-1.20 us (2.03x)" in moved[0]
    assert "3 runs were kept disturbed" in moved[0]
    code, out, _ = cli("devices", "probe", "--threads", "1,2", "--name", "box", "--json")
    assert code == 0 and len(json.loads(out)["moved"]) == 5

    monkeypatch.setattr(command, "probe_device", lambda *args, **kwargs: _probe(STEADY))
    code, out, _ = cli("devices", "probe", "--threads", "1,2", "--name", "box")
    assert code == 0 and "wrote" in out and "moved" not in out
    code, out, _ = cli("devices", "probe", "--threads", "1,2", "--name", "box", "--json")
    assert code == 0 and json.loads(out)["moved"] == []
