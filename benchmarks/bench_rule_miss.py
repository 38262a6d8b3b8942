"""The cost of a miss a shipped rule decides, on the CPU: from the site's call to its launch.

A real site (``bench_rules.py``'s ``scale``) is swept at 7 batch sizes, a rule is built from
its records with ``tunedsl rules build`` and shipped on ``TUNEDSL_RECORDS_PATH``; then each
call is a size never seen, so each is a miss the rule decides. The kernel's launch is left
out (``Entry.launch`` does nothing here): what is timed is the decision, the part that does
not depend on the GPU. Printed: the median decision over the misses, then (in a second
pass, with a timer around each) the median of its parts. Under the interpreter the decision
includes copies of the call's tensors before a rule pick's first launch (``_in_place``: a
failed pick may have written them), which a GPU does not make: they are a part of their own.

    TRITON_INTERPRET=1 python benchmarks/bench_rule_miss.py            # about 20 s
    TRITON_INTERPRET=1 python benchmarks/bench_rule_miss.py --misses 400 --rounds 5
    python benchmarks/bench_rule_miss.py --device cuda     # the same decision on a GPU

With ``--against DIR`` (a directory holding another version's ``tunedsl`` package, e.g.
``git archive main tunedsl | tar -x -C DIR``), both versions are loaded in this one process,
each with its own site on the same rule, cache and sizes, and their rounds alternate (20 by
default): printed are each round's median decision, and for each version the median of
those with their range, then the ratio.

    git archive main tunedsl | tar -x -C /tmp/before
    TRITON_INTERPRET=1 python benchmarks/bench_rule_miss.py --against /tmp/before
    TRITON_INTERPRET=1 python benchmarks/bench_rule_miss.py --against /tmp/before --without-copies

``--without-copies`` leaves the interpreter's copies out of both (``_in_place``: a GPU makes
none), so the comparison is of the decision's Python alone, but for the call's Triton
specialization, which a GPU's plan knows at once and the interpreter's works out from the
tensors' alignment. ``--without-files`` (with it) also stubs the plan's file-system checks in
both (a record's absence, the rule file's signature: nothing here changes either), leaving
the Python alone.

    TRITON_INTERPRET=1 python benchmarks/bench_rule_miss.py --against /tmp/before --without-copies --without-files

``--second-rule`` ships two rules, one directory each on the path: the first from the sizes
up to 9, the next from those from 9 to 729; a site's first miss is the first rule's, the rest
the second's (one directory's rule for small sizes, another's for large ones).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if "cuda" not in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch

SWEPT = (1, 3, 9, 27, 81, 243, 729)
HIDDEN = 16


def own_modules() -> dict[str, ModuleType]:
    """The ``tunedsl`` modules now imported, by name."""
    return {n: m for n, m in sys.modules.items() if n == "tunedsl" or n.startswith("tunedsl.")}


def use_modules(modules: dict[str, ModuleType]) -> None:
    """Make ``modules`` the imported ``tunedsl`` (a function's import at call time finds them,
    and a module not imported yet comes from their package's directory)."""
    for name in own_modules():
        del sys.modules[name]
    sys.modules.update(modules)


def load_other(root: str) -> dict[str, ModuleType]:
    """Import the ``tunedsl`` package under ``root`` beside this one; its modules (this one's
    stay the imported ones)."""
    mine = own_modules()
    use_modules({})
    sys.path.insert(0, root)
    try:
        import importlib

        for name in ("tunedsl.frontend.compile", "tunedsl.runtime.entry", "tunedsl.store.rules"):
            importlib.import_module(name)
        theirs = own_modules()
        assert Path(theirs["tunedsl"].__file__ or "").is_relative_to(root), theirs["tunedsl"]
    finally:
        sys.path.remove(root)
    use_modules(mine)
    return theirs


def other_site() -> Callable[..., Any]:
    """A new site of the swept kernel, as the imported ``tunedsl`` compiles it (the rule and
    cache as set)."""
    import bench_rules as br

    from tunedsl.frontend.compile import compile_source

    ns: dict[str, Any] = {"scaled": br.scaled, "__name__": "bench_rule_miss_site"}
    exec(compile_source(br.DSL, filename=br.__file__), ns)
    return ns["scale"]  # type: ignore[no-any-return]


def make_site(device: str, second_rule: bool) -> Callable[..., Any]:
    """The swept site with its rule shipped, in a fresh cache: every new size is a miss.
    With ``second_rule``, two rules on the path: the first built from the sizes up to 9, the
    next from those from 9 (one directory's rule for small sizes, another's for large)."""
    import bench_rules as br

    from tunedsl.cli import main as cli
    from tunedsl.frontend.compile import compile_source
    from tunedsl.store import rules as rule_store

    ns: dict[str, Any] = {"scaled": br.scaled, "__name__": "bench_rule_miss_site"}
    exec(compile_source(br.DSL, filename=br.__file__), ns)
    scale = ns["scale"]
    parts = (SWEPT[:3], SWEPT[2:]) if second_rule else (SWEPT,)
    built = []
    for sizes in parts:
        os.environ["TUNEDSL_CACHE_DIR"] = tempfile.mkdtemp()
        ns["__tunedsl_site_0__"].clear()
        for b in sizes:
            x = torch.randn(b, HIDDEN, device=device)
            scale(x, torch.empty_like(x), x.numel())
        built.append(str(Path(tempfile.mkdtemp()) / "rules"))
        assert cli(["rules", "build", "--site", "bench_rules_scale", "--out", built[-1]]) == 0
    os.environ["TUNEDSL_RECORDS_PATH"] = os.pathsep.join(built)
    os.environ["TUNEDSL_CACHE_DIR"] = tempfile.mkdtemp()
    rule_store.forget_loaded()
    ns["__tunedsl_site_0__"].clear()
    return scale  # type: ignore[no-any-return]


# The parts of a decision, each a function the miss calls once: (module, attribute, label);
# the first module that holds the attribute is the one the miss calls it through.
PARTS = (
    ("tunedsl.runtime.rule_plans", "RulePlans.decide", "the layout's plan (RulePlans.decide)"),
    ("tunedsl.runtime.miss", "resolve", "the general way (miss.resolve)"),
    ("tunedsl.runtime.entry", "new_entry", "entry and launcher (entry.new_entry)"),
    ("tunedsl.runtime.rule_plans", "_in_place", "interpreter only: copies (_in_place)"),
)


def _timed_parts() -> tuple[dict[str, list[float]], Callable[[], None]]:
    """Wrap each part in a timer; return the per-call times and a function that unwraps."""
    import importlib

    times: dict[str, list[float]] = defaultdict(list)
    undo: list[Callable[[], None]] = []
    for module_names, attr, label in PARTS:
        modules = [importlib.import_module(m) for m in module_names.split()]
        owner: Any = next(m for m in modules if attr.split(".")[0] in vars(m))
        name = attr
        if "." in attr:
            cls, name = attr.split(".")
            owner = getattr(owner, cls)
        real = owner.__dict__[name]

        def timed(*a: Any, _real: Any = real, _label: str = label, **k: Any) -> Any:
            t = time.perf_counter_ns()
            try:
                return _real(*a, **k)
            finally:
                times[_label].append((time.perf_counter_ns() - t) / 1e3)

        setattr(owner, name, timed)
        undo.append(lambda owner=owner, name=name, real=real: setattr(owner, name, real))
    return times, lambda: [u() for u in undo]  # type: ignore[func-returns-value]


def run_misses(scale: Callable[..., Any], sizes: list[int], device: str) -> list[float]:
    """Call ``scale`` once per size (each a miss); the decision times in µs."""
    from tunedsl.runtime.entry import Entry

    inputs = [torch.randn(b, HIDDEN, device=device) for b in sizes]
    outs = [torch.empty_like(x) for x in inputs]
    marks: list[int] = []
    real_launch = Entry.launch
    Entry.launch = lambda entry, *a: marks.append(time.perf_counter_ns())  # type: ignore[method-assign]
    each: list[float] = []
    try:
        for x, y in zip(inputs, outs, strict=True):
            marks.clear()
            t = time.perf_counter_ns()
            source = scale(x, y, x.numel()).source
            assert source == "rule", source
            each.append((marks[0] - t) / 1e3)
    finally:
        Entry.launch = real_launch  # type: ignore[method-assign]
    return each


def fresh_sizes(args: argparse.Namespace) -> list[int]:
    """A site's first miss (decided the general way), then ``args.misses`` new sizes: with
    ``--second-rule`` the first is the first rule's and the rest the second's."""
    start = 10 if args.second_rule else 3
    return [2, *[b for b in range(start, 100_000) if b not in SWEPT][: args.misses]]


def compare(root: str, args: argparse.Namespace) -> None:
    """Alternate rounds of this version's misses and those of the version under ``root``,
    each round on a new site of its version (a site makes a limited number of plans)."""
    versions = {"after": own_modules(), "before": load_other(root)}
    if args.without_copies:  # what a GPU runs: no copies before a pick's first launch
        for modules in versions.values():
            use_modules(modules)
            from tunedsl.runtime import rule_plans

            rule_plans._in_place = lambda call, resolved: []  # type: ignore[assignment]
            if args.without_files:  # no record is made and the rule stays: the Python alone
                from tunedsl.store.layered import LayeredStore

                LayeredStore.absence_check = lambda self: lambda *digests: True  # type: ignore[method-assign,assignment,return-value]
                rule_plans.unchanged_check = lambda digest, rules: lambda: True  # type: ignore[assignment]
            modules.update(own_modules())
        use_modules(versions["after"])
    fresh = fresh_sizes(args)
    medians: dict[str, list[float]] = {"before": [], "after": []}
    for r in range(args.rounds):
        for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
            modules = versions[name]
            use_modules(modules)
            try:
                site_fn = other_site()
                run_misses(site_fn, fresh[:1], args.device)  # the general way: a plan is made
                medians[name].append(statistics.median(run_misses(site_fn, fresh[1:], args.device)))
            finally:
                modules.update(own_modules())  # what it imported meanwhile stays its own
                use_modules(versions["after"])
    print(
        f"{args.rounds} rounds of {args.misses} misses a version, alternating (median decision a round, us):"
    )
    for name in ("before", "after"):
        got = medians[name]
        print(f"  {name:6s} median {statistics.median(got):6.1f} us  (rounds {min(got):.1f}-{max(got):.1f}): "
              + " ".join(f"{m:.1f}" for m in got))  # fmt: skip
    ratio = statistics.median(medians["after"]) / statistics.median(medians["before"])
    print(f"  after / before {ratio:.3f} ({(1 - ratio) * 100:.0f}% less)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", type=int, default=300, help="misses a round (new sizes)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds (a fresh site table each; 3, or 20 with --against)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--against",
        metavar="DIR",
        help="another version's tunedsl package is in DIR: alternate with it",
    )
    parser.add_argument(
        "--without-copies",
        action="store_true",
        help="with --against: leave out the interpreter's copies before a pick's first launch",
    )
    parser.add_argument(
        "--without-files",
        action="store_true",
        help="with --without-copies: stub the plan's file-system checks too (the Python alone)",
    )
    parser.add_argument(
        "--second-rule",
        action="store_true",
        help="two rules on the path; the misses are the second's, after a first of the first's",
    )
    args = parser.parse_args()
    scale = make_site(args.device, args.second_rule)
    if args.against:
        args.rounds = args.rounds or 20
        compare(os.path.abspath(args.against), args)
        return
    args.rounds = args.rounds or 3
    site = scale.__globals__["__tunedsl_site_0__"]
    fresh = fresh_sizes(args)
    run_misses(
        scale, fresh[:1], args.device
    )  # the first miss reads the rule and works out the context
    decisions: list[float] = []
    for _ in range(args.rounds):
        site.clear()
        decisions += run_misses(scale, fresh[1:], args.device)
    site.clear()
    times, undo = _timed_parts()
    try:
        timed = run_misses(scale, fresh[1:], args.device)
    finally:
        undo()
    print(f"{len(decisions)} misses decided by a rule (launch excluded):")
    print(f"  decision median {statistics.median(decisions):6.1f} us  "
          f"(p10 {statistics.quantiles(decisions, n=10)[0]:.1f}, "
          f"p90 {statistics.quantiles(decisions, n=10)[-1]:.1f})")  # fmt: skip
    print(f"  parts (a second pass, each part timed: decision {statistics.median(timed):.1f} us)")
    for _, _, label in PARTS:
        got = times.get(label, [])
        median = statistics.median(got) if got else 0.0
        print(f"    {label:40s} {median:6.1f} us  ({len(got)} calls)")


if __name__ == "__main__":
    main()
