"""The engine process's model: load it (re-quantized first if the preset asks), chat, measure, unload."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import inspect
import io
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from workbench.core.config.preset import Preset
from workbench.core.config.preset_split import llama_split_kwargs
from workbench.core.config.presets import resolve_threads
from workbench.core.engine.chat_template import ChatTemplate, ChatTemplateRefused, templates_left_uncompiled
from workbench.core.engine.chat_turn import ChatTurn, clear_kv_cache
from workbench.core.engine.context_fit import ConversationTooLong
from workbench.core.engine.cpu_pinning import pin_engine
from workbench.core.engine.events import EngineFailed, Loaded, LoadProgressed, Unloaded
from workbench.core.engine.expert_overrides import experts_on_cpu
from workbench.core.engine.log_capture import (
    LOG_LEVEL_ERROR,
    LOG_LEVEL_WARN,
    LlamaLog,
    parse_buffer_sizes,
    parse_device_buffers,
)
from workbench.core.engine.memory_limit import apply_limit, gpu_backend_loaded
from workbench.core.engine.protocol import ChatRequest, LoadRequest, OpFinished, OpProgressed, RunOpRequest
from workbench.core.engine.quantize import cached_quantized_path, partial_path
from workbench.core.engine.quantize_worker import QuantizeFailed, quantize_here
from workbench.core.engine.sequence_context import context_sequences, ensure_sequences
from workbench.core.engine.sequence_events import SequencesOpened
from workbench.core.engine.sequence_loops import run_samples, serve_sequences
from workbench.core.engine.sequence_requests import SequencesUnavailable
from workbench.core.gguf.ggml_types import FILE_TYPES, QUANT_TYPES
from workbench.core.rpc.engine_nodes import NodesRefused, attach_nodes
from workbench.core.rpc.keepalive import tune_node_sockets_while_loading, watch_node_sockets


def llama_kwargs(preset: Preset) -> dict[str, Any]:
    """`llama_cpp.Llama` keyword arguments for a preset (llama-server flag by flag)."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries


    threads = resolve_threads(preset)
    return {
        "n_ctx": preset.ctx_size,
        "n_batch": preset.batch_size,
        "n_ubatch": preset.ubatch_size,
        "n_threads": threads,
        "n_threads_batch": threads,  # llama-server: -tb defaults to -t
        "type_k": getattr(llama_cpp, f"GGML_TYPE_{preset.cache_type_k.upper()}"),
        "type_v": getattr(llama_cpp, f"GGML_TYPE_{preset.cache_type_v.upper()}"),
        "flash_attn": preset.flash_attn,
        # llama.cpp's own default is the full-size SWA cache; llama-server's (and ours) is the window
        "swa_full": preset.swa_full,
        "use_mlock": preset.mlock,
        "use_mmap": preset.mmap,
        **llama_split_kwargs(preset),
    }


def counting_prompt_lookup(num_pred_tokens: int) -> Any:
    """llama-cpp-python's prompt-lookup draft model, counting the draft tokens it proposes."""
    from llama_cpp.llama_speculative import (  # deferred: importing llama_cpp loads the llama.cpp libraries
        LlamaPromptLookupDecoding,  # deferred: importing llama_cpp loads the llama.cpp libraries
    )

    class CountingPromptLookup(LlamaPromptLookupDecoding):
        def __init__(self) -> None:
            super().__init__(num_pred_tokens=num_pred_tokens)
            self.proposed = 0
            self.n_ctx = 0  # set after load: generate() cuts drafts at the context's end

        def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
            drafts = super().__call__(input_ids, **kwargs)
            room = self.n_ctx - len(input_ids) if self.n_ctx else len(drafts)
            self.proposed += max(0, min(len(drafts), room))
            return drafts

    return CountingPromptLookup()


class ModelRunner:
    """Owns the one `llama_cpp.Llama` of this process; every call into it goes through here."""

    def __init__(self, log: LlamaLog, cancel_requested: Callable[[], bool], send: Callable[[object], None]) -> None:
        self._log = log
        self._cancel_requested = cancel_requested
        self._send = send
        self._llama: Any = None
        self._template: ChatTemplate | None = None
        self._draft: Any = None
        self._dropped: tuple[Any, ...] = ()  # turns the last chat left out of the context (see context_fit)
        self._started_on = frozenset(os.sched_getaffinity(0))  # what pinning may narrow, and restores

    def load(self, request: LoadRequest) -> None:
        self.unload(quiet=True)
        path = Path(request.model_path)
        if request.quantize_to:
            path = self._quantize(path, request.quantize_to)
            if path is None:
                return
        self._send(LoadProgressed("loading", 0.0, message=path.name))
        if request.preset.rpc and not self._attach_rpc_nodes(request.preset.rpc):
            return
        pinning = pin_engine(request.preset, self._started_on)  # before llama.cpp makes its threads
        limit = apply_limit(request.memory_budget_bytes, path, pinning.threads, gpu_backend_loaded())
        if limit:
            self._send(LoadProgressed("loading", 0.0, memory_limit_bytes=limit))
        self._log.start_capture()
        dots = [0]

        def on_dots(text: str) -> None:
            # llama.cpp's default load progress prints one "." per percent.
            before = dots[0]
            dots[0] += text.count(".")
            if dots[0] // 10 > before // 10:
                self._send(LoadProgressed("loading", min(1.0, dots[0] / 100.0)))

        self._log.on_continue = on_dots
        started = time.monotonic()
        stop_tuning = None
        if request.preset.rpc:  # a node that goes silent while the weights stream to it must not hang the load

            stop_tuning = tune_node_sockets_while_loading(request.preset.rpc)
        try:
            from llama_cpp import Llama  # deferred: importing llama_cpp loads the llama.cpp libraries

            draft = counting_prompt_lookup(request.preset.draft_prompt_lookup) if request.preset.draft_prompt_lookup else None
            # verbose=True: with False, llama-cpp-python points fd 2 at /dev/null while loading,
            # which would hide ggml's assertion messages from the engine's log. Its own Python
            # prints (a metadata dump, the template) are silenced instead: they would bury the tail.
            self._overrides: list[object] = []  # llama.cpp reads them while loading: held with the model
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()), \
                    templates_left_uncompiled(), experts_on_cpu(request.preset.n_cpu_moe, self._overrides):
                llama = Llama(model_path=str(path), draft_model=draft, verbose=True, **llama_kwargs(request.preset))
        except Exception as error:  # noqa: BLE001 - llama.cpp's own words go into the report
            captured = self._log.stop_capture()
            self._log.on_continue = None
            errors = [line.strip() for level, line in captured if level == LOG_LEVEL_ERROR]
            reason = "; ".join(errors[-3:]) or str(error)
            self._send(EngineFailed("load", f"llama.cpp could not load {path.name}: {reason}", self._log.tail()))
            return
        finally:
            if stop_tuning is not None:
                stop_tuning()
        load_seconds = time.monotonic() - started
        captured = self._log.stop_capture()
        self._log.on_continue = None
        llama.verbose = False  # from here on its prints would only fill the log
        _fit_token_arrays(llama)
        if draft is not None:
            draft.n_ctx = llama.n_ctx()
        self._llama, self._draft = llama, draft
        try:
            self._template = ChatTemplate(llama, request.preset.chat_template, path.name,
                                          request.preset.special_tokens_in_messages)
        except ValueError as error:
            llama.close()
            self._llama = self._draft = None
            self._send(EngineFailed("load", str(error)))
            return
        sizes = parse_buffer_sizes(line for _, line in captured)
        if request.preset.parallel > 1:  # the preset's sequences: the context is made again for them
            opened = self._open_sequences(request.preset.parallel)[1]
            sizes = dataclasses.replace(opened, model_bytes=sizes.model_bytes) if opened else sizes
        warnings = list(request.warnings) + ([pinning.warning] if pinning.warning else [])
        if request.preset.rpc:  # a node that goes silent (power, cable) must not hang the engine

            warnings += watch_node_sockets(request.preset.rpc, self._log.write_note)
        if llama.n_ctx() != request.preset.ctx_size:
            warnings.append(f"llama.cpp gave a context of {llama.n_ctx()} tokens (the preset asked {request.preset.ctx_size})")
        if self._template.mode.notice:
            warnings.append(self._template.mode.notice)
        if draft is not None:
            warnings.append("prompt-lookup drafting keeps logits for every position (llama-cpp-python's logits_all)")
        warnings += [line.strip() for level, line in captured if level == LOG_LEVEL_WARN]
        memory = _own_memory()
        self._send(
            Loaded(
                model_path=request.model_path,
                preset_name=request.preset.name,
                n_ctx=llama.n_ctx(),
                n_ctx_train=llama._model.n_ctx_train(),
                model_buffer_bytes=sizes.model_bytes,
                kv_buffer_bytes=sizes.kv_bytes,
                compute_buffer_bytes=sizes.compute_bytes,
                load_seconds=load_seconds,
                rss_bytes=memory[0],
                uss_bytes=memory[1],
                pid=os.getpid(),
                warnings=tuple(dict.fromkeys(warnings)),
                output_buffer_bytes=sizes.output_bytes,
                rs_buffer_bytes=sizes.rs_bytes,
                n_seq_max=context_sequences(llama)[0],
                weights_type=request.quantize_to or _file_type(llama),
                loaded_path=str(path),
                prediction=request.prediction,
                chat_mode=self._template.mode.kind,
                chat_notice=self._template.mode.notice,
                devices=parse_device_buffers((line for _, line in captured), request.preset.rpc),
                n_threads=pinning.threads,
                cpu_cores=pinning.cpus,
                cores_note=pinning.reason,
            )
        )

    def _attach_rpc_nodes(self, addresses: tuple[str, ...]) -> bool:
        """Register the preset's RPC nodes with llama.cpp, each probed first; False (and refused) if one fails."""
        try:
            attach_nodes(addresses)
        except NodesRefused as refused:
            self._send(EngineFailed("refused", refused.message))
            return False
        return True

    def _quantize(self, source: Path, weights_type: str) -> Path | None:

        target = cached_quantized_path(source, weights_type)
        if target.is_file():
            self._send(LoadProgressed("quantizing", 1.0, message=f"using cached {target.name}"))
            return target
        self._send(LoadProgressed("quantizing", 0.0, message=f"{source.name} -> {weights_type}"))
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = partial_path(target)
        last = [0.0]

        def progress(fraction: float) -> None:
            if fraction - last[0] >= 0.05 or fraction >= 1.0:
                last[0] = fraction
                self._send(LoadProgressed("quantizing", fraction))

        try:
            quantize_here(source, partial, QUANT_TYPES[weights_type], self._log, progress)
            os.replace(partial, target)
        except QuantizeFailed as failure:
            self._send(EngineFailed("load", failure.message, failure.log_tail))
            return None
        finally:
            partial.unlink(missing_ok=True)
        return target

    def unload(self, *, quiet: bool = False) -> None:
        if self._llama is not None:
            self._llama.close()  # frees context, KV cache and (for mmap) unmaps the weights
            self._llama = self._template = self._draft = None
            self._dropped = ()
            gc.collect()
        if not quiet:
            self._send(Unloaded())

    def chat(self, request: ChatRequest) -> None:
        started_at = time.monotonic()
        if self._llama is None or self._template is None:
            self._send(EngineFailed("request", "no model is loaded; load one before chatting"))
            return
        if not request.messages:
            self._send(EngineFailed("request", "the conversation is empty; send at least one user message"))
            return
        turn = ChatTurn(self._llama, self._template, self._cancel_requested, self._send, self._draft, self._dropped)
        try:
            finished = turn.run(request, started_at)
            self._dropped = turn.dropped
            self._send(finished)
        except ChatTemplateRefused as refused:  # rendered before any decode: the KV cache is as it was
            self._send(EngineFailed("request", refused.message))
        except ConversationTooLong as too_long:
            self._send(EngineFailed(
                "request",
                f"the newest message (with the system prompt, if any) takes {too_long.needed_tokens} prompt tokens; "
                f"the context holds {too_long.n_ctx}: shorten it or load a preset with a larger ctx_size",
            ))
        except Exception as error:  # noqa: BLE001 - the engine stays up; the KV state is rebuilt next turn
            self._forget_kv()
            self._send(EngineFailed("request", f"generation failed: {error}", self._log.tail()))

    def run_op(self, request: RunOpRequest) -> None:
        if self._llama is None:
            self._send(EngineFailed("request", f"no model is loaded; load one before running {request.name!r}"))
            return
        try:
            from workbench.core.engine.measure_ops import OPS
        except ImportError as error:
            self._send(EngineFailed("request", f"measurement ops are not available: {error}"))
            return
        op = OPS.get(request.name)
        if op is None:
            known = ", ".join(sorted(OPS)) or "none"
            self._send(EngineFailed("request", f"unknown measurement op {request.name!r}; known: {known}"))
            return
        kwargs = dict(request.kwargs)
        if "progress" in inspect.signature(op).parameters:
            kwargs["progress"] = lambda fraction: self._send(OpProgressed(request.name, fraction))
        try:
            result = op(self._llama, **kwargs)
        except Exception as error:  # noqa: BLE001
            self._send(EngineFailed("request", f"{request.name} failed: {error}", self._log.tail()))
            return
        finally:
            self._forget_kv()  # an op may have used the context freely; the next chat starts clean
        self._send(OpFinished(result))

    def sample_n(self, request: Any) -> None:
        """N samples of one prompt decoded together (sequence_loops.run_samples); SamplesFinished or EngineFailed."""
        if self._llama is None:
            self._send(EngineFailed("request", "no model is loaded; load one before sampling"))
            return
        try:
            self._open_sequences(request.n)
            self._send(run_samples(self._llama, self._template, request.request, request.n, self._cancel_requested))
        except SequencesUnavailable as unavailable:
            self._send(EngineFailed("request", str(unavailable)))
        except Exception as error:  # noqa: BLE001 - the engine stays up
            self._send(EngineFailed("request", f"sampling failed: {error}", self._log.tail()))
        finally:
            self._forget_kv()

    def serve_sequences(self, request: Any, receive: Callable[[], object], poll: Callable[[], bool]) -> object | None:
        """Continuous batching in `request.n_slots` sequences until the client closes the session.

        Returns a request that arrived during the session and ended it (a shutdown), else None.
        """

        if self._llama is None:
            self._send(EngineFailed("request", "no model is loaded; load one before serving"))
            return None
        if not 1 <= request.n_slots <= 256 or self._llama.n_ctx() // request.n_slots < 1:
            self._send(EngineFailed("request", f"{request.n_slots} slots: choose 1 to 256, and no more than the context's {self._llama.n_ctx()} tokens"))
            return None
        try:
            recreated, sizes = self._open_sequences(request.n_slots)
            n_seq_max, unified = context_sequences(self._llama)
            n_ctx = self._llama.n_ctx()
            self._send(SequencesOpened(request.n_slots, n_ctx, n_ctx // request.n_slots, n_seq_max, unified, recreated,
                                       sizes.kv_bytes if sizes else 0, sizes.compute_bytes if sizes else 0,
                                       sizes.rs_bytes if sizes else 0))
            return serve_sequences(self._llama, self._template, request.n_slots, self._send, receive, poll,
                                   self._cancel_requested)
        except SequencesUnavailable as unavailable:
            self._send(EngineFailed("request", str(unavailable)))
            return None
        finally:
            self._forget_kv()

    def _open_sequences(self, n_sequences: int) -> tuple[bool, Any]:
        """Make the context hold `n_sequences` (sequence_context); (re-created?, llama.cpp's buffer sizes then)."""
        self._forget_kv()
        self._log.start_capture()
        try:
            recreated = ensure_sequences(self._llama, n_sequences)
        finally:
            captured = self._log.stop_capture()
        self._dropped = ()
        return recreated, parse_buffer_sizes(line for _, line in captured) if recreated else None

    def _forget_kv(self) -> None:
        if self._llama is not None:
            clear_kv_cache(self._llama)


def _fit_token_arrays(llama: Any) -> None:
    """Size llama-cpp-python's token (and all-logits) arrays to the context llama.cpp really gave.

    llama-cpp-python allocates them for the n_ctx it asked for; llama.cpp may round the
    context up (to 256 at least), and positions past the asked size would not fit them.
    """
    import numpy as np  # deferred: importing numpy costs start-up time

    n_ctx = llama.n_ctx()
    if llama.input_ids.shape[0] < n_ctx:
        input_ids = np.zeros((n_ctx,), dtype=np.intc)
        input_ids[: llama.input_ids.shape[0]] = llama.input_ids
        llama.input_ids = input_ids
    if llama._logits_all and llama.scores.shape[0] < n_ctx:
        llama.scores = np.zeros((n_ctx, llama.scores.shape[1]), dtype=np.single)


def _own_memory() -> tuple[int, int]:
    """(RSS, USS) of this process, read by the engine itself right after load."""
    info = psutil.Process().memory_full_info()
    return info.rss, getattr(info, "uss", 0)


def _file_type(llama: Any) -> str:
    value = llama.metadata.get("general.file_type")
    try:
        return FILE_TYPES.get(int(value), "") if value is not None else ""
    except ValueError:
        return ""
