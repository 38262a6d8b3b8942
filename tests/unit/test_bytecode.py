"""The content-addressed bytecode cache: hits, misses, bad entries, unsafe dirs, concurrency."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from tunedsl import bytecode
from tunedsl.errors import CacheWarning
from tunedsl.store import paths

SOURCE = b"""\
from tunedsl import autotune, cdiv

def blocks_for(n):
    return cdiv(n, 256)

RESULT = blocks_for(1000)
"""


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch: pytest.MonkeyPatch):
    # PYTHONDONTWRITEBYTECODE (set in some CI and dev shells) would turn cache writes off.
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    bytecode.reset()
    yield
    bytecode.reset()


@pytest.fixture
def compile_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every call of the front end's compile_source (the expensive expansion)."""
    import tunedsl.frontend.compile as frontend

    calls: list[str] = []
    real = frontend.compile_source

    def counting(source, filename="<string>", *, optimize=-1):
        calls.append(filename)
        return real(source, filename, optimize=optimize)

    monkeypatch.setattr(frontend, "compile_source", counting)
    return calls


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.py"
    path.write_bytes(SOURCE)
    return path


def run_code(code) -> dict:
    namespace: dict = {"__name__": "cached_module"}
    exec(code, namespace)
    return namespace


def only_entry() -> Path:
    entries = list(bytecode.iter_entries())
    assert len(entries) == 1, entries
    return entries[0]


def load_expecting_warnings(script: Path, count: int, match: str = "") -> object:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = bytecode.load_or_compile(script.read_bytes(), str(script))
    cache_warnings = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert len(cache_warnings) == count, [str(w.message) for w in cache_warnings]
    # At the module being cached, never at a line of tunedsl's own bytecode.py.
    assert all((w.filename, w.lineno) == (str(script), 1) for w in cache_warnings)
    if count:
        assert match in str(cache_warnings[0].message)
    return code


def test_second_load_is_a_hit_without_expanding(script: Path, compile_calls: list[str]) -> None:
    first = bytecode.load_or_compile(script.read_bytes(), str(script))
    assert compile_calls == [str(script)]
    assert (bytecode.stats.misses, bytecode.stats.writes) == (1, 1)

    second = bytecode.load_or_compile(script.read_bytes(), str(script))
    assert compile_calls == [str(script)]  # no second expansion
    assert bytecode.stats.hits == 1
    assert run_code(second)["RESULT"] == run_code(first)["RESULT"] == 4


def test_code_carries_the_real_absolute_path(script: Path, monkeypatch) -> None:
    monkeypatch.chdir(script.parent)
    bytecode.load_or_compile(script.read_bytes(), "kernels.py")
    code = bytecode.load_or_compile(script.read_bytes(), "kernels.py")  # from the cache
    assert bytecode.stats.hits == 1
    assert code.co_filename == str(script)
    nested = [c for c in code.co_consts if hasattr(c, "co_filename")]
    assert nested and all(c.co_filename == str(script) for c in nested)


def test_an_edit_is_a_miss(script: Path, compile_calls: list[str]) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    edited = SOURCE.replace(b"cdiv(n, 256)", b"cdiv(n, 128)")
    script.write_bytes(edited)
    code = bytecode.load_or_compile(edited, str(script))
    assert len(compile_calls) == 2
    assert run_code(code)["RESULT"] == 8
    assert len(list(bytecode.iter_entries())) == 2


def test_content_not_mtime_decides(script: Path, compile_calls: list[str]) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    os.utime(script, (1, 1))  # an old mtime, same bytes: still a hit
    bytecode.load_or_compile(script.read_bytes(), str(script))
    assert len(compile_calls) == 1


def test_key_covers_path_optimize_and_source(tmp_path: Path) -> None:
    key = bytecode.cache_key(SOURCE, "/a/kernels.py")
    assert key == bytecode.cache_key(SOURCE, "/a/kernels.py")
    assert key != bytecode.cache_key(SOURCE, "/b/kernels.py")
    assert key != bytecode.cache_key(SOURCE + b"\n", "/a/kernels.py")
    assert bytecode.cache_key(SOURCE, "/a/k.py", optimize=2) != bytecode.cache_key(
        SOURCE, "/a/k.py", optimize=0
    )


def test_same_text_at_two_paths_gives_two_entries(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    for path in (a, b):
        path.write_bytes(SOURCE)
    code_a = bytecode.load_or_compile(SOURCE, str(a))
    code_b = bytecode.load_or_compile(SOURCE, str(b))
    assert (code_a.co_filename, code_b.co_filename) == (str(a), str(b))
    assert len(list(bytecode.iter_entries())) == 2


def test_directory_is_created_private(script: Path) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    mode = stat.S_IMODE(os.stat(paths.bytecode_dir()).st_mode)
    assert mode & 0o077 == 0, oct(mode)
    assert paths.is_private_dir(paths.bytecode_dir())


def _corrupt_empty(data: bytes) -> bytes:
    return b""


def _corrupt_truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _corrupt_header_only(data: bytes) -> bytes:
    return data[: bytecode.HEADER_SIZE]


def _corrupt_random(data: bytes) -> bytes:
    return os.urandom(len(data))


def _corrupt_flipped_payload_byte(data: bytes) -> bytes:
    index = bytecode.HEADER_SIZE + (len(data) - bytecode.HEADER_SIZE) // 2
    return data[:index] + bytes([data[index] ^ 0xFF]) + data[index + 1 :]


def _corrupt_other_python(data: bytes) -> bytes:
    other_magic = (int.from_bytes(importlib.util.MAGIC_NUMBER[:2], "little") - 10).to_bytes(
        2, "little"
    ) + b"\r\n"
    return data[:8] + other_magic + data[12:]


@pytest.mark.parametrize(
    ("corrupt", "reason"),
    [
        (_corrupt_empty, "truncated"),
        (_corrupt_truncated, "payload digest"),
        (_corrupt_header_only, "payload digest"),
        (_corrupt_random, "format tag"),
        (_corrupt_flipped_payload_byte, "payload digest"),
        (_corrupt_other_python, "another Python"),
    ],
)
def test_bad_entry_is_a_miss_with_one_warning_and_is_rebuilt(
    script: Path, compile_calls: list[str], corrupt, reason: str
) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    entry = only_entry()
    entry.write_bytes(corrupt(entry.read_bytes()))

    code = load_expecting_warnings(script, 1, reason)
    assert run_code(code)["RESULT"] == 4
    assert len(compile_calls) == 2
    assert bytecode.stats.rejected == 1

    load_expecting_warnings(script, 0)  # rebuilt: a clean hit now
    assert len(compile_calls) == 2


def test_entry_stored_under_another_key_is_rejected(tmp_path: Path, script: Path) -> None:
    other = tmp_path / "other.py"
    other.write_bytes(b"from tunedsl import autotune\nRESULT = 'other'\n")
    bytecode.load_or_compile(other.read_bytes(), str(other))
    foreign = only_entry().read_bytes()
    key = bytecode.cache_key(script.read_bytes(), str(script))
    bytecode.entry_path(key).write_bytes(foreign)  # a valid entry, for another source

    code = load_expecting_warnings(script, 1, "wrong key")
    assert run_code(code)["RESULT"] == 4


def test_entry_writable_by_others_is_never_loaded(script: Path, compile_calls) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    os.chmod(only_entry(), 0o666)
    load_expecting_warnings(script, 1, "writable by group or others")
    assert len(compile_calls) == 2
    assert stat.S_IMODE(os.stat(only_entry()).st_mode) & 0o022 == 0  # replaced by a safe one


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
def test_entry_owned_by_another_user_is_never_loaded(script: Path, compile_calls) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    os.chown(only_entry(), 4242, 4242)
    load_expecting_warnings(script, 1, "owned by another user")
    assert len(compile_calls) == 2


def test_symlinked_entry_is_never_loaded(tmp_path: Path, script: Path) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    entry = only_entry()
    elsewhere = tmp_path / "elsewhere.tbc"
    os.replace(entry, elsewhere)
    os.symlink(elsewhere, entry)
    load_expecting_warnings(script, 1, "symbolic link")


def test_directory_writable_by_others_is_not_used(script: Path, compile_calls) -> None:
    directory = paths.ensure_private_dir(paths.bytecode_dir())
    os.chmod(directory, 0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = bytecode.load_or_compile(script.read_bytes(), str(script))
    [warning] = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert "not private" in str(warning.message)
    assert (warning.filename, warning.lineno) == (str(script), 1)  # not tunedsl's own line
    assert run_code(code)["RESULT"] == 4
    assert list(bytecode.iter_entries()) == []  # nothing written into it either
    load_expecting_warnings(script, 0)  # warned once per process
    assert len(compile_calls) == 2


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
def test_directory_owned_by_another_user_is_not_used(script: Path, compile_calls) -> None:
    bytecode.load_or_compile(script.read_bytes(), str(script))
    os.chown(paths.bytecode_dir(), 4242, 4242)
    load_expecting_warnings(script, 1, "not private")
    assert len(compile_calls) == 2


def test_knob_turns_writing_off(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDSL_SAFE", "bytecode")
    load_expecting_warnings(script, 0)
    load_expecting_warnings(script, 0)
    assert list(bytecode.iter_entries()) == []
    assert bytecode.stats.compiles == 2


def test_dont_write_bytecode_turns_writing_off(script: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    load_expecting_warnings(script, 0)
    assert list(bytecode.iter_entries()) == []


def test_unwritable_cache_runs_without_it_and_warns_once(
    tmp_path: Path, script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(blocker))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = bytecode.load_or_compile(script.read_bytes(), str(script))
    [warning] = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert "cannot write to the bytecode cache" in str(warning.message)
    # At the module being cached: it named a line of tunedsl's own bytecode.py.
    assert (warning.filename, warning.lineno) == (str(script), 1)
    assert run_code(code)["RESULT"] == 4
    load_expecting_warnings(script, 0)
    assert not bytecode.writing_enabled()


def test_read_only_directory_runs_without_cache(script: Path) -> None:
    directory = paths.ensure_private_dir(paths.bytecode_dir())
    os.chmod(directory, 0o500)
    try:
        if os.access(directory, os.W_OK):
            pytest.skip("this user (root) can write to read-only directories")
        code = load_expecting_warnings(script, 1, "cannot write to the bytecode cache")
        assert run_code(code)["RESULT"] == 4
        load_expecting_warnings(script, 0)
    finally:
        os.chmod(directory, 0o700)


def _python(code: str, **kwargs) -> subprocess.CompletedProcess:
    # -B: these processes must not write Python's own pycs (see the resource-limit test).
    return subprocess.run(
        [sys.executable, "-B", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX resource limits")
def test_full_disk_runs_without_cache_and_warns_once(script: Path, tmp_path: Path) -> None:
    # A file-size limit makes the write fail with EFBIG, as a full disk fails with ENOSPC.
    # Python itself would write truncated pycs of lazily imported modules under that limit:
    # send them to a throw-away prefix so the source tree's __pycache__ stays sound.
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    result = _python(
        env=env,
        code=f"""
        import resource, signal, sys, warnings
        from tunedsl import bytecode
        import tunedsl.frontend.compile
        sys.dont_write_bytecode = False  # -B kept Python's pycs out; tunedsl's cache writes
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
        path = {str(script)!r}
        source = open(path, "rb").read()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                ns = {{}}
                exec(bytecode.load_or_compile(source, path), ns)
                assert ns["RESULT"] == 4
        print(len(caught), bytecode.stats.compiles, bytecode.stats.writes)
        print(caught[0].message)
        """,
    )
    assert result.returncode == 0, result.stderr
    counts, message = result.stdout.splitlines()[:2]
    assert counts == "1 3 0"
    assert "cannot write to the bytecode cache" in message
    assert list(bytecode.iter_entries()) == []


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path: Path) -> None:
    # Four processes rewrite and read one big entry as fast as they can; a reader that saw a
    # half-written file would get a CacheWarning, turned into an error here.
    big = tmp_path / "big.py"
    lines = ["from tunedsl import autotune"]
    lines += [f"def f{i}(x):\n    return x + {i}\n" for i in range(500)]
    lines.append("RESULT = f499(1)")
    big.write_text("\n".join(lines))
    go = tmp_path / "go"
    worker = f"""
        import os, sys, time, warnings
        from tunedsl import bytecode
        from tunedsl.errors import CacheWarning
        sys.dont_write_bytecode = False
        warnings.simplefilter("error", CacheWarning)
        path = {str(big)!r}
        source = open(path, "rb").read()
        code = bytecode.load_or_compile(source, path)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.001)
        hits = 0
        for _ in range(150):
            bytecode.store(source, path, code)
            loaded = bytecode.lookup(source, path)
            if loaded is not None:
                hits += 1
                ns = {{}}
                exec(loaded, ns)
                assert ns["RESULT"] == 500
        print("ok", bytecode.stats.writes, hits)
        """
    procs = [
        subprocess.Popen(
            [sys.executable, "-B", "-c", textwrap.dedent(worker)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    go.write_text("go")
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        status, writes, hits = out.split()
        assert status == "ok" and int(writes) >= 150 and int(hits) == 150
    assert len(list(bytecode.iter_entries())) == 1
    assert not [p for p in paths.bytecode_dir().iterdir() if p.name.startswith(".tmp-")]


def test_warm_reports_compiled_then_cached(script: Path, compile_calls) -> None:
    assert bytecode.warm(script) == "compiled"
    assert bytecode.warm(script) == "cached"
    assert len(compile_calls) == 1


def test_warm_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        bytecode.warm(tmp_path / "missing.py")


def test_clear_removes_every_entry(script: Path) -> None:
    bytecode.warm(script)
    assert bytecode.clear() == 1
    assert list(bytecode.iter_entries()) == []
    assert bytecode.warm(script) == "compiled"


def _writer_temporary(directory: Path, age_s: float = 0.0) -> Path:
    """A temporary file exactly as a writer creates it, left as a killed writer leaves it."""
    import tempfile
    import time

    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        prefix=bytecode.TEMP_PREFIX, suffix=bytecode.ENTRY_SUFFIX, dir=directory
    )
    os.write(fd, b"TDSLBC half an entry")
    os.close(fd)
    if age_s:
        then = time.time() - age_s
        os.utime(name, (then, then))
    return Path(name)


def test_clear_removes_temporaries_of_killed_writers(script: Path) -> None:
    bytecode.warm(script)
    directory = paths.bytecode_dir()
    fresh, old = _writer_temporary(directory), _writer_temporary(directory, age_s=7200)
    others = [directory / "notes.txt", directory / ".tmp-not-ours.json"]
    for other in others:
        other.write_text("not the cache's")
    assert bytecode.clear() == 1  # entries counted, temporaries removed besides
    assert not fresh.exists() and not old.exists()
    assert all(other.exists() for other in others)
    assert list(bytecode.iter_entries()) == []


def test_first_write_of_a_process_removes_only_stale_temporaries(
    script: Path, tmp_path: Path
) -> None:
    directory = paths.bytecode_dir()
    stale = _writer_temporary(directory, age_s=bytecode.STALE_TEMP_AGE_S + 60)
    recent = _writer_temporary(directory, age_s=60)  # maybe a live writer: left alone
    other = directory / ".tmp-not-ours.json"
    other.write_text("{}")
    then = os.stat(stale).st_mtime
    os.utime(other, (then, then))
    assert bytecode.warm(script) == "compiled"  # the write sweeps the directory once
    assert not stale.exists()
    assert recent.exists() and other.exists()
    assert len(list(bytecode.iter_entries())) == 1  # temporaries are never listed as entries
    # Once per process: a later stale file waits for the next process (or clear()).
    later = _writer_temporary(directory, age_s=bytecode.STALE_TEMP_AGE_S + 60)
    second = tmp_path / "second.py"
    second.write_bytes(SOURCE + b"\nDIFFERENT = 1\n")
    assert bytecode.warm(second) == "compiled"
    assert later.exists()
    assert bytecode.remove_stale_temporaries() == 1
    assert not later.exists() and recent.exists()


def test_clear_during_a_write_skips_that_entry_and_keeps_the_cache_writable(
    script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace = os.replace

    def clear_then_replace(src: str, dst: str, **dir_fds: int) -> None:
        bytecode.clear()  # another process clears the cache between write and rename
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(os, "replace", clear_then_replace)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert bytecode.warm(script) == "compiled"
    monkeypatch.setattr(os, "replace", real_replace)
    assert list(bytecode.iter_entries()) == []
    assert not [p for p in paths.bytecode_dir().iterdir() if p.name.startswith(".tmp-")]
    assert bytecode.writing_enabled()
    assert bytecode.warm(script) == "compiled"  # the next write goes through
    assert bytecode.warm(script) == "cached"


def test_coding_cookie_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nfrom tunedsl import autotune\nRESULT = '\xe9'\n")
    code = bytecode.load_or_compile(path.read_bytes(), str(path))
    assert run_code(code)["RESULT"] == "\u00e9"


DSL = (Path(__file__).parent / "dsl_fixtures" / "dsl_kernels.dslpy").read_bytes()
BAD_DSL = (Path(__file__).parent / "dsl_fixtures" / "bad_placeholder.dslpy").read_bytes()


def test_dsl_source_is_expanded_then_served_from_cache(tmp_path: Path, compile_calls) -> None:
    path = tmp_path / "dsl_kernels.py"
    path.write_bytes(DSL)
    code = bytecode.load_or_compile(DSL, str(path))
    assert "__tunedsl_rt__" in code.co_names  # the expansion's prologue, not the raw text
    again = bytecode.load_or_compile(DSL, str(path))
    assert len(compile_calls) == 1 and bytecode.stats.hits == 1
    assert again.co_names == code.co_names
    functions = {c.co_name: c for c in again.co_consts if hasattr(c, "co_name")}
    assert functions["add"].co_filename == str(path)
    assert functions["add"].co_firstlineno == 10  # line numbers are the user's


def test_dsl_syntax_error_is_raised_and_never_cached(tmp_path: Path) -> None:
    from tunedsl.errors import TunedslSyntaxError

    path = tmp_path / "bad.py"
    path.write_bytes(BAD_DSL)
    for _ in range(2):
        with pytest.raises(TunedslSyntaxError) as info:
            bytecode.load_or_compile(BAD_DSL, str(path))
        assert (info.value.filename, info.value.lineno) == (str(path), 6)
    assert list(bytecode.iter_entries()) == []


def test_undecodable_source_is_a_syntax_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"from tunedsl import autotune\n\nNAME = 'caf\xe9'\n")  # not UTF-8
    with pytest.raises(SyntaxError) as info:
        bytecode.load_or_compile(path.read_bytes(), str(path))
    assert (info.value.filename, info.value.lineno) == (str(path), 3)
    assert list(bytecode.iter_entries()) == []


def _tunedsl_imports(path: Path, package: Path) -> set[Path]:
    """Files of the tunedsl modules ``path`` imports (at top level or inside functions)."""
    import ast

    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name == "tunedsl" or not name.startswith("tunedsl."):
                continue
            base = package.parent.joinpath(*name.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def test_digest_covers_every_module_the_expansion_imports() -> None:
    package = Path(bytecode.__file__).resolve().parent
    todo = sorted((package / "frontend").glob("*.py"))
    closure: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in closure:
            continue
        closure.add(path)
        todo.extend(_tunedsl_imports(path, package) - closure)
    covered = {Path(p).resolve() for p in bytecode.digest_files()}
    # tunedsl/__init__.py and runtime/__init__.py are packages' entry points, not expansion.
    missing = {
        p for p in closure - covered if p.name != "__init__.py" or p.parent.name == "frontend"
    }
    assert package / "model" / "options.py" in closure
    assert missing == set(), "add these to bytecode.EXPANSION_MODULES"


def test_an_edit_of_runtime_options_changes_the_key(monkeypatch) -> None:
    options = Path(bytecode.__file__).resolve().parent / "model" / "options.py"
    before = os.stat(options)
    monkeypatch.setattr(bytecode, "_frontend_fingerprint", None)
    key = bytecode.cache_key(SOURCE, "/a/kernels.py")
    try:  # an editable install's edit: the file's modification time moves
        os.utime(options, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        monkeypatch.setattr(bytecode, "_frontend_fingerprint", None)
        assert bytecode.cache_key(SOURCE, "/a/kernels.py") != key
    finally:
        os.utime(options, ns=(before.st_atime_ns, before.st_mtime_ns))
    monkeypatch.setattr(bytecode, "_frontend_fingerprint", None)
    assert bytecode.cache_key(SOURCE, "/a/kernels.py") == key
