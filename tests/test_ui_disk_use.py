"""The models screen's Disk use tab: each cached repository's bytes, and deleting one after the question."""

from __future__ import annotations

import threading

from fakes import make_app, wait_until
from gguf_factory import write_tiny_gguf
from hubserver import hub, hub_cache  # noqa: F401 - hub is a fixture
from textual.widgets import Button, OptionList, TabbedContent

from workbench.core.hub.download import download_model
from workbench.core.paths import quantized_dir
from workbench.core.units import size_text
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.model_screen import ModelScreen
from workbench.ui.widgets import disk_use_pane
from workbench.ui.widgets.disk_use_pane import DiskUsePane

REPO = "test-org/Disk-GGUF"


async def test_disk_use_is_listed_and_a_repository_deleted_after_the_question(hub, tmp_path):
    tiny = write_tiny_gguf(tmp_path / "disk-Q4_K_M.gguf")
    hub.add_repo(REPO, {tiny.name: tiny})
    download_model(REPO, tiny.name)
    made = quantized_dir() / "made.Q8_0.gguf"
    made.parent.mkdir(parents=True)
    made.write_bytes(b"z" * 2000)
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        app.main_screen.action_open_models()
        await wait_until(pilot, lambda: isinstance(app.screen, ModelScreen) and app.screen.query(DiskUsePane)
                         and app.screen.query_one("#model-list").has_focus)  # resumed: the list took the focus
        app.screen.query_one("#model-tabs", TabbedContent).active = "disk-tab"
        pane = app.screen.query_one(DiskUsePane)
        await wait_until(pilot, lambda: len(pane.rows) == 2, what="the disk use rows")
        said = []
        pane.notify = lambda message, **kwargs: said.append(message)  # a toast may expire before it is read
        repo_row, made_row = pane.rows
        assert repo_row.key == REPO and repo_row.label.strip().startswith(size_text(tiny.stat().st_size))
        assert made_row.key == str(made) and made_row.deletable and "2.0 kB" in made_row.label

        pane.query_one("#disk-list", OptionList).highlighted = 0
        button = pane.query_one("#delete-model", Button)
        await wait_until(pilot, lambda: not button.disabled, what="Delete enabled for the repository")
        button.press()
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        assert REPO in app.screen.title_text
        await wait_until(pilot, lambda: app.screen.query_one("#confirm").region.width > 0, what="the question drawn")
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: [row.key for row in pane.rows] == [str(made)], what="the list without the repo")
        assert not (hub_cache(tmp_path) / "models--test-org--Disk-GGUF").exists()
        assert made.exists()
        assert f"Deleted {REPO}: {size_text(tiny.stat().st_size)} freed." in said


async def test_a_scan_that_ends_after_a_later_one_does_not_bring_back_a_deleted_file(monkeypatch):
    """The pane's first scan reads the disk with a file on it, then is held in its thread; the file goes, a rescan
    lists the disk without it, and only then does the first scan post what it read."""
    made = quantized_dir() / "gone.Q8_0.gguf"
    made.parent.mkdir(parents=True)
    made.write_bytes(b"z" * 2000)
    real = disk_use_pane.disk_use
    before = real(())
    assert [item.path for item in before.local] == [made]
    calls: list = []
    held, release = threading.Event(), threading.Event()

    def scan(folders):
        calls.append(folders)
        if len(calls) > 1:
            return real(folders)
        held.set()
        release.wait(60)
        return before

    monkeypatch.setattr(disk_use_pane, "disk_use", scan)
    reads: list = []  # each Read the pane handled, once it did
    handler = DiskUsePane.on_disk_use_pane_read

    def recorded(pane, message):
        handler(pane, message)
        reads.append(message)

    monkeypatch.setattr(DiskUsePane, "on_disk_use_pane_read", recorded)
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        app.main_screen.action_open_models()
        await wait_until(pilot, lambda: isinstance(app.screen, ModelScreen) and app.screen.query(DiskUsePane))
        pane = app.screen.query_one(DiskUsePane)
        await wait_until(pilot, held.is_set, what="the first scan held in its thread")
        made.unlink()
        pane.rescan()
        await wait_until(pilot, lambda: any(read.use is not None and not read.use.local for read in reads),
                         what="the rescan's list")
        assert pane.rows == []
        release.set()
        await wait_until(pilot, lambda: any(read.use is before for read in reads), 30, what="the held scan's list")
        assert pane.rows == []
