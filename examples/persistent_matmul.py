"""Persistent TMA matrix multiply, fp16 and bf16: tensor descriptors and a space fitted to the GPU.

The kernel follows the device-side descriptor form of Triton's tutorial 09 (persistent
matmul, ``python/tutorials/09-persistent-matmul.py``), written for this gallery.

Teaches:
- a persistent kernel: ``blocks=min(NUM_SMS, tiles)`` starts one program per SM (per pair
  of SMs with ``num_ctas=2``), and each walks the output tiles in grouped order, stepping
  by ``NUM_SMS``;
- TMA tensor descriptors made on the device (``tl.make_tensor_descriptor``): Triton needs
  global scratch memory for them, handed out by the allocator given to
  ``triton.set_allocator``;
- a space fitted to this Triton and this GPU: warp specialization and 2-CTA clusters join it
  only where a probe shows they compile and compute the right answer here (in a child
  process, so a kernel that breaks the GPU context cannot take this one down);
- ``Space(constraint=...)``: the pipeline's shared memory (the device's limit, read from the
  device), the accumulator's registers, and the combinations Triton ignores or rejects
  (warp specialization with a flattened loop, a split epilogue or two warp groups);
- one site for two dtypes: the key holds the tensors' dtypes, so fp16 and bf16 tune apart.

Without a GPU the interpreter runs the same descriptor code at small sizes (Triton's
interpreter reads and writes TMA descriptors as masked loads and stores).

    tunedsl run examples/persistent_matmul.py
"""

import functools
import sys

import torch
import triton
import triton.language as tl

from tunedsl import Space, autotune, cdiv, workload
from tunedsl.gallery.kit import PROBE_FLAG, Example, format_config

ex = Example("persistent_matmul")


ex.use_device_scratch()  # the global memory of descriptors made on the device


@triton.jit
def tile_origin(tile, tiles_m, tiles_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                GROUP_M: tl.constexpr):  # fmt: skip
    # Grouped order: GROUP_M rows of tiles run together, so they share B's columns in L2.
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m * BLOCK_M, pid_n * BLOCK_N


@triton.jit
def tma_matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SUBTILE: tl.constexpr, FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
):  # fmt: skip
    # A is M x K, B is K x N, C is M x N, all row-major. TMA moves whole tiles between global
    # and shared memory: loads past the matrix's edge read zeros, stores there are dropped.
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(
        c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N // 2 if SUBTILE else BLOCK_N]
    )
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # NUM_SMS programs (clusters, with num_ctas > 1) at most; program i takes tiles i,
    # i + NUM_SMS, ... The epilogue counts its own tile number: sharing the loop's would tie
    # the pipelined loads of the next tile to the stores of this one.
    first = tl.program_id(0)
    tile_c = first - NUM_SMS
    for tile in tl.range(
        first, tiles_m * tiles_n, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE
    ):
        off_m, off_n = tile_origin(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            a = a_desc.load([off_m, kk * BLOCK_K])
            b = b_desc.load([kk * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)
        tile_c += NUM_SMS
        off_m, off_n = tile_origin(tile_c, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        if SUBTILE:
            # Two half-width stores: half the epilogue's shared memory, left to the pipeline.
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([off_m, off_n], left.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))


# -- the space ------------------------------------------------------------------------------

#: Shared memory Triton keeps besides the pipeline's buffers (barriers; measured: < 1 KiB).
SMEM_SLACK = 1024
#: fp32 accumulator registers per thread past which a tile spills (of 255 addressable).
MAX_ACC_REGS = 128
FEATURES = ("warp_specialize", "num_ctas")




def per_cta_tile(cfg) -> tuple[int, int]:
    # A 2-CTA cluster splits the tile in two along its longer side (each CTA holds half).
    if cfg.num_ctas == 1:
        return cfg.block_m, cfg.block_n
    if cfg.block_m >= cfg.block_n:
        return cfg.block_m // cfg.num_ctas, cfg.block_n
    return cfg.block_m, cfg.block_n // cfg.num_ctas


def make_fits(smem_limit: int):
    def fits(cfg) -> bool:
        tile_m, tile_n = per_cta_tile(cfg)
        if tile_m * tile_n // (32 * cfg.num_warps) > MAX_ACC_REGS:
            return False
        # num_stages buffers of an A and a B tile (2-byte elements), plus the epilogue's
        # tile of C; checked against Triton's own count for sm_90 (3.6 and 3.9).
        store_n = tile_n // 2 if cfg.subtile else tile_n
        smem = 2 * (cfg.num_stages * (tile_m + tile_n) * cfg.block_k + tile_m * store_n)
        if smem + SMEM_SLACK > smem_limit:
            return False
        if cfg.warp_specialize:
            # Triton 3.6-3.9 specialize only an unflattened loop of one consumer warp group,
            # and fail to compile it with the split epilogue; elsewhere it is ignored.
            return cfg.num_ctas == 1 and cfg.num_warps == 4 and not (cfg.flatten or cfg.subtile)
        if cfg.num_ctas > 1:
            # Two 128-row halves sharing B's tiles; Triton 3.6 fails to compile the cluster
            # with the split epilogue.
            return cfg.block_m == 256 and cfg.num_warps == 8 and cfg.flatten and not cfg.subtile
        return True

    return fits


def matmul_space(features: frozenset[str]) -> Space:
    """The GPU space: tiles, pipeline depth, warps, epilogue split, loop flattening, and the
    optional features this GPU and Triton were found to support."""
    return Space(
        block_m=[128, 256],
        block_n=[128, 256],
        block_k=[64, 128],
        group_m=[8],
        num_stages=[3, 4, 5],
        num_warps=[4, 8],
        subtile=[False, True],
        flatten=[False, True],
        warp_specialize=[False, True] if "warp_specialize" in features else [False],
        num_ctas=[1, 2] if "num_ctas" in features else [1],
        constraint=make_fits(ex.shared_memory_limit()),
    )


CPU_SPACE = Space(
    block_m=[16, 32],
    block_n=[32],
    block_k=[16],
    group_m=[2],
    num_stages=[2],
    num_warps=[4],
    subtile=[False, True],
    flatten=[False],
    warp_specialize=[False],
    num_ctas=[1],
)


@functools.cache
def gpu_features() -> frozenset[str]:
    """The optional features that compile, specialize and compute correctly on this GPU
    (``probe`` below, run in a child process)."""
    return ex.probed_features(__file__, FEATURES)


def probe() -> None:
    """Run the kernel once per optional feature, in the form the space uses it, on a small
    problem where each program walks several tiles; print what worked."""
    a, b, c = random_problem(512, 512, 512, torch.float16)
    expected = reference(a, b)
    tries = {
        "warp_specialize": dict(BLOCK_M=128, FLATTEN=False, SUBTILE=False, WARP_SPECIALIZE=True,
                                num_warps=4, num_ctas=1),
        "num_ctas": dict(BLOCK_M=256, FLATTEN=True, SUBTILE=False, WARP_SPECIALIZE=False,
                         num_warps=8, num_ctas=2),
    }  # fmt: skip
    for name, variant in tries.items():
        programs = 4
        try:
            c.fill_(float("nan"))
            compiled = tma_matmul_kernel[(programs,)](
                a, b, c, 512, 512, 512, programs, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                num_stages=3, **variant,
            )  # fmt: skip
            if ex.on_gpu:
                torch.cuda.synchronize()
            torch.testing.assert_close(c, expected, **TOLERANCE)
            if name == "warp_specialize" and "ttg.warp_specialize" not in compiled.asm["ttgir"]:
                raise RuntimeError("Triton compiled the loop without specializing it")
        except Exception as err:  # any failure leaves the feature out of the space
            reason = " ".join(str(err).split())[:160] or type(err).__name__
            print(f"feature {name} no ({reason})", flush=True)
        else:
            print(f"feature {name} yes", flush=True)


# -- the tuned call -------------------------------------------------------------------------


@functools.cache
def sm_count() -> int:
    if ex.cross_compiling:
        return 132  # an H100's: NUM_SMS is a constant of the compiled kernel
    if not ex.on_gpu:
        return 2  # the interpreter: two programs, each walking several tiles
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def matmul(a, b, c):
    """``c = a @ b`` for row-major fp16 or bf16 ``a`` (M x K) and ``b`` (K x N)."""
    M, K = a.shape
    _, N = b.shape
    for name, t in (("a", a), ("b", b), ("c", c)):
        # A descriptor's rows must start 16-byte aligned: contiguous, the row length a
        # multiple of 8 two-byte elements.
        if not t.is_contiguous() or t.shape[1] % 8:
            raise ValueError(
                f"persistent matmul: {name} must be contiguous with a multiple of 8 columns, "
                f"got shape {tuple(t.shape)}; pad it or call .contiguous()"
            )
    sms = sm_count()
    return autotune(
        space=matmul_space(gpu_features()) if ex.on_gpu else CPU_SPACE,
        blocks=min(sms // $num_ctas, cdiv(M, $block_m) * cdiv(N, $block_n)),
        tma_matmul_kernel(
            a, b, c, M, N, K, NUM_SMS=sms // $num_ctas,
            BLOCK_M=$block_m, BLOCK_N=$block_n, BLOCK_K=$block_k, GROUP_M=$group_m,
            SUBTILE=$subtile, FLATTEN=$flatten, WARP_SPECIALIZE=$warp_specialize,
        ),
    )  # fmt: skip


SIZES = ex.pick(gpu=(4096, 4096, 4096), cpu=(72, 48, 40))  # M, N, K; CPU: ragged tiles
# Triton's interpreter computes tl.dot on bfloat16 wrongly (3.6 and 3.9, with or without
# descriptors), so on the CPU only fp16 runs.
DTYPES = ex.pick(gpu=(torch.float16, torch.bfloat16), cpu=(torch.float16,))
TOLERANCE = dict(rtol=2e-2, atol=1e-1)  # 16-bit outputs, fp32 accumulation in both


def random_problem(m, n, k, dtype):
    a = torch.randn(m, k, device=ex.device, dtype=dtype)
    b = torch.randn(k, n, device=ex.device, dtype=dtype)
    c = ex.poison(torch.empty(m, n, device=ex.device, dtype=dtype))
    return a, b, c


def reference(a, b):
    return (a.float() @ b.float()).to(a.dtype)


def tflops(m, n, k, ms):
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


@workload
def warm():
    for dtype in DTYPES:
        matmul(*random_problem(*SIZES, dtype))


def main():
    M, N, K = SIZES
    launches = {}
    for dtype in DTYPES:
        a, b, c = random_problem(M, N, K, dtype)
        launches[dtype] = (matmul(a, b, c), a, b, c)
        ex.check(f"c ({dtype})", c, reference(a, b), **TOLERANCE)

    if torch.bfloat16 in launches:
        # Tuned and checked above; its speed beside cuBLAS is printed here, fp16's is the
        # gallery's report (benchmarks/bench_flagship.py has both at several shapes).
        launch, a, b, c = launches[torch.bfloat16]
        ours = ex.bench(lambda: matmul(a, b, c))
        theirs = ex.bench(lambda: torch.matmul(a, b))
        print(
            f"bfloat16 {M}x{N}x{K}: {format_config(launch.config)}: {ours:.3f} ms "
            f"({tflops(M, N, K, ours):.0f} TFLOP/s), torch.matmul {theirs:.3f} ms "
            f"({tflops(M, N, K, theirs):.0f} TFLOP/s)"
        )

    launch, a, b, c = launches[torch.float16]
    expected = torch.empty_like(c)
    ex.report(
        launch,
        problem=f"{M}x{N}x{K} " + " and ".join(str(d).split(".")[1] for d in DTYPES),
        run=lambda: matmul(a, b, c),
        reference=lambda: torch.matmul(a, b, out=expected),
        flops=2.0 * M * N * K,
    )


if __name__ == "__main__":
    if PROBE_FLAG in sys.argv:
        probe()
    else:
        main()
