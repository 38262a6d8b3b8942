"""Summarise a py-spy ``--format raw`` (collapsed stacks) profile: the frames with the most
own time (the innermost frame of each sample), and the share of samples under each frame.

    py-spy record --rate 20000 --native --format raw -o dsl.txt -- \\
        python benchmarks/bench_launch.py --only "tunedsl DSL" --calls 200000 --repeats 1
    python benchmarks/collapsed_top.py dsl.txt --under "bench_launch.py" --top 25
"""

from __future__ import annotations

import argparse
import collections
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--under", default="", help="only samples with a frame containing this")
    args = parser.parse_args()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    with open(args.path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit() or args.under not in stack:
                continue
            frames = stack.split(";")
            n = int(count)
            total += n
            own[frames[-1]] += n
            for frame in set(frames):
                inclusive[frame] += n
    if not total:
        print("no samples", file=sys.stderr)
        return 1
    print(f"{total} samples; own time (innermost frame):")
    for frame, n in own.most_common(args.top):
        print(f"{100 * n / total:6.1f}%  {frame[:150]}")
    print("inclusive (samples with the frame anywhere on the stack):")
    for frame, n in inclusive.most_common(args.top):
        print(f"{100 * n / total:6.1f}%  {frame[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
