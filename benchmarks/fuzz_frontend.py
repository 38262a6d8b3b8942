"""A long fuzz run of the front end: how many inputs it survived, and every one it did not.

Run: ``python benchmarks/fuzz_frontend.py [--seconds 300] [--workers N] [--out DIR]``.
No GPU, torch or triton needed (lark is, for the grammar-driven generator).

The generators and the property are the CI fuzz test's (tests/reliability/fuzz_oracle.py and
grammar_sentences.py): sentences of grammar/tunedsl.lark placed in a module, and mutations
of the repository's valid DSL scripts (byte flips, deleted/duplicated/swapped tokens,
sprinkled ``$``, unbalanced brackets, unicode and invalid UTF-8, very deep nesting, huge
lines, truncation, splices, coding cookies). Property: every input compiles or raises
``SyntaxError``; whatever compiles expands to text that compiles. Each input is a seed, so a
failure is reproduced with ``--replay KIND:SEED``; failures are also written to ``--out``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))

import fuzz_oracle  # noqa: E402
import grammar_sentences  # noqa: E402

KINDS = ("grammar", "mutation")


def make_input(kind: str, seed: int, corpus: list[bytes]) -> bytes | str:
    rng = random.Random(seed)
    if kind == "grammar":
        return grammar_sentences.module(rng)
    return fuzz_oracle.mutant(rng, corpus)


def worker(args: tuple[int, float, int]) -> tuple[Counter[tuple[str, str]], list[tuple]]:
    """Fuzz until the deadline; return outcome counts and failures (kind, seed, message)."""
    index, deadline, base_seed = args
    corpus = fuzz_oracle.corpus()
    counts: Counter[tuple[str, str]] = Counter()
    failures: list[tuple[str, int, str, bytes | str]] = []
    seed = base_seed + index * 1_000_000_000
    while time.time() < deadline:
        kind = KINDS[seed % 2]
        source = make_input(kind, seed, corpus)
        try:
            outcome = fuzz_oracle.check(source)
        except fuzz_oracle.FrontendBug as err:
            outcome = "FAILED"
            failures.append((kind, seed, str(err).split(" on ")[0], source))
        counts[(kind, outcome)] += 1
        seed += 1
    return counts, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--out", default="fuzz-failures", help="where failing inputs go")
    parser.add_argument("--replay", help="KIND:SEED: run one input and show the outcome")
    args = parser.parse_args()

    if args.replay:
        kind, seed = args.replay.split(":")
        source = make_input(kind, int(seed), fuzz_oracle.corpus())
        print(fuzz_oracle.check(source))
        return 0

    start = time.time()
    deadline = start + args.seconds
    jobs = [(i, deadline, args.seed) for i in range(args.workers)]
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        results = pool.map(worker, jobs)
    elapsed = time.time() - start
    counts: Counter[tuple[str, str]] = Counter()
    failures = []
    for c, f in results:
        counts.update(c)
        failures.extend(f)

    total = sum(counts.values())
    print(f"front-end fuzz: {total} inputs in {elapsed:.0f} s with {args.workers} workers")
    print(f"{'generator':<10} {'outcome':<52} {'inputs':>8}")
    for (kind, outcome), n in sorted(counts.items()):
        print(f"{kind:<10} {outcome:<52} {n:>8}")
    print(f"failures: {len(failures)}")
    if failures:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        by_message: Counter[str] = Counter(msg for _, _, msg, _ in failures)
        for message, n in by_message.most_common():
            print(f"  {n:>6}  {message[:150]}")
        for kind, seed, _, source in failures[:200]:
            data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
            (out / f"{kind}-{seed}.py").write_bytes(data)
        print(f"  (inputs written to {out}/, replay with --replay KIND:SEED)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
