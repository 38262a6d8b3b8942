"""``python -m tunedsl``: the same as the ``tunedsl`` command."""

from tunedsl.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
