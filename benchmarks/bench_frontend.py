"""How much the ways in cost: warm DSL import, cold expansion, and the import hook's overhead.

Run: ``python benchmarks/bench_frontend.py [--runs 21]``. No GPU, torch or triton needed.

Every number is measured inside a fresh subprocess (median of ``--runs``, runs of the two
sides of a comparison interleaved), timing only the statement in question with
``time.perf_counter``; interpreter start-up is never part of it. Targets:

1. warm import of a generated 1,000-line DSL module (expanded code in tunedsl's cache)
   <= 1.5x importing the same code as plain Python (its expansion, with a warm __pycache__);
2. cold expand + compile of that module < 100 ms;
3. with the hook installed, importing ordinary modules (a generated batch and a batch of
   pure-Python stdlib modules) <= 5% slower than without it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

DSL_LINES = 1000
PLAIN_MODULES = 120

# Pure-Python stdlib modules that a fresh interpreter has not imported yet.
STDLIB_BATCH = [
    "argparse", "ast", "calendar", "configparser", "csv", "dataclasses", "difflib",
    "email.message", "email.mime.multipart", "email.mime.text", "fractions", "ftplib",
    "gettext", "glob", "gzip", "html.parser", "http.client", "inspect", "ipaddress",
    "json", "logging", "logging.handlers", "mailbox", "optparse", "pathlib", "pickle",
    "plistlib", "pprint", "queue", "shlex", "shutil", "smtplib", "string", "tarfile",
    "tempfile", "textwrap", "threading", "tomllib", "typing", "urllib.parse",
    "urllib.request", "uuid", "wave", "xml.dom.minidom", "xml.etree.ElementTree", "zipfile",
]  # fmt: skip

_SITE_CHUNK = '''\
def kernel_{i}(x, y, out, n, BLOCK):
    """Stands in for a @triton.jit kernel: the site holds it and never launches it here."""
    return None


def launch_{i}(x, y, out, n):
    return autotune(
        space=dict(block=[128, 256, 512, 1024], num_warps=[2, 4, 8]),
        blocks=cdiv(n, $block),
        key=n // 4096,
        kernel_{i}(x, y, out, n, BLOCK=$block),
    )


def helper_{i}(values):
    total = 0
    for value in values:
        if value % 2 == 0:
            total += value * {i}
        else:
            total -= value
    return total


TABLE_{i} = {{"name": "k{i}", "sizes": [1, 2, 3, {i}], "scale": {i}.5}}


'''


def generate_dsl_module(lines: int = DSL_LINES) -> str:
    """A realistic DSL module of ``lines`` lines: a site every ~30 lines, helpers between."""
    head = '"""Generated DSL module for the front-end benchmark."""\n\n'
    head += "from tunedsl import autotune, cdiv\n\n\n"
    body, i = [head], 0
    while sum(chunk.count("\n") for chunk in body) < lines:
        body.append(_SITE_CHUNK.format(i=i))
        i += 1
    text = "".join(body)
    return "\n".join(text.splitlines()[:lines]).rstrip() + "\n"


def generate_plain_module(i: int) -> str:
    """An ordinary module of ~150 lines: classes, functions, constants (no tunedsl)."""
    parts = [f'"""Plain module {i}: ordinary Python for the hook-overhead benchmark."""\n']
    parts.append("import collections\nimport functools\n\n")
    for j in range(6):
        parts.append(
            textwrap.dedent(
                f"""
                class Thing{j}:
                    kind = "thing-{i}-{j}"

                    def __init__(self, size):
                        self.size = size
                        self.items = collections.OrderedDict()

                    def add(self, key, value):
                        self.items[key] = value * {j + 1}
                        return len(self.items)

                    @functools.lru_cache(maxsize=None)
                    def total(self):
                        return sum(self.items.values()) + self.size


                def make_{j}(n):
                    out = [Thing{j}(k) for k in range(n)]
                    return {{t.kind: t.size for t in out}}


                LIMITS_{j} = {{"low": {j}, "high": {j * 100}, "names": ["a", "b", "c"]}}
                """
            )
        )
    return "".join(parts)


def _env(cache_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TUNEDSL_CACHE_DIR"] = str(cache_dir)
    return env


_CLOCKS = "import time\nclocks = lambda: (time.perf_counter(), time.process_time())\n"
_REPORT = "print(time.perf_counter() - t[0], time.process_time() - t[1])\n"


def _measure(code: str, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run ``code`` in a fresh interpreter; it prints wall and CPU seconds of its timed part."""
    result = subprocess.run(
        [sys.executable, "-c", _CLOCKS + textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{result.stderr}")
    wall, cpu = result.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _interleaved(runs: int, sides: dict[str, str], cwd: Path, env: dict[str, str]):
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(runs):
        for name, code in sides.items():
            samples[name].append(_measure(code, cwd, env))
    return samples


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"


def _spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) >= 4 else [min(values), 0, max(values)]
    return f"{(q[2] - q[0]) * 1e3:6.3f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="fresh processes per side")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON here")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tunedsl-bench-") as tmp_name:
        tmp = Path(tmp_name)
        cache = tmp / "cache"
        env = _env(cache)
        work = tmp / "work"
        work.mkdir()

        from tunedsl.frontend.compile import expand_source

        dsl_text = generate_dsl_module()
        (work / "dslmod.py").write_text(dsl_text)
        # "The same code as plain Python": its expansion, under its own file name.
        (work / "plainmod.py").write_text(expand_source(dsl_text, str(work / "plainmod.py")))
        batch = work / "plainpkg"
        batch.mkdir()
        (batch / "__init__.py").write_text("")
        for i in range(PLAIN_MODULES):
            (batch / f"mod{i}.py").write_text(generate_plain_module(i))
        plain_names = [f"plainpkg.mod{i}" for i in range(PLAIN_MODULES)]

        # Warm every cache once: tunedsl's bytecode entry, the pycs of everything else.
        warm = f"""
            import tunedsl.activate, dslmod, plainmod, tunedsl.runtime.dsl
            import {", ".join(plain_names)}
            import {", ".join(STDLIB_BATCH)}
            print(0.0, 0.0)
            """
        _measure(warm, work, env)

        pre = "import tunedsl.runtime.dsl, tunedsl.activate as activate\n"
        import_sides = {
            "dsl (hook, warm tunedsl cache)": pre + "t = clocks(); import dslmod\n" + _REPORT,
            # Under `tunedsl run` the cache module is loaded before the script starts.
            "dsl, cache module preloaded": pre
            + "import tunedsl.bytecode, tunedsl.frontend\n"
            + "t = clocks(); import dslmod\n"
            + _REPORT,
            "plain (warm __pycache__)": pre
            + "activate.uninstall()\n"
            + "t = clocks(); import plainmod\n"
            + _REPORT,
        }
        imports = _interleaved(args.runs, import_sides, work, env)

        cold_sides = {
            "frontend import": "t = clocks(); import tunedsl.frontend.compile\n" + _REPORT,
            "cold expand+compile": "import tunedsl.frontend.compile as fc\n"
            "src = open('dslmod.py', 'rb').read()\n"
            "t = clocks(); fc.compile_source(src, 'dslmod.py')\n" + _REPORT,
            "cold load_or_compile (+key, write)": "import sys, tunedsl.bytecode as bc\n"
            "import tunedsl.frontend.compile\n"
            "sys.dont_write_bytecode = False; bc.clear()\n"
            "src = open('dslmod.py', 'rb').read()\n"
            "t = clocks(); bc.load_or_compile(src, 'dslmod.py')\n" + _REPORT,
        }
        cold = _interleaved(args.runs, cold_sides, work, env)

        def batch_code(hook: bool, names: list[str]) -> str:
            # Without the hook, Python's start-up finders (with their directory caches) stay;
            # installing the hook replaces them, and re-listing directories is part of its cost.
            return (
                ("import tunedsl.activate\n" if hook else "import tunedsl, importlib.machinery\n")
                + "t = clocks()\n"
                + "".join(f"import {name}\n" for name in names)
                + _REPORT
            )

        hook_sides = {
            "generated batch, no hook": batch_code(False, plain_names),
            "generated batch, hook": batch_code(True, plain_names),
            "stdlib batch, no hook": batch_code(False, STDLIB_BATCH),
            "stdlib batch, hook": batch_code(True, STDLIB_BATCH),
        }
        hooks = _interleaved(args.runs, hook_sides, work, env)

    rows = {name: v for d in (imports, cold, hooks) for name, v in d.items()}
    wall = {name: statistics.median(w for w, _ in v) for name, v in rows.items()}
    cpu = {name: statistics.median(c for _, c in v) for name, v in rows.items()}
    spread = {name: _spread([w for w, _ in v]) for name, v in rows.items()}

    def ratio(clock: dict[str, float], a: str, b: str) -> float:
        return clock[a] / clock[b]

    pairs = [
        ("warm DSL import / plain import", "dsl (hook, warm tunedsl cache)",
         "plain (warm __pycache__)", 1.5),
        ("  same, cache module preloaded (tunedsl run)", "dsl, cache module preloaded",
         "plain (warm __pycache__)", 1.5),
        (f"hook overhead, {PLAIN_MODULES} generated modules", "generated batch, hook",
         "generated batch, no hook", 1.05),
        (f"hook overhead, {len(STDLIB_BATCH)} stdlib modules", "stdlib batch, hook",
         "stdlib batch, no hook", 1.05),
    ]  # fmt: skip
    checks = []
    for name, a, b, goal in pairs:
        r_wall, r_cpu = ratio(wall, a, b), ratio(cpu, a, b)
        checks.append((name, r_wall, r_cpu, f"<= {goal:.2f}x", r_wall <= goal or r_cpu <= goal))
    cold_ms = wall["cold expand+compile"] * 1e3
    cold_cpu_ms = cpu["cold expand+compile"] * 1e3
    cold_ok = cold_ms < 100 or cold_cpu_ms < 100
    checks.insert(2, ("cold expand+compile (ms)", cold_ms, cold_cpu_ms, "< 100 ms", cold_ok))

    print(f"tunedsl front-end benchmark: Python {platform.python_version()}, {platform.machine()},")
    print(f"{DSL_LINES}-line DSL module, median of {args.runs} fresh processes per row\n")
    print(f"| {'measurement':<40} | {'wall median':>11} | {'wall IQR':>9} | {'CPU median':>11} |")
    print(f"|{'-' * 42}|{'-' * 13}|{'-' * 11}|{'-' * 13}|")
    for name in rows:
        print(f"| {name:<40} | {_fmt(wall[name])} | {spread[name]} | {_fmt(cpu[name])} |")
    print()
    print(f"| {'target':<44} | {'wall':>9} | {'CPU':>9} | {'goal':>9} | {'ok':>4} |")
    print(f"|{'-' * 46}|{'-' * 11}|{'-' * 11}|{'-' * 11}|{'-' * 6}|")
    for name, by_wall, by_cpu, goal, ok in checks:
        unit = "" if goal.endswith("ms") else "x"
        print(
            f"| {name:<44} | {by_wall:8.3f}{unit:1} | {by_cpu:8.3f}{unit:1} | {goal:>9} "
            f"| {'yes' if ok else 'NO':>4} |"
        )
    print(
        "\nRatios are of medians; a comparison passes when the wall or the CPU-time ratio\n"
        "meets the goal (CPU time is immune to the other processes of a busy machine)."
    )

    if args.json:
        payload = {
            "version": 1,
            "python": platform.python_version(),
            "runs": args.runs,
            "wall_median_s": wall,
            "cpu_median_s": cpu,
            "checks": [
                {"name": n, "wall": w, "cpu": c, "goal": g, "ok": ok} for n, w, c, g, ok in checks
            ],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0 if all(check[-1] for check in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
