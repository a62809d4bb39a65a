"""KL divergence of next-token distributions from a reference, the way llama.cpp's perplexity tool computes it.

The reference's log-probabilities are stored per scored token as llama.cpp's
`--kl-divergence-base` file stores them: 16-bit codes over the 16 nats below the token's
most likely log-probability, with a per-token scale and offset (tools/perplexity/perplexity.cpp).
Then, per token: KLD = Σ p_base · (log p_base − log p), over the tokens whose base
log-probability is above −16; top-1 agreement compares the two argmaxes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

LOG_PROB_RANGE = 16.0  # nats kept below the maximum, as llama.cpp keeps them
CODE_MAX = 65535.0


@dataclass(frozen=True)
class KldMeasured:
    """One preset against the reference over the same scored tokens."""

    kld_mean: float
    kld_p99: float  # 99th percentile of the per-token KLD (linear interpolation, as llama.cpp)
    kld_max: float
    top1_agree: float  # fraction of tokens where both models' most likely next token is the same
    ppl: float
    ppl_base: float
    delta_ppl: float  # ppl - ppl_base
    n_tokens: int
    n_ctx: int
    seconds: float


@dataclass(frozen=True)
class KldReference:
    """What the reference run wrote: where, how many tokens, and its own perplexity."""

    path: str
    n_tokens: int
    n_vocab: int
    n_ctx: int
    ppl: float


def log_softmax(logits: Any) -> Any:
    """Rows of logits -> rows of log-probabilities, in float64."""
    import numpy as np  # deferred: importing numpy costs start-up time

    rows = np.asarray(logits, dtype=np.float64)
    top = rows.max(axis=1, keepdims=True)
    return rows - top - np.log(np.exp(rows - top).sum(axis=1, keepdims=True))


def compress_log_probs(logits: Any) -> tuple[Any, Any]:
    """(codes uint16 [n, n_vocab], (scale, min_log_prob) float32 [n, 2]) for rows of logits.

    log p_i ≈ scale · code_i + min_log_prob, exact to scale/2 (16/65535/2 nats) above the floor.
    """
    import numpy as np  # deferred: importing numpy costs start-up time

    rows = np.asarray(logits, dtype=np.float64)
    max_logit = rows.max(axis=1, keepdims=True)
    min_logit = np.maximum(rows.min(axis=1, keepdims=True), max_logit - LOG_PROB_RANGE)
    log_sum = np.log(np.exp(rows - max_logit).sum(axis=1, keepdims=True))
    min_log_prob = min_logit - max_logit - log_sum
    scale = (max_logit - min_logit) / CODE_MAX
    safe = np.where(scale > 0, scale, 1.0)
    codes = np.where(rows > min_logit, np.rint((rows - min_logit) / safe), 0.0)
    codes = np.where(scale > 0, codes, 0.0)
    params = np.concatenate([scale, min_log_prob], axis=1).astype(np.float32)
    return codes.astype(np.uint16), params


def expand_log_probs(codes: Any, params: Any) -> Any:
    import numpy as np  # deferred: importing numpy costs start-up time

    return codes.astype(np.float64) * params[:, :1].astype(np.float64) + params[:, 1:2].astype(np.float64)


@dataclass
class KldAccumulator:
    """Per-token KLD values, top-1 matches and both models' NLL, gathered chunk by chunk."""

    kld: list[Any]
    same_top: int = 0
    nll: float = 0.0
    nll_base: float = 0.0
    count: int = 0

    @classmethod
    def empty(cls) -> "KldAccumulator":
        return cls(kld=[])

    def add(self, logits: Any, base_codes: Any, base_params: Any, targets: Any) -> None:
        """`logits` [n, n_vocab] of the model measured; the reference's codes for the same n positions."""
        import numpy as np  # deferred: importing numpy costs start-up time

        log_p = log_softmax(logits)
        base_log_p = expand_log_probs(base_codes, base_params)
        kept = base_log_p > -LOG_PROB_RANGE
        p_base = np.where(kept, np.exp(base_log_p), 0.0)
        per_token = (p_base * np.where(kept, base_log_p - log_p, 0.0)).sum(axis=1)
        idx = np.arange(len(targets))
        self.kld.append(per_token)
        self.same_top += int((np.asarray(logits).argmax(axis=1) == base_codes.argmax(axis=1)).sum())
        self.nll += float(-log_p[idx, targets].sum())
        self.nll_base += float(-base_log_p[idx, targets].sum())
        self.count += len(targets)

    def result(self, n_ctx: int, seconds: float) -> KldMeasured:
        import numpy as np  # deferred: importing numpy costs start-up time

        if not self.count:
            raise ValueError("no token was scored")
        values = np.concatenate(self.kld)
        ppl, ppl_base = math.exp(self.nll / self.count), math.exp(self.nll_base / self.count)
        return KldMeasured(
            kld_mean=float(values.mean()),
            kld_p99=float(np.percentile(values, 99)),  # linear interpolation between ranks, as llama.cpp
            kld_max=float(values.max()),
            top1_agree=self.same_top / self.count,
            ppl=ppl,
            ppl_base=ppl_base,
            delta_ppl=ppl - ppl_base,
            n_tokens=self.count,
            n_ctx=n_ctx,
            seconds=seconds,
        )
