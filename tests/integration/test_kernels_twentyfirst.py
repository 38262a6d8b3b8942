"""Kernels of the twenty-first set (kernels_twentyfirst.py), tuned ahead of time as an
inference engineer ships them: workloads over batch sizes swept, the serving script run
warm (every swept key decided from its record), a rule built and shipped for batch sizes
never swept, records carried to another cache as a bundle, and a space changed after
shipping (a key then holds one record per space: neither may hide the other)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).resolve().parent

OPS = """\
import os
import torch
import triton
from tunedsl import autotune, cdiv, workload
from kernels_twentyfirst import rmsnorm_res, silu_mul, rotary, paged_gather

HID, H, D, BS, MAXLEN = 64, 4, 16, 4, 12
ROPE = {"old": [1, 2, 4], "new": [1, 2, 4, 8]}
results = []


def rms(x, res, w):
    T, N = x.shape
    out, res_out = torch.empty_like(x), torch.empty_like(res)
    r = autotune(space=dict(num_warps=[1, 2]), blocks=T,
                 rmsnorm_res(x, res, w, out, res_out, N, x.stride(0), res.stride(0),
                             out.stride(0), 1e-6, BLOCK=triton.next_power_of_2(N)))
    results.append(("rms", r))
    return out, res_out


def act(x):
    T, D2 = x.shape
    out = torch.empty(T, D2 // 2)
    r = autotune(space=dict(BT=[1, 4], BD=[16, 32]), blocks=(cdiv(T, $BT), cdiv(D2 // 2, $BD)),
                 silu_mul(x, out, T, D2 // 2, x.stride(0), out.stride(0), BT=$BT, BD=$BD))
    results.append(("act", r))
    return out


def rope(q, cos, sin, pos):
    T, Hq, Dq = q.shape
    r = autotune(space=dict(BH=ROPE[os.environ.get("ROPE_SPACE", "old")]), restore_value=["q"],
                 blocks=(T, cdiv(Hq, $BH)),
                 rotary(q, cos, sin, pos, T, Hq, q.stride(0), q.stride(1), cos.stride(0),
                        HALF=Dq // 2, BH=$BH))
    results.append(("rope", r))


def gather(cache, table, lens):
    B = table.shape[0]
    out = torch.zeros(B, MAXLEN, D)
    r = autotune(space=dict(BT=[8, 16]), blocks=(B, cdiv(MAXLEN, $BT)),
                 paged_gather(cache, table, lens, out, cache.stride(0), cache.stride(1),
                              table.stride(0), out.stride(0), out.stride(1), MAXLEN,
                              BS=BS, D=D, BT=$BT))
    results.append(("gather", r))
    return out


def close(a, b):
    return bool(torch.allclose(a, b, rtol=1e-4, atol=1e-4))


def step(T, layers=("rms", "act", "rope", "gather")):
    g = torch.Generator().manual_seed(T)
    ok = {}
    if "rms" in layers:
        x, res, w = torch.randn(T, HID, generator=g), torch.randn(T, HID, generator=g), torch.randn(HID, generator=g)
        out, res_out = rms(x, res, w)
        h = x + res
        ok["rms"] = close(out, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w) and close(res_out, h)
    if "act" in layers:
        xa = torch.randn(T, 2 * HID, generator=g)
        ok["act"] = close(act(xa), torch.nn.functional.silu(xa[:, :HID]) * xa[:, HID:])
    if "rope" in layers:
        q = torch.randn(T, H, D, generator=g)
        q0 = q.clone()
        cos, sin = torch.randn(64, D // 2, generator=g), torch.randn(64, D // 2, generator=g)
        pos = torch.arange(T, dtype=torch.int32) % 64
        rope(q, cos, sin, pos)
        c, s = cos[pos.long()][:, None, :], sin[pos.long()][:, None, :]
        x1, x2 = q0[..., : D // 2], q0[..., D // 2 :]
        ok["rope"] = close(q, torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1))
    if "gather" in layers:
        cache = torch.randn(32, BS, D, generator=g)
        table = torch.randint(0, 32, (T, MAXLEN // BS), generator=g, dtype=torch.int32)
        lens = torch.randint(1, MAXLEN + 1, (T,), generator=g, dtype=torch.int32)
        ref = torch.zeros(T, MAXLEN, D)
        for b in range(T):
            for t in range(int(lens[b])):
                ref[b, t] = cache[int(table[b, t // BS]), t % BS]
        ok["gather"] = close(gather(cache, table, lens), ref)
    return ok


SWEPT = [1, 2, 4, 8, 16]


@workload
def batches():
    for T in SWEPT:
        step(T)
"""

SERVE = """\
import json
import sys
import tunedsl.activate  # noqa: F401
import ops

layers = sys.argv[2].split(",") if len(sys.argv) > 2 else ("rms", "act", "rope", "gather")
rows = []
for T in [int(s) for s in sys.argv[1].split(",")]:
    ok = ops.step(T, layers)
    start = len(ops.results) - len(ok)
    for name, r in ops.results[start:]:
        rows.append({"T": T, "layer": name, "ok": ok[name], "source": r.source,
                     "config": repr(r.config),
                     "space": r.record.context.get("space") if r.record is not None else None,
                     "stamp": r.record.timestamp if r.record is not None else None})
print("ROWS " + json.dumps(rows))
"""


def _env(tmp_path: Path, cache: str = "cache", **extra: str) -> dict[str, str]:
    env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / cache), TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(HERE)])
    env["TUNEDSL_QUIET"] = "1"
    for name in ("TUNEDSL_AUTOTUNE", "TUNEDSL_FORCE_RETUNE", "TUNEDSL_RECORDS_PATH"):
        env.pop(name, None)
    env.update(extra)
    return env


def _tunedsl(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv], cwd=tmp_path, env=_env(tmp_path, **env),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _serve(tmp_path: Path, sizes: str, *more: str, **env: str) -> list[dict[str, object]]:
    """``python serve.py``: each layer's result checked against torch, its source and
    choice."""
    proc = subprocess.run(
        [sys.executable, "serve.py", sizes, *more], cwd=tmp_path, env=_env(tmp_path, **env),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ROWS "))
    rows: list[dict[str, object]] = json.loads(line[5:])
    assert all(row["ok"] for row in rows), rows
    return rows


def _write(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(OPS, encoding="utf-8")
    (tmp_path / "serve.py").write_text(SERVE, encoding="utf-8")


def test_swept_batch_sizes_hit_their_records_and_a_shipped_rule_decides_the_others(
    tmp_path: Path,
) -> None:
    _write(tmp_path)
    _tunedsl(tmp_path, "sweep", "--no-ray", "ops.py")
    swept = ",".join(map(str, [1, 2, 4, 8, 16]))
    for way in ("python", "tunedsl run"):
        rows = (
            _serve(tmp_path, swept)
            if way == "python"
            else json.loads(
                next(
                    x[5:]
                    for x in _tunedsl(tmp_path, "run", "serve.py", swept).stdout.splitlines()
                    if x.startswith("ROWS ")
                )
            )
        )
        assert len(rows) == 20 and {r["source"] for r in rows} == {"disk"}, (way, rows)
    _tunedsl(tmp_path, "rules", "build", "--out", str(tmp_path / "ship"))
    shipped = {"TUNEDSL_RECORDS_PATH": str(tmp_path / "ship")}
    rows = _serve(tmp_path, "3,5,12", cache="fresh", **shipped)
    assert {r["source"] for r in rows} == {"rule"}, rows
    # Beyond the sweep: tuned where tuning may run; the rule's pick where it may not.
    rows = _serve(tmp_path, "32", cache="fresh", **shipped)
    assert {r["source"] for r in rows} == {"tuned"}, rows
    rows = _serve(tmp_path, "64", cache="fresh", TUNEDSL_AUTOTUNE="cached", **shipped)
    assert {r["source"] for r in rows} == {"rule"}, rows


def test_a_bundle_of_another_space_imported_keeps_this_spaces_own_record(
    tmp_path: Path,
) -> None:
    """A key keeps one record per space. A newer bundle record of the key tuned from another
    space (an older release's) used to be written over this cache's record of its space:
    the key was tuned again, and with mode="cached" the other space's choice launched."""
    _write(tmp_path)
    mine = _serve(tmp_path, "2", "rope", cache="here", ROPE_SPACE="new")
    assert mine[0]["source"] == "tuned"
    _serve(tmp_path, "2", "rope", cache="there", ROPE_SPACE="old")  # measured later
    bundle = str(tmp_path / "old.jsonl")
    _tunedsl(tmp_path, "cache", "export", bundle, cache="there")
    out = _tunedsl(tmp_path, "cache", "import", bundle, cache="here").stdout
    assert "imported 1 record" in out, out
    for mode in ("on", "cached"):
        again = _serve(tmp_path, "2", "rope", cache="here", ROPE_SPACE="new", TUNEDSL_AUTOTUNE=mode)
        assert again[0]["source"] == "disk", (mode, again)
        assert again[0]["space"] == mine[0]["space"], (mode, again, mine)
        assert again[0]["config"] == mine[0]["config"], (mode, again, mine)
    # The imported record serves its own space there too.
    old = _serve(tmp_path, "2", "rope", cache="here", ROPE_SPACE="old")
    assert old[0]["source"] == "disk" and old[0]["space"] != mine[0]["space"], old


def test_a_shipped_record_of_this_space_is_used_behind_a_newer_cached_one_of_another(
    tmp_path: Path,
) -> None:
    """The application ships its release's records (space changed since the release before);
    the user's cache holds a later tuning of the key from the earlier space. The shipped
    record of this space used to be hidden by it: the key was tuned again, and with
    mode="cached" the earlier space's choice launched as "disk"."""
    _write(tmp_path)
    shipped = _serve(tmp_path, "2", "rope", cache="app", ROPE_SPACE="new")
    _serve(tmp_path, "2", "rope", cache="user", ROPE_SPACE="old")  # measured later
    path = {"TUNEDSL_RECORDS_PATH": str(tmp_path / "app" / "records")}
    for mode in ("cached", "on"):
        rows = _serve(
            tmp_path, "2", "rope", cache="user", ROPE_SPACE="new", TUNEDSL_AUTOTUNE=mode, **path
        )
        assert rows[0]["source"] == "disk", (mode, rows)
        assert rows[0]["space"] == shipped[0]["space"], (mode, rows, shipped)
        assert rows[0]["config"] == shipped[0]["config"], (mode, rows, shipped)
    # `cache ls` says the same: neither record is shadowed (each is its space's).
    listed = json.loads(_tunedsl(tmp_path, "cache", "ls", "--json", cache="user", **path).stdout)
    assert len(listed) == 2 and not any(row["shadowed"] for row in listed), listed


def test_a_bundle_of_another_space_imported_into_redis_goes_beside_the_fleets_record(
    server: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """``cache import --remote`` keeps one record per space as the local import does: the
    bundle's newer record of another space used to replace the fleet's record of its own."""
    import dataclasses

    pytest.importorskip("redis", reason="needs the redis client: pip install 'tunedsl[redis]'")
    from redis_server import sample_record, store_for

    from tunedsl.cli import main
    from tunedsl.cli.bundle import export_bundle
    from tunedsl.runtime.space_records import own_digest

    url = server.url  # type: ignore[attr-defined]
    monkeypatch.setenv("TUNEDSL_REDIS_URL", url)
    digest = "ab" * 32
    fleet = dataclasses.replace(
        sample_record(digest, 64), timestamp=2000.0, context={"env": {}, "space": "s-new"}
    )
    store_for(url).put(fleet)
    older_space = dataclasses.replace(
        sample_record(digest, 256), timestamp=3000.0, context={"env": {}, "space": "s-old"}
    )
    bundle = tmp_path / "old.jsonl"
    export_bundle(str(bundle), [older_space])
    capsys.readouterr()
    assert main(["cache", "import", str(bundle), "--remote"]) == 0
    assert "imported 1 record into Redis" in capsys.readouterr().out
    assert store_for(url).get(digest) == fleet
    beside = store_for(url).get(own_digest(digest, "s-old"))
    assert beside == dataclasses.replace(older_space, digest=own_digest(digest, "s-old"))


def _records_by_space(cache: Path) -> dict[str, str]:
    """The digest of each record in ``cache``, by the space it states."""
    out = {}
    for path in (cache / "records").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        out[record["context"]["space"]] = record["digest"]
    return out


def test_a_record_of_this_space_is_found_when_the_other_spaces_record_of_its_key_is_gone(
    tmp_path: Path,
) -> None:
    """The second space to tune a key keeps its record under its space's own digest. Once the
    first space's record was cleared (records of a space no longer used), or the record was
    exported and imported alone, it was never looked up again: the key was tuned again
    (with mode="cached", the site's default launched)."""
    _write(tmp_path)
    _serve(tmp_path, "2", "rope", ROPE_SPACE="old")
    mine = _serve(tmp_path, "2", "rope", ROPE_SPACE="new")
    space = str(mine[0]["space"])
    digests = _records_by_space(tmp_path / "cache")
    alone = str(tmp_path / "alone.jsonl")
    _tunedsl(tmp_path, "cache", "export", alone, digests[space][:16])
    _tunedsl(tmp_path, "cache", "import", alone, cache="other")
    _tunedsl(tmp_path, "cache", "clear", next(d for s, d in digests.items() if s != space)[:16])
    for cache in ("cache", "other"):
        for mode in ("cached", "on"):
            rows = _serve(
                tmp_path, "2", "rope", cache=cache, ROPE_SPACE="new", TUNEDSL_AUTOTUNE=mode
            )
            assert rows[0]["source"] == "disk", (cache, mode, rows)
            assert rows[0]["config"] == mine[0]["config"] and rows[0]["space"] == space, rows
    # Moved to the key's digest, where a space alone with its key keeps its record.
    assert set(_records_by_space(tmp_path / "other")) == {space}
    assert _records_by_space(tmp_path / "other")[space] != digests[space]


def test_a_sweep_of_a_changed_space_keeps_the_records_of_the_earlier_space(
    tmp_path: Path,
) -> None:
    """A sweep's records were written under their keys' digests whatever the cache held
    there: a sweep after the space changed replaced the earlier space's records (a release
    still serving that space then tuned every key again)."""
    _write(tmp_path)
    before = _serve(tmp_path, "2", "rope", ROPE_SPACE="old")
    _tunedsl(tmp_path, "sweep", "--no-ray", "ops.py", ROPE_SPACE="new")
    rows = _serve(tmp_path, "2", "rope", ROPE_SPACE="old")
    assert rows[0]["source"] == "disk" and rows[0]["space"] == before[0]["space"], rows
    assert rows[0]["config"] == before[0]["config"], (rows, before)
    rows = _serve(tmp_path, "2,4", "rope", ROPE_SPACE="new")
    assert {r["source"] for r in rows} == {"disk"}, rows
    assert {r["space"] for r in rows} != {before[0]["space"]}, rows


def test_a_key_tuned_again_over_a_shipped_record_keeps_the_caches_record_of_another_space(
    tmp_path: Path,
) -> None:
    """Where a record goes was decided by the newest record of the key over every store: a
    shipped record of this space, newer than the cache's record of another space, sent a
    key tuned again (``TUNEDSL_FORCE_RETUNE``) over the cache's record, which was lost."""
    _write(tmp_path)
    before = _serve(tmp_path, "2", "rope", cache="user", ROPE_SPACE="old")
    _serve(tmp_path, "2", "rope", cache="app", ROPE_SPACE="new")  # shipped, measured later
    path = {"TUNEDSL_RECORDS_PATH": str(tmp_path / "app" / "records")}
    rows = _serve(
        tmp_path, "2", "rope", cache="user", ROPE_SPACE="new", TUNEDSL_FORCE_RETUNE="1", **path
    )
    assert rows[0]["source"] == "tuned", rows
    rows = _serve(tmp_path, "2", "rope", cache="user", ROPE_SPACE="old", **path)
    assert rows[0]["source"] == "disk" and rows[0]["space"] == before[0]["space"], rows
    assert rows[0]["config"] == before[0]["config"], (rows, before)


PRUNED = """\
import torch
from tunedsl import autotune, workload
from kernels_twentyfirst import rmsnorm_res


def rms(x, res, w):
    T, N = x.shape
    out, res_out = torch.empty_like(x), torch.empty_like(res)
    return autotune(space=dict(B=[64, 128, 256, 512]),
                    prune=lambda configs, args: [c for c in configs if c.B >= args["N"]],
                    blocks=T,
                    rmsnorm_res(x, res, w, out, res_out, N, x.stride(0), res.stride(0),
                                out.stride(0), 1e-6, BLOCK=$B))


@workload
def hidden_sizes():
    for n in [32, 64, 100, 128, 200]:
        rms(torch.randn(2, n), torch.randn(2, n), torch.randn(n))
"""


def test_rules_build_leaves_the_cells_prune_drops_out_of_the_rule(tmp_path: Path) -> None:
    """A single-block row kernel keeps the tiles as wide as the row (``prune=``): on each
    hidden size the narrower tiles are no candidates. ``rules build`` charged those cells as
    never timed: it listed them as missing cells to measure with ``--script`` (which can
    never time them), counted a held-out pick of one as unmeasured, and ranked the cover and
    the single-configuration baseline as if such a tile could run there."""
    (tmp_path / "pruned.py").write_text(PRUNED, encoding="utf-8")
    _tunedsl(tmp_path, "sweep", "--no-ray", "pruned.py")
    # The interpreter's times are noise: make the narrowest tile that fits each size the
    # fastest, as on a GPU, so the rule needs the narrow tiles the wider sizes prune.
    for path in (tmp_path / "cache" / "records").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        for result in record["results"]:
            result["median_ms"] = result["min_ms"] = float(result["config"]["B"])
        record["chosen"] = min(record["results"], key=lambda r: r["median_ms"])["config"]
        path.write_text(json.dumps(record), encoding="utf-8")
    err = _tunedsl(tmp_path, "rules", "build", "--out", str(tmp_path / "ship")).stderr
    # No cell is missing (each size timed every candidate) and no held-out pick is untimed.
    assert "the records never timed" not in err and "never timed there" not in err, err
    assert "prune= drops 4 of the rule's (key, configuration) cells" in err, err
    (path,) = (tmp_path / "ship").glob("*.rule.json")
    rule = json.loads(path.read_text(encoding="utf-8"))
    validation = rule["validation"]
    assert validation["unmeasured"] == 0 and validation["failed"] == 0, validation
    # The one size where a held-out pick is a tile too narrow for its row says so.
    assert validation["dropped"] == 1, validation
    # The single configuration best over all sizes is one every size can launch (B=256,
    # 4x the narrowest tile at the smallest sizes), not the narrower tile that no size
    # over 128 runs.
    assert validation["baselines"]["single_best"]["max"] == 4.0, validation


def test_a_sweep_into_redis_keeps_the_fleets_record_of_another_space(
    server: object, tmp_path: Path
) -> None:
    """A sweep placed each record by the sweeping node's own cache alone: a node that had
    never run the key wrote the record of its space over the record of another space that
    the fleet's Redis held for the key, and every node still serving that space tuned the
    key again."""
    pytest.importorskip("redis", reason="needs the redis client: pip install 'tunedsl[redis]'")
    _write(tmp_path)
    redis = {"TUNEDSL_REDIS_URL": server.url}  # type: ignore[attr-defined]
    fleet = _serve(tmp_path, "2", "rope", cache="node1", ROPE_SPACE="old", **redis)
    assert fleet[0]["source"] == "tuned", fleet
    _tunedsl(tmp_path, "sweep", "--no-ray", "ops.py", cache="sweeper", ROPE_SPACE="new", **redis)
    for cache in ("node2", "sweeper", "node1"):  # a new node, the sweeper, the first node
        rows = _serve(tmp_path, "2", "rope", cache=cache, ROPE_SPACE="old", **redis)
        assert rows[0]["source"] == "disk", (cache, rows)
        assert rows[0]["space"] == fleet[0]["space"], (cache, rows, fleet)
        assert rows[0]["config"] == fleet[0]["config"], (cache, rows, fleet)
    # The sweep's record of its space is found from every node too.
    for cache in ("node3", "sweeper", "node1"):
        rows = _serve(tmp_path, "2,4", "rope", cache=cache, ROPE_SPACE="new", **redis)
        assert {r["source"] for r in rows} == {"disk"}, (cache, rows)
        assert fleet[0]["space"] not in {r["space"] for r in rows}, (cache, rows)
    # Tuned again on the sweeper (its cache holds the sweep's record of the key, Redis the
    # fleet's of the other space): the new record is the one every node finds.
    again = _serve(
        tmp_path, "2", "rope", cache="sweeper", ROPE_SPACE="new", TUNEDSL_FORCE_RETUNE="1", **redis
    )
    assert again[0]["source"] == "tuned", again
    for cache in ("sweeper", "node4"):  # (a node's cache keeps what it copied from Redis)
        rows = _serve(tmp_path, "2", "rope", cache=cache, ROPE_SPACE="new", **redis)
        assert rows[0]["source"] == "disk" and rows[0]["stamp"] == again[0]["stamp"], (cache, rows)
    rows = _serve(tmp_path, "2", "rope", cache="node4", ROPE_SPACE="old", **redis)
    assert rows[0]["source"] == "disk" and rows[0]["stamp"] == fleet[0]["stamp"], rows
