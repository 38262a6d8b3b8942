"""The Triton/PyTorch boundary: private names only in backends/compat/, the version gate,
Triton's truthiness rule for TRITON_INTERPRET (no torch or triton imported here; the
real-Triton side is tests/integration/test_triton_compat.py)."""

from __future__ import annotations

import io
import tokenize
import warnings
from pathlib import Path

import pytest

from tunedsl import knobs, warn

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tunedsl"
COMPAT = PACKAGE / "backends" / "compat"

# Triton/PyTorch internals that are not private by their spelling (no leading underscore)
# but are not public API either: only compat.py may name them.
INTERNAL_NAMES = {
    "device_caches",
    "create_function_from_signature",
    "CudaUtils",
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
    assert not violations(
        '"""Mentions triton._C and _pack_args in prose."""\n# k._init_handles()\n'
    )
    assert not violations("import triton\nprint(triton.__version__)\n")


def test_private_triton_and_torch_names_appear_only_in_compat() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if COMPAT in path.parents:
            continue
        found = violations(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(REPO))] = found
    assert offenders == {}, "route these through tunedsl/backends/compat/"
    # The checker does see them there.
    assert any(violations(p.read_text(encoding="utf-8")) for p in COMPAT.glob("*.py"))


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

    warn.forget("triton-version:3.99.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compat.gate("3.6.0") is True
        assert compat.gate("3.99.0") is False
        assert compat.gate("3.99.0") is False
    assert [w.category for w in caught] == [compat.UntestedTritonWarning]
    text = str(caught[0].message)
    assert "3.99.0" in text and "3.6 to 3.9" in text and "public JIT path" in text


def test_unset_triton_interpret_is_off(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert knobs.triton_interpret_env() is False


# Triton's getenv_bool (libtriton, 3.6.0 and 3.9.0): 1, y, yes, on, true in any case are on;
# any other set value is off (nothing is stripped). tests/integration/test_triton_compat.py
# checks the same table against the installed Triton's knob.
@pytest.mark.parametrize(
    ("value", "on"),
    [
        *[("1", True), ("true", True), ("TRUE", True), ("On", True), ("yes", True), ("Y", True)],
        *[("0", False), ("false", False), ("off", False), ("no", False), ("", False)],
        *[(" 1", False), ("1 ", False), ("2", False), ("t", False), ("enabled", False)],
    ],
)
def test_triton_interpret_env_uses_tritons_rule(monkeypatch, value: str, on: bool) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", value)
    assert knobs.triton_interpret_env() is on
