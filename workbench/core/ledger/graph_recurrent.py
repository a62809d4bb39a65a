"""The recurrent layers of llama.cpp's reserve graphs: Mamba2, LFM2's short convolution, Qwen3-Next's gated delta net.

Transcribed from llama.cpp 0c1e570: src/llama-graph.cpp build_rs (the state reads and copies),
src/models/graph-context-mamba.cpp build_mamba2_layer, src/models/lfm2.cpp build_shortconv_block,
src/models/qwen3next.cpp build_layer_attn_linear (the fused GATED_DELTA_NET op). Checked as
graph_layers' blocks are: against the address llama.cpp gives every tensor of the reserve graph.
"""

from __future__ import annotations

from workbench.core.ledger.graph_alloc import Tensor
from workbench.core.ledger.graph_build import Graph
from workbench.core.ledger.graph_layers import Inputs, Shape


def _store(g: Graph, source: Tensor, cache: Tensor) -> None:
    """A copy into a view of a state cache: it lives in the RS buffer, not in the compute buffer."""
    g.expand(Tensor("CPY", cache.shape, (source, g.view(cache, *cache.shape)), view_of=cache))


def recurrent_state(g: Graph, s: Shape, inp: Inputs, width: int, rows=None) -> Tensor:
    """build_rs: the states of this ubatch's sequences (through `rows`, a get_rows by default) and the
    copy of the others, which stay as they are; only the first lands in the compute buffer."""
    cache = g.weight(width * s.n_rs)
    states = g.reshape(cache, width, s.n_rs)
    zero = g.view(states, 0)  # clearing a state: a zero-sized view with one sequence, scaled in place
    g.expand(Tensor("SCALE", zero.shape, (zero,), view_of=zero))
    main = inp.s_copy_main
    out = rows(states, main) if rows is not None else g.get_rows(states, main)
    g.expand(out)
    n_extra = s.n_rs - s.n_seqs
    extra = g.get_rows(states, inp.s_copy_extra)
    g.expand(Tensor("CPY", (width, n_extra), (extra, g.view(cache, width, n_extra)), view_of=cache))
    return out


def mamba2(g: Graph, s: Shape, inp: Inputs, cur: Tensor) -> Tensor:
    """build_mamba2_layer: the input projection split in z, xBC and dt, the causal convolution over the
    conv state and the new tokens, the selective scan from the SSM state, the gate and grouped norm."""
    t, n_seqs = s.n_tokens, s.n_seqs
    seq_tokens, conv_dim = t // n_seqs, s.d_inner + 2 * s.ssm_groups * s.d_state
    head_dim = s.d_inner // s.ssm_heads
    conv = g.reshape(recurrent_state(g, s, inp, (s.d_conv - 1) * conv_dim), s.d_conv - 1, conv_dim, n_seqs)
    zxbcdt = g.reshape(g.mul_mat(g.weight(), cur, 2 * s.d_inner + 2 * s.ssm_groups * s.d_state + s.ssm_heads),
                       2 * s.d_inner + 2 * s.ssm_groups * s.d_state + s.ssm_heads, seq_tokens, n_seqs)
    xbc = g.view(zxbcdt, conv_dim, seq_tokens, n_seqs)
    conv_x = g.op("CONCAT", (s.d_conv - 1 + seq_tokens, conv_dim, n_seqs), conv, g.transpose(xbc))
    _store(g, g.view(conv_x, s.d_conv - 1, conv_dim, n_seqs), g.weight((s.d_conv - 1) * conv_dim * n_seqs))
    xbc = g.same("UNARY", g.same("ADD", g.op("SSM_CONV", (conv_dim, seq_tokens, n_seqs), conv_x, g.weight()),
                                 g.weight()))
    x = g.view(xbc, head_dim, s.ssm_heads, seq_tokens, n_seqs)
    dt = g.same("ADD", g.cont(g.view(zxbcdt, s.ssm_heads, seq_tokens, n_seqs)), g.weight())
    b = g.view(xbc, s.d_state, s.ssm_groups, seq_tokens, n_seqs)
    c = g.view(xbc, s.d_state, s.ssm_groups, seq_tokens, n_seqs)
    y_ssm = recurrent_state(g, s, inp, s.d_state * s.d_inner, rows=lambda states, ids: g.op(
        "SSM_SCAN", (s.d_inner * t + s.d_state * s.d_inner * n_seqs,),
        g.reshape(states, s.d_state, head_dim, s.ssm_heads, n_seqs), x, dt, g.weight(), b, c, ids))
    _store(g, g.view(y_ssm, s.d_state * s.d_inner * n_seqs), g.weight(s.d_state * s.d_inner * n_seqs))
    z = g.cont(g.view(zxbcdt, head_dim, s.ssm_heads, seq_tokens, n_seqs))
    y = g.same("ADD", g.view(y_ssm, head_dim, s.ssm_heads, seq_tokens, n_seqs), g.same("MUL", x, g.weight()))
    y = g.glu(z, y)
    y = g.rms_norm(g.reshape(y, s.d_inner // s.ssm_groups, s.ssm_groups, seq_tokens, n_seqs))
    return g.mul_mat(g.weight(), g.reshape(y, s.d_inner, seq_tokens, n_seqs), s.n_embd)


def shortconv(g: Graph, s: Shape, inp: Inputs, cur: Tensor) -> Tensor:
    """build_shortconv_block: in_proj split in b, c, x; the convolution of b*x over the conv state; c times
    its output; out_proj. d_conv is shortconv.l_cache."""
    t, n_seqs, n_embd = s.n_tokens, s.n_seqs, s.n_embd
    conv = g.reshape(recurrent_state(g, s, inp, (s.d_conv - 1) * n_embd), s.d_conv - 1, n_embd, n_seqs)
    bcx = g.mul_mat(g.weight(), g.reshape(cur, n_embd, t // n_seqs, n_seqs), 3 * n_embd)
    bx = g.same("MUL", g.view(bcx, n_embd, t), g.view(bcx, n_embd, t))
    conv_x = g.op("CONCAT", (s.d_conv - 1 + t // n_seqs, n_embd, n_seqs), conv, g.transpose(bx))
    _store(g, g.view(conv_x, s.d_conv - 1, n_embd, n_seqs), g.weight((s.d_conv - 1) * n_embd * n_seqs))
    y = g.same("MUL", g.view(bcx, n_embd, t), g.op("SSM_CONV", (n_embd, t), conv_x, g.weight()))
    return g.reshape(g.mul_mat(g.weight(), y, n_embd), n_embd, t)


def delta_net(g: Graph, s: Shape, inp: Inputs, cur: Tensor) -> Tensor:
    """build_layer_attn_linear: the conv state and the delta-net state read, qkv projected and convolved,
    q and k L2-normed and repeated to the value heads, the gates from ba, the fused gated delta net,
    its gated norm by silu(z) and the output projection."""
    t, n_seqs = s.n_tokens, s.n_seqs
    k_heads, v_heads, k_dim = s.ssm_groups, s.ssm_heads, s.d_state
    v_dim = s.d_inner // v_heads
    conv_dim, seq_tokens = 2 * k_dim * k_heads + s.d_inner, t // n_seqs
    conv = g.reshape(recurrent_state(g, s, inp, (s.d_conv - 1) * conv_dim), s.d_conv - 1, conv_dim, n_seqs)
    qkv = g.reshape(g.mul_mat(g.weight(), cur, conv_dim), conv_dim, seq_tokens, n_seqs)
    conv_x = g.op("CONCAT", (s.d_conv - 1 + seq_tokens, conv_dim, n_seqs), conv, g.transpose(qkv))
    _store(g, g.view(conv_x, s.d_conv - 1, conv_dim, n_seqs), g.weight((s.d_conv - 1) * conv_dim * n_seqs))
    state = recurrent_state(g, s, inp, k_dim * s.d_inner)
    conv_out = g.same("UNARY", g.op("SSM_CONV", (conv_dim, seq_tokens, n_seqs), conv_x, g.weight()))

    def normed_repeated() -> Tensor:  # l2 norm (RMS norm, scaled), repeated to the value heads
        x = g.same("SCALE", g.same("RMS_NORM", g.view(conv_out, k_dim, k_heads, t)))
        x = g.reshape(x, k_dim, 1, k_heads, t)
        return g.reshape(g.op("REPEAT", (k_dim, v_heads // k_heads, k_heads, t), x), k_dim, v_heads, t)

    q, k = normed_repeated(), normed_repeated()
    v = g.view(conv_out, v_dim, v_heads, t)
    ba = g.reshape(g.mul_mat(g.weight(), cur, 2 * v_heads), 2 * v_heads // k_heads, k_heads, t)
    gate = g.same("MUL", g.same("UNARY", g.same("ADD", g.cont(g.view(ba, v_heads // k_heads, k_heads, t), v_heads, t),
                                                g.weight())), g.weight())
    beta = g.reshape(g.same("UNARY", g.cont(g.view(ba, v_heads // k_heads, k_heads, t))), 1, v_heads, t)
    out = g.op("GATED_DELTA_NET", (s.d_inner * t + k_dim * s.d_inner * n_seqs,), q, k, v,
               g.reshape(gate, 1, v_heads, t), beta, g.reshape(state, k_dim, v_dim, v_heads, n_seqs))
    _store(g, g.view(out, k_dim, v_dim, v_heads, n_seqs), g.weight(k_dim * s.d_inner * n_seqs))
    y = g.rms_norm(g.view(out, v_dim, v_heads, t))
    z = g.same("UNARY", g.reshape(g.mul_mat(g.weight(), cur, s.d_inner), v_dim, v_heads, t))
    y = g.reshape(g.same("MUL", y, z), s.d_inner, t)
    return g.reshape(g.mul_mat(g.weight(), y, s.n_embd), s.n_embd, t)
