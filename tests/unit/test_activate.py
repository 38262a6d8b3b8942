"""The import hook: DSL modules are expanded through the cache, plain modules stay Python's.

Each scenario runs in a fresh interpreter (the hook changes the import system) over a copy of
``dsl_fixtures`` in a temporary directory.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "dsl_fixtures"

PROBE = """
import json, sys
from tunedsl import bytecode

def report(**extra):
    s = bytecode.stats
    print(json.dumps(dict(hits=s.hits, compiles=s.compiles, writes=s.writes, **extra)))
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    target = tmp_path / "work"
    shutil.copytree(FIXTURES, target, ignore=shutil.ignore_patterns("__pycache__"))
    for dsl in target.glob("*.dslpy"):  # DSL sources are kept out of linters' sight
        dsl.rename(dsl.with_suffix(".py"))
    return target


def run_python(code: str, cwd: Path) -> dict:
    # Python's own pyc writing must be on here: the hook's plain path is the pyc path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE) + textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def pycs(directory: Path, stem: str) -> list[Path]:
    return list((directory / "__pycache__").glob(f"{stem}.*.pyc"))


def test_dsl_module_importing_dsl_module_is_expanded_and_cached(workdir: Path) -> None:
    code = """
        import tunedsl.activate
        import dsl_helper
        report(
            describe=dsl_helper.describe(),
            loader=type(dsl_helper.__loader__).__name__,
            frontend_loaded="tunedsl.frontend.compile" in sys.modules,
        )
    """
    first = run_python(code, workdir)
    assert first["describe"] == "helper+leaf"
    assert first["loader"] == "DslSourceLoader"
    assert (first["compiles"], first["writes"], first["hits"]) == (2, 2, 0)
    # Expanded code never lands in __pycache__: the next run must come from tunedsl's cache.
    assert pycs(workdir, "dsl_helper") == [] and pycs(workdir, "dsl_leaf") == []

    second = run_python(code, workdir)
    assert (second["compiles"], second["hits"]) == (0, 2)
    assert second["describe"] == "helper+leaf"
    assert first["frontend_loaded"] and not second["frontend_loaded"]  # warm: no front end


def test_edit_of_a_dsl_module_is_picked_up(workdir: Path) -> None:
    code = """
        import tunedsl.activate
        import dsl_leaf
        report(name=dsl_leaf.NAME)
    """
    assert run_python(code, workdir)["name"] == "leaf"
    leaf = workdir / "dsl_leaf.py"
    leaf.write_text(leaf.read_text().replace('NAME = "leaf"', 'NAME = "edited"'))
    edited = run_python(code, workdir)
    assert (edited["name"], edited["compiles"]) == ("edited", 1)


def test_plain_module_takes_pythons_pyc_path(workdir: Path) -> None:
    code = """
        import tunedsl.activate
        from tunedsl.activate import DslSourceLoader
        calls = []
        real = DslSourceLoader.source_to_code
        def counting(self, data, path, **kw):
            calls.append(path)
            return real(self, data, path, **kw)
        DslSourceLoader.source_to_code = counting
        import plain_module
        report(
            value=plain_module.VALUE,
            cached=plain_module.__cached__,
            source_to_code=calls,
            frontend_loaded="tunedsl.frontend.compile" in sys.modules,
        )
    """
    first = run_python(code, workdir)
    assert first["value"] == 42
    assert len(first["source_to_code"]) == 1  # no pyc yet: compiled from source once...
    assert Path(first["cached"]).exists()  # ...and written to __pycache__ by Python
    assert first["compiles"] == 0 and not first["frontend_loaded"]

    second = run_python(code, workdir)
    assert second["source_to_code"] == []  # straight from the pyc: source never compiled
    assert not second["frontend_loaded"]  # the front end is not even imported


def test_stale_pyc_of_a_dsl_module_is_not_trusted(workdir: Path) -> None:
    # Plain Python once compiled this DSL module (it has no `$`) and left a valid pyc.
    py_compile.compile(
        str(workdir / "dsl_leaf.py"),
        cfile=importlib.util.cache_from_source(str(workdir / "dsl_leaf.py")),
    )
    assert pycs(workdir, "dsl_leaf")
    result = run_python(
        """
        import tunedsl.activate
        import dsl_leaf
        report(name=dsl_leaf.NAME)
        """,
        workdir,
    )
    assert (result["name"], result["compiles"]) == ("leaf", 1)


def test_install_is_idempotent_and_uninstall_restores(workdir: Path) -> None:
    result = run_python(
        """
        import tunedsl.activate as activate
        activate.install(); activate.install()
        ours = [h for h in sys.path_hooks if getattr(h, "_tunedsl_path_hook", False)]
        activate.uninstall()
        import dsl_leaf
        report(
            ours=len(ours),
            installed=activate.installed(),
            loader=type(dsl_leaf.__loader__).__name__,
        )
        """,
        workdir,
    )
    assert result["ours"] == 1
    assert result["installed"] is False
    assert result["loader"] == "SourceFileLoader"  # after uninstall: Python's own loader
    assert result["compiles"] == 0


def test_tunedsl_itself_is_never_expanded(workdir: Path) -> None:
    result = run_python(
        """
        import tunedsl.activate
        import tunedsl.frontend.compile, tunedsl.runtime.macro
        report()
        """,
        workdir,
    )
    assert result["compiles"] == 0


def test_hook_loader_is_a_source_file_loader() -> None:
    from tunedsl.activate import DslSourceLoader

    assert issubclass(DslSourceLoader, importlib.machinery.SourceFileLoader)


def test_dsl_syntax_error_is_raised_on_import(workdir: Path) -> None:
    result = run_python(
        """
        import tunedsl.activate
        from tunedsl.errors import TunedslSyntaxError
        try:
            import bad_placeholder
        except TunedslSyntaxError as err:
            report(where=[err.filename, err.lineno, err.col], hint=err.hint)
        """,
        workdir,
    )
    assert result["where"] == [str(workdir / "bad_placeholder.py"), 6, 35]
    assert "$tile" in result["hint"]
    assert result["writes"] == 0  # errors are never cached


def test_dsl_module_without_the_hook_fails_as_python_would(workdir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-c", "import dsl_kernels"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "SyntaxError" in result.stderr  # `$tile` is not Python: the hook is what expands


@pytest.mark.skipif(
    importlib.util.find_spec("tunedsl.runtime.dsl") is None,
    reason="tunedsl.runtime.dsl is not built yet",
)
def test_dsl_module_with_sites_imports_and_is_cached(workdir: Path) -> None:
    code = """
        import tunedsl.activate
        import dsl_kernels
        report(
            sites=sorted(n for n in vars(dsl_kernels) if n.startswith("__tunedsl_site_")),
            heavy=[m for m in ("torch", "triton") if m in sys.modules],
        )
    """
    first = run_python(code, workdir)
    assert first["sites"] == ["__tunedsl_site_0__", "__tunedsl_site_1__"]
    assert first["heavy"] == []  # importing a DSL module never imports torch or triton
    assert first["compiles"] == 1
    second = run_python(code, workdir)
    assert (second["compiles"], second["hits"], second["sites"]) == (0, 1, first["sites"])


def test_module_using_the_api_without_the_macro_stays_plain(workdir: Path) -> None:
    code = """
        import tunedsl.activate
        import api_user
        report(
            blocks=api_user.blocks(1000),
            cached=api_user.__cached__,
            frontend_loaded="tunedsl.frontend.compile" in sys.modules,
        )
    """
    for _ in range(2):  # first compiled by Python and written to __pycache__, then its pyc
        result = run_python(code, workdir)
        assert result["blocks"] == 8
        assert (result["compiles"], result["hits"]) == (0, 0)
        assert not result["frontend_loaded"]
        assert Path(result["cached"]).exists()


def test_dsl_module_found_by_a_later_meta_path_finder(workdir: Path, tmp_path: Path) -> None:
    # setuptools' editable installs map top-level names to files with a meta path finder
    # placed after PathFinder; such a DSL module must be expanded too.
    elsewhere = tmp_path / "not_on_sys_path"
    elsewhere.mkdir()
    shutil.move(str(workdir / "dsl_kernels.py"), elsewhere / "mapped_kernels.py")
    result = run_python(
        f"""
        import importlib.util
        class MappingFinder:  # like setuptools' _EditableFinder
            @classmethod
            def find_spec(cls, fullname, path=None, target=None):
                if fullname == "mapped_kernels":
                    origin = {str(elsewhere / "mapped_kernels.py")!r}
                    return importlib.util.spec_from_file_location(fullname, origin)
                return None
        sys.meta_path.append(MappingFinder)
        import tunedsl.activate
        import mapped_kernels
        report(sites=sorted(n for n in vars(mapped_kernels) if n.startswith("__tunedsl_site")))
        """,
        workdir,
    )
    assert result["compiles"] == 1  # expanded (plain Python would stop at `$tile`)
    assert result["sites"] == ["__tunedsl_site_0__", "__tunedsl_site_1__"]


def test_install_keeps_existing_finders_and_their_directory_cache(workdir: Path) -> None:
    # Rebuilding finders re-lists every sys.path directory (costly for the stdlib's); the
    # hook swaps the .py loader of the finders Python already made instead.
    result = run_python(
        """
        import importlib.machinery, os
        import plain_module  # makes and caches the finder of this directory
        here = [p for p, f in sys.path_importer_cache.items()
                if isinstance(f, importlib.machinery.FileFinder) and f.path in ("", ".", os.getcwd())]
        finder = sys.path_importer_cache[here[0]]
        import tunedsl.activate as activate
        same = sys.path_importer_cache.get(here[0]) is finder
        during = [loader.__name__ for _, loader in finder._loaders]
        import dsl_leaf
        activate.uninstall()
        after = [loader.__name__ for _, loader in finder._loaders]
        report(same=same, during=during, after=after,
               dsl_loader=type(dsl_leaf.__loader__).__name__)
        """,
        workdir,
    )
    assert result["same"] is True
    assert "DslSourceLoader" in result["during"]
    assert result["dsl_loader"] == "DslSourceLoader"
    assert "DslSourceLoader" not in result["after"] and "SourceFileLoader" in result["after"]


SITE_MODULE = """
from tunedsl import autotune, cdiv

def add(a, n):
    return autotune(space=dict(t=[1, 2]), blocks=cdiv(n, $t), k(a, T=$t))

NAME = "{name}"
"""
SITES_FILES = """
        import tunedsl.activate
        import {a}, {b}
        report(
            names=[{a}.NAME, {b}.NAME],
            files=[{a}.add.__code__.co_filename, {b}.add.__code__.co_filename],
            sites=[{a}.__tunedsl_site_0__.filename, {b}.__tunedsl_site_0__.filename],
        )
"""


def test_equal_text_in_two_files_gets_each_files_code(workdir: Path) -> None:
    # The expansion bakes the file into the code (tracebacks, the site's records): the same
    # text at another path is another entry, on a cold and on a warm cache.
    for name in ("twin_a", "twin_b"):
        (workdir / f"{name}.py").write_text(SITE_MODULE.format(name="same"))
    files = [str(workdir / "twin_a.py"), str(workdir / "twin_b.py")]
    for run, counts in ((1, (2, 0)), (2, (0, 2))):
        result = run_python(SITES_FILES.format(a="twin_a", b="twin_b"), workdir)
        assert (result["compiles"], result["hits"]) == counts, run
        assert result["files"] == files and result["sites"] == files


def test_an_edit_keeping_size_and_mtime_is_picked_up(workdir: Path) -> None:
    # Python's pyc would be trusted on size and mtime (to the second); the expanded code is
    # found by the source's content.
    module = workdir / "kept.py"
    module.write_text(SITE_MODULE.format(name="old"))
    os.utime(module, (1_700_000_000, 1_700_000_000))
    code = SITES_FILES.format(a="kept", b="kept")
    assert run_python(code, workdir)["names"] == ["old", "old"]
    module.write_text(SITE_MODULE.format(name="new"))  # same size
    os.utime(module, (1_700_000_000, 1_700_000_000))
    result = run_python(code, workdir)
    assert (result["names"], result["compiles"]) == (["new", "new"], 1)


def test_a_module_changed_while_it_is_imported_is_cached_under_what_ran(workdir: Path) -> None:
    # The module rewrites its own file while it runs (an editor saving mid-import): the code
    # run and the entry stored are those of the bytes read; the next import runs the edit.
    module = workdir / "moving.py"
    module.write_text(
        SITE_MODULE.format(name="old")
        + "import pathlib\n_p = pathlib.Path(__file__)\n"
        + "_p.write_text(_p.read_text().replace('NAME = \"old\"', 'NAME = \"new\"'))\n"
    )
    code = SITES_FILES.format(a="moving", b="moving")
    first = run_python(code, workdir)
    assert (first["names"], first["compiles"]) == (["old", "old"], 1)
    second = run_python(code, workdir)
    assert (second["names"], second["compiles"], second["hits"]) == (["new", "new"], 1, 0)
    third = run_python(code, workdir)
    assert (third["names"], third["compiles"], third["hits"]) == (["new", "new"], 0, 1)


def test_a_module_loaded_by_its_path_with_the_dsl_loader_is_expanded(workdir: Path) -> None:
    # docs/running.md: spec_from_file_location picks Python's own loader, hooks or not;
    # given tunedsl's, the module is expanded through the cache.
    (workdir / "by_path.py").write_text(SITE_MODULE.format(name="by path"))
    code = f"""
        import importlib.util
        from tunedsl.activate import DslSourceLoader
        path = {str(workdir / "by_path.py")!r}
        spec = importlib.util.spec_from_file_location(
            "by_path", path, loader=DslSourceLoader("by_path", path)
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        report(name=module.NAME, site=module.__tunedsl_site_0__.filename)
    """
    result = run_python(code, workdir)
    assert (result["name"], result["site"]) == ("by path", str(workdir / "by_path.py"))
    assert result["compiles"] == 1


def test_a_plain_module_rewritten_as_dsl_keeping_size_and_mtime_is_expanded(
    workdir: Path,
) -> None:
    # Imported plain through the hook, the module leaves Python's pyc, trusted on size and
    # mtime (to the second); rewritten as a DSL module of the same size in that second, the
    # pyc would run the plain code, which never names tunedsl.
    module = workdir / "became_dsl.py"
    dsl = SITE_MODULE.format(name="dsl")
    plain = 'NAME = "plain"\n'
    module.write_text(plain + "#" * (len(dsl) - len(plain) - 1) + "\n")
    size = module.stat().st_size
    os.utime(module, (1_700_000_000, 1_700_000_000))
    first = run_python("import tunedsl.activate, became_dsl\nreport(name=became_dsl.NAME)", workdir)
    assert first["name"] == "plain" and pycs(workdir, "became_dsl")
    module.write_text(dsl)
    assert module.stat().st_size == size
    os.utime(module, (1_700_000_000, 1_700_000_000))
    result = run_python(SITES_FILES.format(a="became_dsl", b="became_dsl"), workdir)
    assert (result["names"], result["compiles"]) == (["dsl", "dsl"], 1)
    assert result["sites"] == [str(module), str(module)]
