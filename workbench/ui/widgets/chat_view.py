"""The chat: user prompts, streamed Markdown answers with a stats line each, and notices."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from workbench.ui.widgets.streaming_text import StreamingText

# textual's Markdown (and markdown-it) load with the first answer, not at startup


RESERVE_MIN_LINES = 4
# Exchanges kept as widgets in the chat. Every widget keeps render caches (~300 KiB an exchange
# measured with tracemalloc), so a long session would grow without bound; older exchanges stay in
# the conversation and the transcript (Ctrl+S), and one line says how many left the view.
SHOWN_EXCHANGES = 40
WELCOME_HOWTO = ("Enter sends · Esc cancels · ↑↓ prompt history · F5 system prompt and sampling · "
                 "Ctrl+S saves the transcript · Ctrl+P every command")
WELCOME = ("Ctrl+L loads the model with the chosen preset, then ask below.", WELCOME_HOWTO)
WELCOME_LOADED = ("The model is loaded: ask below.", WELCOME_HOWTO)


class UserBubble(Static):
    """One prompt as the user typed it."""


class AnswerBlock(Vertical):
    """One answer: plain text while it streams, rendered as Markdown once when it ends.

    Re-parsing and re-laying-out Markdown on every batch cost the UI a fifth of a core on a
    2-core box whose other core runs the engine (benchmarks/ui_overhead.py); plain text
    that grows line by line costs a repaint of one line per batch.
    """

    def __init__(self, *, reserve_lines: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = ""
        self.reserve_lines = reserve_lines

    def compose(self) -> ComposeResult:
        live = StreamingText(reserve_lines=self.reserve_lines, classes="answer-live")
        live.status = "generating…"  # drawn right under the text while it streams
        yield live
        stats = Static("", classes="answer-stats")
        stats.display = False  # the stats line takes the status's place when the answer ends
        yield stats

    async def append(self, fragment: str) -> None:
        self.text += fragment
        live = self.query_one(StreamingText)
        live.append(fragment)
        if live.status != "generating…":
            live.set_status("generating…")

    def show_status(self, status: str) -> None:
        """The line under the streaming text: prefill progress before the first token, then "generating…"."""
        for live in self.query(StreamingText):
            live.set_status(status)

    async def finish(self, stats: str, *, failed: bool = False) -> None:
        for live in self.query(StreamingText):
            if self.text:
                from textual.widgets import Markdown  # deferred: markdown-it, with the first finished answer

                await self.mount(Markdown(self.text, classes="answer-text"), before=live)
            await live.remove()
        # a block finished the moment it is mounted (a restored turn) may not have composed its stats line yet
        label = next(iter(self.query(".answer-stats").results(Static)), None)
        if label is None:
            label = Static("", classes="answer-stats")
            await self.mount(label)
        label.update(stats)
        label.display = True
        label.set_class(failed, "-failed")


class Notice(Vertical):
    """A message from the app in the chat: an error with details, or an info line."""

    def __init__(self, title: str, details: str = "", *, kind: str = "info", action: tuple[str, str] | None = None,
                 **kwargs) -> None:
        super().__init__(classes=f"notice -{kind}", **kwargs)
        self.title, self.details, self.action = title, details, action

    def compose(self) -> ComposeResult:
        yield Static(self.title, classes="notice-title", markup=False)
        if self.details:
            yield Static(self.details, classes="notice-details", markup=False)
        if self.action:
            action_id, label = self.action
            with Horizontal(classes="notice-actions"):
                yield Button(label, id=action_id, variant="warning")


class ChatView(VerticalScroll):
    """Grows at the bottom and stays anchored there while the user has not scrolled up."""

    can_focus = False
    trimmed = 0  # exchanges no longer drawn (SHOWN_EXCHANGES)

    def on_mount(self) -> None:
        self.anchor()

    async def show_welcome(self, *, loaded: bool = False) -> None:
        """How to start (no "load first" when a model is loaded), shown until the conversation starts."""
        if not self.query("#welcome"):
            await self.mount(Notice(*(WELCOME_LOADED if loaded else WELCOME), kind="info", id="welcome"))

    def update_welcome(self, *, loaded: bool) -> None:
        """The welcome follows a load or an unload: no "Ctrl+L loads" while a model is loaded."""
        for title in self.query("#welcome .notice-title"):
            title.update((WELCOME_LOADED if loaded else WELCOME)[0])

    async def start_turn(self, prompt: str) -> AnswerBlock:
        """The prompt and an empty answer below it, mounted together: one layout, not two."""
        # the streaming text grows a third of the view at a time: one layout every few seconds
        block = AnswerBlock(reserve_lines=max(RESERVE_MIN_LINES, self.scrollable_content_region.height // 3))
        with self.app.batch_update():
            for welcome in self.query("#welcome"):
                await welcome.remove()
            await self.mount_all([UserBubble(prompt, markup=False), block])
            await self._trim()
        return block

    async def _trim(self) -> None:
        """Keep the last SHOWN_EXCHANGES exchanges as widgets; say how many earlier ones left the view."""
        bubbles = list(self.query(UserBubble))
        extra = len(bubbles) - SHOWN_EXCHANGES
        if extra <= 0:
            return
        first_kept = bubbles[extra]
        gone = [child for child in self.children[: self.children.index(first_kept)] if child.id != "earlier"]
        self.trimmed += extra
        await self.remove_children(gone)
        text = (f"{self.trimmed} earlier {'exchange is' if self.trimmed == 1 else 'exchanges are'} in the "
                "conversation and the transcript (Ctrl+S), no longer drawn here")
        for earlier in self.query("#earlier"):
            earlier.query_one(".notice-title", Static).update(text)
            return
        await self.mount(Notice(text, kind="info", id="earlier"), before=first_kept)

    async def add_notice(self, title: str, details: str = "", *, kind: str = "info",
                         action: tuple[str, str] | None = None, notice_id: str | None = None) -> Notice:
        """A notice; one with `notice_id` replaces an earlier one of that id (one crash box, not a pile)."""
        if notice_id:
            await self.remove_notice(notice_id)
        notice = Notice(title, details, kind=kind, action=action, id=notice_id)
        await self.mount(notice)
        return notice

    async def remove_notice(self, notice_id: str) -> None:
        for notice in self.query(f"#{notice_id}"):
            await notice.remove()

    async def clear(self) -> None:
        self.trimmed = 0
        await self.remove_children()
