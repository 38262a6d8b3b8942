"""The Redis record store and the layered lookup, against a real redis-server on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from redis_server import RedisServer, sample_record, store_for

from tunedsl import warn
from tunedsl.cli.bundle import read_bundle
from tunedsl.engine.seams import RecordStore
from tunedsl.errors import CacheWarning, UsageError
from tunedsl.store import records
from tunedsl.store.files import FileRecordStore
from tunedsl.store.layered import (
    LayeredStore,
    MemoryStore,
    default_stores,
    get_or_tune,
)
from tunedsl.store.redis_store import redact, require_redis

pytest.importorskip("redis", reason="needs the redis client: pip install 'tunedsl[redis]'")

DIGEST = "cd" * 32
HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _fresh_warnings():
    """``warn_once`` remembers topics per process; each test starts without them."""
    warn.forget()
    yield


def test_round_trip_uses_the_file_digest_and_plain_json(server: RedisServer) -> None:
    store = store_for(server.url)
    for each in (store, LayeredStore([store]), FileRecordStore(), MemoryStore()):
        assert isinstance(each, RecordStore)  # the engine's seam
    record = sample_record(DIGEST)
    assert store.get(DIGEST) is None
    assert store.put(record)
    assert store.get(DIGEST) == record
    raw = server.client().get(f"tunedsl:v1:record:{DIGEST}")
    assert json.loads(raw) == record.to_json()  # the same JSON a record file holds
    assert [r.digest for r in store.iter_records()] == [DIGEST]
    assert store.delete(DIGEST) and store.get(DIGEST) is None


@pytest.mark.parametrize(
    "value",
    [
        b"{not json",
        json.dumps({"schema": 99}).encode(),
        b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00.",  # a pickle: never unpickled
        b"\xff\xfe",
    ],
)
def test_a_corrupted_value_is_a_miss_with_one_warning(server: RedisServer, value: bytes) -> None:
    store = store_for(server.url)
    server.client().set(f"tunedsl:v1:record:{DIGEST}", value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.get(DIGEST) is None
        assert store.get(DIGEST) is None
        assert list(store.iter_records()) == []
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1


def test_a_record_stored_under_another_digest_is_a_miss(server: RedisServer) -> None:
    store = store_for(server.url)
    other = sample_record("ef" * 32)
    server.client().set(f"tunedsl:v1:record:{DIGEST}", json.dumps(other.to_json()))
    with pytest.warns(CacheWarning, match="another key"):
        assert store.get(DIGEST) is None


def test_the_server_killed_mid_run_means_local_only_with_one_warning(
    server: RedisServer, tmp_path: Path
) -> None:
    remote = store_for(server.url, backoff_s=3600)
    local = FileRecordStore(tmp_path / "local" / "records")
    layered = LayeredStore([local, remote])
    assert layered.put(sample_record(DIGEST))
    server.kill()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert remote.get(DIGEST) is None
        assert not remote.available()  # backing off: no further network attempts
        assert not remote.put(sample_record(DIGEST))
        with remote.lock(DIGEST, timeout_s=3600) as held:  # never waits on a dead server
            assert held is False
        # The layered store still decides from the local files, and tunes when they miss.
        assert LayeredStore([local, remote]).get(DIGEST) == sample_record(DIGEST)
        other = "12" * 32
        record, source = get_or_tune(layered, other, lambda: sample_record(other, 256))
        assert source == "tuned" and local.get(other) == record
    texts = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(texts) == 1 and "unreachable" in texts[0]


def test_a_stalled_server_times_out_with_one_warning(server: RedisServer) -> None:
    """SIGSTOP: the server accepts connections but never answers (a hung or overloaded
    Redis). Each request gives up after the read timeout, then the store backs off."""
    remote = store_for(server.url, timeout_s=0.3, backoff_s=3600)
    assert remote.put(sample_record(DIGEST))
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert remote.get(DIGEST) is None
            assert remote.get(DIGEST) is None  # backing off: not even a connection attempt
            with remote.lock(DIGEST, timeout_s=3600) as held:
                assert held is False
        assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
        assert not remote.available()
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def test_nothing_listens_is_one_warning_then_backoff(tmp_path: Path) -> None:
    from redis_server import free_port

    remote = store_for(f"redis://127.0.0.1:{free_port()}/0", backoff_s=3600)
    with pytest.warns(CacheWarning, match="unreachable"):
        assert remote.get(DIGEST) is None
    assert not remote.available()


def test_a_password_protected_server(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path, password="s3cret-pw")
    try:
        good = store_for(srv.url)
        assert good.put(sample_record(DIGEST)) and good.get(DIGEST) == sample_record(DIGEST)
        wrong = store_for(f"redis://:wrong-pw@127.0.0.1:{srv.port}/0")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert wrong.get(DIGEST) is None
        texts = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
        assert len(texts) == 1 and "wrong-pw" not in texts[0] and "***" in texts[0]
        with pytest.warns(CacheWarning):
            assert store_for(f"redis://127.0.0.1:{srv.port}/0").get(DIGEST) is None
    finally:
        srv.stop()
    assert redact("redis://:pw@h:1/0") == "redis://:***@h:1/0"


def test_the_lock_is_released_only_by_its_owner_and_expires(server: RedisServer) -> None:
    a, b = store_for(server.url), store_for(server.url)
    with a.lock(DIGEST, timeout_s=5) as held:
        assert held
        with b.lock(DIGEST, timeout_s=0.2) as other:
            assert other is False  # timed out: that caller tunes without it
        assert server.client().get(f"tunedsl:v1:lock:{DIGEST}") is not None
    with b.lock(DIGEST, timeout_s=5) as held:
        assert held
    # A holder that died leaves a lock with an expiry; the next caller gets it after that.
    server.client().set(f"tunedsl:v1:lock:{DIGEST}", "dead-holder", px=300)
    with b.lock(DIGEST, timeout_s=60) as held:
        assert held
        # The dead holder's token cannot release ours.
        c = server.client()
        from tunedsl.store.redis_store import _RELEASE

        assert c.eval(_RELEASE, 1, f"tunedsl:v1:lock:{DIGEST}", "dead-holder") == 0


def test_the_layered_store_writes_a_hit_through_and_a_decision_to_all(tmp_path: Path) -> None:
    first = FileRecordStore(tmp_path / "a" / "records")
    second = FileRecordStore(tmp_path / "b" / "records")
    record = sample_record(DIGEST)
    assert second.put(record)
    layered = LayeredStore([first, second])
    assert first.get(DIGEST) is None
    assert layered.get(DIGEST) == record
    assert first.get(DIGEST) == record  # written through
    new = sample_record("34" * 32, 64)
    assert layered.put(new)
    assert first.get(new.digest) == new and second.get(new.digest) == new
    assert sorted(r.digest for r in layered.iter_records()) == sorted([DIGEST, new.digest])
    assert layered.delete(new.digest) and second.get(new.digest) is None


def test_default_stores_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TUNEDSL_REDIS_URL", raising=False)
    assert [s.name for s in default_stores()][:1] != ["redis"]
    monkeypatch.setenv("TUNEDSL_REDIS_URL", "redis://127.0.0.1:1/0")
    assert [s.name for s in default_stores()][-1] == "redis"
    monkeypatch.setenv("TUNEDSL_REDIS_URL", "http://nope")
    with pytest.raises(UsageError, match="not a Redis URL"):
        default_stores()


def test_a_missing_client_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(UsageError, match=r"tunedsl\[redis\]"):
        require_redis()


# -- several processes (nodes with their own cache directories) ------------------------------

CHILD = r"""
import json, os, sys, time
from pathlib import Path
from redis_server import sample_record
from tunedsl.store.files import FileRecordStore
from tunedsl.store.layered import LayeredStore, get_or_tune
from tunedsl.store.redis_store import RedisRecordStore, RedisSettings

url, local, log, digest, tile, hold, go = sys.argv[1:]
store = LayeredStore([
    FileRecordStore(Path(local) / "records"),
    RedisRecordStore(RedisSettings(url=url, lock_ttl_s=5.0)),
])
while not Path(go).exists():
    time.sleep(0.01)

def tune():
    (Path(log) / f"tuned-{os.getpid()}").write_text(tile)
    time.sleep(float(hold))
    return sample_record(digest, int(tile))

record, source = get_or_tune(store, digest, tune, lock_timeout_s=120)
print(json.dumps({"source": source, "tile": record.chosen["tile"]}))
"""


def run_nodes(server: RedisServer, tmp_path: Path, tiles: list[int], hold: float) -> list[dict]:
    log = tmp_path / "log"
    log.mkdir(parents=True)
    go = tmp_path / "go"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, server.url, str(tmp_path / f"node{i}"), str(log),
             DIGEST, str(tile), str(hold), str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for i, tile in enumerate(tiles)
    ]  # fmt: skip
    go.write_text("go")
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_two_nodes_with_their_own_caches_share_one_decision(
    server: RedisServer, tmp_path: Path
) -> None:
    first = run_nodes(server, tmp_path / "a", [64], hold=0.0)
    second = run_nodes(server, tmp_path / "b", [256], hold=0.0)
    assert first == [{"source": "tuned", "tile": 64}]
    assert second == [{"source": "stored", "tile": 64}]  # node b never tuned
    assert not list((tmp_path / "b" / "log").iterdir())
    # The Redis hit was written through to node b's own files.
    node_b = FileRecordStore(tmp_path / "b" / "node0" / "records")
    assert node_b.get(DIGEST) is not None and node_b.get(DIGEST).chosen["tile"] == 64


def test_eight_nodes_racing_tune_once(server: RedisServer, tmp_path: Path) -> None:
    tiles = [16 * (i + 1) for i in range(8)]
    outs = run_nodes(server, tmp_path, tiles, hold=1.0)
    tuned = list((tmp_path / "log").iterdir())
    assert len(tuned) == 1, [p.name for p in tuned]
    winner = int(tuned[0].read_text())
    assert [o["tile"] for o in outs] == [winner] * 8
    assert sorted(o["source"] for o in outs) == ["stored"] * 7 + ["tuned"]


@pytest.mark.filterwarnings("ignore:ignoring tuning record")
def test_cache_commands_address_redis_with_remote(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from tunedsl.cli import main

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    # A local record goes to Redis through a bundle, and comes back the same way.
    assert records.save_record(sample_record(DIGEST))
    bundle = tmp_path / "b.json"
    assert main(["cache", "export", str(bundle)]) == 0
    assert main(["cache", "import", str(bundle), "--remote"]) == 0
    store_for(server.url).put(sample_record("ef" * 32, 256))
    server.client().set("tunedsl:v1:record:" + "99" * 32, b"garbage")
    capsys.readouterr()
    assert main(["cache", "ls", "--remote", "--json"]) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out)
    assert sorted(r["digest"] for r in rows) == sorted([DIGEST, "ef" * 32])
    assert "invalid: tunedsl:v1:record:" + "99" * 32 in out.err
    assert main(["cache", "show", "efef", "--remote", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] == {"tile": 256}
    back = tmp_path / "back.json"
    assert main(["cache", "export", str(back), DIGEST[:8], "--remote"]) == 0
    assert [r.to_json() for r in read_bundle(str(back))] == [sample_record(DIGEST).to_json()]
    assert main(["cache", "clear", "efef", "--remote"]) == 0
    assert store_for(server.url).get("ef" * 32) is None
    capsys.readouterr()
    assert main(["cache", "clear", "efef", "--remote"]) == 1  # matches nothing now
    assert "none matches efef" in capsys.readouterr().out
    assert main(["cache", "clear", "--all", "--remote"]) == 0  # everything, invalid values too
    assert server.client().keys("tunedsl:v1:record:*") == []
    assert records.load_record(DIGEST) is not None  # the local files were not touched


def test_a_bundle_imported_into_redis_keeps_a_record_tuned_since(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A fleet's record tuned after the bundle was made is not replaced by the bundle's
    older one (it was, in silence); ``--overwrite`` replaces it."""
    import dataclasses

    from tunedsl.cli import main
    from tunedsl.cli.bundle import export_bundle

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    fleet = dataclasses.replace(sample_record(DIGEST, 64), timestamp=3000.0)
    store_for(server.url).put(fleet)
    old = [
        dataclasses.replace(sample_record(d, 256), timestamp=2000.0) for d in (DIGEST, "ef" * 32)
    ]
    bundle = tmp_path / "old.json"
    export_bundle(str(bundle), old)
    capsys.readouterr()
    assert main(["cache", "import", str(bundle), "--remote"]) == 0
    assert "imported 1 record into Redis; kept 1 record newer" in capsys.readouterr().out
    assert store_for(server.url).get(DIGEST) == fleet
    assert store_for(server.url).get("ef" * 32) == old[1]
    assert main(["cache", "import", str(bundle), "--remote", "--overwrite"]) == 0
    assert "imported 2 records into Redis" in capsys.readouterr().out
    assert store_for(server.url).get(DIGEST) == old[0]


def test_a_bundle_listing_a_key_twice_imports_its_newest_record_into_redis(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A key listed twice (bundles concatenated): the newest of its records is imported, as
    into the local cache. Redis holds one of 2000; the bundle's of 3000 replaces it though
    its other line (of 1000) is older (both were skipped), and the older line, listed after
    it, does not replace it either."""
    import dataclasses

    from tunedsl.cli import main
    from tunedsl.cli.bundle import export_bundle

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    store_for(server.url).put(dataclasses.replace(sample_record(DIGEST, 64), timestamp=2000.0))
    newest = dataclasses.replace(sample_record(DIGEST, 128), timestamp=3000.0)
    oldest = dataclasses.replace(sample_record(DIGEST, 256), timestamp=1000.0)
    bundle = tmp_path / "twice.json"
    export_bundle(str(bundle), [newest, oldest])
    assert main(["cache", "import", str(bundle), "--remote"]) == 0
    assert store_for(server.url).get(DIGEST) == newest
    assert main(["cache", "import", str(bundle), "--remote", "--overwrite"]) == 0
    assert store_for(server.url).get(DIGEST) == newest


def test_remote_commands_say_what_is_wrong(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from redis_server import free_port

    from tunedsl.cli import main

    monkeypatch.delenv("TUNEDSL_REDIS_URL", raising=False)
    assert main(["cache", "ls", "--remote"]) == 1
    assert "TUNEDSL_REDIS_URL" in capsys.readouterr().err
    monkeypatch.setenv("TUNEDSL_REDIS_URL", f"redis://:pw@127.0.0.1:{free_port()}/0")
    assert main(["cache", "ls", "--remote"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the Redis record store" in err and ":pw@" not in err


SITE_SCRIPT = """
import sys, json
sys.path.insert(0, {tests!r})
import torch
from shared_kernels import vadd
from tunedsl import autotune_launch

n = 256
a, b = torch.arange(n, dtype=torch.float32), torch.ones(n)
c = torch.empty(n)
r = autotune_launch(vadd, space=dict(TILE=[32, 64, 128]), grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
                    args=(a, b, c, n), kwargs=lambda cfg: dict(TILE=cfg.TILE), name="redis-e2e")
assert torch.equal(c, a + b)
print(json.dumps({{"source": r.source, "tile": r.config.TILE, "digest": r.digest}}))
"""


def test_a_real_site_shares_its_decision_through_redis(server: RedisServer, tmp_path: Path) -> None:
    """End to end through a site: node a tunes and writes its record to its files and to
    Redis; node b, with its own empty cache, takes the decision from Redis without tuning
    and keeps it in its own files."""
    script = tmp_path / "node.py"
    script.write_text(SITE_SCRIPT.format(tests=str(HERE.parent)))
    outs = []
    for node in ("a", "b"):
        env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / node), TUNEDSL_REDIS_URL=server.url)
        env["TRITON_INTERPRET"] = "1"
        proc = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert outs[0]["source"] == "tuned" and outs[1]["source"] == "disk"
    assert outs[0]["tile"] == outs[1]["tile"] and outs[0]["digest"] == outs[1]["digest"]
    digest = outs[0]["digest"]
    assert server.client().get(f"tunedsl:v1:record:{digest}") is not None
    node_b = records.load_from(tmp_path / "b" / "records", digest)
    assert node_b is not None and node_b.chosen["TILE"] == outs[0]["tile"]


def test_a_redis_record_of_another_device_is_a_miss(server: RedisServer, tmp_path: Path) -> None:
    """A Redis value edited to state another GPU under this key's digest: node b, with an
    empty cache, warns once naming the Redis key and the field, and tunes again (it never
    copies the edited record into its files)."""
    script = tmp_path / "node.py"
    script.write_text(SITE_SCRIPT.format(tests=str(HERE.parent)))

    def node(name: str) -> tuple[dict, str]:
        env = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / name), TUNEDSL_REDIS_URL=server.url)
        env["TRITON_INTERPRET"] = "1"
        proc = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr

    first, _ = node("a")
    key = f"tunedsl:v1:record:{first['digest']}"
    edited = json.loads(server.client().get(key))
    edited["device"]["name"] = "NVIDIA A100-SXM4-80GB"
    server.client().set(key, json.dumps(edited))
    second, stderr = node("b")
    assert second["source"] == "tuned" and second["digest"] == first["digest"]
    warned = [line for line in stderr.splitlines() if "not about this call" in line]
    assert len(warned) == 1 and "Redis key" in warned[0] and "(device.name is " in warned[0], stderr
