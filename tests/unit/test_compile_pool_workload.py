"""Workload registration, precompile mode and the precompile site (pure Python)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tunedsl.precompile import workload as wl


def test_workload_registers_without_calling() -> None:
    calls: list[int] = []

    @wl.workload
    def warm_a() -> None:
        calls.append(1)

    assert calls == []
    names = [w.qualname for w in wl.registered_workloads(__name__)]
    assert names.count("test_workload_registers_without_calling.<locals>.warm_a") == 1
    entry = wl.registered_workloads(__name__)[-1]
    assert entry.filename == __file__ and entry.line > 0


def test_registering_again_replaces_the_old_entry() -> None:
    def make():
        @wl.workload
        def warm_b() -> None:
            pass

        return warm_b

    make()
    second = make()
    entries = [w for w in wl.registered_workloads(__name__) if w.qualname.endswith("warm_b")]
    assert len(entries) == 1 and entries[0].fn is second


def test_workload_rejects_a_non_function() -> None:
    with pytest.raises(TypeError, match="decorates a function"):
        wl.workload(42)  # type: ignore[arg-type]


def test_precompile_mode_is_scoped_and_does_not_nest() -> None:
    assert not wl.precompile_active()
    with pytest.raises(RuntimeError, match="boom"), wl.precompile_mode() as session:
        assert wl.precompile_active() and wl.active_session() is session
        with pytest.raises(RuntimeError, match="does not nest"), wl.precompile_mode():
            pass
        raise RuntimeError("boom")
    assert not wl.precompile_active()


class _Inner:
    """A site stand-in: three variants per call; calling it 'launches'."""

    label = "fake.py:3:4"

    def __init__(self) -> None:
        self.launched = 0

    def variants(self, kernel, args, kwargs, bind, key, lazy):
        configs = [SimpleNamespace(tile=t) for t in (1, 2, 3)]
        return (key,), [
            SimpleNamespace(config=c, args=args, kwargs=bind(c)[1], grid=(1,), options={})
            for c in configs
        ]

    def __call__(self, kernel, args, kwargs, bind, key, lazy):
        self.launched += 1
        return "launched"


def _call(site, key="k"):
    return site("kernel", (1, 2), {}, lambda c: ((), {"TILE": c.tile}, (1,)), key, None)


def test_precompile_site_launches_outside_the_mode() -> None:
    inner = _Inner()
    site = wl.PrecompileSite(inner)
    assert _call(site) == "launched" and inner.launched == 1
    assert site.label == "fake.py:3:4"


def test_under_the_interpreter_nothing_is_compiled_and_each_signature_counts_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    inner = _Inner()
    site = wl.PrecompileSite(inner)
    seen: list[str] = []
    with wl.precompile_mode(on_result=lambda s, c, outcome: seen.append(outcome)) as session:
        assert _call(site) is None
        assert _call(site) is None  # the same signature: skipped
        _call(site, key="other")
    assert inner.launched == 0
    assert seen == ["interpreted"] * 6
    assert session.totals()["interpreted"] == 6
    assert [r.key for r in session.reports] == [("k",), ("other",)]
