"""The models screen's Disk use tab: each cached repository's bytes, and deleting one after the question."""

from __future__ import annotations

from fakes import make_app, wait_until
from gguf_factory import write_tiny_gguf
from hubserver import hub, hub_cache  # noqa: F401 - hub is a fixture
from textual.widgets import Button, OptionList, TabbedContent

from workbench.core.hub.download import download_model
from workbench.core.paths import quantized_dir
from workbench.core.units import size_text
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.model_screen import ModelScreen
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
