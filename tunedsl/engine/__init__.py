"""The tuning engine: search strategies, the measurement loop and choosing (pure Python).

- ``seams``: the protocols (SearchSpace, SearchStrategy, Measurer, RecordStore, Observation);
- ``search``: the strategies by name (exhaustive, random, pattern, model, auto);
- ``racing``: measuring a batch, repetitions only where they can change the choice;
- ``driver``: ``run_search``, the budgeted loop strategy -> measurer -> race -> outcome;
- ``effort``: presets of budget and race settings; ``history``: records <-> observations.

Spaces themselves (``Space``, ``Axis``, ``ListSpace``) are in ``tunedsl.model.space``.
"""
