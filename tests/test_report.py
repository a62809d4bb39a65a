"""`workbench report`: the report model from bench files of two devices, the HTML it writes, and hostile bench
files (a bench file is outside data) refused or shown escaped. The browser's view is tests/test_report_browser.py."""

from __future__ import annotations

import math
import re

import pytest
from cli_runner import run_cli
from report_files import BOARD_ROWS, HOST_ROWS, HOSTNAME, edited, write_pair

from workbench.core.bench.report import read_results
from workbench.core.bench.report_model import build_report
from workbench.core.errors import WorkbenchError

HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)> $\\frac{a}{b}$ & "q"'


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_pair(tmp_path_factory.mktemp("bench"))


@pytest.fixture(scope="module")
def report(pair):
    return build_report([(path.name, read_results(path)) for path in pair], "9.9.9")


def test_rows_of_both_devices_keep_the_files_figures(report):
    host, board = report.devices
    assert (host.simulated, board.simulated) == (False, True)
    assert board.label == f"raspberry-pi-5-8gb (simulated on {HOSTNAME})"
    for device, specs in ((host, HOST_ROWS), (board, BOARD_ROWS)):
        assert [(r.preset, r.decode.measured, r.decode.stddev, r.ppl, r.memory.peak_bytes >> 20, r.decode.predicted)
                for r in device.rows] == list(specs)


def test_verdicts_against_each_budget(report):
    # The board's budget is 270 MiB: 300 is over it, 250 leaves 20 (under a tenth of 270: tight); the host's 6000 fits.
    verdicts = [(row.device == report.devices[1].label, row.preset, row.memory.verdict) for row in report.rows]
    assert verdicts == [(False, "quality-q8", "fits"), (False, "balanced-q4km", "fits"),
                        (False, "edge-int4-kv8", "fits"), (True, "quality-q8", "does not fit"),
                        (True, "balanced-q4km", "tight")]


def test_noise_pairs_are_those_under_twice_the_standard_error_of_the_difference(report):
    expected = []
    for device, specs in zip(report.devices, (HOST_ROWS, BOARD_ROWS)):
        ordered = sorted(specs, key=lambda spec: -spec[1])  # three runs each (report_files)
        expected += [(device.label, a[0], b[0]) for a, b in zip(ordered, ordered[1:])
                     if abs(a[1] - b[1]) < 2 * math.sqrt(a[2] ** 2 / 3 + b[2] ** 2 / 3)]
    assert list(report.noise) == expected == [(report.devices[0].label, "edge-int4-kv8", "balanced-q4km")]


def test_the_answer_in_words(report):
    host, board = report.answers
    # edge-int4-kv8 is fastest, but balanced-q4km is within its noise with the lower perplexity
    assert host == (f"On {HOSTNAME} (host), balanced-q4km gives 60.0 tok/s with +0.30 perplexity against quality-q8, "
                    "using 250.0 MiB of 5.9 GiB.")
    # the board: quality-q8 does not fit; the board's predicted rate leads, the host's is named as the host's
    assert board.startswith(f"On raspberry-pi-5-8gb (a board simulated on {HOSTNAME}), balanced-q4km is predicted "
                            "to give 12.0 tok/s with +0.30 perplexity")
    assert f"59.0 tok/s was measured on {HOSTNAME}, not on the board" in board


@pytest.fixture(scope="module")
def written(pair, tmp_path_factory):
    """`workbench report A B --out report.html --pdf`, run once for the module."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    result = run_cli("report", *map(str, pair), "--out", str(out), "--pdf")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"wrote {out}", f"wrote {out.with_suffix('.pdf')}"]
    return out


def test_a_board_is_named_by_its_profiles_description(pair):
    import dataclasses

    board = read_results(pair[1])
    described = dataclasses.replace(board, machine=dataclasses.replace(
        board.machine, device_description="Raspberry Pi 5 8 GB: 4 x Cortex-A76, 32-bit LPDDR4X"))
    (sentence,) = build_report([("pi5.json", described)], "1").answers
    assert sentence.startswith(f"On Raspberry Pi 5 8 GB (raspberry-pi-5-8gb, a board simulated on {HOSTNAME}), ")


def test_the_html_holds_every_section_and_no_script(written):
    page = written.read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "default-src 'none'" in page  # the CSP: no script, no fetch
    assert sorted(re.findall(r'data-chart="(\w+)"', page)) == ["memory", "quality", "speed"]
    for section in ("answer", "speed", "quality", "memory", "energy", "appendix"):
        assert f'<section id="{section}">' in page
    assert page.count('<pre class="preset-toml">') == 3  # quality-q8, balanced-q4km, edge-int4-kv8
    assert "not on the board" in page and "no power source on this machine" in page
    # the files say llama-cpp-python 0.3.36: its vendored llama.cpp is commit 0c1e570 (the package's vendor/ tree)
    assert page.count("llama.cpp build: llama-cpp-python 0.3.36 (vendored llama.cpp 0c1e570)") == 2


def test_a_hostile_preset_name_is_text_in_the_page_and_the_charts(pair, tmp_path):
    hostile = edited(pair[0], tmp_path / "hostile.json", {"preset": HOSTILE}, slice(0, 2))
    out = tmp_path / "report.html"
    result = run_cli("report", str(hostile), str(pair[1]), "--out", str(out))
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert "<script" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in page


@pytest.mark.parametrize(("change", "rows", "message"), [
    ({"avg_ts": math.nan}, slice(1, 2), "avg_ts = 'nan' is not a number"),
    ({"prefill_tps": math.inf}, slice(0, 2), "prefill_tps = 'inf'"),
    ({"model_size": 10 ** 400}, slice(0, 2), "model_size = '1000000000"),
    ({"peak_rss_bytes": -1}, slice(0, 2), "peak_rss_bytes = '-1' is not a count"),
    ({"preset": "p" * 10_000}, slice(0, 2), "the preset name is not a text of at most 200"),
    ({"ppl": "10.0"}, slice(0, 2), "ppl = '10.0' is not a number"),
    ({"n_gen": True}, slice(1, 2), "n_gen = 'True' is not a count"),
])
def test_a_hostile_figure_is_refused_naming_file_row_and_field(pair, tmp_path, change, rows, message):
    hostile = edited(pair[0], tmp_path / "hostile.json", change, rows)
    result = run_cli("report", str(hostile), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2
    assert message in result.stderr and "hostile.json: row 1" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_too_many_rows_or_files_are_refused(pair, tmp_path):
    import json

    records = json.loads(pair[0].read_text())
    many = []
    for index in range(150):  # 150 presets of two test rows each, twice: more rows than a report shows
        for record in records[:2]:
            many.append({**record, "preset": f"p{index}"})
    (tmp_path / "many.json").write_text(json.dumps(many))
    build_report([("many.json", read_results(tmp_path / "many.json"))], "1")  # 150 rows: shown
    with pytest.raises(WorkbenchError, match="300 bench rows: a report shows at most 256"):
        build_report([("many.json", read_results(tmp_path / "many.json"))] * 2, "1")
    with pytest.raises(WorkbenchError, match="17 bench files: a report shows at most 16"):
        build_report([("a", read_results(pair[0]))] * 17, "1")


def test_pdf_is_printed_by_chromium(written):
    pdf = written.with_suffix(".pdf").read_bytes()
    pages = re.findall(rb"/Type\s*/Page(?!s)", pdf)  # each page object; the /Pages tree node is not one
    assert pdf.startswith(b"%PDF-") and len(pages) >= 3  # the answer, then speed, quality, memory on their own


def test_a_simulated_boards_answer_is_ranked_by_its_predicted_rates():
    from report_files import machine, row

    from workbench.core.bench.report import BenchResults

    # here "fast-here" decodes faster, but the board's model predicts "fast-there" faster: the board's order counts
    rows = (row("fast-here", 50.0, 1.0, 10.0, 250, 5.0), row("fast-there", 30.0, 1.0, 10.0, 250, 9.0))
    (sentence,) = build_report([("pi5.json", BenchResults(machine("raspberry-pi-5-8gb", 6000), rows))], "1").answers
    assert "fast-there is predicted to give 9.0 tok/s" in sentence and "30.0 tok/s was measured on" in sentence
    assert "+0.00 perplexity against quality-q8" in sentence  # report_files' rows name quality-q8 the reference
    reference = (row("quality-q8", 30.0, 1.0, 10.25, 250, 9.0),)
    (sentence,) = build_report([("q8.json", BenchResults(machine("host", 6000), reference))], "1").answers
    assert "with perplexity 10.25 (the reference the others' perplexity is against)" in sentence
