"""The Redis record store at its edges, against a real redis-server on loopback: the
``--remote`` commands' argument checks and output, values too long or of another Redis
type, a lock held by another node or left without an expiry, and credentials in URLs."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from redis_server import RedisServer, free_port, sample_record, store_for

from tunedsl import warn
from tunedsl.errors import CacheWarning
from tunedsl.knobs import redact_url
from tunedsl.store.files import FileRecordStore
from tunedsl.store.layered import LayeredStore
from tunedsl.store.records import MAX_RECORD_BYTES

pytest.importorskip("redis", reason="needs the redis client: pip install 'tunedsl[redis]'")

DIGEST = "cd" * 32
OTHER = "ef" * 32
SECRET = "S3cretPW"


@pytest.fixture(autouse=True)
def _fresh_warnings():
    warn.forget()
    yield


def cache_warnings(caught: list) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def record_key(digest: str) -> str:
    return f"tunedsl:v1:record:{digest}"


# -- `tunedsl cache ... --remote`: the local command's checks and escaping --------------------


def test_remote_clear_is_checked_like_the_local_one_and_needs_all(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from tunedsl.cli import main

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    remote = store_for(server.url)
    assert remote.put(sample_record(DIGEST)) and remote.put(sample_record(OTHER, 256))
    capsys.readouterr()
    for argv, says in [
        (["--site", ""], "--site"),
        (["--kernel", " "], "--kernel"),
        ([""], "at least 4 hex digits"),
        (["c"], "at least 4 hex digits"),
        (["cdcz"], "not a record id"),
        ([], "--all"),  # nothing named: not "everything"
        (["--all", "cdcd"], "--all"),
    ]:
        assert main(["cache", "clear", *argv, "--remote"]) == 1, argv
        err = capsys.readouterr().err
        assert says in err, (argv, err)
        assert remote.get(DIGEST) is not None and remote.get(OTHER) is not None, argv
    # A selection that matches nothing says so and fails, as `cache show` of it does.
    assert main(["cache", "clear", "--site", "k.py", "--kernel", "nope", "--remote"]) == 1
    assert "removed 0 records from Redis: none matches --kernel 'nope', --site 'k.py'" in (
        capsys.readouterr().out
    )
    server.client().set(record_key("99" * 32), b"garbage")
    assert main(["cache", "clear", "--all", "--remote"]) == 0
    assert "removed 3 records" in capsys.readouterr().out
    assert server.client().keys("tunedsl:v1:record:*") == []


def test_remote_export_of_an_unknown_id_is_an_error(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from tunedsl.cli import main

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    assert store_for(server.url).put(sample_record(DIGEST))
    out = tmp_path / "bundle.json"
    assert main(["cache", "export", str(out), "abcd1234", "--remote"]) == 1
    err = capsys.readouterr().err
    assert "no tuning record with id 'abcd1234' in Redis" in err
    assert not out.exists()
    assert main(["cache", "export", str(out), DIGEST[:6], "abcd1234", "--remote"]) == 1
    assert not out.exists()
    assert main(["cache", "export", str(out), "ab", "--remote"]) == 1
    assert "at least 4 hex digits" in capsys.readouterr().err
    assert main(["cache", "show", "c", "--remote"]) == 1  # a 1-digit id matches nothing
    assert "at least 4 hex digits" in capsys.readouterr().err


def test_remote_ls_and_show_escape_control_characters(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from tunedsl.cli import main

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    record = sample_record(DIGEST, site="k.py\x1b[2J\x1b]0;owned\x07:3:4")
    assert store_for(server.url).put(record)
    bad_key = record_key("9\x1b[31m")  # an invalid value's key is printed too
    server.client().set(bad_key, b"garbage")
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["cache", "ls", "--remote"]) == 0
    listed = capsys.readouterr()
    assert main(["cache", "show", DIGEST[:8], "--remote"]) == 0
    shown = capsys.readouterr().out
    texts = cache_warnings(caught)
    assert texts and all("\x1b" not in t for t in texts)  # the store's warning too
    for text in (listed.out, listed.err, shown):
        assert "\x1b" not in text and "\x07" not in text
    assert "k.py\\x1b[2J\\x1b]0;owned\\x07:3:4" in listed.out
    assert "k.py\\x1b[2J" in shown
    assert "\\x1b[31m" in listed.err


def test_show_escapes_a_failed_configurations_reason_local_and_remote(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A failed configuration's reason is free text another Redis client, a bundle or a
    shipped record chooses: `cache show` (local and `--remote`) printed it raw, so its escape
    sequences cleared the screen or retitled the terminal."""
    from dataclasses import replace

    from tunedsl.cli import main
    from tunedsl.model.config import Config
    from tunedsl.store.records import ConfigResult, save_record

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / "cache"))
    record = sample_record(DIGEST)
    failed = ConfigResult(Config(tile=512), "failed", reason="\x1b[2J\x1b]0;owned\x07boom")
    record = replace(record, results=(*record.results, failed))
    assert store_for(server.url).put(record)
    assert save_record(record)
    capsys.readouterr()
    for remote in ([], ["--remote"]):
        assert main(["cache", "show", DIGEST[:8], *remote]) == 0
        shown = capsys.readouterr().out
        assert "\x1b" not in shown and "\x07" not in shown, remote
        assert "failed: \\x1b[2J\\x1b]0;owned\\x07boom" in shown, (remote, shown)


# -- values: a length limit, and keys of another type ----------------------------------------


def _sent_bytes(server: RedisServer) -> int:
    return int(server.client().info("stats")["total_net_output_bytes"])


def test_a_value_over_the_record_limit_is_a_miss_never_read_nor_written_through(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A valid record just over the record files' limit: one warning, a miss, never sent
    over the network and never written to a local file (which every later process would
    reject)."""
    big = sample_record(DIGEST, site="s" * MAX_RECORD_BYTES)
    server.client().set(record_key(DIGEST), json.dumps(big.to_json(), indent=1))
    del big
    remote = store_for(server.url)
    assert remote.put(sample_record(OTHER))
    local = FileRecordStore(tmp_path / "node" / "records")
    layered = LayeredStore([local, remote])
    before = _sent_bytes(server)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert layered.get(DIGEST) is None
        assert layered.get(DIGEST) is None
        assert [k for k, r in remote.iter_entries() if r is None] == [record_key(DIGEST)]
    assert _sent_bytes(server) - before < 1024 * 1024  # the value never came over
    texts = cache_warnings(caught)
    assert len(texts) == 1 and "over the limit" in texts[0] and record_key(DIGEST) in texts[0]
    assert not (tmp_path / "node" / "records" / f"{DIGEST}.json").exists()
    assert remote.available() and layered.get(OTHER) == sample_record(OTHER)
    # `cache ls --remote` lists it as invalid (and `clear --all --remote` removes it).
    from tunedsl.cli import main

    monkeypatch.setenv("TUNEDSL_REDIS_URL", server.url)
    capsys.readouterr()
    assert main(["cache", "ls", "--remote"]) == 0
    assert f"invalid: {record_key(DIGEST)}" in capsys.readouterr().err


def test_listing_reads_values_in_bounded_batches(server: RedisServer) -> None:
    """Many values together over the batch size still all come back, each once."""
    import tunedsl.store.redis_store as rs

    remote = store_for(server.url)
    digests = [f"{i:064x}" for i in range(1, 41)]
    for d in digests:
        assert remote.put(sample_record(d, site="x" * 50_000))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rs, "BATCH_BYTES", 300_000)  # about five values a request
        got = [r.digest for r in remote.iter_records()]
    assert got == digests


@pytest.mark.parametrize("kind", ["list", "hash", "set"])
def test_a_key_of_another_type_is_a_miss_not_an_outage(server: RedisServer, kind: str) -> None:
    client = server.client()
    key = record_key(DIGEST)
    {"list": lambda: client.rpush(key, "x"), "hash": lambda: client.hset(key, "a", "b"),
     "set": lambda: client.sadd(key, "x")}[kind]()  # fmt: skip
    remote = store_for(server.url, backoff_s=3600)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert remote.get(DIGEST) is None
        assert remote.get(DIGEST) is None
        assert remote.available()  # Redis answered: not skipped for the back-off
        assert remote.put(sample_record(OTHER)) and remote.get(OTHER) == sample_record(OTHER)
        assert dict(remote.iter_entries())[key] is None
    texts = cache_warnings(caught)
    assert len(texts) == 1, texts
    assert f"holds a {kind}" in texts[0] and key in texts[0] and "unreachable" not in texts[0]


# -- the lock ----------------------------------------------------------------------------------


def test_a_waiter_on_a_redis_lock_says_who_holds_it_and_when_it_gives_up(
    server: RedisServer, capsys
) -> None:
    holder, waiter = store_for(server.url), store_for(server.url)
    with holder.lock(DIGEST, timeout_s=5) as held:
        assert held
        capsys.readouterr()
        with waiter.lock(DIGEST, timeout_s=4) as other:  # first notice after 2 s
            assert other is False
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("tunedsl:")]
    assert any(line.startswith("tunedsl: waiting ") for line in lines), err
    assert lines[-1].startswith("tunedsl: gave up waiting for the tuning lock"), err
    assert f"held by process {os.getpid()} on " in err
    assert f"Redis key tunedsl:v1:lock:{DIGEST}" in err and "expires in" in err


def test_lock_notices_come_after_two_seconds_then_every_thirty() -> None:
    """The cadence the Redis waiter shares with the file lock's (``locks.WaitNotices``),
    driven by moving the start back instead of sleeping."""
    import io
    import time

    from tunedsl.store.locks import WaitNotices

    out = io.StringIO()
    notices = WaitNotices("key abc", "Redis key k", timeout_s=600, out=out)
    assert not notices.due()
    notices.start = time.monotonic() - 2.2
    assert notices.due()
    notices.waiting("process 1 on 'h'")
    assert not notices.due()
    notices.start -= 25
    assert not notices.due()  # 27.2 s: the next notice is at 32.2 s
    notices.start -= 6
    assert notices.due()
    assert out.getvalue().startswith("tunedsl: waiting 2 s for the tuning lock of key abc")
    assert "held by process 1 on 'h' (Redis key k; gives up after 600 s" in out.getvalue()


def test_a_lock_without_an_expiry_is_given_one(server: RedisServer) -> None:
    client = server.client()
    lock_key = f"tunedsl:v1:lock:{DIGEST}"
    client.set(lock_key, "left-by-hand")  # no expiry: would hold the key forever
    waiter = store_for(server.url, lock_ttl_s=1.0)
    with waiter.lock(DIGEST, timeout_s=30) as held:
        assert held  # within about one lock TTL, not after the whole timeout
        value = json.loads(client.get(lock_key))
        assert value["pid"] == os.getpid() and value["token"]
        assert client.pttl(lock_key) > 0  # the lock it holds has an expiry too
    assert client.get(lock_key) is None


# -- credentials in URLs ---------------------------------------------------------------------

URL_FORMS = [
    f"redis://127.0.0.1:{{port}}/0?password={SECRET}",
    f"redis://user:{SECRET}@127.0.0.1:{{port}}/0",
    f"redis://:{SECRET}@127.0.0.1:{{port}}/0",
    f"rediss://:{SECRET}@127.0.0.1:{{port}}/0",
    f"redis://127.0.0.1:{{port}}/0?db=0&username=u&password={SECRET}",
    f"unix:///nonexistent/tunedsl-test.sock?db=0&password={SECRET}",
    f"unix://user:{SECRET}@/nonexistent/tunedsl-test.sock?db=0",
]


@pytest.mark.parametrize("form", URL_FORMS)
def test_credentials_never_appear_in_warnings_errors_or_env(
    form: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from tunedsl.cli import main

    url = form.format(port=free_port())  # nothing listens there
    assert SECRET not in redact_url(url) and "***" in redact_url(url)
    with pytest.warns(CacheWarning, match="unreachable") as caught:
        assert store_for(url, timeout_s=2.0).get(DIGEST) is None
    assert all(SECRET not in str(w.message) for w in caught)
    monkeypatch.setenv("TUNEDSL_REDIS_URL", url)
    capsys.readouterr()
    assert main(["cache", "ls", "--remote"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the Redis record store" in err and SECRET not in err
    for argv in (["env", "--no-device-probe"], ["env", "--no-device-probe", "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "TUNEDSL_REDIS_URL" in out and SECRET not in out, out


def test_a_wrong_password_in_the_query_is_not_printed(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path, password="right-pw")
    try:
        wrong = store_for(f"redis://127.0.0.1:{srv.port}/0?password={SECRET}")
        with pytest.warns(CacheWarning) as caught:
            assert wrong.get(DIGEST) is None
        texts = [str(w.message) for w in caught]
        assert texts and all(SECRET not in t for t in texts) and "password=***" in texts[0]
    finally:
        srv.stop()


@pytest.mark.parametrize("damage", ["over the limit", "a list", "an int of 5000 digits"])
def test_a_site_tunes_past_a_damaged_redis_value(
    server: RedisServer, tmp_path: Path, damage: str
) -> None:
    """End to end through ``autotune_launch``: node a tunes and shares its record; the
    Redis value is then replaced by the same record padded past the record limit (or by a
    list); node b, with its own empty cache, tunes (one warning, no crash), and keeps a
    record file every later process accepts."""
    import subprocess
    import sys

    from test_redis_store import HERE, SITE_SCRIPT

    from tunedsl.store import records

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
    key = record_key(first["digest"])
    client = server.client()
    if damage == "a list":
        client.delete(key)
        client.rpush(key, "x")
    elif damage == "an int of 5000 digits":  # json.loads raises a plain ValueError
        text = client.get(key).decode()
        client.set(
            key, text.replace('"tuning_s": ', '"tuning_s": 1' + "0" * 5000 + ", " + '"x": ', 1)
        )
    else:
        padded = json.loads(client.get(key))
        padded["kernel"]["file"] = "/" + "p" * MAX_RECORD_BYTES  # still a valid record
        client.set(key, json.dumps(padded))
        del padded
    second, err = node("b")
    assert second["source"] == "tuned" and second["digest"] == first["digest"]
    assert err.count("CacheWarning") == 1, err
    assert "over the limit" in err or "holds a list" in err or "4300 digits" in err, err
    assert "unreachable" not in err
    kept = records.load_from(tmp_path / "b" / "records", first["digest"])
    assert kept is not None and len(kept.kernel["file"]) < 4096  # its own, not the padded one


RUN_ONE_SITE = """
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


n = 40
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick", name="redis-url",
                grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
                kwargs=lambda cfg: {"TILE": cfg.tile})
print("tuned")
"""


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:99999/0",
        "redis://127.0.0.1:6379/0?socket_timeout=soon",
        "redis://[::1/0",
        "redis://:s3cret@127.0.0.1:99999/0",
    ],
)
def test_a_redis_url_redis_py_cannot_parse_is_a_usage_error_naming_the_variable(
    tmp_path: Path, url: str
) -> None:
    import subprocess
    import sys

    script = tmp_path / "one_site.py"
    script.write_text(RUN_ONE_SITE)
    env = {**os.environ, "TUNEDSL_REDIS_URL": url, "TUNEDSL_CACHE_DIR": str(tmp_path / "c"),
           "TRITON_INTERPRET": "1"}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script)],
        env=env, capture_output=True, text=True, timeout=180, cwd=str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    # One line, at the site whose miss read the store: "<file>:17:1 (...): TUNEDSL_REDIS_URL=..."
    assert last.startswith(f"tunedsl.errors.UsageError: {script}:"), proc.stderr
    assert "TUNEDSL_REDIS_URL=" in last, last
    assert "is not a valid Redis URL" in last, last
    assert "site-packages/redis" not in proc.stderr and "s3cret" not in proc.stderr, proc.stderr


def test_a_server_of_ones_own_on_a_unix_socket_is_used(tmp_path: Path) -> None:
    """Who runs a server on this host is checked (tests/reliability/test_redis_server_trust.py);
    a server of the user's own passes, here over a unix socket (the others here use TCP)."""
    import shutil
    import subprocess
    import time

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    sock = tmp_path / "r.sock"
    proc = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", str(sock), "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        store = store_for(f"unix://{sock}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert store.put(sample_record(DIGEST))
            got = store.get(DIGEST)
        assert cache_warnings(caught) == []
        assert got is not None and got.digest == DIGEST
    finally:
        proc.terminate()
        proc.wait(10)
