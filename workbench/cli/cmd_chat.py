"""`workbench chat MODEL --preset NAME`: a plain terminal chat with per-turn stats, for SSH sessions."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from typing import Any

from workbench.cli.chat_resume import (
    ChatKeeper,
    offer_resume,
    restored_history,
    resumed,
)
from workbench.cli.split_output import (
    add_rpc_argument,
    loaded_devices_text,
    rpc_endpoints,
)
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset
from workbench.core.engine.client import EngineClient, failure_where
from workbench.core.engine.events import (
    ChatMessage,
    ContextShifted,
    EngineFailed,
    Loaded,
    LoadProgressed,
    Sampling,
    TokenChunk,
    TurnFinished,
)
from workbench.core.engine.sampling_checks import validate_sampling
from workbench.core.errors import EngineError
from workbench.core.files.model_ref import resolve_model
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.simulated import BoardSimulation, board_simulation
from workbench.core.units import MIB

_SAMPLING_FLAGS = {
    "temperature": "--temp", "top_p": "--top-p", "top_k": "--top-k", "min_p": "--min-p",
    "repeat_penalty": "--repeat-penalty", "seed": "--seed", "max_tokens": "--max-tokens",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="chat with a model in the terminal, with per-turn stats",
        description="Load MODEL with a preset in the engine process and chat line by line (stdin may be a "
        "pipe). After each answer the turn's figures are printed to stderr, like `ollama run --verbose`. "
        "Ctrl-C stops the current answer; Ctrl-C at the prompt, a second Ctrl-C, EOF or /bye exits.",
    )
    parser.add_argument("model", metavar="MODEL", help="a .gguf path or 'bundled'")
    parser.add_argument("--preset", default="as-is", help="preset name or TOML path (default: as-is)")
    parser.add_argument("--device", help="device profile for the memory check (default: this machine)")
    parser.add_argument("--allow-overbudget", action="store_true",
                        help="load even when the ledger says the preset does not fit the device")
    parser.add_argument("--system", default="", metavar="TEXT", help="system prompt")
    parser.add_argument("--temp", type=float, default=0.7, help="temperature (0 = greedy; default 0.7)")
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--min-p", type=float, default=0.05)
    parser.add_argument("--repeat-penalty", type=float, default=1.1)
    parser.add_argument("--seed", type=int, default=-1, help="sampling seed (-1 = random)")
    parser.add_argument("--max-tokens", type=int, default=512, help="longest answer in tokens")
    parser.add_argument("--no-stats", action="store_true", help="do not print the per-turn figures")
    parser.add_argument("--resume", nargs="?", const="latest", metavar="NAME",
                        help="continue a journaled conversation: the latest, or the one NAME names "
                        "(each finished turn is kept in the state folder's conversations/)")
    add_rpc_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    sampling = Sampling(
        temperature=args.temp, top_p=args.top_p, top_k=args.top_k, min_p=args.min_p,
        repeat_penalty=args.repeat_penalty, seed=args.seed, max_tokens=args.max_tokens,
    )
    validate_sampling(sampling, _SAMPLING_FLAGS)  # before the model loads: a typo costs nothing
    model_path = resolve_model(args.model)
    preset = load_preset(args.preset)
    device = load_device(args.device) if args.device else None
    restored = resumed(args.resume) if args.resume else None
    system_prompt = args.system or (restored.head.system_prompt if restored is not None else "")
    system = (ChatMessage("system", system_prompt),) if system_prompt else ()
    keeper = ChatKeeper(model_path.stem, preset.name, system_prompt, sampling)
    history: list[ChatMessage] = []
    if restored is not None:
        history = restored_history(restored, model_path.stem)
        keeper.seed(restored)
    else:
        offer_resume(args)

    session = _ChatSession(EngineClient(), model_path, preset, device, args.allow_overbudget, not args.no_stats,
                           rpc=rpc_endpoints(args))
    try:
        session.load()
        while True:
            line = _read_line()
            if line is None or line.strip() in ("/bye", "/exit"):
                return 0
            if not line.strip():
                continue
            question = ChatMessage("user", line.rstrip("\n"))
            finished = session.turn([*system, *history, question], sampling)
            if finished is not None:
                keeper.finished(question.content, finished)  # on disk before the next prompt is read
                history += [question, ChatMessage("assistant", finished.text)]
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    finally:
        keeper.close()
        session.close()


def _read_line() -> str | None:
    """The next line from the user; None at EOF. A terminal gets a prompt, a pipe does not."""
    if sys.stdin.isatty():
        try:
            return input(">>> ")
        except EOFError:
            print(file=sys.stderr)
            return None
    line = sys.stdin.readline()
    return line if line else None


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _say_at_once(text: str) -> None:
    """A line on stderr from a signal handler: os.write, since the handler may run inside a print
    to sys.stderr, where writing again through it is a reentrant call."""
    try:
        os.write(sys.stderr.fileno(), f"{text}\n".encode())
    except (OSError, ValueError):  # a stderr without a file descriptor (captured in-process)
        print(text, file=sys.stderr, flush=True)


class _ChatSession:
    """The engine client plus what it takes to restart it after a crash."""

    def __init__(self, client: Any, model_path: Any, preset: Any, device: Any, allow_overbudget: bool,
                 show_stats: bool, rpc: tuple = ()) -> None:
        self._client = client
        self._rpc = rpc  # --rpc nodes (RpcEndpoint), replacing the preset's
        self._model_path = model_path
        self._preset = preset
        self._device = device
        self._allow_overbudget = allow_overbudget
        self._show_stats = show_stats
        self._board: BoardSimulation | None = None  # --device names another machine than this one

    def close(self) -> None:
        self._client.close()

    def load(self) -> None:

        shown: set[str] = set()
        for event in self._client.load(self._model_path, self._preset, device=self._device,
                                       allow_overbudget=self._allow_overbudget, rpc=self._rpc):
            if isinstance(event, LoadProgressed):
                if event.stage not in shown:
                    shown.add(event.stage)
                    _say(f"{event.stage}...")
                if event.message:
                    _say(f"  {event.message}")
            elif isinstance(event, Loaded):
                _say(_loaded_summary(event))
                self._board = board_simulation(read_gguf(self._model_path), self._preset,
                                               self._device)
                if self._board is not None:
                    _say(f"  note: {self._board.notice()}")
                if len(event.devices) > 1:
                    _say(loaded_devices_text(event))
            elif isinstance(event, EngineFailed):
                for line in event.log_tail[-5:]:
                    _say(f"  | {line}")
                raise EngineError(event.message, where=failure_where(event, str(self._model_path)))

    def turn(self, messages: list, sampling: Any) -> TurnFinished | None:
        """Stream one answer to stdout; the finished turn (partial when stopped), or None when it failed."""
        if self._client.loaded is None and not self._reload():
            return None
        interrupts = [0]

        def on_interrupt(_signum: int, _frame: object) -> None:
            interrupts[0] += 1
            if interrupts[0] > 1:
                raise KeyboardInterrupt
            self._client.cancel()
            _say_at_once(f"\n[stopping the answer; an engine that does not stop within "
                         f"{self._client.cancel_grace_s:g} s is restarted; Ctrl-C again quits]")

        failure = None
        previous = signal.signal(signal.SIGINT, on_interrupt)
        try:
            # closing(): the chat generator holds the client's one-request lock until it ends,
            # so it must be finished before a crash restarts the engine below.
            with contextlib.closing(self._client.chat(messages, sampling)) as events:
                for event in events:
                    if isinstance(event, TokenChunk):
                        sys.stdout.write(event.text)
                        sys.stdout.flush()
                    elif isinstance(event, ContextShifted):
                        _say(f"[context full: dropped the {event.turns_dropped} oldest turn(s), "
                             f"{event.tokens_dropped} tokens]")
                    elif isinstance(event, TurnFinished):
                        print(flush=True)
                        if event.stop_reason == "cancelled":
                            _say("[stopped]")
                        if event.answer_note:
                            _say(f"[{event.answer_note}]")
                        if self._show_stats:
                            _say(format_turn_stats(event, self._board))
                        return event
                    elif isinstance(event, EngineFailed):
                        print(flush=True)
                        failure = event
                        break
        finally:
            signal.signal(signal.SIGINT, previous)
        if failure is not None:
            self._report_failure(failure)
        return None

    def _report_failure(self, failure: Any) -> None:
        _say(f"workbench: {failure.message}")
        if failure.kind != "crash":
            return
        for line in failure.log_tail[-8:]:
            _say(f"  | {line}")
        if failure.prediction:
            _say(f"  predicted: {failure.prediction}")
        _say("restarting the engine; the conversation is kept")
        self._client.start()
        if self._reload() and failure.cancel_unanswered:
            _say("[the engine was restarted after it did not stop; the conversation is kept]")

    def _reload(self) -> bool:
        """Load again after a crash; a failure (an RPC node still down) is said, and the next message retries."""
        try:
            self.load()
        except EngineError as error:
            _say(f"workbench: the model did not load again: {error}")
            _say("the conversation is kept; your next message tries to load again")
            return False
        return True


def _loaded_summary(loaded: Any) -> str:
    return (
        f"loaded {loaded.preset_name} in {loaded.load_seconds:.2f}s: context {loaded.n_ctx} tokens, "
        f"llama.cpp buffers: model {loaded.model_buffer_bytes / MIB:.1f} MiB, KV {loaded.kv_buffer_bytes / MIB:.1f} MiB, "
        f"compute {loaded.compute_buffer_bytes / MIB:.1f} MiB; engine RSS {loaded.rss_bytes / MIB:.0f} MiB"
        + (f"\n  {loaded.prediction_check}" if loaded.prediction_check else "")
        + "".join(f"\n  warning: {text}" for text in loaded.warnings)
    )


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:.2f} tokens/s" if seconds > 0 and count > 0 else "n/a"


def _duration(seconds: float, measured: bool) -> str:
    if not measured:
        return "n/a"
    return f"{seconds * 1000:.1f}ms" if seconds < 1 else f"{seconds:.3f}s"


def format_turn_stats(turn: Any, board: BoardSimulation | None = None) -> str:
    """A turn's figures, laid out like `ollama run --verbose` plus cache and context lines."""
    evaluated = turn.prompt_tokens - turn.reused_tokens
    generated_after_first = max(0, turn.generated_tokens - 1)
    has_first_token = turn.generated_tokens > 0
    # Stopped in prefill: llama.cpp evaluated part of the prompt and says not how much.
    stopped_in_prompt = turn.stop_reason == "cancelled" and not has_first_token
    rows = (
        ("total duration", _duration(turn.finished_at - turn.started_at, True)),
        ("time to first token", _duration(turn.ttft_s, has_first_token)),
        ("prompt eval count", f"stopped before the end of {evaluated} token(s)" if stopped_in_prompt
         else f"{evaluated} token(s)"),
        ("reused from cache", f"{turn.reused_tokens} token(s)"),
        ("prompt eval duration", _duration(turn.prefill_s, turn.prefill_s > 0)),
        ("prompt eval rate", _rate(evaluated, turn.prefill_s)),
        ("eval count", f"{turn.generated_tokens} token(s)"),
        ("eval duration", _duration(turn.decode_s, turn.decode_s > 0)),
        ("eval rate", _rate(generated_after_first, turn.decode_s)),
        ("context used", f"{turn.kv_cells_used} / {turn.n_ctx} cells"),
        ("stop reason", turn.stop_reason),
    )
    if turn.draft_proposed:
        rows += (("draft tokens accepted", f"{turn.draft_accepted} of {turn.draft_proposed}"),)
    if board is not None:  # the eval rate above is this machine's: the board's own is predicted
        measured = generated_after_first / turn.decode_s if turn.decode_s > 0 and generated_after_first else None
        rows += (("board eval rate", board.beside(measured, turn.kv_cells_used)),)
    return "\n".join(f"{label + ':':<22}{value}" for label, value in rows)
