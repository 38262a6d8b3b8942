"""Whether a stored ``verify=`` rejection still stands (runtime layer).

A configuration ``verify=`` rejected was judged by the site's check as it was then: what it
compares against (the first configuration, named outputs, a reference function) and within
which tolerances (``rtol=``, ``atol=``). A record never retries what it rejected, so a site
whose check changed since (``rtol=`` loosened to let a summation order that rounds the other
way through, ``verify=True`` replaced by a reference) would keep those configurations out
for good, with reasons that name the old tolerances.

So a record states the check its rejections were made under (``context["verify"]``), and a
site that checks otherwise reads the record without them: those configurations are measured
and checked again, the rest of the record's timings reused. A site that no longer verifies
keeps them out (the safe side: each gave an output the check refused). A record that states
no check (written before records stated one) counts as another check. An edited reference
function is the same check here: ``tunedsl cache clear`` measures its key anew.

``mode="cached"`` never tunes: where the record's choice fails the site's check, it launches
the default, and a default that fails too is an error saying so, naming a record made under
another check (``default_fails``), not "the only configuration" ``mode="off"`` has.

What the check compares is also what each launch starts from: ``reset_to_zero=`` zeroes its
buffers before every launch, so a split-K configuration that adds into its output is judged
on its own sums only when the output is zeroed. A rejection made without a buffer zeroed
(the caller's ``torch.empty`` added to) does not stand for a site that zeroes it, nor the
other way round: the names zeroed are part of the check, and so is whether a ``pre_hook=``
runs before each launch (where a Triton ``Config``'s ``pre_hook`` that zeroes an output is
ported; an edited hook is the same check, as an edited reference is). ``restore_value=`` is
not: every launch of a tuning starts from the caller's values with or without it (the
in-place watch).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tunedsl import knobs

if TYPE_CHECKING:
    from tunedsl.model.config import Config
    from tunedsl.model.settings import Settings
    from tunedsl.store.records import Record

#: The record ``context`` entry stating the check its rejections were made under.
VERIFY = "verify"


def check_of(settings: Settings) -> dict[str, Any] | None:
    """The site's check as JSON (None: the site does not verify)."""
    verify = settings.verify
    if verify is None or verify is False:
        return None
    if callable(verify):
        against: Any = "reference"
    elif verify is True:
        against = "first"
    else:
        against = sorted(str(name) for name in verify)
    check: dict[str, Any] = {
        "against": against,
        "rtol": float(settings.rtol),
        "atol": float(settings.atol),
        "given": bool(settings.tolerance_given),
    }
    if settings.reset_to_zero:  # left out when none: the check records stated before it
        check["zeroed"] = sorted(settings.reset_to_zero)
    if settings.pre_hook is not None:
        check["pre_hook"] = True
    return check


def noted(settings: Settings) -> dict[str, Any]:
    """The ``context`` entry of a new record: the check its rejections were made under."""
    check = check_of(settings)
    return {} if check is None else {VERIFY: check}


def current(record: Record | None, settings: Settings) -> Record | None:
    """``record`` as this site reads it: without the rejections of another check."""
    if record is None:
        return None
    check = check_of(settings)
    if check is None or record.context.get(VERIFY) == check:
        return record
    kept = tuple(r for r in record.results if r.status != "rejected")
    return record if len(kept) == len(record.results) else replace(record, results=kept)


def made_under_another_check(record: Record, settings: Settings) -> bool:
    """Whether ``record``'s rejections were made under another check than the site's."""
    check = check_of(settings)
    return check is not None and record.context.get(VERIFY) != check


def default_fails(
    cfg: Config, problem: str, settings: Settings, record: Record | None, only: bool
) -> str:
    """The error of a default launched without tuning that fails ``verify=``: why the default
    is what this call launches, and what to do. ``record``: the key's record, if any;
    ``only``: no other configuration could launch (``mode="off"``, one left)."""
    head = f"{cfg} fails verify= ({problem})"
    if only or settings.mode != "cached":
        return (
            f"{head}; it is the only configuration this call can launch (the space, what "
            "prune= keeps, or mode=): fix the kernel or the reference"
        )
    if knobs.force_retune():
        why = "TUNEDSL_FORCE_RETUNE=1 sets the key's records aside"
    elif record is None:
        why = "this key has no record"
    else:
        held = "(it fails this check, or the space or prune= no longer holds it)"
        why = (
            f"the key's record {record.id} was made under another verify= check (another "
            "reference, form or tolerance), so its rejections do not count under this one, "
            f"and its choice {record.chosen} is not launched here {held}"
            if made_under_another_check(record, settings)
            else f"the key's record {record.id} chose {record.chosen}, not launched here {held}"
        )
    return (
        f'{head}: mode="cached" never tunes: it launches the site\'s default where no record '
        f"decides the key, and {why}. Tune the key under this check (a run with "
        'mode="on"), give a default= that passes it, or fix the kernel or the reference'
    )
