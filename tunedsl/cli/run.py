"""``tunedsl run SCRIPT [ARGS...]``: run a DSL script the way ``python SCRIPT`` runs Python.

The script becomes ``__main__`` (``sys.argv == [SCRIPT, *ARGS]``, ``sys.path[0]`` is its
directory, ``__file__`` its absolute path), its expanded code comes from the bytecode cache,
and the import hook is installed so it can import DSL modules. Exit status follows Python:
0, the ``sys.exit`` value, 1 for an uncaught exception (traceback without tunedsl's frames)
or a DSL syntax error (rendered, no traceback), 130 for Ctrl-C, 2 when the script is missing.
Children started with ``spawn`` or ``forkserver`` install the import hook before they run the
script again (``_spawn_with_the_hook``).
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import os
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

USAGE = "tunedsl run [-h] SCRIPT [ARGS ...]"
DESCRIPTION = (
    "Run a DSL script like `python SCRIPT ARGS...`: arguments after SCRIPT are passed to "
    "the script untouched, and imports of DSL modules are expanded."
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run", help="run a DSL script like `python SCRIPT`", description=DESCRIPTION, usage=USAGE
    )
    parser.add_argument("script", metavar="SCRIPT", help="the DSL (or plain Python) script")
    parser.add_argument(
        "args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments for the script"
    )
    return parser


def main(args: argparse.Namespace) -> int:
    return run_script(args.script, list(args.args))


def main_argv(argv: Sequence[str], restore: bool = False) -> int:
    """Entry point from the dispatcher: ``argv`` is everything after ``run``; ``restore``:
    called in a process that goes on (:func:`run_script`)."""
    argv = list(argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    elif not argv or argv[0] in ("-h", "--help"):
        parser = argparse.ArgumentParser(prog="tunedsl run", usage=USAGE, description=DESCRIPTION)
        parser.add_argument("script", metavar="SCRIPT", help="the DSL (or plain Python) script")
        parser.add_argument("args", metavar="ARGS", nargs="*", help="arguments for the script")
        if not argv:
            parser.print_usage(sys.stderr)
            print("tunedsl run: error: missing SCRIPT", file=sys.stderr)
            return 2
        parser.print_help()
        return 0
    return run_script(argv[0], argv[1:], restore=restore)


class _ImportHookInChild:
    """Unpickled in a spawned child before it runs the main script again: installs the
    import hook there, so the script (and the DSL modules it imports) read as they do here,
    and passes it on to the child's own spawned children (``_hook_in_child``). ``main``: the
    DSL main script's module name and file, which the child imports by that name."""

    def __init__(self, main: tuple[str, str] | None = None) -> None:
        self.main = main

    def __reduce__(self) -> tuple[Any, tuple[tuple[str, str] | None]]:
        return _hook_in_child, (self.main,)


def _hook_in_child(main: tuple[str, str] | None = None) -> None:
    """In a spawned child: the import hook, and the same in the children it spawns (a
    grandchild read the DSL script with plain Python, and the child's pool restarted it)."""
    import multiprocessing.spawn as spawn

    from tunedsl import activate

    activate.install()
    if main is not None:  # imported by its name here: from its source, never a pyc
        activate.read_scripts(dict([main]))
    original = spawn.get_preparation_data

    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        data["tunedsl_import_hook"] = _ImportHookInChild(main)
        return data

    spawn.get_preparation_data = get_preparation_data  # type: ignore[assignment]


def _spawn_with_the_hook(path: str, source: bytes) -> None:
    """A child started with ``spawn`` or ``forkserver`` (``multiprocessing``, a DataLoader's
    workers, ``ProcessPoolExecutor``) runs the main script again with plain Python (a DSL
    script, or a DSL module it imports, was a SyntaxError in every child, and a pool started
    them again without end). Its preparation data, unpickled in the child first, now installs
    the import hook there, and a DSL main script is run again by module name, through the
    hook; one whose file name is no module name is refused here, with the fix."""
    import multiprocessing.spawn as spawn

    from tunedsl.errors import UsageError

    original = spawn.get_preparation_data
    stem = os.path.splitext(os.path.basename(path))[0]

    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        data["tunedsl_import_hook"] = _ImportHookInChild()  # keys it does not know: ignored
        main = data.get("init_main_from_path")
        if main is None or os.path.normpath(main) != os.path.normpath(path):
            return data
        try:
            compile(source, path, "exec", dont_inherit=True)
            return data  # plain Python: run again from its file, as Python does
        except SyntaxError:
            pass
        if not _imports_as(stem, path, data.get("sys_path", sys.path)):
            raise UsageError(
                f"{path} uses the DSL, and a process started with the 'spawn' or 'forkserver' "
                "method (multiprocessing, a DataLoader's num_workers, ProcessPoolExecutor) "
                f"imports the main script again, as module `{stem}`, which finds no such "
                "module or another file: name the script as a Python identifier "
                "(`my_script.py`) that no other module on the path has, keep its directory "
                "on the path (no `python -P`), or start the processes with the 'fork' method"
            )
        del data["init_main_from_path"]
        data["init_main_from_name"] = stem  # sys.path[0] is the script's directory there too
        data["tunedsl_import_hook"] = _ImportHookInChild((stem, path))
        return data

    spawn.get_preparation_data = get_preparation_data  # type: ignore[assignment]


def _imports_as(name: str, path: str, search: list[str]) -> bool:
    """True when importing ``name`` from ``search`` (a child's ``sys.path``) finds ``path``."""
    import importlib.machinery
    import keyword

    if not name.isidentifier() or keyword.iskeyword(name):
        return False
    spec = importlib.machinery.PathFinder.find_spec(name, [p or os.getcwd() for p in search])
    origin = getattr(spec, "origin", None)
    return origin is not None and os.path.realpath(origin) == os.path.realpath(path)


def _exit_code(err: SystemExit) -> int:
    # Mirrors Python: None -> 0, an int -> itself, anything else is printed and gives 1.
    code = err.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _report_uncaught(err: BaseException) -> None:
    # Drop tunedsl's own frames (this module's exec) so the traceback starts in the script.
    tb = err.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    from tunedsl.errors import TunedslSyntaxError
    from tunedsl.runtime.mistakes import is_own_file, without_own_frames

    if isinstance(err, TunedslSyntaxError):
        # A DSL error (in an imported DSL module, or found by a site on its first call):
        # the user's frames that led there, then the rendered error, no importlib noise.
        import traceback

        frames = [
            frame
            for frame in traceback.extract_tb(tb)
            if not frame.filename.startswith("<frozen ") and not is_own_file(frame.filename)
        ]
        if frames:
            print("Traceback (most recent call last):", file=sys.stderr)
            print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
        print(err.render(), file=sys.stderr)
        return
    from tunedsl.errors import TunedslError
    from tunedsl.runtime.launch_effect import USER_EXPRESSION

    mistake = isinstance(err, (TunedslError, KeyboardInterrupt)) or hasattr(err, USER_EXPRESSION)
    if mistake and not sys.flags.dev_mode:
        # A mistake reported by tunedsl (a bad blocks=, a kernel without @triton.jit), an
        # error raised by the site's own expressions (blocks= under one configuration), a
        # failed tune or a Ctrl-C: the user's frames only, as pytest hides its own
        # (`python -X dev` keeps them).
        tb = without_own_frames(tb)
    # The default hook prints the exception's own __traceback__, so trim that too.
    sys.excepthook(type(err), err.with_traceback(tb), tb)


def run_script(script: str, args: Sequence[str], restore: bool = False) -> int:
    """Run ``script`` as ``__main__`` with ``args``; return the exit status. ``restore``: the
    caller's process goes on after (``tunedsl.cli.main``), so its ``sys.argv``,
    ``sys.modules["__main__"]``, ``sys.path[0]`` and spawn's preparation are put back after,
    as ``runpy.run_path`` does; the command itself (``restore=False``) ends with the script,
    whose threads and exit handlers may still read them."""
    from tunedsl.autointerp import enable_if_no_gpu
    from tunedsl.frontend.source import read_source, unreadable_reason

    path = os.path.abspath(script)
    try:
        source = read_source(path)  # a FIFO or a device is refused, never waited on
    except OSError as err:
        reason = unreadable_reason(path, err)
        if script.startswith("-") and not os.path.exists(path):  # `-m module`, `-O`: python's
            reason += (
                f"; tunedsl run takes the script's path first and no options of its own "
                f"(`{script}` is python's): `tunedsl run path/to/script.py ARGS...`, or for a "
                "module, `python -c 'import tunedsl.activate, runpy; "
                'runpy.run_module("NAME", run_name="__main__")\'`'
            )
        print(f"tunedsl run: error: cannot open script {script!r}: {reason}", file=sys.stderr)
        return 2
    # Before anything can import Triton (and after the script is known to be there, so a
    # mistyped name gets its error alone): without a GPU driver, the interpreter it is.
    from tunedsl import knobs
    from tunedsl.errors import TunedslSyntaxError, UsageError

    try:
        # Read here whether or not the interpreter is this command's to choose (a GPU host,
        # TRITON_INTERPRET set): a bad value would otherwise fail the script's first tuning.
        knobs.quiet()
        knobs.no_auto_interpret()
        enable_if_no_gpu("tunedsl run")
    except UsageError as err:  # a bad TUNEDSL_QUIET / TUNEDSL_NO_AUTO_INTERPRET: tunedsl's own
        print(f"tunedsl run: error: {err}", file=sys.stderr)
        return 2
    from tunedsl import activate
    from tunedsl.bytecode import load_or_compile

    try:
        code = load_or_compile(source, path)
    except TunedslSyntaxError as err:
        print(err.render(), file=sys.stderr)
        return 1
    except SyntaxError as err:  # plain Python syntax errors, NUL bytes
        from tunedsl.frontend.source import describe_syntax_error

        print(describe_syntax_error(err, path, source), end="", file=sys.stderr)
        return 1

    activate.install()
    # `python -P` adds no script directory, and neither does this.
    directory = None if getattr(sys.flags, "safe_path", False) else os.path.dirname(path)
    with _put_back(directory) if restore else contextlib.nullcontext():
        _spawn_with_the_hook(path, source)
        return _exec_main(code, path, script, args, directory)


@contextlib.contextmanager
def _put_back(directory: str | None) -> Iterator[None]:
    """Within: the script runs as ``__main__``; after, the caller's ``sys.argv`` (the list
    and what it holds), ``__main__``, first ``sys.path`` entry and spawn's preparation."""
    import multiprocessing.spawn as spawn

    argv, argv_items, first = sys.argv, list(sys.argv), sys.path[:1]
    main, prepare = sys.modules.get("__main__"), spawn.get_preparation_data
    try:
        yield
    finally:
        sys.argv = argv
        argv[:] = argv_items
        if main is None:
            sys.modules.pop("__main__", None)
        else:
            sys.modules["__main__"] = main
        if directory is not None and directory in sys.path:
            at = sys.path.index(directory)
            sys.path[at : at + 1] = first
        spawn.get_preparation_data = prepare  # type: ignore[method-assign]


def _exec_main(
    code: types.CodeType, path: str, script: str, args: Sequence[str], directory: str | None
) -> int:
    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(
        __file__=path, __cached__=None, __loader__=None, __spec__=None, __builtins__=builtins
    )
    sys.argv[:] = [script, *args]
    if directory is not None:
        # Replaces the entry Python made for tunedsl itself (its bin dir, or cwd for -m).
        sys.path[0:1] = [directory]
    sys.modules["__main__"] = main_module
    try:
        exec(code, main_module.__dict__)
    except SystemExit as err:
        return _exit_code(err)
    except KeyboardInterrupt as err:
        _report_uncaught(err)
        return 130
    except BaseException as err:
        _report_uncaught(err)
        return 1
    return 0
