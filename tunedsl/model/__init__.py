"""The model layer: what a tuning is about, as plain values (pure Python, no I/O).

Configurations and spaces (lazy for large ones), the variant of a call, call keys, launch
hints, the macro's option names, resolved settings, site identity and ``HOLE``. Every
other layer builds on these; this one imports nothing of tunedsl but errors and knobs.
"""
