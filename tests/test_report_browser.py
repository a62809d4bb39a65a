"""The report in a real browser: headless Chromium (/usr/bin/chromium, driven by playwright, which never downloads a
browser of its own here) opens the HTML offline, a screenshot is taken, and the page is checked as drawn: the three
charts decoded, no script error and no request off the file, the numbers in the tables equal the bench files', and
a hostile preset name shown as text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_runner import run_cli
from report_files import edited, write_pair

from workbench.core.bench.report_pdf import FLAGS

CHROMIUM = "/usr/bin/chromium"
HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)>'
playwright = pytest.importorskip("playwright.sync_api", reason="the test extras install playwright")


@pytest.fixture(scope="module")
def page_of():
    """Opens an HTML file in one Chromium for the module; returns (page, console errors, requests, dialogs)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install.py installs Debian's chromium with the test extras")
    with playwright.sync_playwright() as driver:
        # playwright gives the browser a fresh profile in a temporary folder of its own (no --user-data-dir)
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=list(FLAGS))
        opened = []

        def open_page(path: Path):
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            errors: list[str] = []
            requests: list[str] = []
            dialogs: list[str] = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(path.as_uri(), wait_until="load")
            opened.append(page)
            return page, errors, requests, dialogs

        yield open_page
        for page in opened:
            page.close()
        browser.close()


@pytest.fixture(scope="module")
def bench_pair(tmp_path_factory):
    return write_pair(tmp_path_factory.mktemp("bench"))


def _report(files, out: Path) -> Path:
    result = run_cli("report", *map(str, files), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


def _cells(page, css: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"table.{css} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))")


def test_the_report_renders_in_chromium_with_the_files_numbers(page_of, bench_pair, tmp_path):
    html = _report(bench_pair, tmp_path / "report.html")
    page, errors, requests, dialogs = page_of(html)
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    charts = page.eval_on_selector_all("img.chart", "imgs => imgs.map(i => [i.dataset.chart, i.complete, "
                                       "i.naturalWidth, i.naturalHeight])")
    assert sorted(name for name, *_ in charts) == ["memory", "quality", "speed"]
    assert all(done and width > 300 and height > 100 for _, done, width, height in charts), charts
    assert errors == [] and dialogs == []
    assert {url.split(":", 1)[0] for url in requests} <= {"file", "data"}
    # Every test row of the two files, against the speed table's cells in file order.
    expected = []
    for path in bench_pair:
        records = json.loads(path.read_text())
        for pp, tg in zip(records[::2], records[1::2]):
            expected.append([tg["preset"], f"pp{pp['n_prompt']}+tg{tg['n_gen']}",
                             f"{tg['avg_ts']:.2f} ± {tg['stddev_ts']:.2f}", f"{tg['predicted_decode_tps']:.2f}",
                             f"{tg['avg_ts'] / tg['predicted_decode_tps']:.2f}",
                             f"{pp['avg_ts']:.2f} ± {pp['stddev_ts']:.2f}", f"{tg['predicted_prefill_tps']:.2f}"])
    assert [cells[1:8] for cells in _cells(page, "speed")] == expected
    memory = [(cells[1], cells[5], cells[7], cells[8]) for cells in _cells(page, "memory")]
    budgets = [json.loads(path.read_text())[0]["machine"]["device_budget_mb"] for path in bench_pair]
    assert memory == [
        (record["preset"], f"{record['peak_rss_bytes'] / 2**20:,.1f}", f"{budget:,.1f}",
         "does not fit" if record["peak_rss_bytes"] > budget * 2**20
         else "tight" if budget * 2**20 - record["peak_rss_bytes"] < budget * 2**20 / 10 else "fits")
        for path, budget in zip(bench_pair, budgets) for record in json.loads(path.read_text())[1::2]]
    energy = _cells(page, "energy")
    assert {cells[2] for cells in energy} == {"not measured [1]"}  # note 1 under the table says why
    notes = page.eval_on_selector_all("#energy ol.notes li", "items => items.map(i => [i.value, i.innerText])")
    assert notes[0] == [1, "no power source on this machine"]
    assert "not on the board" in page.inner_text("#answer")


def test_a_hostile_preset_name_is_shown_as_text_and_runs_nothing(page_of, bench_pair, tmp_path):
    hostile = edited(bench_pair[0], tmp_path / "hostile.json", {"preset": HOSTILE}, slice(0, 2))
    page, errors, requests, dialogs = page_of(_report([hostile, bench_pair[1]], tmp_path / "hostile.html"))
    assert dialogs == [] and errors == []
    assert page.eval_on_selector_all("script", "nodes => nodes.length") == 0
    assert page.eval_on_selector_all("img:not(.chart)", "nodes => nodes.length") == 0
    assert _cells(page, "speed")[0][1] == HOSTILE
    assert {url.split(":", 1)[0] for url in requests} <= {"file", "data"}


def test_the_checks_see_a_script_that_runs(page_of, tmp_path):
    """The control: a page whose script runs is seen by the same dialog and error checks."""
    control = tmp_path / "control.html"
    control.write_text("<html><body><script>alert('ran'); undefined_function();</script></body></html>")
    page, errors, _, dialogs = page_of(control)
    assert dialogs == ["ran"] and any("undefined_function" in error for error in errors)
