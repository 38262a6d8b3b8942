"""Matrix multiply: 2-D blocks, grouped ordering, a constrained space and size buckets.

Teaches:
- a 2-D grid, ``blocks=(cdiv(M, $block_m), cdiv(N, $block_n))``;
- grouped ordering (``group_m`` rows of tiles at a time, so neighbouring programs reuse the
  same columns of B from the L2 cache);
- ``Space(constraint=...)``: the product of the axes, minus the configurations that cannot
  be good (here: more than 128 fp32 accumulator registers per thread);
- ``occupancy`` and ``num_warps`` launch hints (``occupancy=2``: two blocks per SM, which
  tunedsl turns into a register cap);
- ``key=``: sizes in the same power-of-two bucket share one tuning decision, so a second
  call with a slightly different size launches at once.

    tunedsl run examples/matmul.py
"""

import torch
import triton
import triton.language as tl

from tunedsl import Space, autotune, cdiv, workload
from tunedsl.gallery.kit import Example

ex = Example("matmul")


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    # The grid is 2-D; renumber its programs so that GROUP_M rows of tiles run together.
    pid = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    programs_per_group = GROUP_M * num_pid_n
    first_pid_m = (pid // programs_per_group) * GROUP_M
    group_rows = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % programs_per_group) % group_rows
    pid_n = (pid % programs_per_group) // group_rows

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=(kk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    c = acc.to(c_ptr.dtype.element_ty)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=mask)


def fits_in_registers(cfg):
    # Each of the block's threads holds block_m * block_n / (32 * num_warps) accumulators;
    # past 128 they spill. Two blocks per SM (occupancy=2) only for tiles up to 128x128.
    per_thread = cfg.block_m * cfg.block_n // (32 * cfg.num_warps)
    return per_thread <= 128 and (cfg.occupancy == 1 or cfg.block_m * cfg.block_n <= 128 * 128)


SPACE = ex.pick(
    gpu=Space(
        block_m=[64, 128, 256],
        block_n=[64, 128, 256],
        block_k=[64],
        group_m=[8],
        num_warps=[4, 8],
        num_stages=[3, 4],
        occupancy=[1, 2],
        constraint=fits_in_registers,
    ),
    cpu=Space(
        block_m=[16, 32],
        block_n=[32],
        block_k=[32],
        group_m=[2],
        num_warps=[4],
        num_stages=[2],
        occupancy=[1, 2],
        constraint=fits_in_registers,
    ),
)


def size_bucket(n):
    return (n - 1).bit_length()  # 2049..4096 -> 12: one tuning decision per power of two


def matmul(a, b, c):
    M, K = a.shape
    _, N = b.shape
    return autotune(
        space=SPACE,
        blocks=(cdiv(M, $block_m), cdiv(N, $block_n)),
        key=(size_bucket(M), size_bucket(N), size_bucket(K)),
        matmul_kernel(
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=$block_m, BLOCK_N=$block_n, BLOCK_K=$block_k, GROUP_M=$group_m,
        ),
    )  # fmt: skip


M, N, K = ex.pick(gpu=(4096, 4096, 4096), cpu=(96, 96, 40))
TOLERANCE = dict(rtol=1e-2, atol=1e-1)  # fp16 output, fp32 accumulation in both


def random_problem(m, n, k):
    a = torch.randn(m, k, device=ex.device, dtype=torch.float16)
    b = torch.randn(k, n, device=ex.device, dtype=torch.float16)
    c = ex.poison(torch.empty(m, n, device=ex.device, dtype=torch.float16))
    return a, b, c


def fp32_reference(a, b):
    return (a.float() @ b.float()).half()


@workload
def warm():
    a, b, c = random_problem(M, N, K)
    matmul(a, b, c)


def main():
    a, b, c = random_problem(M, N, K)
    launch = matmul(a, b, c)
    ex.check("c", c, fp32_reference(a, b), **TOLERANCE)

    # A different size in the same buckets: no tuning, the decision above is reused. (Still
    # a multiple of 16: Triton compiles separately for sizes that are not, and so tunes.)
    a2, b2, c2 = random_problem(M - 16, N - 16, K)
    again = matmul(a2, b2, c2)
    ex.check(f"c ({M - 16}x{N - 16}, same bucket)", c2, fp32_reference(a2, b2), **TOLERANCE)
    ex.require("the same bucket reuses the decision", again.source == "memory", again.source)

    expected = torch.empty_like(c)
    ex.report(
        launch,
        problem=f"{M}x{N}x{K} float16",
        run=lambda: matmul(a, b, c),
        reference=lambda: torch.matmul(a, b, out=expected),
    )


if __name__ == "__main__":
    main()
