"""Choose a model: bundled, local folders, the Hugging Face cache, or the hub; see its inspect summary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import (
    Button,
    Footer,
    Header,
    Input,
    OptionList,
    Static,
    TabbedContent,
    TabPane,
)
from textual.widgets.option_list import Option

from workbench.ui.messages import ModelInspected, ModelsFound
from workbench.ui.model_catalog import (
    find_models,
    load_model_folders,
    save_model_folders,
)
from workbench.ui.model_summary import model_summary
from workbench.ui.selection import Selection
from workbench.ui.widgets.disk_use_pane import DiskUsePane
from workbench.ui.worker_requests import Requests


class ModelScreen(Screen[tuple[str, str] | None]):
    """Dismisses with (path, label) of the chosen model, or None; a download finished meanwhile is offered."""

    @dataclass
    class ModelOffered(Message):
        """A model (a finished download) to add to the main screen's list without choosing it."""

        path: Path

    CSS_PATH = "model_screen.tcss"
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back"),
        Binding("ctrl+u", "use_model", "Use model"),
        Binding("f5", "rescan", "Rescan"),
    ]

    def __init__(self, selection: Selection) -> None:
        super().__init__()
        self.selection = selection
        self.entries: dict[str, str] = {}  # path -> label
        self.highlighted: str | None = None
        self._requests = Requests()

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="model-tabs"):
            with TabPane("Local and cached", id="local-tab"):
                with Horizontal():
                    with Vertical(id="model-list-pane"):
                        with Horizontal(id="folder-row"):
                            yield Input(":".join(str(f) for f in load_model_folders()), id="folders",
                                        placeholder="folders to scan, or .gguf files, separated by ':'")
                            yield Button("Scan", id="scan")
                        yield OptionList(id="model-list")
                        yield Static("", id="model-problems")
                    with Vertical(id="model-detail"):
                        with VerticalScroll():
                            yield Static("Select a model to see its header.", id="inspect-summary")
                        yield Button("Use this model", id="use-model", variant="primary", disabled=True)
            with TabPane("Hub", id="hub-tab"):
                yield from self._hub_tab()
            with TabPane("Disk use", id="disk-tab"):
                yield DiskUsePane(tuple(load_model_folders()), id="disk-use")
        yield Footer()

    def _hub_tab(self) -> ComposeResult:
        try:
            from workbench.ui.widgets.hub_browser import HubBrowser
        except ImportError:
            yield Static("The hub browser is not part of this build; use `workbench search` and "
                         "`workbench download`, then Rescan.", id="hub-missing")
            return
        yield HubBrowser(self.selection.preset_name, self.selection.device_name)

    def on_mount(self) -> None:
        self.title = "Models"

    def on_screen_resume(self) -> None:
        # each visit lists again: downloads finish and folders change while the screen is away
        self.scan(self.folders(), self._requests.ask("scan"))
        for pane in self.query(DiskUsePane):  # not there yet on the first visit: it reads on its own mount
            pane.rescan(tuple(self.folders()))
        # the screen stays installed: the hub's fit preview follows the main screen's current choice
        for browser in self.query("#hub-browser"):
            browser.preview_with(self.selection.preset_name, self.selection.device_name)
        self.query_one("#model-list", OptionList).focus()

    def folders(self) -> list[Path]:
        text = self.query_one("#folders", Input).value
        return [Path(part.strip()).expanduser() for part in text.split(":") if part.strip()]

    @on(Button.Pressed, "#scan")
    @on(Input.Submitted, "#folders")
    def action_rescan(self) -> None:
        folders = self.folders()
        try:
            save_model_folders(folders)
        except OSError as error:
            self.notify(f"cannot remember the folders: {error}", severity="warning")
        self.scan(folders, self._requests.ask("scan"))

    @work(thread=True, exclusive=True, group="scan")
    def scan(self, folders: list[Path], request: int) -> None:
        # the folders are read from the Input on the UI thread: a worker only posts messages
        entries, problems = find_models(folders)
        self.post_message(ModelsFound(entries, problems, request))

    def on_models_found(self, message: ModelsFound) -> None:
        if self._requests.stale("scan", message.request):
            return  # a later scan (other folders) was asked for
        option_list = self.query_one("#model-list", OptionList)
        option_list.clear_options()
        self.entries = {}
        for label, path, origin in message.entries:
            self.entries[path] = label
            option_list.add_option(Option(Text.assemble(label, (f"\u00a0\u00a0{origin}", "dim")), id=path))
        self.query_one("#model-problems", Static).update("\n".join(message.problems))
        if message.entries:
            # a .gguf just typed into the folders box comes first, else the model in use
            typed = [str(path) for path in self.folders() if path.suffix.lower() == ".gguf"]
            wanted = [*typed, str(self.selection.model_path)]
            index = next((i for want in wanted for i, entry in enumerate(message.entries) if entry[1] == want), 0)
            option_list.highlighted = index

    @on(OptionList.OptionHighlighted, "#model-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.highlighted = event.option.id
        self.query_one("#use-model", Button).disabled = True
        self.query_one("#inspect-summary", Static).update("Reading the header…")
        self.inspect(event.option.id)

    @work(thread=True, exclusive=True, group="inspect")
    def inspect(self, path: str) -> None:
        try:
            model = self.selection.model_info(Path(path))
        except Exception as error:
            self.post_message(ModelInspected(path, None, str(error) or type(error).__name__))
            return
        self.post_message(ModelInspected(path, model))

    def on_model_inspected(self, message: ModelInspected) -> None:
        if message.path != self.highlighted:
            return  # the user moved on
        summary = self.query_one("#inspect-summary", Static)
        if message.model is None:
            summary.update(Text.assemble(("Cannot use this file\n", "bold red"), message.error))
            return
        summary.update(model_summary(message.model))
        self.query_one("#use-model", Button).disabled = False

    @on(OptionList.OptionSelected, "#model-list")
    @on(Button.Pressed, "#use-model")
    def action_use_model(self) -> None:
        if self.highlighted and not self.query_one("#use-model", Button).disabled:
            self.dismiss((self.highlighted, self.entries.get(self.highlighted, Path(self.highlighted).name)))

    def on_hub_browser_model_downloaded(self, message) -> None:
        """A hub download finished: use it when the user is here, else offer it and say so."""
        path = Path(message.path)
        if self.is_current:
            self.dismiss((str(path), path.name))
            return
        self.post_message(self.ModelOffered(path))  # the app routes it to the main screen
        self.app.notify(f"{path.name} is ready: choose it in the model list.", title="Download finished")
