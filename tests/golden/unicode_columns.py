# Non-ASCII text before and inside the macro keeps columns right.
from tunedsl import autotune

größe = "ünïcödé"; r = autotune(space=dict(tile=[1, 2]), blocks=$tile, k("é", größe, $tile)); after = 1
