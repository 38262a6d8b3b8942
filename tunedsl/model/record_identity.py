"""Whether a stored record is about the lookup that found it (model layer, pure Python).

A record is found by its digest, and the digest is a hash of what the record is about: the
kernel, the device, the compiler and the key. A record file, a bundle line or a Redis value
can be edited, so a record measured on another GPU or for another kernel can sit under this
lookup's digest. ``mismatch`` compares what a record says it is about with what the lookup
is about, field by field: the device (type, model, compute capability, architecture), the
kernel (qualified name and source hash), the compiler (Triton's version and backend) and
the record key. A record that differs in any of them is not this lookup's: a miss.

Every record tunedsl writes states the identity it was found under: these fields are in
both the record and the digest (``runtime/decide.py``: ``context`` and ``tune_and_record``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tunedsl.model.canonical import canonical_json
from tunedsl.model.record import KEYED_TOOLS, Record

#: The device facts in the digest (``runtime.decide.context``), compared one by one.
DEVICE_FIELDS = ("type", "name", "capability", "arch")
#: The kernel facts compared: its name and the hash of its source.
KERNEL_FIELDS = ("qualname", "source_hash")


@dataclass(frozen=True)
class Expected:
    """What a lookup is about, in the terms a record states it."""

    kernel: Mapping[str, Any]
    device: Mapping[str, Any]
    versions: Mapping[str, Any]
    key: Mapping[str, Any]  # the readable record key

    @classmethod
    def of(cls, context: Mapping[str, Any], readable: Mapping[str, Any]) -> Expected:
        """From a digest's context (``runtime.decide.context``) and its readable key."""
        kernel = context.get("kernel", {})
        device = context.get("device", {})
        toolchain = context.get("toolchain", {})
        return cls(
            kernel={k: kernel.get(k) for k in KERNEL_FIELDS},
            device={k: device.get(k) for k in DEVICE_FIELDS},
            versions={k: toolchain.get(k) for k in KEYED_TOOLS},
            key=readable,
        )


def mismatch(record: Record, expected: Expected) -> str | None:
    """None when ``record`` states the identity ``expected``; else which field differs,
    with both values (``"device.name is 'A100', not this lookup's 'H100'"``)."""
    for part, facts, want in (
        ("device", record.device, expected.device),
        ("kernel", record.kernel, expected.kernel),
        ("versions", record.versions, expected.versions),
    ):
        for name, value in want.items():
            got = facts.get(name)
            if got != value:
                return f"{part}.{name} is {_short(got)}, not this lookup's {_short(value)}"
    key_text, want_text = canonical_json(record.key), canonical_json(expected.key)
    if key_text != want_text:  # the JSON texts, computed only when a record was found
        return f"key is {_clip(key_text)}, not this lookup's {_clip(want_text)}"
    return None


def checker(
    context: Mapping[str, Any], readable: Mapping[str, Any]
) -> Callable[[Record], str | None]:
    """``mismatch`` against one lookup, for the record stores' ``get(digest, expect=)``."""
    expected = Expected.of(context, readable)
    return lambda record: mismatch(record, expected)


def _short(value: Any) -> str:
    return _clip(repr(value))


def _clip(text: str) -> str:
    return text if len(text) <= 120 else f"{text[:100]}... ({len(text)} characters)"
