"""HubBrowser: search the hub, list a repo's GGUF files, preview the fit, download with progress."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Input, ProgressBar, Static

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.fit.options import best_file_for
from workbench.core.fit.types import FitRequest
from workbench.core.hub.client import HubUnreachable
from workbench.core.hub.files import list_gguf_files
from workbench.core.hub.preview import preview_fit
from workbench.core.hub.search import RepoHit, curated_models, search_gguf_repos
from workbench.core.ledger.types import DOES_NOT_FIT, FITS
from workbench.core.units import MIB, eta_text, rate_text, size_text
from workbench.ui.download_jobs import DownloadJob, current_job, start_job
from workbench.ui.messages import (
    BestFitFound,
    DownloadAdvanced,
    DownloadEnded,
    FilesListed,
    FitPreviewed,
    HubFailed,
    ReposFound,
)
from workbench.ui.selection import device_from, preset_from
from workbench.ui.worker_requests import Requests

CSS_FILE = Path(__file__).with_name("hub_browser.tcss")
BEST_FIT = "best fit for this device"
OFFLINE_HINT = "Bundled, cached and local models still work offline (the Local and cached tab, `workbench models`)."


class HubBrowser(Vertical):
    """Self-contained hub tab. Give it the preset and device to preview with (objects or their names)."""

    class ModelDownloaded(Message):
        """A model is in the cache, verified; `path` is what to load. Bubbles to the screen."""

        def __init__(self, path: Path) -> None:
            super().__init__()
            self.path = path

    def __init__(self, preset: Preset | str, device: DeviceProfile | str, *, id: str | None = "hub-browser") -> None:  # noqa: A002
        super().__init__(id=id)
        self._preset_spec, self._device_spec = preset, device
        self._listing = None  # RepoFiles of the selected repository
        self._selected_file: str | None = None
        self._requests = Requests()  # per worker group: an earlier device's preview never replaces the current one

    # -- layout --------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="hub-search-row"):
            yield Input(placeholder="search GGUF models on the hub, e.g. qwen2.5 0.5b", id="hub-query")
            yield Button("Search", id="hub-search")
            yield Button("Curated", id="hub-curated")
        yield Static("", id="hub-status")
        with Horizontal(id="hub-body"):
            repos = DataTable(id="hub-repos", cursor_type="row", zebra_stripes=True)
            repos.border_title = "Repositories"
            yield repos
            with Vertical(id="hub-detail"):
                files = DataTable(id="hub-files", cursor_type="row", zebra_stripes=True)
                files.border_title = "GGUF files"
                yield files
                with VerticalScroll(id="hub-preview-box"):
                    yield Static("Pick a file to see whether it fits, before downloading it.", id="hub-preview")
                with Horizontal(id="hub-download-row"):
                    yield Button("Download", id="hub-download", variant="primary", disabled=True)
                    yield Button("Cancel", id="hub-cancel", variant="error", disabled=True)
                    yield ProgressBar(id="hub-progress", show_eta=False)
                yield Static("", id="hub-progress-text")

    def on_mount(self) -> None:
        self._load_css()
        self.query_one("#hub-repos", DataTable).add_columns("Repository", "Downloads", "Likes", "Gated")
        files = self.query_one("#hub-files", DataTable)
        files.add_columns("File", "Quant", "Size", "Parts")
        files.add_column("Fit", key="fit")  # "best fit": the file the fit search chooses for the device
        self.show_curated()
        job = current_job(self.app)
        if job is not None:  # a download started from an earlier visit of this screen
            job.listener = self.post_message
            self._show_job(job)

    def _load_css(self) -> None:
        """Widgets have no CSS_PATH: add hub_browser.tcss to the app's stylesheet once, as a screen's would be."""
        stylesheet = self.app.stylesheet
        if not stylesheet.has_source(str(CSS_FILE), ""):
            stylesheet.read(CSS_FILE)
            stylesheet.reparse()
            stylesheet.update(self.app)

    def on_unmount(self) -> None:
        job = current_job(self.app)
        if job is not None and job.listener == self.post_message:
            job.listener = None

    # -- repositories --------------------------------------------------------------------------
    @on(Button.Pressed, "#hub-curated")
    def show_curated(self) -> None:
        hits = tuple(RepoHit(m.repo, None, None, m.gated, "", ()) for m in curated_models())
        self.post_message(ReposFound(hits, "Curated edge-friendly models. Search the hub above for more.",
                                     self._requests.ask("search")))

    @on(Button.Pressed, "#hub-search")
    @on(Input.Submitted, "#hub-query")
    def start_search(self) -> None:
        text = self.query_one("#hub-query", Input).value.strip()
        if not text:
            self.show_curated()
            return
        self._status(f"Searching the hub for {text!r}…")
        self.search(text, self._requests.ask("search"))

    @work(thread=True, exclusive=True, group="hub-search")
    def search(self, text: str, request: int) -> None:
        try:
            hits = search_gguf_repos(text, limit=30)
        except Exception as error:  # noqa: BLE001 - every failure becomes the status line
            self._post_failure("search", error, request)
            return
        self.post_message(ReposFound(hits, f"{len(hits)} GGUF repositories match {text!r}, most downloaded first.",
                                     request))

    def on_repos_found(self, message: ReposFound) -> None:
        if self._requests.stale("search", message.request):
            return
        table = self.query_one("#hub-repos", DataTable)
        table.clear()
        for hit in message.hits:
            downloads = "curated" if hit.downloads is None else f"{hit.downloads:,}"
            likes = "" if hit.likes is None else f"{hit.likes:,}"
            table.add_row(hit.repo, downloads, likes, "yes" if hit.gated else "", key=hit.repo)
        self._status(message.title)

    @on(DataTable.RowHighlighted, "#hub-repos")
    def _repo_highlighted(self, event: DataTable.RowHighlighted) -> None:
        repo = str(event.row_key.value)
        if self._listing is not None and self._listing.repo == repo:
            return
        self._listing = None
        self.query_one("#hub-files", DataTable).clear()
        self.query_one("#hub-download", Button).disabled = True
        self._status(f"Listing the files of {repo}…")
        self.list_files(repo, self._requests.ask("files"))

    @work(thread=True, exclusive=True, group="hub-files")
    def list_files(self, repo: str, request: int) -> None:
        try:
            listing = list_gguf_files(repo)
        except Exception as error:  # noqa: BLE001
            self._post_failure("files", error, request)
            return
        self.post_message(FilesListed(repo, listing, request))

    def on_files_listed(self, message: FilesListed) -> None:
        if self._requests.stale("files", message.request):
            return
        self._listing = message.listing
        table = self.query_one("#hub-files", DataTable)
        table.clear()
        for gguf_file in message.listing.files:
            table.add_row(gguf_file.name, gguf_file.quant or "?", size_text(gguf_file.size_bytes), str(len(gguf_file.parts)),
                          "…", key=gguf_file.name)
        self.best_fit(message.listing, self._preset_spec, self._device_spec, self._requests.ask("best-fit"))
        gated = "  Gated: accept the licence on the hub and set HF_TOKEN." if message.listing.gated else ""
        self._status(f"{message.repo}: {len(message.listing.files)} GGUF files.{gated}")

    # -- fit preview ---------------------------------------------------------------------------
    @on(DataTable.RowHighlighted, "#hub-files")
    def _file_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self._listing is None:
            return
        self._selected_file = str(event.row_key.value)
        self._refresh_download_button()
        self._mark_download(fits=True)
        self._preview_selected()

    @work(thread=True, exclusive=True, group="hub-preview")
    def preview(self, repo: str, gguf_file, preset: Preset | str, device: DeviceProfile | str, request: int) -> None:
        """Worker: whether the file fits `device` with `preset` (names are resolved here: detecting `host`
        reads /proc and /sys)."""
        try:
            result = preview_fit(repo, gguf_file.name, preset_from(preset), device_from(device), listing=gguf_file)
        except Exception as error:  # noqa: BLE001
            self._post_failure("preview", error, request)
            return
        self.post_message(FitPreviewed((repo, gguf_file.name), result, request))

    def preview_with(self, preset: Preset | str, device: DeviceProfile | str) -> None:
        """Preview with this preset and device from now on (the app's current choice), again if shown."""
        if (preset, device) == (self._preset_spec, self._device_spec):
            return
        self._preset_spec, self._device_spec = preset, device
        if self._listing is not None:
            self.best_fit(self._listing, preset, device, self._requests.ask("best-fit"))
        if self._listing is not None and self._selected_file is not None:
            self._preview_selected()

    @work(thread=True, exclusive=True, group="hub-best-fit")
    def best_fit(self, listing, preset: Preset | str, device: DeviceProfile | str, request: int) -> None:
        """Worker: the file the fit search (workbench fit) chooses among the listing's for `device`."""
        base = replace(preset_from(preset), gpu_layers=None, rpc=(), tensor_split=())  # the host's budget alone
        try:
            result = best_file_for(listing, device_from(device), FitRequest(base=base))
        except Exception as error:  # noqa: BLE001 - the marker is left out, and the status line says why
            self.post_message(BestFitFound(listing.repo, None, f"the fit search failed: {error}", request))
            return
        chosen = result.chosen
        summary = (f"{chosen.option.weight_type}, {chosen.preset.cache_type_k} KV, ctx {chosen.ctx:,}"
                   if chosen else f"no file fits this device: {result.reason}")
        self.post_message(BestFitFound(listing.repo, chosen.option.filename if chosen else None, summary, request))

    def on_best_fit_found(self, message: BestFitFound) -> None:
        if self._requests.stale("best-fit", message.request):
            return
        if self._listing is None or message.repo != self._listing.repo:
            return  # another repository is listed now
        table = self.query_one("#hub-files", DataTable)
        for gguf_file in self._listing.files:
            mark = BEST_FIT if gguf_file.name == message.filename else ""
            table.update_cell(gguf_file.name, "fit", mark)
        if message.filename is None:
            self._status(f"{message.repo}: {message.summary}", problem=True)

    def _preview_selected(self) -> None:
        self.query_one("#hub-preview", Static).update("Reading the header with range requests…")
        self.preview(self._listing.repo, self._listing.find(self._selected_file), self._preset_spec, self._device_spec,
                     self._requests.ask("preview"))

    def on_fit_previewed(self, message: FitPreviewed) -> None:
        if self._requests.stale("preview", message.request):
            return  # a later preview was asked for (another file, preset or device)
        if self._listing is None or message.key != (self._listing.repo, self._selected_file):
            return  # the user moved on
        preset = self._preset_spec if isinstance(self._preset_spec, Preset) else None
        weights = preset.weights if preset is not None else _weights_of(self._preset_spec)
        self.query_one("#hub-preview", Static).update(_preview_text(message.preview, self.app.theme_variables, weights))
        self._mark_download(fits=message.preview.fits)

    def _mark_download(self, *, fits: bool) -> None:
        """A model the preview says cannot fit can still be fetched, but the button says so."""
        button = self.query_one("#hub-download", Button)
        button.label = "Download" if fits else "Download anyway"
        button.variant = "primary" if fits else "warning"

    # -- download ------------------------------------------------------------------------------
    @on(Button.Pressed, "#hub-download")
    def start_download(self) -> None:
        if self._listing is None or self._selected_file is None:
            return
        current = current_job(self.app)
        if current is not None and current.running:
            return
        job = DownloadJob(self._listing.repo, self._selected_file, listener=self.post_message)
        start_job(self.app, job)
        self._show_job(job)

    @on(Button.Pressed, "#hub-cancel")
    def cancel_download(self) -> None:
        job = current_job(self.app)
        if job is not None and job.running:
            job.cancel.set()
            self.query_one("#hub-progress-text", Static).update("Stopping… (the partial file is kept for a resume)")

    def on_download_advanced(self, message: DownloadAdvanced) -> None:
        message.stop()
        job = current_job(self.app)
        if job is not None:
            self._show_job(job)

    def on_download_ended(self, message: DownloadEnded) -> None:
        message.stop()
        self._show_job(message.job)
        outcome = message.job.outcome
        if hasattr(outcome, "path"):
            self.post_message(self.ModelDownloaded(outcome.path))

    def _show_job(self, job: DownloadJob) -> None:
        bar = self.query_one("#hub-progress", ProgressBar)
        text = self.query_one("#hub-progress-text", Static)
        self.query_one("#hub-cancel", Button).disabled = not job.running
        self._refresh_download_button()
        progress = job.latest
        if progress is not None:
            bar.update(total=max(progress.total_bytes, 1), progress=progress.done_bytes)
        if job.running:
            if progress is None:
                text.update(f"Starting {job.filename}…")
            else:
                text.update(f"{job.filename}: {progress.fraction:.1%}  {size_text(progress.done_bytes)} of "
                            f"{size_text(progress.total_bytes)}  {rate_text(progress.rate_bytes_per_s)}  {eta_text(progress.eta_s)}")
        elif hasattr(job.outcome, "path"):
            text.update(Text.assemble(("Downloaded and verified: ", "bold"), str(job.outcome.path)))
        else:
            text.update(Text(str(job.outcome), style="bold"))

    def _refresh_download_button(self) -> None:
        job = current_job(self.app)
        busy = job is not None and job.running
        self.query_one("#hub-download", Button).disabled = busy or self._selected_file is None

    # -- status --------------------------------------------------------------------------------
    def _post_failure(self, stage: str, error: Exception, request: int) -> None:
        self.post_message(HubFailed(stage, str(error) or type(error).__name__, isinstance(error, HubUnreachable),
                                    request))

    def on_hub_failed(self, message: HubFailed) -> None:
        if self._requests.stale(message.stage, message.request):
            return
        if message.stage == "preview":
            self.query_one("#hub-preview", Static).update(Text(message.text, style="bold"))
        self._status(message.text + (f"\n{OFFLINE_HINT}" if message.unreachable else ""), problem=True)

    def _status(self, text: str, *, problem: bool = False) -> None:
        status = self.query_one("#hub-status", Static)
        status.update(text)
        status.set_class(problem, "-problem")


def _weights_of(preset_name: str) -> str:
    """The weight type a preset named so re-quantizes to ("keep" when it keeps the file's, or cannot be read)."""
    try:
        return preset_from(preset_name).weights
    except Exception:  # noqa: BLE001 - the preview itself names a preset that cannot be read
        return "keep"


def _preview_text(preview, colours: dict[str, str], weights: str = "keep") -> Text:
    """The fit preview panel: what the header says, the predicted ledger, the largest context.

    `colours` are the app's theme variables, so the verdict follows the theme. `weights` is the preset's
    weight type: one that re-quantizes makes every file of a model predict the same, and the panel says so.
    """
    header, ledger = preview.header, preview.ledger
    model = header.model
    verdict_colour = {FITS: "text-success", DOES_NOT_FIT: "text-error"}.get(ledger.verdict, "text-warning")
    verdict_style = f"bold {colours[verdict_colour]}"
    if header.quant_confirmed:
        quant = f"{header.header_quant} (name and header agree)"
    else:
        quant = f"header says {header.header_quant or 'no file type'}, name says {header.name_quant or 'nothing'}"
    source = "the header cache (nothing fetched)" if header.from_cache else f"{size_text(header.bytes_fetched)} fetched in {header.requests} requests"
    lines = Text()
    lines.append(f"{model.name or header.filename}\n", style="bold")
    lines.append(f"{model.architecture}, {model.n_params / 1e6:,.0f} M parameters, {model.n_layer} layers, trained ctx {model.n_ctx_train:,}\n")
    lines.append(f"quant: {quant}; file {size_text(model.file_size)}\n")
    lines.append(f"header: {source}\n\n", style="dim")
    if weights.lower() != "keep":
        lines.append(f"the preset re-quantizes to {weights}: the preset decides the weights, not this file's quant "
                     "(every file of this model predicts the same)\n", style="bold")
    lines.append(f"{preview.preset} on {preview.device}: ")
    lines.append(ledger.verdict.upper(), style=verdict_style)
    lines.append(f"\n{ledger.reason}\n")
    lines.append(f"weights {ledger.weights_bytes / MIB:,.0f} MiB + KV {ledger.kv_bytes / MIB:,.0f} MiB (ctx {ledger.ctx_size:,}) + "
                 f"compute {ledger.compute_bytes / MIB:,.0f} MiB + overhead {ledger.overhead_bytes / MIB:,.0f} MiB = "
                 f"{ledger.total_bytes / MIB:,.0f} of {ledger.budget_bytes / MIB:,.0f} MiB\n")
    if preview.largest_ctx:
        lines.append(f"largest context that fits: {preview.largest_ctx:,}")
    else:
        lines.append("no context fits this device with this preset", style=f"bold {colours['text-error']}")
    return lines
