"""Which GPUs a tuning measures on (backends layer, pure): ``TUNEDSL_TUNE_DEVICES``.

Used by ``multi_device.py`` (one measuring worker per chosen GPU); kept apart because it is
pure (no torch, no workers) and tested on its own (``tests/unit/test_tune_devices.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tunedsl.errors import UsageError

__all__ = ["tune_devices"]


def tune_devices(
    setting: str, visible: Sequence[int], caller: int, models: Mapping[int, str]
) -> list[int]:
    """The devices a tuning measures on, the caller's first (pure; ``TUNEDSL_TUNE_DEVICES``).

    ``setting``: ``all`` (every visible device of the caller's model), ``N`` (a count: the
    caller's and the next N-1 of its model; ``1`` is the caller's only) or a comma-separated
    list of device indices (``3,`` names device 3 alone); the caller's device is always
    included, because the leaders are re-measured there. ``models`` maps each visible device
    to its model (name and capability); a listed device of another model is an error: its
    timings would choose for the wrong device.
    """
    where = "TUNEDSL_TUNE_DEVICES"
    if caller not in visible:
        raise UsageError(f"{where}: the caller's device {caller} is not visible ({visible})")
    mine = [d for d in visible if models.get(d) == models.get(caller)]
    others = [d for d in mine if d != caller]
    text = setting.strip().lower()
    if text in ("", "all"):
        return [caller, *others]
    if "," not in text:
        try:
            count = int(text)
        except ValueError:
            raise UsageError(
                f"{where}={setting!r}: expected 'all', a count like 2, or device indices like 0,1"
            ) from None
        if count < 1:
            raise UsageError(f"{where}={setting!r}: the count must be at least 1")
        return [caller, *others[: count - 1]]
    chosen = [caller]
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            device = int(part)
        except ValueError:
            raise UsageError(
                f"{where}={setting!r}: {part.strip()!r} is not a device index"
            ) from None
        if device not in visible:
            raise UsageError(
                f"{where}={setting!r}: device {device} is not visible (visible: "
                f"{', '.join(map(str, visible))}); check CUDA_VISIBLE_DEVICES"
            )
        if models.get(device) != models.get(caller):
            raise UsageError(
                f"{where}={setting!r}: device {device} is a {models.get(device)}, the "
                f"caller's device {caller} a {models.get(caller)}; timings of another model "
                "would choose for the wrong device: list devices of one model only"
            )
        if device not in chosen:
            chosen.append(device)
    return chosen
