"""The precompile layer: workloads, the precompile session, replay of records and sweeps.

It wraps runtime sites (``runtime.site_wrap``) while a session is active; the
runtime never imports it. ``precompile(paths, ...)`` (``run.py``) is the library function
behind ``tunedsl precompile``; the CLI (``cli/precompile.py``, ``cli/sweep.py``) only parses
and renders on top.
"""

from tunedsl.precompile.run import Summary, precompile

__all__ = ["Summary", "precompile"]
