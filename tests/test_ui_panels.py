"""Each live panel in a small host app: set its attributes, read what it draws."""

import dataclasses

from fakes import MIB, FakeSampler, panel_host, rendered, styles_of, wait_until

from workbench.core.engine.events import Loaded, TurnFinished
from workbench.core.ledger.types import DOES_NOT_FIT, FITS, Ledger
from workbench.ui.panel_views import LedgerView, ThermalView
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.speed_panel import SpeedPanel, SpeedView
from workbench.ui.widgets.thermal_panel import ThermalPanel


def ledger(*, weights=3200, kv=2400, budget=6192, verdict=FITS):
    total = weights + kv + 300 + 100
    return Ledger(model="m", preset="p", device="jetson", ctx_size=4096, cache_type_k="q8_0", cache_type_v="q8_0",
                  ram_total_bytes=8192 * MIB, reserves_bytes=(("os", 1200 * MIB), ("dma_frame_buffers", 800 * MIB)),
                  budget_bytes=budget * MIB, weights_bytes=weights * MIB, kv_bytes=kv * MIB, compute_bytes=300 * MIB,
                  overhead_bytes=100 * MIB, total_bytes=total * MIB, headroom_bytes=(budget - total) * MIB,
                  verdict=verdict, reason="why", kv_bytes_per_token=18432, max_ctx_by_kv_type=(("f16", 4096),),
                  decode_tps_bound=(20.0, 12.0))


def loaded():
    return Loaded(model_path="/m.gguf", preset_name="p", n_ctx=4096, n_ctx_train=8192,
                  model_buffer_bytes=3180 * MIB, kv_buffer_bytes=2400 * MIB, compute_buffer_bytes=290 * MIB,
                  load_seconds=1.0, rss_bytes=5000 * MIB, uss_bytes=4900 * MIB, pid=1)


async def test_ledger_panel_shows_budget_lines_and_three_columns():
    panel = LedgerPanel(classes="panel")
    async with panel_host(panel).run_test(size=(70, 30)) as pilot:
        assert "No prediction yet" in rendered(panel)
        panel.view = LedgerView(ledger=ledger())
        await pilot.pause()
        text = rendered(panel)
        for line in ("device jetson", "8,192 MiB", "reserve os", "reserve dma frame buffers", "left for the LLM",
                     "6,192 MiB", "3,200", "2,400", "predicted", "llama.cpp", "measured", "weights", "KV cache",
                     "compute", "overhead", "headroom"):
            assert line in text, line
        assert "3,180" not in text  # nothing reported before loading
        panel.view = LedgerView(ledger=ledger(), loaded=loaded(), sample=FakeSampler(engine_pid=7).sample())
        await pilot.pause()
        text = rendered(panel)
        assert "3,180" in text and "233" in text  # llama.cpp's buffer, the engine's measured RSS
        assert "swap in use" not in text


async def test_ledger_panel_warns_on_swap_and_over_budget():
    panel = LedgerPanel(classes="panel")
    async with panel_host(panel).run_test(size=(70, 30)) as pilot:
        panel.view = LedgerView(ledger=ledger(budget=4000, verdict=DOES_NOT_FIT),
                                sample=FakeSampler(swap_used_bytes=512 * MIB).sample())
        await pilot.pause()
        text = rendered(panel)
        assert "swap in use (512.0 MiB)" in text
        assert "-2,000" in text  # headroom below zero
        over = pilot.app.theme_variables["ledger-over"].lower()
        assert over in styles_of(panel, "█")  # the part of the bar past the budget


async def test_kv_panel_grid_follows_segments_and_theme():
    panel = KvPanel(classes="panel")
    async with panel_host(panel).run_test(size=(60, 20)) as pilot:
        assert "No model loaded" in rendered(panel)
        panel.n_ctx, panel.bytes_per_token, panel.cache_types = 2048, 9216, "K f16 / V f16"
        panel.segments = (("system", 512), ("current", 512))
        panel.cells_used = 1024
        await pilot.pause()
        text = rendered(panel)
        assert "cells used 1,024 / 2,048 (50%)" in text
        assert "1 block = 16 tokens = 0.1 MiB at K f16 / V f16" in text
        assert text.count("■") == 2048 // 16 + 5  # every block plus the five legend swatches
        system_colour = pilot.app.theme_variables["kv-system"].lower()
        assert system_colour in styles_of(panel, "■")
        pilot.app.theme = "projector-light"
        await pilot.pause()
        assert pilot.app.theme_variables["kv-system"].lower() in styles_of(panel, "■")
        assert system_colour not in styles_of(panel, "■")
        panel.shift_notice = "context shift: 1 earlier turns (64 tokens) dropped"
        await pilot.pause()
        assert "context shift" in rendered(panel)


async def test_speed_panel_rates_from_engine_timestamps_and_turn_table():
    panel = SpeedPanel(classes="panel")
    async with panel_host(panel).run_test(size=(80, 30)) as pilot:
        assert "bandwidth bound n/a" in rendered(panel.query_one("#speed-turns"))
        panel.view = SpeedView(bound_tps=55.0)
        panel.turn_started()
        panel.tokens_arrived(5, 100.0, 100.1)  # tokens 1..5 over 0.1 s: 4 tokens / 0.1 s
        panel.tokens_arrived(5, 100.15, 100.3)
        assert [round(rate) for _, rate in panel.series[-1]] == [40, 30]
        panel.turn_finished(TurnFinished(text="x", stop_reason="stop", prompt_tokens=10, reused_tokens=0,
                                         generated_tokens=10, ttft_s=0.2, prefill_tps=300.0, decode_tps=33.0,
                                         kv_cells_used=20, n_ctx=2048, context_shifts=0, started_at=99.8,
                                         finished_at=100.3))
        await pilot.pause()
        table = rendered(panel.query_one("#speed-turns"))
        assert "200 ms" in table and "300.0" in table and "33.0" in table and "prefill t/s" in table
        # the chart is drawn after a refresh (or at the 1 s tick), not when the figures are set
        await wait_until(pilot, lambda: "bound 55" in rendered(panel.query_one("#speed-chart")))


async def test_speed_panel_shows_the_prediction_beside_the_measured_rates():
    from workbench.core.ledger.types import SpeedPrediction

    measured = SpeedPrediction(decode_tps_empty=117.6, decode_tps_full=60.0, prefill_tps=214.6, ttft_ms=2385.0,
                               basis="measured: ...", band=(0.85, 1.15), method="measured", threads=1, backend="CPU")
    panel = SpeedPanel(classes="panel")
    async with panel_host(panel).run_test(size=(80, 30)) as pilot:
        assert "predicted: no ledger yet" in rendered(panel.query_one("#speed-turns"))
        panel.view = SpeedView(bound_tps=500.0, prediction=measured)
        await pilot.pause()
        text = rendered(panel.query_one("#speed-turns"))
        assert "predicted: decode 117.6, prefill 214.6 tok/s (measured, x0.85-x1.15)" in text
        panel.turn_finished(TurnFinished(text="x", stop_reason="stop", prompt_tokens=10, reused_tokens=0,
                                         generated_tokens=10, ttft_s=0.2, prefill_tps=300.0, decode_tps=101.0,
                                         kv_cells_used=20, n_ctx=2048, context_shifts=0, started_at=99.8,
                                         finished_at=100.3))
        await pilot.pause()
        text = rendered(panel.query_one("#speed-turns"))
        assert "101.0" in text and "predicted: decode 117.6" in text  # the measured turn above the prediction
        panel.view = SpeedView(bound_tps=500.0, prediction=dataclasses.replace(measured, method="bound"))
        await pilot.pause()
        assert "predicted: bound only" in rendered(panel.query_one("#speed-turns"))
        text = " ".join(rendered(panel.query_one("#speed-turns")).split())
        assert "`workbench devices probe` measures this machine" in text
        # a simulated board's bound-only prediction: probing this machine would not help; what the board lacks
        panel.view = SpeedView(bound_tps=500.0, prediction=dataclasses.replace(measured, method="bound"),
                               board="jetson-orin-nano-8gb", host="this machine")
        await pilot.pause()
        text = " ".join(rendered(panel.query_one("#speed-turns")).split())
        assert "predicted on jetson-orin-nano-8gb: bound only (no published figures for CPU on it)" in text


async def test_thermal_panel_values_sparklines_and_missing_sensors():
    panel = ThermalPanel(classes="panel")
    sampler = FakeSampler()
    async with panel_host(panel).run_test(size=(70, 20)) as pilot:
        assert "Waiting for the first telemetry sample" in rendered(panel)
        for _ in range(4):
            panel.view = ThermalView(sample=sampler.sample())
            await pilot.pause()
        text = rendered(panel)
        assert "cpu" in text and "56.0 °C" in text and "powersave" in text and "capped below 3,600 MHz" in text
        assert "throttle: none" in text and "power 8.5 W" in text
        assert any(bar in text for bar in "▁▂▃▄▅▆▇█")
        start = sampler.sample()
        end = sampler.sample()
        panel.view = panel.view.after_turn(start, end, 20)
        await pilot.pause()
        assert "last turn 0.50 J/token" in rendered(panel)
        panel.view = ThermalView(sample=FakeSampler(sensors=False).sample())
        await pilot.pause()
        text = rendered(panel)
        assert "no thermal sensors exposed" in text and "°C" not in text and "0.0 W" not in text


async def test_speed_panel_plots_each_answer_from_its_first_token_and_keeps_the_last_five():
    panel = SpeedPanel(classes="panel")

    def turn(n: int) -> TurnFinished:
        return TurnFinished(text="x", stop_reason="stop", prompt_tokens=10, reused_tokens=0, generated_tokens=10,
                            ttft_s=0.1 * n, prefill_tps=300.0, decode_tps=30.0 + n, kv_cells_used=20, n_ctx=2048,
                            context_shifts=0, started_at=0.0, finished_at=1.0)

    async with panel_host(panel).run_test(size=(80, 30)) as pilot:
        for number in range(1, 8):
            start = 1000.0 * number  # ten idle minutes and more between answers (engine clock)
            panel.turn_started()
            panel.tokens_arrived(5, start, start + 0.1)
            panel.tokens_arrived(5, start + 0.15, start + 0.3)
            panel.turn_finished(turn(number))
        await pilot.pause()
        assert len(panel.series) == 5 and len(panel.turns) <= 5
        # every answer's points start at its own first token: 0.1 s and 0.3 s in, not 7,000 s
        assert all([round(x, 2) for x, _ in points] == [0.1, 0.3] for points in panel.series)
        table = rendered(panel.query_one("#speed-turns"))
        assert "#7" in table and "#5" in table and "#4" not in table  # numbered over the whole session
        await wait_until(pilot, lambda: "last 5 answers" in rendered(panel.query_one("#speed-chart")))


def test_a_legend_breaks_between_pairs_never_inside_one():
    from workbench.ui.widgets.colours import legend

    items = [("red", "weights"), ("blue", "KV cache"), ("green", "compute"), ("grey", "overhead"), ("white", "headroom")]
    for width in range(12, 60):
        lines = legend(items, width).plain.split("\n")
        pairs = [pair for line in lines for pair in line.split("  ")]
        assert pairs == [f"■ {label}" for _, label in items], (width, lines)
        assert all(len(line) <= width for line in lines)


def test_the_ledger_view_takes_a_sample_only_when_a_shown_figure_changes():
    first = FakeSampler(engine_pid=7).sample()
    view = LedgerView(ledger=ledger()).with_sample(first)
    assert view.sample is first
    later = dataclasses.replace(first, timestamp=first.timestamp + 1)
    assert view.with_sample(later) is view  # a redraw costs: nothing the panel shows changed
    swapping = dataclasses.replace(first, swap_used_bytes=first.swap_used_bytes + 512 * MIB)
    assert view.with_sample(swapping).sample is swapping
