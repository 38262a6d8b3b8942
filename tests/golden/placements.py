# Launch before, between and after the keywords; `td.autotune`; the macro as a value.
import tunedsl as td
from tunedsl import cdiv

SPACE = {"BLOCK": [64, 128]}


def first(x, y, n):
    return td.autotune(kern(x, y, n, BLOCK=$BLOCK), space=SPACE, blocks=cdiv(n, $BLOCK))


def middle(x, n):
    res = td.autotune(space=[{"BLOCK": 64, "num_warps": 4}, {"BLOCK": 128, "num_warps": 8}],
                      kernels.scale(x, n, $BLOCK, 2.0),
                      blocks=(cdiv(n, $BLOCK), 1, 1), name="scale")
    return res


at_module_scope = td.autotune(space=dict(BLOCK=[32]), blocks=1, key=(n, x.dtype), kern(x, n, BLOCK=$BLOCK),)
