"""Replay fixture (DSL): a Triton dtype passed as a ``tl.constexpr``, fixed by the call
(``ACC=tl.float32``) and chosen per configuration (``OUT=getattr(tl, $DT)``), which a record
holds by name (``"triton.language.float16"``)."""

import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload
from tunedsl.precompile.workload import precompile_device


@triton.jit
def cast_kernel(x, out, n, BLOCK: tl.constexpr, ACC: tl.constexpr, OUT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n).to(ACC)
    tl.store(out + offs, (v * 2.0).to(OUT).to(ACC), mask=offs < n)


def cast(x, out):
    return autotune(space=dict(BLOCK=[64], DT=["float16", "bfloat16"]),
                    blocks=cdiv(x.numel(), $BLOCK),
                    cast_kernel(x, out, x.numel(), BLOCK=$BLOCK, ACC=tl.float32,
                                OUT=getattr(tl, $DT)))


@workload
def warm():
    x = torch.empty(300, device=precompile_device())
    cast(x, torch.empty_like(x))


if __name__ == "__main__":
    x = torch.randn(300)
    out = torch.empty(300)
    res = cast(x, out)
    print(res.source)
    torch.testing.assert_close(out, (x * 2.0).to(getattr(torch, res.config.DT)).float(),
                               rtol=1e-2, atol=1e-2)
