"""llama.cpp's sampler chain for one sequence, built in the order llama-server uses."""

from __future__ import annotations

from typing import Any

from workbench.core.engine.sequence_events import SequenceRequest

# llama-server's --repeat-last-n default: the penalties look at the last 64 tokens.
PENALTY_LAST_N = 64


class SamplerChain:
    """llama.cpp's own sampler chain for one sequence (the order llama-server uses)."""

    def __init__(self, llama: Any, request: SequenceRequest, seed: int, history: list[int]) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        sampling = request.sampling
        self._chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = lambda sampler: llama_cpp.llama_sampler_chain_add(self._chain, sampler)  # noqa: E731
        if sampling.repeat_penalty != 1.0 or request.frequency_penalty or request.presence_penalty:
            add(llama_cpp.llama_sampler_init_penalties(
                llama.n_vocab(), PENALTY_LAST_N, sampling.repeat_penalty,
                request.frequency_penalty, request.presence_penalty,
            ))
        if sampling.temperature <= 0:
            add(llama_cpp.llama_sampler_init_greedy())
        else:
            if sampling.top_k > 0:
                add(llama_cpp.llama_sampler_init_top_k(sampling.top_k))
            add(llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
            add(llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
            add(llama_cpp.llama_sampler_init_temp(sampling.temperature))
            add(llama_cpp.llama_sampler_init_dist(seed))
        for token in history[-PENALTY_LAST_N:]:
            llama_cpp.llama_sampler_accept(self._chain, token)

    def sample(self, ctx: Any, batch_index: int) -> int:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        return int(llama_cpp.llama_sampler_sample(self._chain, ctx, batch_index))  # also accepts the token

    def free(self) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None
