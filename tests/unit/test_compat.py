"""The Triton/PyTorch boundary: private names only in backends/compat.py, the version gate,
and one reading of Triton's interpreter setting."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tokenize
import warnings
from pathlib import Path

import pytest

from tunedsl import knobs

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tunedsl"
COMPAT = PACKAGE / "backends" / "compat.py"

# Triton/PyTorch internals that are not private by their spelling (no leading underscore)
# but are not public API either: only compat.py may name them.
INTERNAL_NAMES = {
    "device_caches",
    "create_function_from_signature",
    "MockTensor",
    "packed_metadata",
    "get_cache_key",
    "get_cache_manager",
    "get_cache_invalidating_env_vars",
    "libtriton",
    "AsyncCompileMode",
    "active_mode",
    "InterpretedFunction",
    "launch_enter_hook",
    "launch_exit_hook",
    "pre_run_hooks",
    "metadata_group",
    "binary_ext",
    "jit_cache_hook",
    "jit_post_compile_hook",
    "CompiledKernel",
    "get_current_stream",
    "get_current_device",
    "get_current_target",
    "warmup",
}
ROOTS = {"triton", "torch", "tknobs"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def violations(source: str) -> list[str]:
    """Private Triton/PyTorch names in Python source: attribute chains from ``triton`` or
    ``torch`` through a ``_name``, ``from triton... import _name``, the ``_pack_args``-style
    attributes Triton objects carry, and :data:`INTERNAL_NAMES`. Comments and strings are
    not code, so they do not count."""
    found: list[str] = []
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type in (tokenize.NAME, tokenize.OP, tokenize.NEWLINE, tokenize.NL)
    ]
    statement_from: str | None = None
    after_import = False
    for i, tok in enumerate(tokens):
        if tok.type in (tokenize.NEWLINE,):
            statement_from, after_import = None, False
            continue
        if tok.type != tokenize.NAME:
            continue
        where = f"line {tok.start[0]}: {tok.line.strip()}"
        if tok.string == "from" and i + 1 < len(tokens):
            statement_from = tokens[i + 1].string
        elif tok.string == "import":
            after_import = True
        elif after_import and statement_from in ROOTS and _private(tok.string):
            found.append(where)
        if tok.string in INTERNAL_NAMES:
            found.append(where)
        if tok.string in ("_pack_args", "_init_handles", "_async_compile"):
            found.append(where)
        if tok.string in ROOTS:  # follow triton.a.b... and torch.a.b...
            j = i + 1
            while j + 1 < len(tokens) and tokens[j].string == "." and tokens[j + 1].type == 1:
                if _private(tokens[j + 1].string):
                    found.append(where)
                    break
                j += 2
    return found


def test_the_checker_finds_each_kind_of_private_access() -> None:
    assert violations("from triton.runtime import _async_compile\n")
    assert violations("import triton\nx = triton._C.libtriton.getenv('A')\n")
    assert violations("def f(k):\n    return k._pack_args(1)\n")
    assert violations("def f(c):\n    c._init_handles()\n")
    assert violations("def f(k):\n    return hasattr(k, 'x') or k.device_caches\n")
    assert violations("import torch\ntorch._dynamo.reset()\n")
    assert violations("from torch._C import _cuda_getDevice\n")
    assert not violations('"""Mentions triton._C and _pack_args in prose."""\n# k._init_handles()\n')
    assert not violations("import triton\nprint(triton.__version__)\n")


def test_private_triton_and_torch_names_appear_only_in_compat() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == COMPAT:
            continue
        found = violations(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(REPO))] = found
    assert offenders == {}, "route these through tunedsl/backends/compat.py"
    assert violations(COMPAT.read_text(encoding="utf-8"))  # the checker does see them there


# -- the version gate ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "tested"),
    [
        ("3.6.0", True),
        ("3.7.1", True),
        ("3.9.0", True),
        ("3.9.0+git1a2b3c4", True),
        ("3.5.1", False),
        ("3.10.0", False),
        ("3.10.0rc1", False),
        ("4.0.0", False),
        ("2.3.1", False),
        ("nightly", False),
        ("", False),
    ],
)
def test_tested_versions(version: str, tested: bool) -> None:
    from tunedsl.backends import compat

    assert compat.version_tested(version) is tested


def test_an_untested_version_warns_once_and_names_the_way_out() -> None:
    from tunedsl.backends import compat

    compat._warned_versions.discard("3.99.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compat.gate("3.6.0") is True
        assert compat.gate("3.99.0") is False
        assert compat.gate("3.99.0") is False
    assert [w.category for w in caught] == [compat.UntestedTritonWarning]
    text = str(caught[0].message)
    assert "3.99.0" in text and "3.6 to 3.9" in text and "public JIT path" in text


def test_the_installed_triton_is_a_tested_version() -> None:
    import triton

    from tunedsl.backends import compat

    assert compat.version_tested(triton.__version__), (
        f"Triton {triton.__version__} is installed: check compat.py's functions and widen "
        "TESTED_TRITON"
    )


GATE_SCRIPT = r"""
import json, sys, warnings
import triton
triton.__version__ = sys.argv[1]  # simulate another installed Triton
sys.path.insert(0, sys.argv[2])
from test_runtime_direct_launch import FakeJit, FakeTensor
from tunedsl.backends import compat, triton_launch as tl

class Runtime:  # Triton's knobs.runtime without hooks (no GPU driver here)
    class launch_enter_hook:
        calls = []
    launch_exit_hook = launch_enter_hook

compat.device_and_stream = lambda: (lambda: 0, lambda device: 1000)
compat.runtime_knobs = lambda: Runtime
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = FakeJit()
    args = (FakeTensor(0), 64)
    launcher = tl.make_launcher(kernel, {}, args, {})
    launcher((4,), args, {}, {"TILE": 16}, ())
    launcher((4,), args, {}, {"TILE": 16}, ())
    out = {
        "launcher": type(launcher).__name__,
        "direct": tl.direct_launch_enabled(),
        "stored": tl.stored_binaries_enabled(),
        "paths": [entry[0] for entry in kernel.log],
        "warnings": [str(w.message) for w in caught if w.category is compat.UntestedTritonWarning],
    }
print(json.dumps(out))
"""


@pytest.mark.needs_triton
@pytest.mark.parametrize("version", ["3.6.0", "3.9.0", "3.10.0", "3.5.0"])
def test_outside_the_tested_range_launches_go_through_the_jit(tmp_path, version) -> None:
    # A fresh process per version (the gate is a process constant); the kernel is the
    # direct-launch tests' stand-in JITFunction (a real one needs a GPU: tests/gpu).
    script = tmp_path / "gate.py"
    script.write_text(GATE_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET="0", TUNEDSL_DIRECT_LAUNCH="1")
    env["TUNEDSL_STORED_BINARIES"] = "1"
    out = subprocess.run(
        [sys.executable, str(script), version, str(REPO / "tests" / "integration")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if version in ("3.6.0", "3.9.0"):
        assert result["launcher"] == "DirectLauncher" and result["direct"] and result["stored"]
        assert result["paths"] == ["jit", "direct"]  # the second call skips the JIT
        assert result["warnings"] == []
    else:
        assert result["launcher"] == "JitLauncher"
        assert not result["direct"] and not result["stored"]
        assert result["paths"] == ["jit", "jit"]
        assert len(result["warnings"]) == 1 and version in result["warnings"][0]


# -- interpreting -------------------------------------------------------------------------

# What Triton's getenv_bool answers (libtriton: 1, y, yes, on, true in any case; anything
# else set is false; unset is the default).
VALUES = ["1", "true", "TRUE", "True", "on", "ON", "yes", "y", "Y"]
VALUES += ["0", "false", "off", "no", "n", "", " 1", "1 ", "2", "t", "enabled"]


@pytest.mark.needs_triton
@pytest.mark.parametrize("value", VALUES)
def test_one_reading_agrees_with_tritons_knob(monkeypatch, value) -> None:
    from triton import knobs as tknobs

    from tunedsl.backends import compat
    from tunedsl.backends import triton as bt
    from tunedsl.backends import triton_compile as tc

    monkeypatch.setenv("TRITON_INTERPRET", value)
    expected = bool(tknobs.runtime.interpret)
    assert expected is (value.lower() in {"1", "y", "yes", "on", "true"})
    assert knobs.triton_interpret_env() is expected
    assert compat.interpreting() is expected
    assert bt.interpreting is compat.interpreting is tc.interpreting  # one function


def test_unset_is_off(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert knobs.triton_interpret_env() is False


TRUE_SCRIPT = r"""
import json
import torch
from shared_kernels import vadd
from tunedsl import autotune_launch, cdiv
from tunedsl.backends import triton as bt, triton_launch as tl

n = 300
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.zeros(n)
result = autotune_launch(
    vadd, space={"tile": [64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="interp-true",
)
print(json.dumps({
    "correct": bool(torch.equal(c, a + 1)),
    "backend": result.record.versions["triton_backend"],
    "device": bt.device_facts()["type"],
    "locked": tl.JitLauncher(vadd, {}).lock is tl.INTERPRETER_LOCK,
    "interpreting": bt.interpreting(),
}))
"""


@pytest.mark.needs_triton
@pytest.mark.parametrize("value", ["true", "on", "1"])
def test_triton_interpret_true_is_the_interpreter_everywhere(tmp_path, value) -> None:
    script = tmp_path / "interp.py"
    script.write_text(TRUE_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET=value, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {
        "correct": True,
        "backend": "interpreter",  # not "unavailable: ..."
        "device": "interpreter",
        "locked": True,
        "interpreting": True,
    }
