"""The Redis record store against servers that are not what the URL promises: one that another
local user (a real second user, uid 65534) listens with on the socket path or port the URL
names, which must be sent nothing, the password included; and servers of one's own that answer
with replies no Redis sends, trickle a reply a byte at a time, or put terminal escapes in an
error. Each is a miss with one warning, never a crash, a stall or a record used. The servers
are real processes speaking on real sockets (the system Python, the standard library only)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import swap_attack

from tunedsl import warn
from tunedsl.errors import CacheWarning

pytest.importorskip("redis", reason="needs the redis client: pip install 'tunedsl[redis]'")

from tunedsl.store.redis_store import RedisRecordStore, RedisSettings

SECRET = "fleet-secret-7f3a"
DIGEST = "cd" * 32

# A server speaking just enough RESP: it logs what each connection sends (as repr, one chunk a
# line, "connected" first) and answers every command with the reply MODE names.
FAKE_SERVER = r"""
import os, socket, sys, threading, time
where, log, mode = sys.argv[1:4]
REPLIES = {
    "ok": b"+OK\r\n",
    "int": b":5\r\n",
    "empty_type": b"*1\r\n*0\r\n",
    "empty": b"*0\r\n",
    "nested": b"*1\r\n" * 100000 + b":1\r\n",
    "escapes": b"-ERR \x1b]0;owned\x07\x1b[2Jred\r\n",
}
KEY = b"tunedsl:v1:record:" + b"cd" * 32
SCAN = b"*2\r\n$1\r\n0\r\n*1\r\n$%d\r\n%s\r\n" % (len(KEY), KEY)
def serve(conn):
    with open(log, "a") as f:
        f.write("connected\n")
    while True:
        data = conn.recv(65536)
        if not data:
            return
        with open(log, "a") as f:
            f.write(repr(data) + "\n")
        if b"HELLO" in data:  # "hello_ok": a handshake answered as no server does
            conn.sendall(b"+OK\r\n" if mode == "hello_ok" else b"%1\r\n+proto\r\n:3\r\n")
        elif b"SCAN" in data:  # one record key, whose read is then answered with `mode`
            conn.sendall(SCAN)
        elif mode == "drip":  # a reply that never ends, a byte each 0.2 s
            conn.sendall(b"$100000\r\n")
            for _ in range(600):
                conn.sendall(b"x")
                time.sleep(0.2)
        else:
            conn.sendall(REPLIES.get(mode, b"+OK\r\n"))
if where.startswith("/"):
    s = socket.socket(socket.AF_UNIX)
    s.bind(where)
    os.chmod(where, 0o777)
else:
    s = socket.socket()
    s.bind(("127.0.0.1", int(where)))
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    warn.forget()
    yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory under /tmp both users can use (as /tmp itself is)."""
    with swap_attack.shared_tmp() as path:
        yield path


def _start(where: str, log: Path, mode: str, as_other: bool) -> subprocess.Popen[str]:
    if as_other:
        proc = swap_attack.as_attacker(FAKE_SERVER, where, str(log), mode)
    else:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", FAKE_SERVER, where, str(log), mode],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "listening", proc.stderr.read() if proc.stderr else line
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate(timeout=30)


def _store(url: str) -> RedisRecordStore:
    return RedisRecordStore(RedisSettings(url=url))


def _warnings_of(call: object) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()  # type: ignore[operator]
    return result, [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def _logged(log: Path) -> list[str]:
    deadline = time.monotonic() + 10
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("over", ["unix", "tcp"])
def test_a_server_another_user_listens_with_is_sent_nothing_not_even_the_password(
    shared_dir: Path, over: str
) -> None:
    swap_attack.need_second_user()
    log = shared_dir / "log"
    if over == "unix":
        where = str(shared_dir / "redis.sock")
        url = f"unix://:{SECRET}@{where}"
    else:
        where = str(_free_port())
        url = f"redis://:{SECRET}@127.0.0.1:{where}/0"
    server = _start(where, log, "ok", as_other=True)
    try:
        store = _store(url)
        got, said = _warnings_of(lambda: store.get(DIGEST))
        assert got is None
        assert len(said) == 1 and "run by nobody (uid 65534)" in said[0], said
        assert "not used" in said[0] and SECRET not in said[0], said
        # The connection was made (the check is on the connected socket) and nothing went
        # over it: no AUTH, no HELLO, no request.
        lines = _logged(log)
        assert lines[:1] == ["connected"], lines
        assert lines[1:] == [], lines
        from tunedsl.errors import UsageError

        with pytest.raises(UsageError, match=r"run by nobody \(uid 65534\)"):
            store.check()
        assert all("HELLO" not in x and "AUTH" not in x for x in _logged(log)), _logged(log)
    finally:
        _stop(server)


@pytest.mark.parametrize("mode", ["int", "empty_type", "empty", "nested", "hello_ok"])
def test_a_reply_no_redis_sends_is_a_miss_with_one_warning(shared_dir: Path, mode: str) -> None:
    sock = str(shared_dir / "own.sock")
    server = _start(sock, shared_dir / "log", mode, as_other=False)
    try:
        store = _store(f"unix://{sock}")
        got, said = _warnings_of(lambda: store.get(DIGEST))
        assert got is None
        assert len(said) == 1 and "not a Redis reply" in said[0], said
        warn.forget()  # a warning is given once per server and process
        listed, said = _warnings_of(lambda: list(_store(f"unix://{sock}").iter_entries()))
        assert listed == [] and len(said) == 1, said
    finally:
        _stop(server)


def test_a_reply_trickling_in_a_byte_at_a_time_gives_up_within_its_deadline(
    shared_dir: Path,
) -> None:
    sock = str(shared_dir / "drip.sock")
    server = _start(sock, shared_dir / "log", "drip", as_other=False)
    try:
        store = _store(f"unix://{sock}")
        start = time.monotonic()
        got, said = _warnings_of(lambda: store.get(DIGEST))
        waited = time.monotonic() - start
        # Each byte comes within the 0.5 s reply timeout; the reply would take 120 s.
        assert got is None and len(said) == 1, said
        assert waited < 60, waited
        assert not store.available()  # backing off: the next launch does not wait again
    finally:
        _stop(server)


def test_terminal_escapes_in_a_server_error_are_shown_escaped(shared_dir: Path) -> None:
    sock = str(shared_dir / "esc.sock")
    server = _start(sock, shared_dir / "log", "escapes", as_other=False)
    try:
        got, said = _warnings_of(lambda: _store(f"unix://{sock}").get(DIGEST))
        assert got is None and len(said) == 1, said
        assert "\x1b" not in said[0] and "\x07" not in said[0], said
        assert "\\u001b]0;owned" in said[0], said
    finally:
        _stop(server)


def test_a_reply_trickling_over_tls_gives_up_within_its_deadline_too(shared_dir: Path) -> None:
    """``rediss://`` (a server of one's own, its certificate checked) is held to the same
    deadline for a whole reply as ``redis://``: it waited as long as the server trickled."""
    import shutil
    import ssl
    import threading

    if shutil.which("openssl") is None:
        pytest.skip("needs openssl to make a certificate")
    crt, key = shared_dir / "c.pem", shared_dir / "k.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(crt), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(crt, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with context.wrap_socket(conn, server_side=True) as tls:
            while not stop.is_set():
                data = tls.recv(65536)
                if not data:
                    return
                if b"HELLO" in data:
                    tls.sendall(b"%1\r\n+proto\r\n:3\r\n")
                    continue
                tls.sendall(b"*1\r\n$600\r\n")
                for _ in range(600):  # a byte each 0.2 s: 120 s for the reply
                    if stop.is_set():
                        return
                    tls.sendall(b"x")
                    time.sleep(0.2)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        port = listener.getsockname()[1]
        store = _store(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={crt}")
        start = time.monotonic()
        got, said = _warnings_of(lambda: store.get(DIGEST))
        assert got is None and len(said) == 1, said
        assert time.monotonic() - start < 60
    finally:
        stop.set()
        listener.close()
