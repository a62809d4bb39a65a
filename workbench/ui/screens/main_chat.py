"""The main screen's chat: send a prompt, stream the answer, end the turn, and engine failures in a turn."""

from __future__ import annotations

import time

from textual import work

from workbench.ui import engine_work
from workbench.ui.conversation import stats_line
from workbench.ui.kv_layout import kv_segments
from workbench.ui.messages import ContextShiftNoticed, EngineDied, PrefillReported, TokensArrived, TurnEnded
from workbench.ui.screens.phases import GENERATING, IDLE, LOADED
from workbench.core.units import mib
from workbench.ui.widgets.chat_view import ChatView
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.speed_panel import SpeedPanel
from workbench.ui.widgets.thermal_panel import ThermalPanel

LIVE_KV_INTERVAL_S = 1.0  # the KV grid follows a streaming answer once a second: redrawing it costs


class ChatFlow:
    """MainScreen's part that runs turns in a thread worker and feeds the chat and the panels."""

    async def send(self, text: str) -> None:
        self.conversation.add_user(text)
        self._answer = await self.query_one(ChatView).start_turn(text)
        self._turn_generated = 0
        self._settled_segments = self.query_one(KvPanel).segments
        self._turn_start_sample = self.latest_sample
        self.query_one(SpeedPanel).turn_started()
        self.phase = GENERATING
        if self.vote_mode.on:
            self._vote_worker(self.engine, self.conversation.for_engine(), self.conversation.sampling,
                              self.vote_mode.samples)
            return
        self._chat_worker(self.engine, self.conversation.for_engine(), self.conversation.sampling)

    @work(thread=True, exclusive=True, group="chat")
    def _vote_worker(self, engine, messages, sampling, n) -> None:
        from workbench.ui.chat_vote import sample_and_vote

        sample_and_vote(engine, messages, sampling, n, self.post_message)

    async def on_vote_arrived(self, message) -> None:
        """Vote mode: the winning sample becomes the answer, the tally shows under it."""
        from workbench.core.tasks.chat_vote import turn_from_samples, vote_samples
        from workbench.ui.widgets.vote_view import VoteView

        vote, winner = vote_samples(message.finished.samples)
        text = message.finished.samples[winner].text if winner is not None else ""
        n_ctx = self.engine.loaded.n_ctx if self.engine is not None and self.engine.loaded is not None else 0
        if self._answer is not None:
            await self._answer.append(text)
            await self._answer.mount(VoteView(vote, message.n))
        await self.on_turn_ended(TurnEnded(turn_from_samples(message.finished, text, n_ctx)))

    @work(thread=True, exclusive=True, group="chat")
    def _chat_worker(self, engine, messages, sampling) -> None:
        engine_work.stream_turn(engine, messages, sampling, self.post_message, self.token_batch_interval_s)

    async def on_tokens_arrived(self, message: TokensArrived) -> None:
        if self._answer is not None:
            await self._answer.append(message.text)
        self._turn_generated += message.n_tokens
        self.query_one(SpeedPanel).tokens_arrived(message.n_tokens, message.first_timestamp, message.last_timestamp)
        kv = self.query_one(KvPanel)
        now = time.monotonic()
        if kv.n_ctx and now - self._kv_drawn_at >= LIVE_KV_INTERVAL_S:
            # live view while streaming (at most twice a second): the last turn's layout plus the answer
            self._kv_drawn_at = now
            segments = self._settled_segments + (("current", self._turn_generated),)
            kv.show_cells(segments, min(kv.n_ctx, sum(n for _, n in segments)))

    def on_prefill_reported(self, message: PrefillReported) -> None:
        if self._answer is not None and message.total:
            share = message.evaluated / message.total
            self._answer.show_status(f"reading the prompt: {message.evaluated:,} of {message.total:,} tokens "
                                     f"({share:.0%})")

    def on_context_shift_noticed(self, message: ContextShiftNoticed) -> None:
        shift = message.shift
        # the engine counts every turn now out of its context; this shift dropped the new ones
        conversation = self.conversation
        newly = conversation.skipped_turns + shift.turns_dropped - conversation.turns_out_of_context
        notice = (f"context shift: {newly} more earlier {'turn' if newly == 1 else 'turns'} dropped to fit n_ctx "
                  f"({shift.turns_dropped} out of the context in all, {shift.tokens_dropped} tokens)")
        self.query_one(KvPanel).shift_notice = notice
        self.notify(notice, title="Context full", severity="warning", timeout=8)

    async def on_turn_ended(self, message: TurnEnded) -> None:
        finished = message.finished
        dropped_now = 0
        if finished.text or finished.stop_reason != "cancelled":
            dropped_now = self.conversation.add_answer(finished)
        else:
            self.query_one(PromptInput).restore(self.conversation.drop_unanswered())
        if self._answer is not None:
            await self._answer.finish(stats_line(finished, dropped_now))
            self._answer = None
        self.phase = LOADED if self.engine is not None and self.engine.loaded is not None else IDLE
        self.query_one(SpeedPanel).turn_finished(finished)
        kv = self.query_one(KvPanel)
        kv.n_ctx = finished.n_ctx or kv.n_ctx
        kv.segments = kv_segments(self.conversation, finished)
        kv.cells_used = finished.kv_cells_used
        if not finished.context_shifts:
            kv.shift_notice = ""
        self._update_bound()
        self.query_one(ThermalPanel).turn_energy(self._turn_start_sample, self.latest_sample,
                                                 finished.generated_tokens)

    async def on_engine_died(self, message: EngineDied) -> None:
        failure = message.failure
        self.last_failure = failure
        alive = self.engine is not None and getattr(self.engine, "alive", False) and failure.kind != "crash"
        partial = self._answer.text if self._answer is not None else ""
        if self._answer is not None:
            kept = "; the partial answer is kept in the transcript" if partial else ""
            await self._answer.finish(f"interrupted: {failure.message}{kept}", failed=True)
            self._answer = None
        messages = self.conversation.messages
        prompt_text = messages[-1].content if messages and messages[-1].role == "user" else ""
        if partial and prompt_text:
            self.conversation.add_interrupted(partial, failure.message)
        else:
            self.conversation.drop_unanswered()
        prompt = self.query_one(PromptInput)
        if prompt_text and not prompt.value.strip():
            prompt.restore(prompt_text)  # ready to send again after a restart, the cursor at its end
        elif prompt_text:
            prompt.remember(prompt_text)  # the box holds a draft: the lost prompt waits one ↑ away
        chat = self.query_one(ChatView)
        if alive:
            self.phase = LOADED if self.engine.loaded is not None else IDLE
            await chat.add_notice(f"Request failed: {failure.message}", "\n".join(failure.log_tail[-6:]), kind="error")
            self.notify(failure.message, title="Request failed", severity="error", timeout=8)
            return
        self.phase = IDLE
        self.clear_loaded_panels()  # the dead process's cache is gone with it
        how = failure.exit_signal or (f"exit code {failure.exit_code}" if failure.exit_code is not None else failure.kind)
        prediction = failure.prediction or (
            f"the ledger predicted {mib(self.ledger.total_bytes)} of {mib(self.ledger.budget_bytes)}"
            if self.ledger else "no ledger prediction")
        details = "\n".join(["last llama.cpp log lines:", *failure.log_tail[-8:], f"prediction: {prediction}",
                             "The conversation is kept; Restart engine (Ctrl+R) loads the model again."])
        await chat.add_notice(f"Engine died ({how}): {failure.message}", details, kind="error",
                              action=("restart-engine", "Restart engine"), notice_id="crash-notice")
        self.notify(f"{how}: {failure.message}", title="Engine died", severity="error", timeout=12)

    def action_cancel_turn(self) -> None:
        if self.phase == GENERATING and self.engine is not None:
            self.engine.cancel()  # thread-safe: the turn ends with stop reason "cancelled"

    def action_edit_settings(self) -> None:
        from workbench.ui.screens.settings_modal import SettingsModal

        def applied(result) -> None:
            if result is not None:
                self.conversation.system_prompt, self.conversation.sampling = result
                self.notify("System prompt and sampling apply from the next turn.", title="Settings")

        self.app.push_screen(SettingsModal(self.conversation.system_prompt, self.conversation.sampling), applied)

    def action_save_transcript(self) -> None:
        from workbench.ui.screens.save_modal import SaveTranscriptModal

        if not self.conversation.messages:
            self.notify("Nothing to save yet.", title="Transcript", severity="warning")
            return
        self.app.push_screen(SaveTranscriptModal(self.conversation))

    def action_new_conversation(self) -> None:
        if self.phase == GENERATING:
            self.notify("Cancel the answer first (Esc).", severity="warning")
            return
        if not self.conversation.unsaved:
            self.run_worker(self._start_new_conversation())
            return
        from workbench.ui.screens.confirm_modal import ConfirmModal

        def answered(discard: bool | None) -> None:
            if discard:
                self.run_worker(self._start_new_conversation())

        count = len(self.conversation.messages)
        self.app.push_screen(ConfirmModal(
            "Discard this conversation?",
            f"Its {count} messages are not in a saved transcript. Back, then Ctrl+S, saves them first.",
            "Discard"), answered)

    async def _start_new_conversation(self) -> None:
        self.conversation.clear()
        chat = self.query_one(ChatView)
        await chat.clear()
        await chat.show_welcome(loaded=self.phase == LOADED)
        self.notify("Started a new conversation.", title="Chat")
