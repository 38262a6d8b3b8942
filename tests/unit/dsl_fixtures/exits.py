import sys

from tunedsl import autotune  # noqa: F401

how = sys.argv[1]
if how == "none":
    sys.exit()
if how == "message":
    sys.exit("stopped: bad input")
if how == "interrupt":
    raise KeyboardInterrupt
if how == "fall-through":
    print("done")
else:
    sys.exit(int(how))
