"""Canonical JSON: one text for equal values, whatever their keys' order (sorted keys, no
spaces, ``repr`` for what JSON has no form for). What digests and rule families encode.
Pure Python (the standard library's encoder), no torch or triton: the model layer.
"""

from __future__ import annotations

import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"), default=repr)``."""
    try:
        return "".join(_ENCODE(obj, 0)) if _ENCODE is not None else _CANONICAL.encode(obj)
    except RecursionError:  # a cycle (not checked for, below): the encoder's own error
        return _CANONICAL.encode(obj)


# The C encoder made once (``encode`` makes one a call: half the time of a miss's key),
# without the cycle check (a cycle recurses until the interpreter's limit instead).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=repr)
_MAKE_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_ENCODE = (
    None
    if _MAKE_C_ENCODER is None
    else _MAKE_C_ENCODER(
        None, repr, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, True
    )
)
