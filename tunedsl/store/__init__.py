"""The storage layer: every file tunedsl writes, and the record stores.

``paths`` (where the caches live), ``atomic`` (the one writer and safe reader), ``locks``
(compile lock, cross-process key locks), ``records`` (the JSON schema, strict loading),
``files``/``redis_store``/``layered`` (the ``RecordStore`` implementations and their
lookup order). Pure Python: no torch or triton.
"""
