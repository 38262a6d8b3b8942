# Non-literal space, hints and options go to the lazy thunk; $-dependent args become HOLEs.
from tunedsl import autotune, cdiv


def sweep(a, out, n, nw, check, *rest, **extra):
    autotune(space=make_space(n), blocks=(cdiv(n, $TILE), $SPLIT), num_warps=nw, num_stages=2,
             prune=lambda cfgs: cfgs[:4], verify=check, rtol=1e-3, mode="cached",
             default={"TILE": 64, "SPLIT": 1},
             k(a, out, n * $TILE, $SPLIT + 1, *rest, stride=$TILE // 2, eps=1e-6, **extra))
