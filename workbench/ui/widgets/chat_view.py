"""The chat: user prompts, streamed Markdown answers with a stats line each, and notices."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

# textual's Markdown (and markdown-it) load with the first answer, not at startup


class UserBubble(Static):
    """One prompt as the user typed it."""


class AnswerBlock(Vertical):
    """One answer: Markdown fed by a stream (it coalesces appends when drawing falls behind)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = ""
        self._stream = None  # a MarkdownStream while the answer streams

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown

        yield Markdown(classes="answer-text")
        yield Static("generating…", classes="answer-stats")

    async def append(self, fragment: str) -> None:
        self.text += fragment
        if self._stream is None:
            from textual.widgets import Markdown

            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(fragment)

    async def finish(self, stats: str, *, failed: bool = False) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        label = self.query_one(".answer-stats", Static)
        label.update(stats)
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

    def on_mount(self) -> None:
        self.anchor()

    async def add_user(self, text: str) -> UserBubble:
        bubble = UserBubble(text, markup=False)
        await self.mount(bubble)
        return bubble

    async def start_answer(self) -> AnswerBlock:
        block = AnswerBlock()
        await self.mount(block)
        return block

    async def add_answer(self, text: str, stats: str) -> AnswerBlock:
        """An answer already complete (redrawing a kept conversation)."""
        from textual.widgets import Markdown

        block = await self.start_answer()
        await block.query_one(Markdown).update(text)
        block.text = text
        await block.finish(stats)
        return block

    async def add_notice(self, title: str, details: str = "", *, kind: str = "info",
                         action: tuple[str, str] | None = None) -> Notice:
        notice = Notice(title, details, kind=kind, action=action)
        await self.mount(notice)
        return notice

    async def clear(self) -> None:
        await self.remove_children()
