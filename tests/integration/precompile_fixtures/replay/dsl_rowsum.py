"""Replay fixture (DSL): a kernel that calls a Triton library function (``tl.sum``), whose
record made under the interpreter hashes that function's source too."""

import torch
import triton
import triton.language as tl

from tunedsl import autotune


@triton.jit
def rowsum_kernel(x, out, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + tl.program_id(0) * n + cols, mask=cols < n, other=0.0)
    tl.store(out + tl.program_id(0), tl.sum(v, axis=0))


def rowsum(x, out):
    return autotune(space=dict(BLOCK=[64, 128]), blocks=x.shape[0],
                    rowsum_kernel(x, out, x.shape[1], BLOCK=$BLOCK))


if __name__ == "__main__":
    x = torch.randn(4, 50)
    out = torch.empty(4)
    print(rowsum(x, out).source)
    torch.testing.assert_close(out, x.sum(1))
