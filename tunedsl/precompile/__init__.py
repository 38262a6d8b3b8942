"""The precompile layer: workloads, the precompile session, replay of records and sweeps.

It handles runtime sites' misses (``runtime.site_wrap``) in the thread whose session is
active; the runtime never imports it. ``precompile(paths, ...)`` (``run.py``) is the library function
behind ``tunedsl precompile``; the CLI (``cli/precompile.py``, ``cli/sweep.py``) only parses
and renders on top.
"""

from tunedsl.precompile.run import Summary, precompile

__all__ = ["Summary", "precompile"]
