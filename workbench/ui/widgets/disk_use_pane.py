"""Disk use per model (HF cache repositories, the workbench's folder, the scanned folders) and deleting one, asked first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from workbench.core.errors import WorkbenchError
from workbench.core.hub.disk_use import (
    CachedRepoUse,
    Deleted,
    DiskUse,
    LocalFileUse,
    delete_cached_model,
    delete_local_model,
    disk_use,
)
from workbench.core.units import size_text
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.worker_requests import Requests


@dataclass(frozen=True)
class DiskRow:
    key: str  # the repository id or the file's path
    label: str
    deletable: bool
    question: str  # the confirmation's body


def disk_rows(use: DiskUse) -> list[DiskRow]:
    rows = []
    for repo in use.repos:
        revisions = f"{len(repo.revisions)} revision{'s' if len(repo.revisions) != 1 else ''}"
        rows.append(DiskRow(repo.repo, f"{size_text(repo.size_bytes):>9}  {repo.repo}  ({revisions}, HF cache)", True,
                            _repo_question(repo)))
    for local in use.local:
        where = "the workbench's folder" if local.deletable else "your folder: delete it yourself"
        rows.append(DiskRow(str(local.path), f"{size_text(local.size_bytes):>9}  {local.path.name}  ({where})",
                            local.deletable, _local_question(local)))
    return rows


def _repo_question(repo: CachedRepoUse) -> str:
    return (f"{size_text(repo.size_bytes)} in {len(repo.revisions)} revision(s) of {repo.repo}. huggingface_hub's cache "
            "API removes them; a file another repository links is kept. A later download fetches it again.")


def _local_question(local: LocalFileUse) -> str:
    return f"{size_text(local.size_bytes)}: {local.path}. `workbench quantize` makes it again from its source."


class DiskUsePane(Vertical):
    """Lists what the models take on disk; Delete asks, then removes the highlighted one in a worker."""

    @dataclass
    class Read(Message):
        use: DiskUse | None
        error: str
        request: int  # the rescan it answers (Requests): an earlier one's is dropped

    @dataclass
    class Removed(Message):
        deleted: Deleted | None
        error: str = ""

    def __init__(self, folders: tuple[Path, ...] = (), **kwargs) -> None:
        super().__init__(**kwargs)
        self.folders = folders
        self.rows: list[DiskRow] = []
        self._requests = Requests()

    def compose(self) -> ComposeResult:
        yield OptionList(id="disk-list")
        yield Static("Reading the disk use…", id="disk-total", markup=False)
        with Horizontal(id="disk-buttons"):
            yield Button("Delete…", id="delete-model", variant="error", disabled=True)

    def on_mount(self) -> None:
        self.rescan()

    def rescan(self, folders: tuple[Path, ...] | None = None) -> None:
        if folders is not None:
            self.folders = folders
        self._read(self.folders, self._requests.ask("disk-use"))

    @work(thread=True, exclusive=True, group="disk-use")
    def _read(self, folders: tuple[Path, ...], request: int) -> None:
        try:
            self.post_message(self.Read(disk_use(folders), "", request))
        except (WorkbenchError, OSError) as error:
            self.post_message(self.Read(None, str(error), request))

    def on_disk_use_pane_read(self, message: Read) -> None:
        message.stop()
        if self._requests.stale("disk-use", message.request):
            return  # a scan from before a deletion or another folder
        options = self.query_one("#disk-list", OptionList)
        options.clear_options()
        if message.use is None:
            self.rows = []
            self.query_one("#disk-total", Static).update(message.error)
            return
        self.rows = disk_rows(message.use)
        options.add_options([Option(row.label, id=row.key) for row in self.rows])
        problems = "".join(f"\nnot counted: {problem}" for problem in message.use.problems)
        self.query_one("#disk-total", Static).update(
            f"HF cache {message.use.cache}: {size_text(message.use.cache_bytes)} in model repositories "
            f"(huggingface_hub's scan){problems}")
        if self.rows:
            options.highlighted = 0

    @property
    def current(self) -> DiskRow | None:
        index = self.query_one("#disk-list", OptionList).highlighted
        return self.rows[index] if index is not None and index < len(self.rows) else None

    @on(OptionList.OptionHighlighted, "#disk-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        row = self.current
        self.query_one("#delete-model", Button).disabled = row is None or not row.deletable

    @on(Button.Pressed, "#delete-model")
    def ask_delete(self, event: Button.Pressed) -> None:
        event.stop()
        row = self.current
        if row is None or not row.deletable:
            return

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self._delete(row.key)

        name = Path(row.key).name if row.key.startswith("/") else row.key
        self.app.push_screen(ConfirmModal(f"Delete {name}?", row.question, "Delete"), answered)

    @work(thread=True, group="disk-delete")  # each deletion reports
    def _delete(self, key: str) -> None:
        try:
            deleted = delete_local_model(key) if key.startswith("/") else delete_cached_model(key)
        except (WorkbenchError, OSError) as error:
            self.post_message(self.Removed(None, str(error)))
            return
        self.post_message(self.Removed(deleted))

    def on_disk_use_pane_removed(self, message: Removed) -> None:
        message.stop()
        if message.deleted is None:
            self.notify(message.error, title="Not deleted", severity="error", timeout=10)
        else:
            kept = f"; {len(message.deleted.kept)} file(s) of other repositories kept" if message.deleted.kept else ""
            self.notify(f"Deleted {message.deleted.what}: {size_text(message.deleted.freed_bytes)} freed{kept}.",
                        title="Models")
        self.rescan()
