"""``python -m tunedsl``: the same as the ``tunedsl`` command."""

from tunedsl.cli import entry

if __name__ == "__main__":
    raise SystemExit(entry())
