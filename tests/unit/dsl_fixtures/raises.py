from tunedsl import autotune  # noqa: F401


def inner(n):
    return n / 0  # the line the traceback must show


inner(3)
