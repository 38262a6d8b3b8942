"""A tuned kernel inside ``torch.compile(fullgraph=True)``: ``tunedsl.torch_op`` in an nn.Module.

Teaches: wrapping a tunedsl launch in ``@tunedsl.torch_op`` (a ``torch.library.custom_op``
with a fake implementation for the compiler), so a module calling it compiles as one graph
with no graph break; the operator's body runs the site eagerly and launches the tuned
configuration (the first call tunes, later calls take the decision from memory). See
docs/pytorch.md.

    tunedsl run examples/torch_compile_module.py
"""

import torch
import triton
import triton.language as tl

import tunedsl
from tunedsl import autotune, cdiv
from tunedsl.gallery.kit import Example

ex = Example("torch_compile_module")


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, TILE: tl.constexpr):
    offsets = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offsets < n
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(total, 0.0), mask=mask)


SPACE = ex.pick(
    gpu=dict(tile=[1024, 2048, 4096], num_warps=[4, 8]),
    cpu=dict(tile=[512, 2048], num_warps=[4]),
)
LAST: list = []  # the latest LaunchResult, for the report below


# The fake tells the compiler the output's shape and dtype without running the kernel.
@tunedsl.torch_op("tunedsl_examples::add_relu", fake=lambda x, y: torch.empty_like(x))
def add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    launch = autotune(space=SPACE, blocks=cdiv(n, $tile), add_relu_kernel(x, y, out, n, TILE=$tile))
    LAST[:] = [launch]
    return out


class ResidualReLU(torch.nn.Module):
    """relu(x + linear(x)) with the add and the relu fused in one tuned kernel."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return add_relu(x, self.linear(x))


FEATURES = ex.pick(gpu=4096, cpu=64)
ROWS = ex.pick(gpu=4096, cpu=33)


def main():
    torch.manual_seed(0)
    model = ResidualReLU(FEATURES).to(ex.device)
    x = torch.randn(ROWS, FEATURES, device=ex.device)
    # Inductor on a GPU; on the CPU "aot_eager" (no C++ compiler needed). fullgraph=True
    # would raise on a graph break: the custom operator is one node of the graph.
    compiled = torch.compile(model, fullgraph=True, backend=ex.pick(gpu="inductor", cpu="aot_eager"))
    with torch.no_grad():
        out = compiled(x)
        expected = torch.relu(x + model.linear(x))
    ex.check("out", out, expected)

    with torch.no_grad():
        ex.report(
            LAST[0],
            problem=f"{ROWS}x{FEATURES} float32, relu(x + linear(x)) compiled",
            run=lambda: compiled(x),
            reference=lambda: torch.relu(x + model.linear(x)),
        )


if __name__ == "__main__":
    main()
