"""A board profile on another machine is announced as a simulation: the memory verdict is the board's, the measured
speed this machine's, and the board's predicted rate stands beside it (in workbench chat, bench's table and the
app's speed panel); a rate measured above the board's prediction is never shown without saying whose it is."""

from __future__ import annotations

import json
import platform
import re

from cli_runner import run_cli
from fakes import panel_host, rendered
from report_files import BOARD_ROWS, machine, row

from workbench.core.bench.report import BenchResults, to_markdown
from workbench.core.config.host import probed_profile_name, profile_is_this_machine
from workbench.core.engine.events import TurnFinished
from workbench.core.ledger.types import SpeedPrediction
from workbench.ui.widgets.speed_panel import SpeedPanel, SpeedView

BOARD = "raspberry-pi-5-8gb"


def test_only_the_host_and_its_probed_profile_are_this_machine():
    assert profile_is_this_machine("host") and profile_is_this_machine(probed_profile_name())
    assert profile_is_this_machine("lab-probed", "Lab") and not profile_is_this_machine("lab-probed", "other")
    assert not profile_is_this_machine(BOARD)


def test_bench_markdown_says_whose_speed_it_measured():
    board = to_markdown(BenchResults(machine(BOARD, 270), tuple(row(*spec) for spec in BOARD_ROWS)))
    host = to_markdown(BenchResults(machine("host", 6000), tuple(row(*spec) for spec in BOARD_ROWS)))
    assert f"{BOARD} is a board simulated on {machine(BOARD, 270).hostname}: the memory verdict is the board's" in board
    assert "the board's own rates are the predicted columns" in board and "simulated" not in host


def test_workbench_chat_on_a_board_profile_puts_the_boards_predicted_rate_beside_the_measured_one():
    ledger = run_cli("ledger", "bundled", "--device", BOARD, "--preset", "as-is", "--json")
    assert ledger.returncode == 0, ledger.stderr
    predicted = json.loads(ledger.stdout)["predicted_decode_tps"]["empty_context"]
    chat = run_cli("chat", "bundled", "--device", BOARD, "--preset", "as-is", "--max-tokens", "12", "--temp", "0",
                   stdin="Say hello.\n")
    assert chat.returncode == 0, chat.stderr
    said = chat.stdout + chat.stderr
    host = platform.node()
    assert (f"note: {BOARD} is a board simulated on {host}: the memory verdict is the board's, but the measured "
            f"speed is {host}'s; the board's predicted decode is {predicted:.1f} tok/s at empty context") in said
    eval_rate = float(re.search(r"^eval rate: +([\d.]+) tokens/s", said, re.M).group(1))
    board_line = re.search(r"^board eval rate: +([\d.]+) tok/s predicted on " + BOARD + "(.*)$", said, re.M)
    board_rate = float(board_line.group(1))
    assert abs(board_rate - predicted) / predicted < 0.1  # the same model a few tokens into the context
    if eval_rate > board_rate:  # a laptop core outruns a Pi 5: the line must say so (the else is checked below)
        assert f"measured is {host}'s, {eval_rate / board_rate:.1f}x the board's" in board_line.group(2)
    else:
        assert board_line.group(2) == ""


async def test_the_speed_panel_names_a_simulated_boards_figures():
    prediction = SpeedPrediction(decode_tps_empty=12.0, decode_tps_full=9.0, prefill_tps=80.0, ttft_ms=6400.0,
                                 basis="published", band=(0.4, 1.3), method="published", threads=4, backend="CPU")
    panel = SpeedPanel(classes="panel")
    async with panel_host(panel).run_test(size=(100, 30)) as pilot:
        panel.view = SpeedView(bound_tps=100.0, prediction=prediction, board=BOARD, host="laptop")
        await pilot.pause()
        text = " ".join(rendered(panel.query_one("#speed-turns")).split())
        assert f"predicted on {BOARD}: decode 12.0, prefill 80.0 tok/s" in text
        assert f"{BOARD} is simulated on laptop: the memory verdict is the board's, the measured t/s are laptop's" in text
        assert panel.border_title == f"Tokens/sec measured here, not on {BOARD}"
        panel.turn_finished(TurnFinished(text="x", stop_reason="stop", prompt_tokens=10, reused_tokens=0,
                                         generated_tokens=10, ttft_s=0.2, prefill_tps=300.0, decode_tps=33.0,
                                         kv_cells_used=20, n_ctx=2048, context_shifts=0, started_at=99.8,
                                         finished_at=100.3))
        await pilot.pause()
        text = " ".join(rendered(panel.query_one("#speed-turns")).split())
        assert f"decode 33.0 here is above the board's predicted 12.0: laptop's rate, not {BOARD}'s" in text
        panel.view = SpeedView(bound_tps=100.0, prediction=prediction)  # the host's own profile: no such lines
        await pilot.pause()
        assert "simulated" not in rendered(panel.query_one("#speed-turns")) and panel.border_title == "Tokens/sec"



def test_a_board_sweep_says_so_keeps_its_preset_and_stays_out_of_the_boards_history(tmp_path):
    import tomllib

    from workbench.core.bench.report import read_results
    from workbench.core.bench.sweep import shipped_eval_text
    from workbench.core.ledger.speed_history import history_path, read_history

    preset = tmp_path / "tiny.toml"
    preset.write_text('name = "tiny"\nweights = "keep"\nctx_size = 256\n')
    eval_file = tmp_path / "eval.txt"
    eval_file.write_text(shipped_eval_text()[:300])
    out = tmp_path / "pi5.json"
    result = run_cli("bench", "--model", "bundled", "--presets", str(preset), "--device", BOARD, "-p", "8", "-n", "4",
                     "-r", "1", "--ppl-ctx", "64", "--eval-text", str(eval_file), "--output", "json", "--out", str(out))
    assert result.returncode == 0, result.stderr
    host = platform.node()
    assert f"workbench: {BOARD} is a board simulated on {host}: the memory verdict is the board's" in result.stderr
    assert "This sweep stays out of the board's speed history." in result.stderr
    assert f"{BOARD} is a board simulated on {host}" in result.stdout  # the table's note
    (measured,) = read_results(out).rows
    assert measured.predicted_decode_tps is not None  # the board's rate is there, beside the measured one
    kept = tomllib.loads(measured.preset_toml)
    assert (kept["weights"], kept["ctx_size"]) == ("keep", 256)
    assert BOARD not in read_history(history_path())


async def test_the_panels_announce_a_simulated_board_when_its_model_loads():
    import dataclasses

    from test_ui_panels import ledger, loaded

    from workbench.ui.widgets.panel_grid import PanelGrid

    grid = PanelGrid()
    async with panel_host(grid).run_test(size=(160, 48)) as pilot:
        grid.show_ledger(dataclasses.replace(ledger(), device=BOARD))
        grid.model_loaded(loaded())
        await pilot.pause()
        notes = [(note.title, note.message) for note in pilot.app._notifications]
        assert notes == [("simulated board", f"{BOARD} is simulated on this machine: the memory verdict is the "
                          "board's, the measured tok/s are this machine's; Tokens/sec shows the board's predicted rate")]
        grid.show_ledger(dataclasses.replace(ledger(), device="host"))
        grid.model_loaded(loaded())
        await pilot.pause()
        assert len(pilot.app._notifications) == 1  # this machine's own profile: nothing to announce
