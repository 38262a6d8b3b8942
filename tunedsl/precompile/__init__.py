"""The precompile layer: workloads, the precompile session, replay of records and sweeps.

It wraps runtime sites (``runtime.dsl.site_wrapper``) while a session is active; the
runtime never imports it. The CLI (``cli/precompile.py``, ``cli/sweep.py``) parses and
renders on top.
"""
