"""Stored kernel binaries (``tunedsl/backends/triton_binaries.py``) with real cubins.

Cross-compiled for ``cuda:90`` (no GPU needed): the store/load round trip, the check that
only the launch's own binary is stored, and every validation failure being a miss with a
warning. Cross-compiling needs Triton imported without ``TRITON_INTERPRET`` (which this
directory's conftest sets), so each case runs this file as a script in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tunedsl import warn

pytestmark = pytest.mark.needs_triton


def _run(case: str, tmp_path) -> dict:
    env = dict(
        os.environ,
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
        TUNEDSL_CACHE_DIR=str(tmp_path / "tunedsl"),
    )
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run(
        [sys.executable, __file__, case],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_round_trip_loads_the_identical_binary(tmp_path) -> None:
    r = _run("round_trip", tmp_path)
    assert r["fingerprint"] and len(r["fingerprint"]) == 64
    assert r["stored"] and r["loaded_same_binary"] and r["same_metadata_hash"]
    assert r["files"] == ["manifest.json", "mm.cubin", "mm.json"]
    assert r["other_options_miss"] and r["other_options_key_differs"]
    assert r["other_alignment_key_differs"]
    assert r["warnings"] == []


def test_only_the_launchs_own_binary_is_stored(tmp_path) -> None:
    r = _run("wrong_kernel", tmp_path)
    assert r["stored"] is False
    assert r["entries"] == []


def test_a_damaged_entry_is_a_miss_with_one_warning(tmp_path) -> None:
    r = _run("damaged", tmp_path)
    for case in ("flipped_byte", "truncated", "bad_manifest", "other_key", "extra_file"):
        assert r[case]["loaded"] is False, case
        assert len(r[case]["warnings"]) == 1, (case, r[case])
    assert "sha256" in r["flipped_byte"]["warnings"][0]
    assert "size" in r["truncated"]["warnings"][0]
    assert r["intact"]["loaded"] is True and r["intact"]["warnings"] == []
    assert r["removed_after_warning"]


def test_a_directory_writable_by_others_is_not_trusted(tmp_path) -> None:
    r = _run("not_private", tmp_path)
    assert r["loaded"] is False
    assert len(r["warnings"]) == 1 and "not private" in r["warnings"][0]


def test_a_cache_root_writable_by_others_is_not_trusted_below_it(tmp_path) -> None:
    r = _run("root_not_private", tmp_path)
    assert r["loaded"] is False and len(r["warnings"]) == 1, r
    assert f"{r['root']} is writable by group or others" in r["warnings"][0]
    assert r["loaded_once_fixed"] is True


@pytest.mark.parametrize("where", ["root", "binaries"])
def test_nothing_is_stored_below_a_directory_others_can_write(tmp_path, where: str) -> None:
    """The cache root (or its binaries directory) is open to others' writes: a binary is
    not written there (they could swap the directory it is written into), and one warning
    names the directory and why."""
    r = _run(f"store_{where}_not_private", tmp_path)
    assert r["stored"] is False, r
    assert r["entries"] == [], r
    assert len(r["warnings"]) == 1 and f"{r['open']} is writable by group" in r["warnings"][0]


def test_triton_knobs_that_need_a_real_compile_disable_the_store(tmp_path) -> None:
    r = _run("knobs", tmp_path)
    assert r == {"always_compile": None, "jit_cache_hook": None, "plain": True}


def test_replay_signature_is_tritons_specialization(tmp_path) -> None:
    r = _run("replay_signature", tmp_path)
    assert r["signature"]["a"] == "*fp16:D"
    assert r["signature"]["BM"] == {"constexpr": 32}
    assert r["signature"] == r["specialization"]
    assert r["replayed_same_binary"]  # precompile --replay rebuilds the launch's binary


def test_a_launch_keyed_alike_reuses_its_source_and_any_other_gets_its_own(tmp_path) -> None:
    r = _run("memo", tmp_path)
    # Another size of the same specialization (a new key to a site): the same source, and
    # the binder was made once for the kernel and target.
    assert r["same_spec_reused"] and r["binders_made"] == 1
    # Every launch, remembered or not, has exactly the key a fresh build gives it.
    assert r["keys_as_fresh"] == [True] * r["launches"]
    assert r["distinct_keys"] == 5  # alignment, int class, option and constexpr each differ


# -- the cases, run in a subprocess -----------------------------------------------------------


def _kernel():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared kernels
    from shared_kernels import mm

    return mm


def _call(dtype_offset: int = 0):
    import torch

    a = torch.empty(128 * 128 + 8, dtype=torch.float16)[dtype_offset:][: 128 * 128].view(128, 128)
    args = (a, a, a, 128, 128, 128, 128, 1, 128, 1, 128, 1)
    return args, {"BM": 32, "BN": 32, "BK": 32}


OPTIONS = {"num_warps": 4, "num_stages": 2}


def _compiled(options=OPTIONS, offset: int = 0):
    from tunedsl.backends import triton_binaries as tb
    from tunedsl.backends.triton_compile import compile_variant

    kernel = _kernel()
    args, kwargs = _call(offset)
    cc = compile_variant(kernel, args, kwargs, options, target="cuda:90")
    launch = tb.launch_source(kernel, args, kwargs, options, target="cuda:90")
    return kernel, cc, launch


def _load(launch):
    from tunedsl.backends import triton_binaries as tb

    warn.forget()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = tb.load(launch)
    return compiled, [str(w.message) for w in caught]


def _case_round_trip() -> dict:
    from tunedsl.backends import triton_binaries as tb

    _, cc, launch = _compiled()
    stored = tb.store(launch, cc.kernel)
    loaded, caught = _load(launch)
    _, _, launch8 = _compiled({"num_warps": 8, "num_stages": 2})
    other, caught8 = _load(launch8)
    _, _, misaligned = _compiled(offset=1)  # 2-byte offset: not 16-byte aligned
    return {
        "fingerprint": tb.triton_fingerprint(),
        "stored": stored,
        "loaded_same_binary": loaded is not None and loaded.kernel == cc.binary,
        "same_metadata_hash": loaded is not None and loaded.hash == cc.hash,
        "files": sorted(os.listdir(tb.binaries_dir() / launch.key)),
        "other_options_miss": other is None,
        "other_options_key_differs": launch8.key != launch.key,
        "other_alignment_key_differs": misaligned.key != launch.key,
        "warnings": caught + caught8,
    }


def _case_wrong_kernel() -> dict:
    from tunedsl.backends import triton_binaries as tb

    _, cc8, _ = _compiled({"num_warps": 8, "num_stages": 2})
    _, _, launch4 = _compiled()
    stored = tb.store(launch4, cc8.kernel)  # the binary of another configuration
    root = tb.binaries_dir()
    return {"stored": stored, "entries": sorted(os.listdir(root)) if root.exists() else []}


def _case_damaged() -> dict:
    import shutil

    from tunedsl.backends import triton_binaries as tb

    _, cc, launch = _compiled()
    folder = tb.binaries_dir() / launch.key
    out = {}

    def fresh() -> None:
        shutil.rmtree(folder, ignore_errors=True)
        assert tb.store(launch, cc.kernel)

    def outcome() -> dict:
        compiled, caught = _load(launch)
        return {"loaded": compiled is not None, "warnings": caught}

    fresh()
    cubin = folder / "mm.cubin"
    data = bytearray(cubin.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cubin.write_bytes(bytes(data))
    out["flipped_byte"] = outcome()
    fresh()
    cubin.write_bytes(cubin.read_bytes()[:-16])
    out["truncated"] = outcome()
    fresh()
    (folder / "manifest.json").write_text("{not json")
    out["bad_manifest"] = outcome()
    out["removed_after_warning"] = not folder.exists()
    fresh()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["key"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    out["other_key"] = outcome()
    fresh()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["../escape.json"] = {"size": 1, "sha256": "0" * 64}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    out["extra_file"] = outcome()
    fresh()
    out["intact"] = outcome()
    return out


def _case_not_private() -> dict:
    from tunedsl.backends import triton_binaries as tb

    _, cc, launch = _compiled()
    assert tb.store(launch, cc.kernel)
    os.chmod(tb.binaries_dir(), 0o777)
    compiled, caught = _load(launch)
    return {"loaded": compiled is not None, "warnings": caught}


def _case_root_not_private() -> dict:
    from tunedsl.backends import triton_binaries as tb
    from tunedsl.store import paths

    _, cc, launch = _compiled()
    assert tb.store(launch, cc.kernel)
    os.chmod(paths.cache_root(), 0o777)  # the binaries directory below it stays private
    compiled, caught = _load(launch)
    os.chmod(paths.cache_root(), 0o700)
    again, _ = _load(launch)
    return {
        "loaded": compiled is not None,
        "warnings": caught,
        "root": str(paths.cache_root()),
        "loaded_once_fixed": again is not None,
    }


def _store_not_private(open_dir) -> dict:
    from tunedsl.backends import triton_binaries as tb

    _, cc, launch = _compiled()
    open_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(open_dir, 0o777)
    warn.forget()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stored = tb.store(launch, cc.kernel)
    binaries = tb.binaries_dir()
    return {
        "stored": stored,
        "warnings": [str(w.message) for w in caught],
        "entries": sorted(os.listdir(binaries)) if binaries.is_dir() else [],
        "open": str(open_dir),
    }


def _case_store_root_not_private() -> dict:
    from tunedsl.store import paths

    return _store_not_private(paths.cache_root())


def _case_store_binaries_not_private() -> dict:
    from tunedsl.backends import triton_binaries as tb

    return _store_not_private(tb.binaries_dir())


def _case_knobs() -> dict:
    from triton import knobs as tknobs

    from tunedsl.backends import triton_binaries as tb

    kernel = _kernel()
    args, kwargs = _call()
    out = {}
    tknobs.compilation.always_compile = True
    out["always_compile"] = tb.launch_source(kernel, args, kwargs, OPTIONS, target="cuda:90")
    tknobs.compilation.always_compile = False
    tknobs.runtime.jit_cache_hook = lambda *a, **k: False
    out["jit_cache_hook"] = tb.launch_source(kernel, args, kwargs, OPTIONS, target="cuda:90")
    tknobs.runtime.jit_cache_hook = None
    plain = tb.launch_source(kernel, args, kwargs, OPTIONS, target="cuda:90")
    out["plain"] = plain is not None
    return out


def _case_replay_signature() -> dict:
    import types

    from tunedsl.backends import triton as bt
    from tunedsl.backends.triton_compile import compile_variant, triton_specialization
    from tunedsl.model.config import Config
    from tunedsl.model.variant import Variant
    from tunedsl.precompile.replay import replay_jobs
    from tunedsl.runtime.decide import replay_signature
    from tunedsl.store.records import ConfigResult

    kernel = _kernel()
    args, kwargs = _call()
    variant = Variant(Config(BM=32), args, kwargs, (4, 4), dict(OPTIONS))
    signature = replay_signature(kernel, bt.kernel_info(kernel), variant)
    result = ConfigResult(
        Config(BM=32), "ok", 1.0, 0.0, 1, 1.0, options=dict(OPTIONS), constexprs=dict(kwargs)
    )
    record = types.SimpleNamespace(  # a record tuned on a GPU: its options are the launch's
        signature=json.loads(json.dumps(signature)), results=[result], device={"type": "cuda"}
    )
    ((_, replay),) = replay_jobs(record, kernel, "cuda:90")
    launched = compile_variant(kernel, args, kwargs, OPTIONS, target="cuda:90")
    return {
        "replayed_same_binary": replay().binary == launched.binary,
        "signature": signature,
        "specialization": json.loads(json.dumps(triton_specialization(kernel, args, kwargs))),
    }


def _case_memo() -> dict:
    from tunedsl.backends import compat
    from tunedsl.backends import triton_binaries as tb

    made = []
    real = compat.make_binder
    compat.make_binder = lambda *a: (made.append(a), real(*a))[1]
    kernel = _kernel()
    args, kwargs = _call()
    odd = _call(1)[0]
    launches = [
        (args, kwargs, OPTIONS),
        ((*args[:3], 64, 64, 64, *args[6:]), kwargs, OPTIONS),  # other sizes, same classes
        (odd, kwargs, OPTIONS),  # a misaligned tensor
        ((*args[:3], 100, *args[4:]), kwargs, OPTIONS),  # M not a multiple of 16
        (args, kwargs, {**OPTIONS, "num_warps": 8}),
        (args, {**kwargs, "BK": 64}, OPTIONS),
    ]
    sources = [tb.launch_source(kernel, *call, target="cuda:90") for call in launches]
    fresh = []
    for call in launches:
        getattr(tb, "_made", {}).clear()  # this process's kept sources
        fresh.append(tb.launch_source(kernel, *call, target="cuda:90"))
    compat.make_binder = real
    return {
        "same_spec_reused": sources[1] is sources[0],
        "binders_made": len(made) - len(launches),  # the fresh builds made one each
        "keys_as_fresh": [a.key == b.key for a, b in zip(sources, fresh, strict=True)],
        "launches": len(launches),
        "distinct_keys": len({s.key for s in sources}),
    }


if __name__ == "__main__":
    result = globals()[f"_case_{sys.argv[1]}"]()
    print(json.dumps(result, default=lambda o: None))
