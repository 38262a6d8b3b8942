"""Vector add: the smallest tuned kernel.

Teaches: 1-D blocks with ``cdiv(n, $tile)``; a space of a tile size and ``num_warps`` (a
launch hint: it goes to the launch, never to the kernel); the ``LaunchResult`` the macro
returns; a precompile workload.

    tunedsl run examples/vector_add.py
"""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.gallery.kit import Example

# Without a GPU this turns on the Triton interpreter (before the kernels are defined).
ex = Example("vector_add")


@triton.jit
def vadd_kernel(a_ptr, b_ptr, c_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n  # the last block may run past the end
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a + b, mask=mask)


# Every combination is a configuration; the first one (tile=1024, num_warps=2 on a GPU) is
# what you would probably have hard-coded. Under the interpreter, two configurations do.
SPACE = ex.pick(
    gpu=dict(tile=[1024, 2048, 4096, 8192], num_warps=[2, 4, 8]),
    cpu=dict(tile=[512, 2048], num_warps=[4]),
)


def vadd(a, b, c):
    n = c.numel()
    # `$tile` is the configuration's tile: it sizes the grid and the kernel's TILE alike.
    return autotune(space=SPACE, blocks=cdiv(n, $tile), vadd_kernel(a, b, c, n, TILE=$tile))


SIZE = ex.pick(gpu=1 << 26, cpu=3 * 1024 + 7)  # an odd size on the CPU: the mask matters


@workload
def warm():
    # `tunedsl precompile examples/vector_add.py` compiles every configuration for this call.
    x = torch.empty(SIZE, device=ex.device)
    vadd(x, x, x)


def main():
    a = torch.randn(SIZE, device=ex.device)
    b = torch.randn(SIZE, device=ex.device)
    c = ex.poison(torch.empty(SIZE, device=ex.device))  # NaN: an unwritten element shows
    # The first call tunes, then launches the winner. `launch.config` is the configuration
    # used; `launch.source` says where it came from: "tuned" now, "memory" (this process
    # decided earlier) or "disk" (a record from an earlier run).
    launch = vadd(a, b, c)
    ex.check("c", c, a + b)

    expected = torch.empty_like(c)
    ex.report(
        launch,
        problem=f"n={SIZE} float32",
        run=lambda: vadd(a, b, c),
        reference=lambda: torch.add(a, b, out=expected),
    )


if __name__ == "__main__":
    main()
