"""What a person shipping a rule just built should know (model layer): the notes
``tunedsl rules build`` prints under its table (``model/rule_build.py`` builds the rule)."""

from __future__ import annotations

from collections.abc import Sequence

from tunedsl.model.rule_build import (
    FEWEST_HELD_OUT,
    Built,
    SweptKey,
    dropped_cells,
    outside_cells,
)
from tunedsl.model.rule_unswept import int_classes_swept


def build_notes(site: str, keys: Sequence[SweptKey], built: Built) -> list[str]:
    """What a person shipping the rule just built should know (``tunedsl rules build``
    prints each as a note): too few keys to validate it, keys never held out, keys left out,
    held-out picks that failed or were never timed, int arguments swept only equal to 1 or
    only 64-bit, cells ``prune=`` drops or outside a key's space."""
    v, notes = built.validation, []
    if not isinstance(v.get("geomean"), float):
        notes.append(
            f"{site}: {len(keys)} swept key(s), too few to validate the rule on keys it was "
            "not built from; it decides only sizes within theirs. Sweep more sizes and build "
            "again"
        )
    elif int(v.get("n") or 0) < FEWEST_HELD_OUT:  # type: ignore[call-overload]
        notes.append(
            f"{site}: validated on {v.get('n')} held-out key(s), too few to tell its maps "
            "apart: it follows what the sweep measured at the swept keys. Sweep more sizes "
            "and build again"
        )
    alone = [f.family for f in built.families if len(f.points) == 1]
    if alone and isinstance(v.get("geomean"), float):  # the others were validated
        notes.append(
            f"{site}: {len(alone)} swept key(s) alone in their family, never held out (the "
            f"regrets are of the other keys): {'; '.join(alone)[:300]}. Sweep more sizes of "
            "those families"
        )
    notes += [f"{site}: {why}" for why in built.left_out]
    if v.get("failed") or v.get("unmeasured"):  # a failed pick is tuned over at run time
        notes.append(
            f"{site}: held-out picks that failed on their key: {v.get('failed', 0)}; never "
            f"timed there: {v.get('unmeasured', 0)} (no regret of theirs: the regrets are of "
            f"the other {v.get('n', 0)}; give --script to measure them, or sweep with "
            "search='exhaustive')"
        )
    if (classes := int_classes_swept(f.family for f in built.families)) is not None:
        notes.append(f"{site}: {classes}")
    outside = outside_cells(keys, built.configs)
    if outside:  # a space computed per call keeps other configurations at other sizes
        notes.append(
            f"{site}: {outside} of the rule's (key, configuration) cells are outside the "
            "key's space as its record states it (a space computed per call, or one grown "
            f"since the sweep); held-out picks of them: {v.get('outside', 0)} (refused at "
            "run time: the key is tuned where it may be). A space fixed for every call, with "
            "prune= dropping what a size cannot run, lets the rule pick among the same "
            "configurations everywhere"
        )
    dropped = dropped_cells(keys, built.configs)
    if dropped:  # no candidate there: not a missing cell, nor a pick the runtime launches
        notes.append(
            f"{site}: prune= drops {dropped} of the rule's (key, configuration) cells: no "
            "candidates of those keys, never timed or launched there and left out of the "
            f"cover; held-out picks of them: {v.get('dropped', 0)} (refused at run time: the "
            "key is tuned where it may be)"
        )
    return notes
