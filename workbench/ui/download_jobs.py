"""Hub downloads that outlive the screen that started them: one job per app, its progress and outcome."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from textual.app import App
from textual.message import Message
from textual.worker import get_current_worker

from workbench.core.hub.download import download_model
from workbench.core.hub.download_events import DownloadProgressed
from workbench.ui.messages import DownloadAdvanced, DownloadEnded


@dataclass
class DownloadJob:
    """One download. The worker thread writes `latest` and `outcome`; the UI thread reads them and sets
    `listener`, where the worker posts (a reference swap each: no lock needed)."""

    repo: str
    filename: str
    cancel: threading.Event = field(default_factory=threading.Event)
    latest: DownloadProgressed | None = None
    outcome: Any = None  # DownloadFinished, or the error text
    listener: Callable[[Message], object] | None = None  # post_message of the browser showing it now

    @property
    def running(self) -> bool:
        return self.outcome is None

    def _tell(self, message: Message) -> None:
        listener = self.listener
        if listener is not None:
            listener(message)


_JOBS: weakref.WeakKeyDictionary[App, DownloadJob] = weakref.WeakKeyDictionary()  # written on the UI thread only


def current_job(app: App) -> DownloadJob | None:
    """The app's download, running or finished (None before the first)."""
    return _JOBS.get(app)


def start_job(app: App, job: DownloadJob) -> None:
    """Run `job` in an app-level worker: it outlives the widget, and only posts to whoever shows the job."""
    _JOBS[app] = job
    app.run_worker(lambda: run_download(job), thread=True, group="hub-download",
                   name=f"download {job.filename}", exit_on_error=False)


def run_download(job: DownloadJob) -> None:
    """The worker body: download, keep the newest progress on the job, post to whoever shows it."""
    worker = get_current_worker()

    def on_event(event) -> None:
        if worker.is_cancelled:  # the app is quitting: stop, keep the partial (the executor would wait for us)
            job.cancel.set()
        if isinstance(event, DownloadProgressed):
            job.latest = event
            job._tell(DownloadAdvanced(event))

    try:
        job.outcome = download_model(job.repo, job.filename, on_event=on_event, cancel=job.cancel)
    except Exception as error:  # noqa: BLE001 - shown as the progress line
        job.outcome = str(error) or type(error).__name__
    job._tell(DownloadEnded(job))
