"""The probe's prefill FLOP/s at more threads: bounded by linear scaling from the next lower thread count."""

from __future__ import annotations

import json

import pytest

from workbench.core.bench.device_probe import DeviceProbe
from workbench.core.bench.thread_scaling import SCALING_MARGIN, bounded_by_fewer_threads
from workbench.core.config.preset import ThreadRates


def _rates(threads: int, **gflops: float) -> ThreadRates:
    return ThreadRates(threads=threads, token_us=10, layer_us=1, read_gbs=(("Q8_0", 10.0),), kv_read_gbs=None,
                       prefill_token_us=1, prefill_layer_us=1, prefill_gflops=tuple(gflops.items()))


def test_a_fit_past_the_threads_share_is_bounded_and_named():
    # two fits of this machine's probes: Q8_0 414 GFLOP/s at 2 threads against 79 at 1, Q6_K 2,663 against 205
    one = _rates(1, Q8_0=79.0, Q4_K=100.0, Q6_K=205.0)
    two = _rates(2, Q8_0=414.0, Q4_K=200.0, Q6_K=2663.0, Q4_1=70.0)
    (kept_one, kept_two), notes = bounded_by_fewer_threads([two, one])  # fewest threads first, whatever the order
    assert kept_one == one
    table = dict(kept_two.prefill_gflops)
    assert SCALING_MARGIN == pytest.approx(1.15)
    assert table["Q8_0"] == pytest.approx(79 * 2 * 1.15) and table["Q6_K"] == pytest.approx(205 * 2 * 1.15)
    assert table["Q4_K"] == 200.0  # linear scaling is no fit past it
    assert table["Q4_1"] == 70.0  # not measured at 1 thread: nothing to bound it by
    assert [kind for kind, _ in kept_two.prefill_gflops] == ["Q8_0", "Q4_K", "Q6_K", "Q4_1"]
    assert len(notes) == 2
    assert notes[0].startswith("Q8_0 at 2 threads: 414 fitted, bounded to 182") and "its 79 at 1" in notes[0]
    assert notes[1].startswith("Q6_K at 2 threads: 2,663 fitted, bounded to ") and "its 205 at 1" in notes[1]


def test_each_count_is_bounded_by_the_next_lower_one_as_bounded():
    rates = [_rates(1, Q8_0=100.0), _rates(2, Q8_0=1000.0), _rates(4, Q8_0=1000.0)]
    bounded, notes = bounded_by_fewer_threads(rates)
    assert [dict(r.prefill_gflops)["Q8_0"] for r in bounded] == pytest.approx([100, 230, 529])
    assert len(notes) == 2 and notes[1].startswith("Q8_0 at 4 threads: 1,000 fitted, bounded to 529")


def test_steady_fits_pass_unchanged_and_the_method_says_what_was_bounded():
    rates = (_rates(1, Q8_0=100.0), _rates(2, Q8_0=190.0))
    assert bounded_by_fewer_threads(rates) == (rates, ())
    probe = DeviceProbe(rates=rates, runs=(), llama_cpp="0", measured_at="now", seconds=1.0,
                        bounded=("Q8_0 at 2 threads: 414 fitted, bounded to 182",))
    assert "(bounded here: Q8_0 at 2 threads: 414 fitted, bounded to 182)" in probe.method
    assert "bounded here" not in DeviceProbe(rates=rates, runs=(), llama_cpp="0", measured_at="now", seconds=1.0).method


def test_devices_probe_says_which_figures_it_bounded(cli, monkeypatch):
    import workbench.cli.cmd_devices_probe as command
    from workbench.core.config.devices import load_device

    rates, notes = bounded_by_fewer_threads([_rates(1, Q8_0=79.0), _rates(2, Q8_0=414.0)])
    probe = DeviceProbe(rates=rates, runs=(), llama_cpp="0", measured_at="now", seconds=1.0, bounded=notes)
    monkeypatch.setattr(command, "probe_device", lambda *args, **kwargs: probe)  # the minute of timing: not here
    code, out, _ = cli("devices", "probe", "--threads", "1,2", "--name", "box")
    assert code == 0
    assert "prefill FLOP/s past linear scaling (the machine moved while it was measured): Q8_0 at 2 threads: 414" in out
    assert "Q8_0 182" in out  # the 2-thread line gives the figure kept
    assert "(bounded here: Q8_0 at 2 threads: 414 fitted" in dict(load_device("box").notes)["speed"]
    code, out, _ = cli("devices", "probe", "--threads", "1,2", "--name", "box", "--json")
    assert code == 0 and json.loads(out)["bounded"] == list(notes)
