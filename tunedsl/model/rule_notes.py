"""What a person shipping a rule just built should know (model layer): the notes
``tunedsl rules build`` prints under its table (``model/rule_build.py`` builds the rule)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tunedsl.model.rule_build import (
    FEWEST_HELD_OUT,
    Built,
    SweptKey,
    dropped_cells,
    outside_cells,
)
from tunedsl.model.rule_features import ALIGNED, ranged, show_value
from tunedsl.model.rule_unswept import int_classes_swept


def build_notes(site: str, keys: Sequence[SweptKey], built: Built) -> list[str]:
    """What a person shipping the rule just built should know (``tunedsl rules build``
    prints each as a note): too few keys to validate it, keys never held out, keys left out,
    held-out picks that failed or were never timed, int arguments swept only equal to 1 or
    only 64-bit or off a multiple of 16 only at one end of the sweep, cells ``prune=`` drops
    or outside a key's space."""
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
    notes += [f"{site}: {why}" for fam in built.families for why in odd_at_one_end(fam.points)]
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


def odd_at_one_end(points: Sequence[tuple[Mapping[str, float], int]]) -> list[str]:
    """Per int argument of a family's swept keys (``points``) passed both off a multiple of
    16 and on one, but off one only below (or above) every multiple of 16 on a size the sweep
    varied (a batch size swept in powers of two: 2, 4, 8, then 16, 32, 64): what a key off a
    multiple of 16 beyond them gets, and what to sweep. The maps let those keys' picks decide
    only the sizes they bracket (``model.rule_near``): beyond, the nearest swept size's."""
    notes = []
    for f in sorted({f for x, _ in points for f in x if not ranged(f)}):
        odd = [x for x, _ in points if x.get(f) == 0.0]
        even = [x for x, _ in points if x.get(f) == 1.0]
        if not odd or not even:
            continue
        for size in sorted({s for x, _ in points for s in x if ranged(s)}):
            lo, hi = min(x[size] for x in odd), max(x[size] for x in odd)
            elo, ehi = min(x[size] for x in even), max(x[size] for x in even)
            if hi < elo or lo > ehi:
                name, end = f.removesuffix(ALIGNED), "below" if hi < elo else "above"
                notes.append(
                    f"the sweep passed {name} off a multiple of 16 only {end} the multiples "
                    f"of 16 on {size} ({show_value(lo)}-{show_value(hi)}; multiples of 16: "
                    f"{show_value(elo)}-{show_value(ehi)}), so a key off a multiple of 16 "
                    "beyond them takes the pick of the nearest swept size of either "
                    "alignment. Sweep sizes off a multiple of 16 across the range too "
                    "(17, 40, 63 beside 16, 32, 64) and build again"
                )
                break
    return notes
