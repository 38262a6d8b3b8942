"""temporary: SDPA's TFLOP/s by backend and with inputs that require grad (B4 H32 N4096 fp16)"""
import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

print(torch.__version__, triton.__version__, torch.cuda.get_device_name())
for d in (64, 128):
    for causal in (False, True):
        flops = 4 * 4 * 32 * 4096 * 4096 * d * (0.5 if causal else 1.0)
        row = []
        for grad in (False, True):
            q, k, v = (torch.randn(4, 32, 4096, d, device="cuda", dtype=torch.float16, requires_grad=grad) for _ in range(3))
            for name, backends in (("default", None), ("cudnn", [SDPBackend.CUDNN_ATTENTION]),
                                   ("flash", [SDPBackend.FLASH_ATTENTION]), ("efficient", [SDPBackend.EFFICIENT_ATTENTION])):
                def fn():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                try:
                    if backends is None:
                        ms = triton.testing.do_bench(fn, warmup=25, rep=200)
                    else:
                        with sdpa_kernel(backends):
                            ms = triton.testing.do_bench(fn, warmup=25, rep=200)
                    row.append(f"{name}{'+grad' if grad else ''} {flops / ms / 1e9:.0f}")
                except Exception as err:
                    row.append(f"{name}{'+grad' if grad else ''} n/a ({type(err).__name__})")
        print(f"d{d} {'causal' if causal else 'full'}: " + ", ".join(row))
