"""Helpers for the runtime integration tests: build sites exactly as expanded DSL code does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tunedsl.runtime import dsl
from tunedsl.runtime.helpers import cdiv
from tunedsl.store import paths

SPACE = {"tile": [64, 128, 256]}


def site(name: str | None = None, space: Any = SPACE, **kw: Any) -> Any:
    options = dict(kw.pop("options", {}))
    if name:
        options["name"] = name
    return dsl.make_site(
        filename=__file__,
        line=kw.pop("line", 10),
        col=kw.pop("col", 4),
        end_line=11,
        end_col=40,
        kernel_text="kernel",
        space=space,
        static_hints=kw.pop("static_hints", {}),
        options=options,
        placeholders=kw.pop("placeholders", (("tile", 10, 30),)),
        has_key=kw.pop("has_key", False),
    )


def call(
    s: Any, kernel: Any, args: tuple, n: int, *, key: Any = None, lazy: Any = None, **static: Any
) -> Any:
    """The call shape of the expansion contract: TILE=$tile, blocks=cdiv(n, $tile)."""
    return s(
        kernel,
        args,
        static,
        lambda cfg: ((), {"TILE": cfg.tile}, (cdiv(n, cfg.tile),)),
        key,
        lazy,
    )


def new_process(*sites: Any) -> None:
    """What a new process starts without: the sites' in-memory decisions and verify checks."""
    from tunedsl.runtime import verified

    for s in sites:
        s.clear()
    verified.clear()


def new_api_process() -> None:
    """What a new process starts without, for every site of the plain API
    (``autotune_launch``): records on disk stay."""
    from tunedsl.runtime import api

    new_process(*api._sites.values())


def record_files() -> list[Path]:
    root = paths.records_dir()
    return sorted(root.glob("*.json")) if root.is_dir() else []


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())


def script_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a script run in its own process: a cache in ``tmp_path``, Triton's
    interpreter, ``tmp_path`` and these helpers importable, no progress output."""
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parent)])
    env["TUNEDSL_QUIET"] = "1"
    env.update(extra)
    return env


def run_script(
    tmp_path: Path, name: str, text: str, *argv: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``text`` written to ``tmp_path / name`` and run with ``tunedsl run`` (``script_env``)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(path), *argv],
        env=script_env(tmp_path, **extra), cwd=tmp_path, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
