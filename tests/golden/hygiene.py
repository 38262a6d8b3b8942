# User names that look like generated ones, and user variables called cfg, space, key, autotune.
from tunedsl import autotune

__tunedsl_rt__ = "user's"
__tunedsl_site_0__ = "user's too"
cfg = {"tile": 1}
space = {"tile": [64, 128]}
key = "k"


def f(x, n):
    return autotune(space=space, blocks=cfg["tile"] + $tile, key=key, k(x, n, cfg, $tile))
