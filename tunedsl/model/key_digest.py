"""The digest that names a record: sha256 of the canonical JSON of the site's id, the readable
record key (``keys.readable_key``) and the process context, the context encoded once for all
of a site's keys. Pure Python: the model layer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from tunedsl.model.canonical import canonical_json


class KeyDigest:
    """``KeyDigest(site_id, context)(key)``, the sha256 naming a record: of many keys of one
    site and context. The context
    is encoded and hashed once. The text hashed is ``canonical_json`` of the whole mapping,
    whose sorted keys put the context first and the site last, so only the key is encoded
    per call."""

    __slots__ = ("_head", "_tail")

    def __init__(self, site_id: str, context: Mapping[str, Any]) -> None:
        head = '{"context":' + canonical_json(context) + ',"key":'
        self._head = hashlib.sha256(head.encode("utf-8"))
        self._tail = (',"site":' + canonical_json(site_id) + "}").encode("utf-8")

    def __call__(self, record_key: Mapping[str, Any]) -> str:
        return self.of_text(canonical_json(record_key))

    def of_text(self, key_text: str) -> str:
        """The digest of a record key given as its ``canonical_json`` text."""
        h = self._head.copy()
        h.update(key_text.encode("utf-8"))
        h.update(self._tail)
        return h.hexdigest()
