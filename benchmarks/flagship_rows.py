"""The child side of ``bench_flagship.py``: one tuner, one group of rows, in a fresh process.

Imports the gallery example as a module, tunes (tunedsl's DSL site, or ``triton.autotune``
over the same configurations and prune), re-times the choice beside the PyTorch reference,
and for attention (tunedsl's process) re-times every configuration; prints one ``ROW
{json}`` line per row as it goes.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MATMUL = "persistent_matmul"
ATTENTION = "fused_attention"


def load_example(name: str, features: frozenset[str]) -> Any:
    """Import a gallery example as a module (a DSL script: through tunedsl's import hook),
    with the features the parent probed instead of probing again."""
    import importlib

    import tunedsl.activate  # noqa: F401  (the examples are DSL scripts)

    sys.path.insert(0, str(EXAMPLES))
    module = importlib.import_module(name)
    module.gpu_features = lambda: features
    return module


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def bench_ms(fn: Callable[[], Any], rep: int) -> float:
    """do_bench's median (cold L2) on a GPU; a wall-clock median under the interpreter."""
    import torch

    if torch.cuda.is_available():
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=25, rep=rep, return_mode="median"))
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def wall_bench(fn: Callable[[], Any], **_: Any) -> float:
    """``triton.autotune``'s timer under the interpreter (do_bench needs a GPU)."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, rep: int) -> dict[str, list]:
    """Each function's do_bench median per round, rounds interleaved (drift hits all alike)."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(bench_ms(fn, rep))
    return samples


def timed_first_call(call: Callable[[], Any]) -> tuple[Any, float]:
    sync()
    start = time.perf_counter()
    out = call()
    sync()
    return out, time.perf_counter() - start


def label(cfg: Any) -> str:
    """A configuration as sorted ``k=v`` pairs: the same text for tunedsl's choice, Triton's
    and the exhaustive table's."""
    return " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in sorted(cfg.items()))


def rel_err(out: Any, expected: Any) -> float:
    return float((out.float() - expected.float()).norm() / expected.float().norm())


# Space field -> kernel parameter, for triton.Config; the launch hints stay options.
MATMUL_FIELDS = {"block_m": "BLOCK_M", "block_n": "BLOCK_N", "block_k": "BLOCK_K",
                 "group_m": "GROUP_M", "subtile": "SUBTILE", "flatten": "FLATTEN",
                 "warp_specialize": "WARP_SPECIALIZE"}  # fmt: skip
ATTENTION_FIELDS = {"block_m": "BLOCK_M", "block_n": "BLOCK_N",
                    "warp_specialize": "WARP_SPECIALIZE"}  # fmt: skip
HINTS = ("num_warps", "num_stages", "num_ctas")


def triton_configs(space: Any, fields: dict[str, str], extra: Callable[[Any], dict]) -> list:
    import triton

    configs = []
    for cfg in space.configs():
        kwargs = {param: cfg[field] for field, param in fields.items()}
        kwargs.update(extra(cfg))
        hints = {h: cfg[h] for h in HINTS if h in cfg}
        configs.append(triton.Config(kwargs, **hints))
    return configs


def triton_choice(tuned: Any, fields: dict[str, str], space: Any) -> dict[str, Any]:
    """``triton.autotune``'s choice in the space's field names."""
    best = tuned.best_config
    back = {param: field for field, param in fields.items()}
    chosen = {back[k]: v for k, v in best.kwargs.items() if k in back}
    chosen.update({h: getattr(best, h) for h in HINTS})
    names = set(space.configs()[0])
    return {k: v for k, v in chosen.items() if k in names}


def space_of(module: Any, name: str) -> Any:
    if module.ex.on_gpu:
        return getattr(module, name)(module.gpu_features())
    return module.CPU_SPACE


def matmul_rows(ns: argparse.Namespace, shapes: Sequence[Sequence[int]]) -> None:
    import torch
    import triton

    mod = load_example(MATMUL, frozenset(ns.features))
    space = space_of(mod, "matmul_space")
    tuned = None
    if ns.child == "triton":
        sms = mod.sm_count()
        configs = triton_configs(space, MATMUL_FIELDS, lambda cfg: {"NUM_SMS": sms // cfg.num_ctas})
        tuned = triton.autotune(
            configs, key=["M", "N", "K"], **({} if mod.ex.on_gpu else {"do_bench": wall_bench})
        )(mod.tma_matmul_kernel)
    for shape in shapes:
        row = matmul_row(ns, mod, space, tuned, getattr(torch, ns.dtype), *shape)
        print("ROW " + json.dumps(row), flush=True)


def matmul_row(ns: argparse.Namespace, mod: Any, space: Any, tuned: Any, dtype: Any,
               M: int, N: int, K: int) -> dict[str, Any]:  # fmt: skip
    """One shape: the first call (tunedsl's site, or ``tuned``: triton.autotune), then the
    choice re-timed beside cuBLAS."""
    import torch
    import triton

    a, b, c = mod.random_problem(M, N, K, dtype)
    row: dict[str, Any] = {"shape": [M, N, K], "configs": len(space.configs())}
    if tuned is None:

        def run() -> Any:
            return mod.matmul(a, b, c)

        launch, row["first_call_s"] = timed_first_call(run)
        row["chosen"] = dict(launch.config.items())
        row["source"] = launch.source
    else:

        def grid(meta: dict) -> tuple[int]:
            tiles = triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])
            return (min(meta["NUM_SMS"], tiles),)

        def run() -> Any:
            return tuned[grid](a, b, c, M, N, K)

        _, row["first_call_s"] = timed_first_call(run)
        row["chosen"] = triton_choice(tuned, MATMUL_FIELDS, space)
    row["rel_err"] = rel_err(c, a.float() @ b.float())
    expected = torch.empty_like(c)
    times = interleaved(
        {"ours": run, "ref": lambda: torch.matmul(a, b, out=expected)}, ns.rounds, ns.rep
    )
    row["ours_ms"] = statistics.median(times["ours"])
    row["ref_ms"] = statistics.median(times["ref"])
    row["flops"] = 2.0 * M * N * K
    return row


def attention_rows(ns: argparse.Namespace, size: Sequence[int]) -> None:
    import triton

    mod = load_example(ATTENTION, frozenset(ns.features))
    space = space_of(mod, "attention_space")
    tuned = None
    if ns.child == "triton":

        def prune(configs: list, named_args: dict, **kwargs: Any) -> list:
            # the site's prune=, on triton.Config objects (its fields by kernel name)
            args = {**named_args, **kwargs}
            kept = mod.fits_sequence([_AsCfg(c) for c in configs], args)
            return [c.config for c in kept]

        tuned = triton.autotune(
            triton_configs(space, ATTENTION_FIELDS, lambda cfg: {}),
            key=["N_CTX", "HEAD_DIM", "CAUSAL"],
            prune_configs_by={"early_config_prune": prune},
            **({} if mod.ex.on_gpu else {"do_bench": wall_bench}),
        )(mod.attention_kernel)
    for causal in (False, True):
        row = attention_row(ns, mod, space, tuned, size, causal)
        print("ROW " + json.dumps(row), flush=True)


def attention_row(ns: argparse.Namespace, mod: Any, space: Any, tuned: Any,
                  size: Sequence[int], causal: bool) -> dict[str, Any]:  # fmt: skip
    """Full or causal: the first call, the choice re-timed beside SDPA, and (tunedsl's
    process) every configuration re-timed."""
    import torch.nn.functional as F
    import triton

    batch, heads, n = size
    head_dim = ns.head_dim
    q, k, v, o = mod.random_problem(batch, heads, n, head_dim)
    row: dict[str, Any] = {"head_dim": head_dim, "causal": causal}
    if tuned is None:

        def run() -> Any:
            return mod.attention(q, k, v, o, causal)

        launch, row["first_call_s"] = timed_first_call(run)
        row["chosen"] = dict(launch.config.items())
        row["source"] = launch.source
    else:

        def grid(meta: dict) -> tuple[int, int]:
            return (triton.cdiv(n, meta["BLOCK_M"]), batch * heads)

        def run() -> Any:
            scale = 1 / math.sqrt(head_dim)
            return tuned[grid](
                q, k, v, o, scale, batch * heads, n, HEAD_DIM=head_dim, CAUSAL=causal
            )

        _, row["first_call_s"] = timed_first_call(run)
        row["chosen"] = triton_choice(tuned, ATTENTION_FIELDS, space)
    row["rel_err"] = rel_err(o, mod.reference(q, k, v, causal))

    from torch.nn.attention import SDPBackend, sdpa_kernel

    def ref() -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def flash() -> Any:  # SDPA's FlashAttention-2 backend (its default on the H100: cuDNN's)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    times = interleaved({"ours": run, "ref": ref, "flash": flash}, ns.rounds, ns.rep)
    row["ours_ms"] = statistics.median(times["ours"])
    row["ref_ms"] = statistics.median(times["ref"])
    row["flash_ms"] = statistics.median(times["flash"])
    row["flops"] = mod.attention_flops(q, causal)
    row["configs"] = len(space.configs())
    if tuned is None:
        row["exhaustive"] = exhaustive(mod, space, q, k, v, o, causal, ns)
    return row


class _AsCfg:
    """A ``triton.Config`` read as the site's configuration (``c.block_m``, ...), for the
    example's prune."""

    def __init__(self, config: Any) -> None:
        self.config = config
        back = {param: field for field, param in ATTENTION_FIELDS.items()}
        self.fields = {back.get(k, k): v for k, v in config.kwargs.items()}
        self.fields.update({h: getattr(config, h) for h in HINTS})

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["fields"][name]
        except KeyError:
            raise AttributeError(name) from None


def exhaustive(mod: Any, space: Any, q: Any, k: Any, v: Any, o: Any, causal: bool,
               ns: argparse.Namespace) -> dict:  # fmt: skip
    """Every configuration the prune keeps, launched straight through Triton and re-timed in
    interleaved rounds: the reference a tuner's choice is judged against."""
    import triton

    batch, heads, n, head_dim = q.shape
    args = {"N_CTX": n, "HEAD_DIM": head_dim, "CAUSAL": causal}
    kept = mod.fits_sequence(list(space.configs()), args)
    runs = {}
    failed = {}
    for cfg in kept:
        grid = (triton.cdiv(n, cfg.block_m), batch * heads)
        hints = {h: cfg[h] for h in HINTS if h in cfg}

        def launch(cfg: Any = cfg, grid: tuple = grid, hints: dict = hints) -> Any:
            return mod.attention_kernel[grid](
                q, k, v, o, 1 / math.sqrt(head_dim), batch * heads, n, HEAD_DIM=head_dim,
                CAUSAL=causal, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                WARP_SPECIALIZE=cfg.warp_specialize, **hints,
            )  # fmt: skip

        try:  # compiles, or loads what the tuning compiled into the Triton cache
            launch()
            sync()
        except Exception as err:  # e.g. more shared memory than the GPU has
            failed[label(cfg)] = f"{type(err).__name__}: {str(err)[:120]}"
            continue
        runs[label(cfg)] = launch
    if not runs:
        return {"median_ms": {}, "best": None, "best_ms": None, "best_spread": 0.0,
                "failed": failed}  # fmt: skip
    samples = interleaved(runs, ns.rounds, ns.rep)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    best = min(medians, key=medians.__getitem__)
    low, high = min(samples[best]), max(samples[best])
    return {"median_ms": medians, "best": best, "best_ms": medians[best],
            "best_spread": high / low - 1.0, "failed": failed}  # fmt: skip


def child_main(ns: argparse.Namespace) -> None:
    if ns.kernel == "matmul":
        shapes = json.loads(ns.shapes)
        matmul_rows(ns, shapes)
    else:
        attention_rows(ns, json.loads(ns.size))
