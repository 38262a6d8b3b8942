from tunedsl import autotune

price = "costs $5"  # a $comment
fmt = f"{price!r:>{10}} and $tile"


def launch(x, n):
    # $tile in a comment is text
    autotune(space={"tile": [128]},  # $tile here too
             blocks=n // $tile,
             show(x, "$tile is text", b"$", r"\$", f"{n} $tile", tile=$tile))
