"""The chat pane: the conversation, the prompt, and the answer being streamed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input

from workbench.core.config.cpu_topology import format_cpu_list
from workbench.core.engine.events import (
    ChatMessage,
    EngineFailed,
    Loaded,
    Sampling,
    TurnFinished,
)
from workbench.core.files.chat_journal import (
    ChatJournal,
    RestoredConversation,
    journal_folder,
    latest_journal,
    mark_closed,
)
from workbench.core.ledger.types import Ledger
from workbench.core.tasks.chat_vote import turn_from_samples, vote_samples
from workbench.ui.chat_vote import VoteMode
from workbench.ui.conversation import Conversation, stats_line
from workbench.ui.conversation_journal import (
    journal_head,
    journal_turn,
    offer_text,
    restore,
    retire,
)
from workbench.ui.engine_session import Phase
from workbench.ui.failure_notices import died_notice, died_toast, restarted_notice
from workbench.ui.kv_layout import kv_segments
from workbench.ui.messages import (
    AnswerEnded,
    ContextShiftNoticed,
    EngineDied,
    PrefillReported,
    TokensArrived,
    VoteArrived,
)
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.save_modal import SaveTranscriptModal
from workbench.ui.screens.settings_modal import SettingsModal
from workbench.ui.widgets.chat_view import AnswerBlock, ChatView
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.vote_view import VoteView

CRASH_NOTICE = "crash-notice"  # the one "Engine died" box, answered by a restart
CORES_NOTICE = "cores-notice"  # which CPUs the engine is pinned to and why; a reload replaces it
NOT_SENT = {Phase.GENERATING: "wait for the answer or press Esc", Phase.LOADING: "the model is still loading"}


class ChatPane(Vertical):
    """Owns the `Conversation`, the `VoteMode` and the answer being streamed; the screen sets `phase`.

    A turn: Enter posts `TurnStarted` with what the engine is to read; the screen's worker posts the
    engine's messages (TokensArrived, AnswerEnded, VoteArrived, EngineDied, ...) to this pane, which
    draws them and posts `TurnEnded` or `TurnFailed`. TokensArrived bubbles on to the screen's panels.
    """

    @dataclass
    class TurnStarted(Message):
        """The user sent a prompt: the engine is to answer `messages` (with `samples` > 1, by a vote)."""

        messages: tuple[ChatMessage, ...]
        sampling: Sampling
        samples: int

    @dataclass
    class TurnEnded(Message):
        """The answer is in the conversation; `segments` is what the context now holds, for the KV panel."""

        finished: TurnFinished
        segments: tuple[tuple[str, int], ...]

    @dataclass
    class TurnFailed(Message):
        """The engine failed during the turn; the partial answer (if any) is kept."""

        failure: EngineFailed

    @dataclass
    class ContextShifted(Message):
        """The engine dropped earlier turns to fit its context; `notice` says how many."""

        notice: str

    phase: reactive[Phase] = reactive(Phase.IDLE, init=False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.conversation = Conversation()
        self.vote_mode = VoteMode()
        self._answer: AnswerBlock | None = None
        self.journal_folder = journal_folder()
        self._journal: ChatJournal | None = None  # created at the first finished turn

    @property
    def answering(self) -> bool:
        """Whether an answer is on its way (from Enter until the turn ends)."""
        return self._answer is not None

    def compose(self) -> ComposeResult:
        yield ChatView(id="chat")
        yield PromptInput(id="prompt", placeholder="Ask the model…  Enter sends · Esc cancels · ↑↓ history")

    def on_mount(self) -> None:
        self.call_later(self.query_one(ChatView).show_welcome)
        self.call_after_refresh(self._offer_restore)

    def on_unmount(self) -> None:
        self._close_journal()

    def watch_phase(self, phase: Phase) -> None:
        # a blinking cursor repaints twice a second; while an answer streams every repaint is CPU the engine could use
        self.query_one(PromptInput).cursor_blink = phase != Phase.GENERATING

    def focus_prompt(self) -> None:
        self.query_one(PromptInput).focus()

    def type_into_prompt(self, character: str) -> None:
        prompt = self.query_one(PromptInput)
        prompt.focus()
        prompt.insert_text_at_cursor(character)

    # ---- a turn ---------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    async def _prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        if self.phase != Phase.LOADED or self.answering:
            phase = Phase.GENERATING if self.answering else self.phase
            self.notify(NOT_SENT.get(phase, "load a model first (Ctrl+L)"), title="Not sent", severity="warning")
            return
        prompt = self.query_one(PromptInput)
        prompt.remember(text)
        prompt.value = ""
        await self.send(text)

    async def send(self, text: str) -> None:
        """Start a turn with `text`: shown at once, answered by the engine the screen runs."""
        self.conversation.add_user(text)
        self._answer = await self.query_one(ChatView).start_turn(text)
        self.post_message(self.TurnStarted(tuple(self.conversation.for_engine()), self.conversation.sampling,
                                           self.vote_mode.samples))

    async def on_tokens_arrived(self, message: TokensArrived) -> None:
        if self._answer is not None:  # not stopped: the speed and KV panels follow the batch too
            await self._answer.append(message.text)

    def on_prefill_reported(self, message: PrefillReported) -> None:
        message.stop()
        if self._answer is not None and message.total:
            share = message.evaluated / message.total
            self._answer.show_status(f"reading the prompt: {message.evaluated:,} of {message.total:,} tokens "
                                     f"({share:.0%})")

    def on_context_shift_noticed(self, message: ContextShiftNoticed) -> None:
        message.stop()
        shift = message.shift
        # the engine counts every turn now out of its context; this shift dropped the new ones
        conversation = self.conversation
        newly = conversation.skipped_turns + shift.turns_dropped - conversation.turns_out_of_context
        self.post_message(self.ContextShifted(
            f"context shift: {newly} more earlier {'turn' if newly == 1 else 'turns'} dropped to fit n_ctx "
            f"({shift.turns_dropped} out of the context in all, {shift.tokens_dropped} tokens)"))

    async def on_vote_arrived(self, message: VoteArrived) -> None:
        """Vote mode: the winning sample becomes the answer, the tally shows under it."""
        message.stop()
        vote, winner = vote_samples(message.finished.samples)
        text = message.finished.samples[winner].text if winner is not None else ""
        if self._answer is not None:
            await self._answer.append(text)
            await self._answer.mount(VoteView(vote, message.n))
        await self._end_turn(turn_from_samples(message.finished, text, message.n_ctx))

    async def on_answer_ended(self, message: AnswerEnded) -> None:
        message.stop()
        await self._end_turn(message.finished)

    async def _end_turn(self, finished: TurnFinished) -> None:
        dropped_now = 0
        if finished.text or finished.stop_reason != "cancelled":
            dropped_now = self.conversation.add_answer(finished)
            self._journal_answer(len(self.conversation.messages) - 1)
        else:
            self.query_one(PromptInput).restore(self.conversation.drop_unanswered())
        if self._answer is not None:
            await self._answer.finish(stats_line(finished, dropped_now))
            self._answer = None
        self.post_message(self.TurnEnded(finished, kv_segments(self.conversation, finished)))

    async def on_engine_died(self, message: EngineDied) -> None:
        """The turn failed: keep a partial answer, put the prompt back, and say so (the screen says why)."""
        message.stop()
        failure = message.failure
        partial = self._answer.text if self._answer is not None else ""
        if self._answer is not None:
            kept = "; the partial answer is kept in the transcript" if partial else ""
            await self._answer.finish(f"interrupted: {failure.message}{kept}", failed=True)
            self._answer = None
        messages = self.conversation.messages
        prompt_text = messages[-1].content if messages and messages[-1].role == "user" else ""
        if partial and prompt_text:
            self.conversation.add_interrupted(partial, failure.message)
            self._journal_answer(len(self.conversation.messages) - 1)
        else:
            self.conversation.drop_unanswered()
        prompt = self.query_one(PromptInput)
        if prompt_text and not prompt.value.strip():
            prompt.restore(prompt_text)  # ready to send again after a restart, the cursor at its end
        elif prompt_text:
            prompt.remember(prompt_text)  # the box holds a draft: the lost prompt waits one ↑ away
        self.post_message(self.TurnFailed(failure))

    # ---- what the screen tells the pane ---------------------------------------------------

    def load_started(self, model_name: str, preset_name: str) -> None:
        self.conversation.model_name = model_name
        self.conversation.preset_name = preset_name

    async def model_loaded(self, loaded: Loaded) -> None:
        self.conversation.engine_restarted()  # a fresh context: send only what the model saw before
        chat = self.query_one(ChatView)
        await chat.remove_notice(CRASH_NOTICE)
        chat.update_welcome(loaded=True)
        self.query_one(PromptInput).focus()
        kept = len(self.conversation.messages)
        note = f"; the conversation continues ({kept} messages kept)" if kept else ""
        cores = f" on CPUs {format_cpu_list(loaded.cpu_cores)}" if loaded.cpu_cores else ""
        plural = "" if loaded.n_threads == 1 else "s"
        threads = f", {loaded.n_threads} thread{plural}{cores}" if loaded.n_threads else ""
        self.notify(f"{Path(loaded.model_path).name} with {loaded.preset_name}: n_ctx {loaded.n_ctx}{threads}, "
                    f"{loaded.load_seconds:.2f} s{note}", title="Model loaded")
        if loaded.cpu_cores:  # pinned: which cores and why stay in the conversation
            await chat.add_notice(f"Engine pinned to CPUs {format_cpu_list(loaded.cpu_cores)}", loaded.cores_note,
                                  kind="info", notice_id=CORES_NOTICE)
        if loaded.chat_notice:  # which chat path the model takes: kept in the conversation, not a toast
            await chat.add_notice(loaded.chat_notice, kind="info")

    def model_unloaded(self) -> None:
        self.query_one(ChatView).update_welcome(loaded=False)

    async def show_load_failed(self, failure: EngineFailed) -> None:
        await self.query_one(ChatView).add_notice(f"Load failed: {failure.message}",
                                                  "\n".join(failure.log_tail[-6:]), kind="error")
        self.notify(failure.message, title="Load failed", severity="error", timeout=10)

    async def show_request_failed(self, failure: EngineFailed) -> None:
        """A request failed and the engine lives on."""
        await self.query_one(ChatView).add_notice(f"Request failed: {failure.message}",
                                                  "\n".join(failure.log_tail[-6:]), kind="error")
        self.notify(failure.message, title="Request failed", severity="error", timeout=8)

    async def show_engine_died(self, failure: EngineFailed, ledger: Ledger | None) -> None:
        """The engine process died: why, beside what the ledger predicted, and a Restart engine button."""
        title, details = died_notice(failure, ledger, interrupted=self.conversation.ends_interrupted)
        await self.query_one(ChatView).add_notice(title, details, kind="error", notice_id=CRASH_NOTICE,
                                                  action=("restart-engine", "Restart engine"))
        self.notify(died_toast(failure), title="Engine died", severity="error", timeout=12)

    async def show_engine_restarted(self, failure: EngineFailed) -> None:
        """The engine was killed for not answering a cancel: one notice that the app loads it again."""
        title, details = restarted_notice(failure)
        await self.query_one(ChatView).add_notice(title, details, kind="error")

    async def remove_crash_notice(self) -> None:
        await self.query_one(ChatView).remove_notice(CRASH_NOTICE)

    # ---- the conversation's own actions ---------------------------------------------------

    def cycle_vote(self) -> None:
        samples = self.vote_mode.cycle()
        how = ("each answer is the majority of the samples, decoded together" if samples > 1
               else "answers stream as usual")
        self.notify(f"Chat: {self.vote_mode.label()} ({how}).", title="N samples, vote")

    def edit_settings(self) -> None:
        def applied(result) -> None:
            if result is not None:
                self.conversation.system_prompt, self.conversation.sampling = result
                self.notify("System prompt and sampling apply from the next turn.", title="Settings")

        self.app.push_screen(SettingsModal(self.conversation.system_prompt, self.conversation.sampling), applied)

    def save_transcript(self) -> None:
        if not self.conversation.messages:
            self.notify("Nothing to save yet.", title="Transcript", severity="warning")
            return
        self.app.push_screen(SaveTranscriptModal(self.conversation))

    def new_conversation(self) -> None:
        if self.phase == Phase.GENERATING:
            self.notify("Cancel the answer first (Esc).", severity="warning")
            return
        if not self.conversation.unsaved:
            self.run_worker(self._start_new_conversation())
            return

        def answered(discard: bool | None) -> None:
            if discard:
                self.run_worker(self._start_new_conversation())

        count = len(self.conversation.messages)
        self.app.push_screen(ConfirmModal(
            "Discard this conversation?",
            f"Its {count} messages are not in a saved transcript. Back, then Ctrl+S, saves them first.",
            "Discard"), answered)

    def open_conversation(self, found: RestoredConversation) -> None:
        """Show a journaled conversation in place of this one (whose finished turns stay in their journal)."""
        if self.answering:
            self.notify("Cancel the answer first (Esc).", severity="warning")
            return

        async def replace() -> None:
            self._close_journal()
            self.conversation.clear()
            await self.query_one(ChatView).clear()
            await self._restore(found)
            retire(self.journal_folder, found, self._journal)

        self.run_worker(replace())

    async def _start_new_conversation(self) -> None:
        self._close_journal()
        self.conversation.clear()
        chat = self.query_one(ChatView)
        await chat.clear()
        await chat.show_welcome(loaded=self.phase == Phase.LOADED)
        self.notify("Started a new conversation.", title="Chat")

    # ---- the journal: each finished exchange on disk, so a killed app loses none ----------

    def _journal_answer(self, index: int) -> None:
        answers = [index]
        if self._journal is None:  # the first answer, or the first since the journal closed: every exchange
            self._journal = ChatJournal(self.journal_folder, journal_head(self.conversation))
            answers = [at for at, message in enumerate(self.conversation.messages[: index + 1])
                       if message.role == "assistant"]
        self._journal_said(self._journal.record(*(journal_turn(self.conversation, at) for at in answers)))

    def _journal_said(self, failure: str) -> None:
        if failure:
            self.notify(failure, title="Conversation journal", severity="warning", timeout=10)

    def _close_journal(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def _offer_restore(self) -> None:
        """At start: offer the last conversation when the app stopped without closing it."""
        scan = latest_journal(self.journal_folder, unclosed_only=True)
        for line in scan.skipped:
            self.notify(line, title="Conversation journal skipped", severity="warning", timeout=10)
        found = scan.found
        if found is None:
            return

        def answered(restore_it: bool | None) -> None:
            if restore_it:
                self.run_worker(self._restore(found))
            else:
                self._journal_said(mark_closed(found.path))  # asked once; the file stays for --resume

        self.app.push_screen(ConfirmModal(*offer_text(found), "Restore", back_label="Start fresh"), answered)

    async def _restore(self, found: RestoredConversation) -> None:
        restore(self.conversation, found)
        conversation, chat = self.conversation, self.query_one(ChatView)
        for index in range(1, len(conversation.messages), 2):
            block = await chat.start_turn(conversation.messages[index - 1].content)
            await block.append(conversation.messages[index].content)
            if index in conversation.interrupted:
                await block.finish(f"interrupted: {conversation.interrupted[index]}", failed=True)
            else:
                await block.finish(stats_line(conversation.stats[index]) if index in conversation.stats
                                   else "stats not restored (damaged in the journal)")
        # the restored turns continue in a journal of their own; the old one is closed
        self._journal = ChatJournal(self.journal_folder, journal_head(conversation))
        self._journal_said(self._journal.record(*found.turns) or mark_closed(found.path))
        self.notify(f"{len(found.turns)} turns restored from {found.name}; load a model to go on.",
                    title="Conversation restored")
