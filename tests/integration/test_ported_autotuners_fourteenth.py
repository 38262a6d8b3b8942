"""A fourteenth batch of other autotuners' test suites, ported to tunedsl: xformers' tiled
matmul (tests/test_tiled_matmul.py: a 2x2 grid of operand and output tiles, views of one
tensor, split-K by atomic adds into the output, which xformers' ``init_to_zero`` pre-hook of
its split-K configurations zeroes; with one tile per dimension its launcher passes one tensor
for every tile, and ``EVEN_K`` is a ``@triton.heuristics`` of the tuned block and split),
vLLM's fused mixture-of-experts GEMM (tests/kernels/moe/test_moe.py: the tokens aligned to
each configuration's block of rows, so the arguments and the grid are computed per
configuration, and the decision keyed by the nearest batch size of vLLM's tuned files),
SGLang's two-stage decode attention (test/srt/test_triton_attention_kernels.py: the number of
key/value splits tuned in stage 1 and read back from the launch result by stage 2),
Liger-Kernel's cross entropy (test/transformers/test_cross_entropy.py: a kernel launched from a
``torch.autograd.Function`` that writes the logits' gradient over the logits it reads),
PyTorch Inductor's cooperative reductions (test/inductor/test_cooperative_reductions.py: a
row reduced by a tuned number of programs, RSPLIT, the last to arrive at the row's semaphore
finishing it), and cases of Triton's test_cache.py and test_autotuner.py and of Kernel
Tuner's test_util_functions.py named below.

Found and fixed: the warning of arguments a kernel changes in place named them, and the
``restore_value=`` to pass, in an order that followed the process's hash seed (xformers'
output tiles came out as ``'C22', 'C11', 'C21', 'C12'`` in one run and otherwise in the next);
it is the kernel's parameter order now
(test_tiled_matmul_split_k_without_reset_on_a_zeroed_output). Kernel Tuner's restrictions
(test/test_util_functions.py::test_check_restrictions: a list of restrictions that must all
hold) ported as a ``Space`` constraint returning that list kept every configuration, a
non-empty list counting as true whatever it holds; a constraint returning a list, tuple or
other container is a ``UsageError`` naming it, the configuration and ``all([...])``
(test_a_constraint_returning_a_list_of_restrictions_is_named_with_all,
test_a_site_whose_constraint_returns_a_tuple_launches_nothing). Triton's
``early_config_prune`` (test_autotuner.py::test_prune_configs) written ``return configs[0]``
returned one configuration, which tunedsl iterated as its field names ("expected a dict of
fields or a Config, not 'block'"), and one returning a set was used in its hash-seed order;
both are named now with the list to return
(test_an_early_prune_returning_one_configuration_or_a_set_is_named). Kernel Tuner's
verification function (test_util_functions.py::test_normalize_verify_function: a comparison
``verify(answer, result_host, atol=None)``) given as tunedsl's ``verify=`` failed with a
``TypeError`` placed in tunedsl's own hook runner; it is named on the site's first call with
how tunedsl calls it and an example, as ``prune=`` and the hooks are
(test_a_verify_function_in_kernel_tuners_form_is_named_with_tunedsls). A ``grid=``,
``args=`` or ``kwargs=`` function that cannot take the configuration (Triton's grid is
``lambda META: ...``; test_autotuner.py::test_kwargs) failed as a bare ``TypeError`` naming no
option; it is named on the site's first call
(test_a_function_of_the_configuration_that_cannot_take_it_is_named).

Looked at and found sound: ``reset_to_zero`` of four views of one NaN-filled output, and of one
tensor named four times, before every try and before the decided launch; the in-place rule on
split-K tiles with no ``reset_to_zero`` (each try starts from the caller's zeros); ``args=``
and ``grid=`` functions giving each configuration its own alignment buffers of its own length
under one ``key=`` bucket, the decided configuration launched on another batch's alignment
and, in a new process, the stored one; a stage-1 buffer each configuration writes in its own
slots, some empty, taken for an output; a gradient written over the logits it is computed
from, with ``restore_value`` and without (one warning naming it), each call's logits ending
as one launch's gradient; a semaphore the kernel sets back, one ``reset_to_zero`` names, and
one neither resets (found in place, restored before each launch, named once; with
``isolate=True`` found and restored in the worker, which gives no notice, as documented).
Triton's test_cache.py ``test_toplevel_change`` (a Triton function picked as a
``tl.constexpr`` local, ``FN: tl.constexpr = function_2``, then called): the picked function
edited is another kernel, tuned again in a new process
(test_a_function_picked_as_a_constexpr_local_edited_is_tuned_again). Kernel Tuner's
test_searchspace.py space (``x=[1, 1.5, 2, 3]``, ``y=[4, 5.5]``, strings, ``y % x == 1``):
six valid points, a sample asked for more than there are gives them all, and the neighbours
of a point the constraint rejects are valid ones one step away
(test_kernel_tuners_simple_space_its_sample_and_the_neighbours_of_a_rejected_point).

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through ``autotune_launch``.

Not ported, for want of a counterpart or because another test file has it: xformers' 3x3 grid
and its backward (the same kernel on more tiles; its perf-model prune is Triton's, and
``prune=`` is one user function: test_ported_autotuners_more.py), its bfloat16 and int8
operands (the interpreter computes in NumPy; dtype keys are test_ported_autotuners.py's);
vLLM's fp8/int8 quantized MoE, its expert-parallel maps and its JSON files per device (rules
per GPU model: tests/integration/test_rule_ranges.py); SGLang's paged key/value indices and
grouped-query heads (arithmetic of the kernel, not of tuning); Liger's label smoothing, softcap
and z-loss (arithmetic), its chunked fused linear cross entropy (the same in-place gradient,
per chunk); Kernel Tuner's restriction strings (tunedsl evaluates no strings: a string
constraint is refused as not callable, test_ported_autotuners_third.py); Inductor's grid
barrier (its programs wait for each other, which the interpreter, running one program after
another, cannot), its code generation and kernel counts (Inductor's own lowering).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from tunedsl import Config, autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton

#: What each site launch returned, in call order, by site.
SOURCES: dict[str, list[str]] = {}


def _note(site: str, res: Any) -> None:
    SOURCES.setdefault(site, []).append(res.source)


# --- xformers: the tiled matmul, split-K by atomic adds --------------------------------------


def _tiles(t: torch.Tensor, rows: list[int], cols: list[int]) -> list[list[torch.Tensor]]:
    """``t`` cut into a grid of views (xformers' operands are tiles of one tensor)."""
    out, r0 = [], 0
    for r in rows:
        row, c0 = [], 0
        for c in cols:
            row.append(t[r0 : r0 + r, c0 : c0 + c])
            c0 += c
        out.append(row)
        r0 += r
    return out


def _flat(ts: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """xformers' launcher: a 2x2 grid of tiles, the last row or column repeated where fewer."""
    return [ts[min(i, len(ts) - 1)][min(j, len(ts[0]) - 1)] for i in range(2) for j in range(2)]


def tiled_mm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, ms: list[int], ns: list[int],
             ks: list[int], name: str, *, reset: bool = True,
             split_k: tuple[int, ...] = (1, 2, 3)) -> Any:  # fmt: skip
    """xformers' ``tiled_matmul``: ``c`` (cut by ``ms`` x ``ns``) = ``a`` (``ms`` x ``ks``)
    @ ``b`` (``ks`` x ``ns``), tuned over block sizes and SPLIT_K, keyed by the tile sizes
    as xformers' ``key=["M1", ..., "K3"]``; ``reset_to_zero`` names the output tiles as
    xformers' split-K ``pre_hook`` zeroes them."""
    from ported_kernels_fourteenth import tiled_matmul_even_k

    at, bt, ct = _tiles(a, ms, ks), _tiles(b, ks, ns), _tiles(c, ms, ns)
    pad = lambda xs: [*xs, 0] if len(xs) == 1 else xs  # noqa: E731
    m2, n2, k2 = pad(ms), pad(ns), pad(ks)
    res = autotune_launch(
        tiled_matmul_even_k,
        space=dict(BLOCK_M=[16], BLOCK_N=[16], BLOCK_K=[16], SPLIT_K=list(split_k)),
        grid=lambda cfg: (sum(cdiv(m, cfg.BLOCK_M) for m in ms)
                          * sum(cdiv(n, cfg.BLOCK_N) for n in ns), cfg.SPLIT_K),
        args=(*_flat(at), *_flat(bt), *_flat(ct), *m2, *n2, *k2,
              a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)),
        kwargs=lambda cfg: {"BLOCK_M": cfg.BLOCK_M, "BLOCK_N": cfg.BLOCK_N,
                            "BLOCK_K": cfg.BLOCK_K, "SPLIT_K": cfg.SPLIT_K},
        key=(tuple(ms), tuple(ns), tuple(ks)),
        reset_to_zero=["C11", "C12", "C21", "C22"] if reset else None,
        effort="quick",
        name=name,
    )  # fmt: skip
    _note(name, res)
    return res


@pytest.mark.parametrize(("ms", "ns", "ks"), [([24, 8], [16, 12], [32, 16]), ([20], [24], [48])])
def test_tiled_matmul_split_k_into_views_of_one_output(ms: list[int], ns: list[int],
                                                        ks: list[int]) -> None:  # fmt: skip
    """xformers' tiled matmul: the output is a grid of views of one tensor, each added into
    atomically by SPLIT_K programs, with a NaN-filled output zeroed by ``reset_to_zero``
    (xformers' ``init_to_zero`` pre-hook of its split-K configurations) before every try
    and before the decided launch. With one tile per dimension the launcher passes the same
    tensor for all four tiles (xformers' ``min(i, len - 1)``), so one output is named four
    times. The product equals ``a @ b`` on the tuning call and on the decided call, and
    the inputs are left as they were."""
    # ported from: facebookresearch/xformers tests/test_tiled_matmul.py::test_forward_backward
    torch.manual_seed(0)
    name = f"xformers-tiled-{len(ms)}"
    for _ in range(2):
        a = torch.randn(sum(ms), sum(ks))
        b = torch.randn(sum(ks), sum(ns))
        keep_a, keep_b = a.clone(), b.clone()
        c = torch.full((sum(ms), sum(ns)), float("nan"))
        res = tiled_mm(a, b, c, ms, ns, ks, name)
        torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
        assert torch.equal(a, keep_a) and torch.equal(b, keep_b)
        assert res.config.SPLIT_K in (1, 2, 3)
    assert SOURCES[name] == ["tuned", "memory"]


def test_tiled_matmul_split_k_without_reset_on_a_zeroed_output() -> None:
    """The same kernel given a zeroed output and no ``reset_to_zero`` (xformers' pre-hook
    left out): the split-K configurations add into the output, so each try would start from
    the last one's sum; the in-place rule finds the output tiles (views of one tensor) and
    puts them back before each launch, so the product is ``a @ b`` once, not once per
    timed launch, and one warning names the tiles."""
    # ported from: facebookresearch/xformers tests/test_tiled_matmul.py::test_forward_backward
    torch.manual_seed(1)
    ms, ns, ks = [24, 8], [16, 12], [32, 16]
    a, b = torch.randn(sum(ms), sum(ks)), torch.randn(sum(ks), sum(ns))
    c = torch.zeros(sum(ms), sum(ns))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tiled_mm(a, b, c, ms, ns, ks, "xformers-tiled-noreset", reset=False, split_k=(2, 3))
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    in_place = [str(m.message) for m in seen if "in place" in str(m.message)]
    assert len(in_place) == 1
    assert "changes 'C11', 'C12', 'C21', 'C22' in place" in in_place[0]
    assert "restore_value=['C11', 'C12', 'C21', 'C22']" in in_place[0]


# --- vLLM: the fused mixture-of-experts GEMM, tokens aligned to the tuned block -------------

#: The batch sizes vLLM's tuned-configuration files hold (``E=..,N=..,device_name=...json``).
BATCH_SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64]


def moe_align_block_size(topk_ids: torch.Tensor, block: int, experts: int) -> tuple[Any, ...]:
    """vLLM's ``moe_align_block_size``: the (token, expert) slots sorted by expert, each
    expert's run padded to a multiple of ``block`` with the padding id ``numel``, in a buffer
    of the most slots any routing needs; the expert of each block; the padded count."""
    flat = topk_ids.flatten()
    numel = flat.numel()
    cap = numel + experts * (block - 1)
    sorted_ids = torch.full((cap,), numel, dtype=torch.int32)
    expert_ids = torch.zeros(cdiv(cap, block), dtype=torch.int32)
    at = 0
    for e in range(experts):
        ids = (flat == e).nonzero().flatten()
        padded = cdiv(ids.numel(), block) * block
        sorted_ids[at : at + ids.numel()] = ids.to(torch.int32)
        expert_ids[at // block : (at + padded) // block] = e
        at += padded
    return sorted_ids, expert_ids, torch.tensor([at], dtype=torch.int32)


def fused_experts(a: torch.Tensor, w: torch.Tensor, topk_weights: torch.Tensor,
                  topk_ids: torch.Tensor, name: str) -> torch.Tensor:  # fmt: skip
    """vLLM's ``fused_experts`` (one GEMM, routed weights applied): tokens are aligned to
    each configuration's BLOCK_SIZE_M, so ``args=`` and ``grid=`` compute the alignment per
    configuration; the decision is keyed by the nearest tuned batch size, as vLLM's
    ``get_moe_configs`` picks a configuration from its file."""
    from ported_kernels_fourteenth import fused_moe

    m, k = a.shape
    experts, n, _ = w.shape
    top_k = topk_ids.shape[1]
    c = torch.empty(m * top_k, n)
    aligned: dict[int, tuple[Any, ...]] = {}

    def align(block: int) -> tuple[Any, ...]:
        if block not in aligned:
            aligned[block] = moe_align_block_size(topk_ids, block, experts)
        return aligned[block]

    res = autotune_launch(
        fused_moe,
        space=dict(BLOCK_SIZE_M=[16, 32], BLOCK_SIZE_N=[16, 32], BLOCK_SIZE_K=[16]),
        grid=lambda cfg: (cdiv(align(cfg.BLOCK_SIZE_M)[0].numel(), cfg.BLOCK_SIZE_M),
                          cdiv(n, cfg.BLOCK_SIZE_N)),
        args=lambda cfg: (a, w, c, topk_weights, *align(cfg.BLOCK_SIZE_M), n, k, m * top_k,
                          top_k, True),
        kwargs=lambda cfg: {"BLOCK_SIZE_M": cfg.BLOCK_SIZE_M, "BLOCK_SIZE_N": cfg.BLOCK_SIZE_N,
                            "BLOCK_SIZE_K": cfg.BLOCK_SIZE_K},
        key=min(BATCH_SIZES, key=lambda x: abs(x - m)),
        effort="quick",
        name=name,
    )  # fmt: skip
    _note(name, res)
    return c.view(m, top_k, n).sum(1)


def _moe_reference(a: Any, w: Any, topk_weights: Any, topk_ids: Any) -> torch.Tensor:
    out = torch.zeros(a.shape[0], w.shape[1])
    for t in range(a.shape[0]):
        for j in range(topk_ids.shape[1]):
            out[t] += topk_weights[t, j] * (w[topk_ids[t, j]] @ a[t])
    return out


def test_fused_moe_aligned_per_configuration_and_keyed_by_nearest_batch_size() -> None:
    """vLLM's fused MoE: each token's two experts chosen by a router's top-k, the slots
    sorted by expert and padded to the configuration's block of rows (so the arguments and
    the grid differ per configuration, computed by ``args=``/``grid=`` functions), the
    padding slots written nowhere. The output equals the loop over experts for 5 tokens
    (tuned, key 4), 4 tokens (the same key: the decision of 5 launched, "memory", on
    another alignment), 14 tokens (key 16: tuned again), and in a new process 6 tokens
    (key 4 again: the stored decision, "disk")."""
    # ported from: vllm-project/vllm tests/kernels/moe/test_moe.py::test_fused_moe
    from runtime_helpers import new_process

    from tunedsl.runtime import api

    torch.manual_seed(2)
    experts, n, k, top_k = 4, 32, 32, 2
    w = torch.randn(experts, n, k) / 8
    for m in (5, 4, 14, 6):
        if m == 6:
            new_process(*api._sites.values())
        a = torch.randn(m, k)
        score = torch.softmax(torch.randn(m, experts), dim=-1)
        topk_weights, topk_ids = torch.topk(score, top_k)
        out = fused_experts(a, w, topk_weights, topk_ids, "vllm-moe")
        torch.testing.assert_close(out, _moe_reference(a, w, topk_weights, topk_ids),
                                   rtol=1e-4, atol=1e-4)  # fmt: skip
    assert SOURCES["vllm-moe"] == ["tuned", "memory", "tuned", "disk"]


# --- SGLang: two-stage decode attention, the key/value splits tuned --------------------------

#: The most key/value splits (the slots of SGLang's ``attn_logits`` buffer).
MAX_SPLITS = 4


def decode_attention(q: Any, k_buffer: Any, v_buffer: Any, seq_lens: Any, name: str) -> Any:
    """SGLang's ``decode_attention_fwd``: stage 1 (tuned: how many splits each sequence's
    keys are cut into, and the block of keys a step loads) writes each split's output and
    log-sum-exp into a buffer of ``MAX_SPLITS`` slots, and stage 2 merges the splits the
    chosen configuration wrote, reading its ``NUM_KV_SPLITS`` from the launch result."""
    from ported_kernels_fourteenth import decode_attention_stage1, decode_attention_stage2

    batch, heads, d = q.shape
    max_len = k_buffer.shape[1]
    mid_o = torch.empty(batch, heads, MAX_SPLITS, d)
    mid_lse = torch.empty(batch, heads, MAX_SPLITS)
    res = autotune_launch(
        decode_attention_stage1,
        space=dict(NUM_KV_SPLITS=[1, 2, MAX_SPLITS], BLOCK_N=[8, 16]),
        grid=lambda cfg: (batch, heads, cfg.NUM_KV_SPLITS),
        args=(q, k_buffer, v_buffer, seq_lens, mid_o, mid_lse, d**-0.5, MAX_SPLITS, heads,
              max_len),
        kwargs=lambda cfg: {"D": d, "BLOCK_N": cfg.BLOCK_N, "NUM_KV_SPLITS": cfg.NUM_KV_SPLITS},
        effort="quick",
        name=name,
    )  # fmt: skip
    _note(name, res)
    out = torch.empty_like(q)
    decode_attention_stage2[(batch, heads)](mid_o, mid_lse, out, seq_lens, MAX_SPLITS, heads,
                                            D=d, NUM_KV_SPLITS=res.config.NUM_KV_SPLITS)  # fmt: skip
    return out


def _decode_reference(q: Any, k_buffer: Any, v_buffer: Any, seq_lens: Any) -> torch.Tensor:
    out = torch.empty_like(q)
    for b, length in enumerate(seq_lens.tolist()):
        keys, values = k_buffer[b, :length], v_buffer[b, :length]  # (length, heads, d)
        s = torch.einsum("hd,lhd->hl", q[b], keys) * q.shape[-1] ** -0.5
        out[b] = torch.einsum("hl,lhd->hd", torch.softmax(s, dim=-1), values)
    return out


def test_decode_attention_splits_tuned_and_merged_by_the_chosen_count() -> None:
    """SGLang's decode attention: sequences of 1 to 37 keys (shorter than some splits, so a
    split may be empty and write nothing), the stage-1 buffers left uninitialized. The
    merged output equals softmax attention on the tuning call and on the decided call with
    other lengths (lengths are tensor contents: the same key), and a buffer each
    configuration writes in its own slots is an output, not an argument changed in place
    (no warning)."""
    # ported from: sgl-project/sglang test/srt/test_triton_attention_kernels.py::TestTritonAttention::test_decode_attention
    torch.manual_seed(3)
    batch, heads, d, max_len = 3, 2, 16, 40
    k_buffer, v_buffer = (
        torch.randn(batch, max_len, heads, d),
        torch.randn(batch, max_len, heads, d),
    )
    for lengths in ([37, 1, 9], [3, 40, 17]):
        q = torch.randn(batch, heads, d)
        seq_lens = torch.tensor(lengths, dtype=torch.int32)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = decode_attention(q, k_buffer, v_buffer, seq_lens, "sglang-decode")
        torch.testing.assert_close(out, _decode_reference(q, k_buffer, v_buffer, seq_lens),
                                   rtol=1e-4, atol=1e-5)  # fmt: skip
        assert [str(m.message) for m in seen if "in place" in str(m.message)] == []
    assert SOURCES["sglang-decode"] == ["tuned", "memory"]


# --- Kernel Tuner: a list of restrictions, all of which must hold ----------------------------


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_check_restrictions
def test_a_constraint_returning_a_list_of_restrictions_is_named_with_all() -> None:
    """Kernel Tuner takes a list of restrictions that must all hold (``["a==b+c", "b!=b",
    "a-b==c"]`` is false). Ported as a constraint returning that list, a non-empty list is
    true whatever it holds, so every configuration would be kept: the space names the
    constraint, the configuration and the fix (``all([...])``); written with ``all``, it
    keeps what Kernel Tuner's check keeps."""
    from tunedsl import Space, UsageError

    listed = Space(a=[7], b=[4], c=[1, 3],
                   constraint=lambda p: [p.a == p.b + p.c, p.b == p.b, p.a - p.b == p.c])  # fmt: skip
    with pytest.raises(UsageError, match=r"returned a list .*Config\(a=7, b=4, c=1\).*all\("):
        listed.configs()
    fixed = Space(a=[7], b=[4], c=[1, 3],
                  constraint=lambda p: all([p.a == p.b + p.c, p.b == p.b, p.a - p.b == p.c]))  # fmt: skip
    assert list(fixed.configs()) == [Config({"a": 7, "b": 4, "c": 3})]


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_check_restrictions
def test_a_site_whose_constraint_returns_a_tuple_launches_nothing() -> None:
    """The same on a site: a constraint returning a tuple of conditions (``(c.block >= 64,
    c.block <= 64)``, each false for some block) is a ``UsageError`` on the site's first call,
    before any configuration runs, instead of tuning blocks it was written to leave out."""
    from ported_kernels_more import copy

    from tunedsl import Space, UsageError

    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=r"constraint .* returned a tuple"):
        autotune_launch(
            copy,
            space=Space(block=[32, 64, 128], constraint=lambda c: (c.block >= 64, c.block <= 64)),
            grid=lambda cfg: (cdiv(300, cfg.block),),
            args=(dst, src, 300),
            kwargs=lambda cfg: {"BLOCK": cfg.block},
            name="tuple-constraint",
        )
    assert not dst.any()


# --- Liger-Kernel: cross entropy, the gradient written over the logits -----------------------


class CrossEntropy(torch.autograd.Function):
    """Liger's ``LigerCrossEntropyFunction`` on a tunedsl site: the forward computes the
    loss and, in place over the logits, their gradient, which the backward scales."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor, restore: bool,
                name: str) -> Any:  # fmt: skip
        from ported_kernels_fourteenth import liger_cross_entropy

        rows, cols = logits.shape
        n_non_ignore = int((target != -100).sum())
        losses = torch.zeros(rows)
        res = autotune_launch(liger_cross_entropy, space=dict(BLOCK_SIZE=[16, 32, 64]),
                              grid=(rows,),
                              args=(logits, logits.stride(0), target, losses, cols,
                                    n_non_ignore, -100),
                              kwargs=lambda cfg: {"BLOCK_SIZE": cfg.BLOCK_SIZE},
                              restore_value=["X"] if restore else None, effort="quick",
                              name=name)  # fmt: skip
        _note(name, res)
        ctx.save_for_backward(logits.detach())
        return losses.sum() / n_non_ignore

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> Any:
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, None, None


@pytest.mark.parametrize("restore", [True, False])
def test_cross_entropy_gradient_written_over_the_logits(restore: bool) -> None:
    """Liger's cross entropy (mean over the rows not ignored, ``ignore_index=-100`` on two
    rows, a vocabulary of 100 that no block divides): the kernel reads each row's logits
    and writes their gradient over them, so a second launch would compute the gradient of
    a gradient. The loss and the logits' gradient equal PyTorch's on the tuning call and on
    the decided call, the caller's logits end as one launch's gradient (Liger's documented
    effect), and without ``restore_value=["X"]`` one warning names ``X``."""
    # ported from: linkedin/Liger-Kernel test/transformers/test_cross_entropy.py::test_correctness
    torch.manual_seed(4)
    name = f"liger-ce-{restore}"
    for _ in range(2):
        logits = torch.randn(6, 100) * 3
        target = torch.randint(0, 100, (6,))
        target[[1, 4]] = -100
        ref_in = logits.clone().requires_grad_()
        ref = torch.nn.functional.cross_entropy(ref_in, target, ignore_index=-100)
        ref.backward(torch.tensor(2.0))
        ours_in = logits.clone().requires_grad_()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            loss = CrossEntropy.apply(ours_in, target, restore, name)
        loss.backward(torch.tensor(2.0))
        torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(ours_in.grad, ref_in.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(ours_in.detach() * 2, ref_in.grad, rtol=1e-4, atol=1e-6)
        in_place = [str(m.message) for m in seen if "in place" in str(m.message)]
        if not restore and SOURCES[name][-1] == "tuned":
            assert len(in_place) == 1 and "'X'" in in_place[0]
        else:
            assert in_place == []
    assert SOURCES[name] == ["tuned", "memory"]


# --- Triton test_cache: a function picked as a constexpr local, then called ------------------

PICKED = """
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


@triton.jit
def function_0(x, BLOCK: tl.constexpr):
    return x + 2.0


@triton.jit
def function_2(x, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK == 32)
    return x + 1.0


@triton.jit
def function_1(x, BLOCK: tl.constexpr):
    cond: tl.constexpr = True
    if cond:
        FN: tl.constexpr = function_2
    else:
        FN: tl.constexpr = function_0
    return FN(x, BLOCK)


@triton.jit
def kernel(dst, src, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    tl.store(dst + offs, function_1(x, BLOCK), mask=offs < n)


def run(dst, src):
    n = src.numel()
    return autotune_launch(kernel, space=dict(BLOCK=[32, 64]), grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=(dst, src, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
                           name="picked")
"""


def _load(path: Any, text: str) -> Any:
    import importlib.util

    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("ported14_picked", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_function_picked_as_a_constexpr_local_edited_is_tuned_again(tmp_path: Any) -> None:
    """Triton's ``function_1`` picks the function it calls as a ``tl.constexpr`` local
    (``FN: tl.constexpr = function_2``), and its cache key changes when that function is
    edited. Here the picked function lets only BLOCK=32 build: tuned, then served from disk
    in a new process; edited so that only BLOCK=64 builds, it is another kernel, tuned again,
    never the stored BLOCK=32 failing at launch."""
    # ported from: triton-lang/triton python/test/unit/runtime/test_cache.py::test_toplevel_change
    from runtime_helpers import new_process

    from tunedsl.runtime import api

    path = tmp_path / "ported14_picked.py"
    src = torch.randn(100)
    for text, block, source in [(PICKED, 32, "tuned"), (PICKED, 32, "disk"),
                                (PICKED.replace("BLOCK == 32", "BLOCK == 64"), 64, "tuned")]:  # fmt: skip
        new_process(*api._sites.values())
        dst = torch.zeros(100)
        res = _load(path, text).run(dst, src)
        assert (res.source, res.config) == (source, Config(BLOCK=block))
        assert torch.equal(dst, src + 1.0)


# --- Inductor: a cooperative reduction, its semaphore and workspace --------------------------


def split_mean(x: torch.Tensor, sem: torch.Tensor, name: str, *, reset_in_kernel: bool,
               reset: bool) -> tuple[torch.Tensor, Any]:  # fmt: skip
    """Each row's mean over RSPLIT programs (tuned, 17 being no power of two), the last
    program of a row to arrive at its semaphore finishing it."""
    from ported_kernels_fourteenth import split_mean as kernel

    rows, count = x.shape
    partial = torch.full((rows, 32), float("nan"))
    out = torch.full((rows,), float("nan"))
    res = autotune_launch(kernel, space=dict(RSPLIT=[4, 17]),
                          grid=lambda cfg: (rows, cfg.RSPLIT),
                          args=(x, partial, sem, out, count, 32),
                          kwargs=lambda cfg: {"RSPLIT": cfg.RSPLIT, "BLOCK": 64, "MAXP2": 32,
                                              "RESET": reset_in_kernel},
                          reset_to_zero=["sem"] if reset else None, effort="quick",
                          name=name)  # fmt: skip
    _note(name, res)
    return out, res


@pytest.mark.parametrize(
    ("reset_in_kernel", "reset"), [(True, False), (False, True), (False, False)],
    ids=["kernel-resets", "reset_to_zero", "neither"],
)  # fmt: skip
def test_cooperative_reduction_semaphore_over_tuned_splits(reset_in_kernel: bool,
                                                           reset: bool) -> None:  # fmt: skip
    """Inductor's cooperative reductions (test_non_power_of_2: rows of 257 elements, RSPLIT
    of 4 or 17 programs a row): a row's programs arrive at a semaphore and the last one
    finishes the row. When the kernel sets the semaphore back (Inductor's workspace), or
    ``reset_to_zero`` names it, every launch starts from zero and nothing warns; when
    neither does, the count left by one launch would keep the next from finishing any row:
    the in-place rule finds the semaphore, restores it before each launch and names it
    once. The means are right on the tuning call and on the decided call every way, and
    the caller's semaphore ends as one launch leaves it (zero, or the chosen RSPLIT)."""
    # ported from: pytorch/pytorch test/inductor/test_cooperative_reductions.py::test_non_power_of_2
    torch.manual_seed(5)
    name = f"inductor-coop-{reset_in_kernel}-{reset}"
    for _ in range(2):
        x = torch.randn(2, 257)
        sem = torch.zeros(2, dtype=torch.int32)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out, res = split_mean(x, sem, name, reset_in_kernel=reset_in_kernel, reset=reset)
        torch.testing.assert_close(out, x.mean(1), rtol=1e-5, atol=1e-6)
        in_place = [str(m.message) for m in seen if "in place" in str(m.message)]
        tuned = SOURCES[name][-1] == "tuned"
        if not reset_in_kernel and not reset and tuned:
            assert len(in_place) == 1 and "'sem'" in in_place[0]
        else:
            assert in_place == []
        assert sem.tolist() == [0 if reset_in_kernel else res.config.RSPLIT] * 2
    assert SOURCES[name] == ["tuned", "memory"]


# --- Triton test_autotuner: what an early prune returns --------------------------------------


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_prune_configs
@pytest.mark.parametrize(
    ("prune", "problem"),
    [
        (lambda configs, args: configs[0], r"returned one configuration \(Config\(block=32\)\)"
                                           r".*a list.*\[Config\(block=32\)\]"),
        (lambda configs, args: {"block": 64}, r"returned one configuration \(\{'block': 64\}\)"),
        (lambda configs, args: {c for c in configs if c.block > 32},
         r"returned a set, whose order changes from run to run.*a list"),
    ],
    ids=["a-config", "a-dict", "a-set"],
)  # fmt: skip
def test_an_early_prune_returning_one_configuration_or_a_set_is_named(prune: Any,
                                                                      problem: str) -> None:  # fmt: skip
    """Triton's ``early_config_prune`` returns the list of configurations it keeps
    (``[configs[0]]``). One written ``return configs[0]`` returns a configuration, whose
    iteration gives its field names: it is named as one configuration with the list to
    return, not as a field name that is no configuration. A set has no order (it follows the
    hash seed, and the first configuration kept is launched when tuning is off): named with
    the fix, as an axis given as a set is. Nothing is launched."""
    from ported_kernels_more import copy

    from tunedsl import UsageError

    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=problem):
        autotune_launch(copy, space=dict(block=[32, 64, 128]),
                        grid=lambda cfg: (cdiv(300, cfg.block),), args=(dst, src, 300),
                        kwargs=lambda cfg: {"BLOCK": cfg.block}, prune=prune,
                        name=f"prune-returns-{problem[:12]}")  # fmt: skip
    assert not dst.any()


# --- Kernel Tuner: a verification function of its own form ---------------------------------


def kt_verify(answer: Any, result_host: Any, atol: Any = None) -> bool:
    """Kernel Tuner's ``verify(answer, result_host, atol=None)``: the expected answer list and
    the kernel's results, compared by the function."""
    return all(a is None or torch.allclose(a, r) for a, r in zip(answer, result_host, strict=True))


# ported from: KernelTuner/kernel_tuner test/test_util_functions.py::test_normalize_verify_function
def test_a_verify_function_in_kernel_tuners_form_is_named_with_tunedsls() -> None:
    """Kernel Tuner's ``verify=`` is a comparison ``fn(answer, result_host, atol=None)``;
    tunedsl's is a reference ``fn(inputs) -> {output: expected}``. One of Kernel Tuner's form
    is named where the site is made, with how tunedsl calls it and an example, as a
    ``prune=`` or hook that cannot take its call is, instead of a ``TypeError`` raised
    inside tunedsl's own hook runner ("missing 1 required positional argument")."""
    from ported_kernels_more import copy

    from tunedsl import UsageError

    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=r"verify=kt_verify\(answer.*result_host.*\) .*"
                                         r"cannot be called as verify\(inputs\).*verify=lambda"):  # fmt: skip
        autotune_launch(copy, space=dict(block=[32, 128]),
                        grid=lambda cfg: (cdiv(300, cfg.block),), args=(dst, src, 300),
                        kwargs=lambda cfg: {"BLOCK": cfg.block}, verify=kt_verify,
                        name="kt-verify")  # fmt: skip
    assert not dst.any()


# --- Triton test_autotuner: functions of the configuration ----------------------------------


# ported from: triton-lang/triton python/test/unit/runtime/test_autotuner.py::test_kwargs
@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ({"grid": lambda: (10,)}, r"grid=<lambda.*>\(\) cannot be called as grid\(cfg\)"),
        ({"args": lambda: ()}, r"args=<lambda.*>\(\) cannot be called as args\(cfg\)"),
        ({"kwargs": lambda cfg, n: {}}, r"kwargs=<lambda.*>\(cfg, n\) cannot be called as "
                                        r"kwargs\(cfg\)"),
    ],
    ids=["grid", "args", "kwargs"],
)  # fmt: skip
def test_a_function_of_the_configuration_that_cannot_take_it_is_named(call: Any,
                                                                      problem: str) -> None:  # fmt: skip
    """Triton's grid is a function of the configuration (``grid = lambda META:
    (triton.cdiv(N, META['BLOCK_SIZE_M']),)``), as are ``autotune_launch``'s ``grid=``,
    ``args=`` and ``kwargs=`` functions. One that cannot take it (``lambda: (10,)``, a second
    parameter) is named on the site's first call with how it is called and an example,
    instead of a bare ``TypeError`` ("takes 0 positional arguments but 1 was given") naming
    no option; nothing is launched."""
    from ported_kernels_more import copy

    from tunedsl import UsageError

    src, dst = torch.randn(300), torch.zeros(300)
    given = {"grid": lambda cfg: (cdiv(300, cfg.block),), "args": (dst, src, 300),
             "kwargs": lambda cfg: {"BLOCK": cfg.block}, **call}  # fmt: skip
    with pytest.raises(UsageError, match=problem + r".*with the configuration.*lambda cfg"):
        autotune_launch(copy, space=dict(block=[32, 128]), name=f"fn-of-{problem[:6]}", **given)
    assert not dst.any()


# --- Kernel Tuner: its simple search space -------------------------------------------------


# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_size
# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_random_sample
# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_neighbors_fictious
def test_kernel_tuners_simple_space_its_sample_and_the_neighbours_of_a_rejected_point() -> None:
    """Kernel Tuner's simple space (``x=[1, 1.5, 2, 3]``, ``y=[4, 5.5]``, two strings,
    restricted by ``y % x == 1``) as a ``Space``: the six points Kernel Tuner keeps; a sample
    of more points than there are gives each valid point once (Kernel Tuner raises); the
    neighbours of a point the constraint rejects are valid points one step away along one
    axis, never the point itself."""
    import random

    from tunedsl import Space

    space = Space(x=[1, 1.5, 2, 3], y=[4, 5.5], z=["string_1", "string_2"],
                  constraint=lambda c: c.y % c.x == 1)  # fmt: skip
    kept = {(c.x, c.y, c.z) for c in space.configs()}
    assert kept == {(x, y, z) for x, y in [(1.5, 4), (1.5, 5.5), (3, 4)]
                    for z in ("string_1", "string_2")}  # fmt: skip
    sample = space.sample(random.Random(0), 7)
    assert sorted((c.x, c.y, c.z) for c in sample) == sorted(kept)
    rejected = Config({"x": 1, "y": 4, "z": "string_1"})
    assert rejected not in space
    near = space.neighbours(rejected)
    assert near and all(c in space and c != rejected for c in near)
    assert all(sum(c[f] != rejected[f] for f in ("x", "y", "z")) == 1 for c in near)
