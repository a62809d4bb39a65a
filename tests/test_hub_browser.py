"""The HubBrowser widget in a small host app, driven with Pilot against the test hub server."""

from __future__ import annotations

import threading

import pytest
from fakes import wait_for, wait_until
from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Button, DataTable, Static

from hubserver import Fault, closed_port_url, hub  # noqa: F401 - hub is a fixture
from workbench.core.hub.cache import cached_models
from workbench.core.hub.search import curated_models
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import DeviceProfile
from workbench.core.config.presets import load_preset
from workbench.ui.widgets.hub_browser import OFFLINE_HINT, HubBrowser

REPO = "bartowski/SmolLM2-135M-Instruct-GGUF"  # the first curated repository
FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"
BOARD = DeviceProfile(name="board-1gb", ram_total_mb=1024, reserves_mb=(("os", 300),), cores=4)


class HubScreen(Screen):
    def compose(self) -> ComposeResult:
        yield HubBrowser(load_preset("as-is"), BOARD)


class Host(App):
    def __init__(self, *, on_screen: bool = False) -> None:
        super().__init__()
        self.on_screen = on_screen
        self.downloaded: list = []

    def compose(self) -> ComposeResult:
        if not self.on_screen:
            yield HubBrowser("as-is", "raspberry-pi-5-8gb")  # names work too: resolved in a worker

    def on_hub_browser_model_downloaded(self, message: HubBrowser.ModelDownloaded) -> None:
        self.downloaded.append(message.path)


def text_of(app: App, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


@pytest.fixture
def served(hub):
    hub.add_repo(REPO, {FILE: bundled_model_path()}, downloads=4_000)
    hub.add_repo("Qwen/Qwen2.5-0.5B-Instruct-GGUF", {"qwen2.5-0.5b-instruct-q4_1.gguf": bundled_model_path()}, downloads=9_000)
    return hub


async def test_curated_search_files_preview_and_download(served, tmp_path):
    app = Host()
    async with app.run_test(size=(180, 50)) as pilot:
        repos = app.query_one("#hub-repos", DataTable)
        assert repos.row_count == len(curated_models())
        files = app.query_one("#hub-files", DataTable)
        await wait_until(pilot, lambda: files.row_count == 1, what="the first curated repository's files")  # listed on mount
        assert "GGUF files" in text_of(app, "#hub-status")

        await pilot.click("#hub-query")
        await pilot.press(*"qwen", "enter")
        await wait_until(pilot, lambda: repos.row_count == 1, what="search results")
        assert repos.get_row_at(0)[:2] == ["Qwen/Qwen2.5-0.5B-Instruct-GGUF", "9,000"]
        await wait_until(pilot, lambda: text_of(app, "#hub-status") == "Qwen/Qwen2.5-0.5B-Instruct-GGUF: 1 GGUF files.",
                       what="the first result's files")

        await pilot.click("#hub-curated")
        await wait_until(pilot, lambda: repos.row_count == len(curated_models()), what="the curated list again")
        await wait_until(pilot, lambda: files.row_count == 1, what="files of the curated repository")
        assert files.get_row_at(0)[:4] == [FILE, "Q4_1", "98.4 MB", "1"]  # then the Fit column (test_ui_fit)

        files.focus()
        files.move_cursor(row=0)
        await wait_until(pilot, lambda: "FITS" in text_of(app, "#hub-preview"), what="the fit preview")
        preview = text_of(app, "#hub-preview")
        assert "Q4_1 (name and header agree)" in preview and "as-is on raspberry-pi-5-8gb" in preview
        assert "largest context that fits: 8,192" in preview and "header: the header cache (nothing fetched)" in preview  # read once already, on mount

        download = app.query_one("#hub-download", Button)
        assert not download.disabled and str(download.label) == "Download"
        await pilot.click("#hub-download")
        await wait_until(pilot, lambda: app.downloaded, what="the download")
        (cached,) = cached_models()
        assert app.downloaded == [cached.path] and cached.repo == REPO
        assert "Downloaded and verified" in text_of(app, "#hub-progress-text")
        assert app.query_one("#hub-cancel", Button).disabled


async def test_an_unreachable_hub_says_so_and_points_to_local_models(served, monkeypatch):
    endpoint = closed_port_url()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    app = Host()
    async with app.run_test(size=(180, 50)) as pilot:
        status = app.query_one("#hub-status", Static)
        await wait_until(pilot, lambda: status.has_class("-problem"), what="the unreachable line")
        text = text_of(app, "#hub-status")
        assert f"Hugging Face hub unreachable at {endpoint}" in text and OFFLINE_HINT in text
        assert app.query_one("#hub-repos", DataTable).row_count == len(curated_models())  # still offered


async def test_a_download_keeps_running_when_the_screen_is_left(served):
    release = threading.Event()
    app = Host(on_screen=True)
    async with app.run_test(size=(180, 50)) as pilot:
        await app.push_screen(HubScreen())
        files = app.screen.query_one("#hub-files", DataTable)
        await wait_until(pilot, lambda: files.row_count == 1, what="files")
        files.move_cursor(row=0)
        preview = app.screen.query_one("#hub-preview", Static)
        await wait_until(pilot, lambda: "FITS" in str(preview.render()), what="the fit preview")
        served.set_fault(REPO, FILE, Fault(stall_after=30_000_000, stall_seconds=120, release=release))  # hold it mid-file
        await pilot.click("#hub-download")
        await wait_until(pilot, lambda: served.events["stalled"].is_set(), what="the stall point")
        app.pop_screen()  # leave while the link is stalled
        release.set()  # the link comes back while no screen shows the download

        await wait_until(pilot, lambda: cached_models() != (), what="the download finishing with no screen showing it")
        await app.push_screen(HubScreen())  # come back: the new browser shows the finished job
        # the file is in the cache a moment before the worker records the job's outcome: the browser shows it
        # on mount, or when the job's end message reaches it
        progress_text = app.screen.query_one("#hub-progress-text", Static)
        await wait_until(pilot, lambda: "Downloaded and verified" in str(progress_text.render()), what="the finished job shown")
        # The same transfer went on (no resume): the one GET without a Range (previews read ranges) sent every byte.
        (transfer,) = [r for r in served.file_requests() if r.range is None]
        assert transfer.body_bytes == bundled_model_path().stat().st_size


async def test_quitting_the_app_stops_the_download_and_keeps_the_partial(served):
    from workbench.core.hub.cache import partial_downloads
    from workbench.ui.download_jobs import current_job

    release = threading.Event()
    app = Host()
    async with app.run_test(size=(180, 50)) as pilot:
        files = app.query_one("#hub-files", DataTable)
        await wait_until(pilot, lambda: "FITS" in text_of(app, "#hub-preview"), what="the fit preview")
        served.set_fault(REPO, FILE, Fault(stall_after=20_000_000, stall_seconds=120, release=release, cut_on_release=True, times=None))
        files.focus()
        await pilot.click("#hub-download")
        await wait_until(pilot, lambda: any(p.size_bytes >= 20_000_000 for p in partial_downloads()), what="the stall point")
    job = current_job(app)
    release.set()  # the held link drops after the app quit: the job must stop there, not resume
    wait_for(lambda: not job.running, what="the download job to stop")
    assert "download cancelled at" in str(job.outcome)
    (partial,) = partial_downloads()
    assert partial.size_bytes == 20_000_000 and cached_models() == ()


async def test_a_model_that_does_not_fit_says_so_on_the_download_button(served):
    class TinyHost(App):
        def compose(self) -> ComposeResult:
            yield HubBrowser(load_preset("as-is"), DeviceProfile(name="board-160mb", ram_total_mb=160, reserves_mb=(("os", 100),)))

    app = TinyHost()
    async with app.run_test(size=(180, 50)) as pilot:
        await wait_until(pilot, lambda: "DOES NOT FIT" in text_of(app, "#hub-preview"), what="the fit preview")
        assert "no context fits this device with this preset" in text_of(app, "#hub-preview")
        button = app.query_one("#hub-download", Button)
        assert str(button.label) == "Download anyway" and button.variant == "warning"
