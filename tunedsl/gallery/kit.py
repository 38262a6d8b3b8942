"""What a gallery example uses to check and report itself: device choice, poison, check, timing.

An example script creates one :class:`Example` *before* it defines its kernels. Without a
GPU that turns on the Triton interpreter; Triton reads ``TRITON_INTERPRET`` when it is first
imported (``tl.sum`` and friends are decorated then), so if triton is already imported the
process re-executes itself once with ``TRITON_INTERPRET=1`` (announced on stderr). The
script then checks its output against PyTorch with :meth:`Example.check`, and ends with
:meth:`Example.report`, which times the tuned launch and the PyTorch reference, prints a
summary and, when the script was given ``--gallery-result FILE`` (as ``tunedsl gallery`` runs
it), writes the result there. torch and triton are imported only inside methods.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from tunedsl import knobs
from tunedsl.backends.python_child import module_argv
from tunedsl.gallery.result import ConfigTiming, ExampleResult, json_safe, write_result

if TYPE_CHECKING:
    from tunedsl.model.config import Config
    from tunedsl.runtime.result import LaunchResult

T = TypeVar("T")

CPU_TIMING_REPS = 3

#: The argument ``tunedsl gallery`` gives an example: where to write its result (JSON).
RESULT_FLAG = "--gallery-result"
#: The argument that makes an example probe its optional features (``probed_features``).
PROBE_FLAG = "--probe"
#: An H100's opt-in shared memory per block, bytes: the limit when there is no GPU to ask.
H100_SHARED_MEMORY = 232448


def gallery_result_path(argv: list[str] | None = None) -> str | None:
    """The file named by ``--gallery-result FILE`` (or ``--gallery-result=FILE``) among the
    script's arguments, or None."""
    args = sys.argv[1:] if argv is None else argv
    for i, arg in enumerate(args):
        if arg == RESULT_FLAG and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(RESULT_FLAG + "="):
            return arg.partition("=")[2]
    return None


def config_as_dict(config: Config | Mapping[str, Any]) -> dict[str, Any]:
    """A configuration as a plain JSON-ready dict, fields in the space's order."""
    return {str(k): json_safe(v) for k, v in config.items()}


def format_config(config: Mapping[str, Any] | None) -> str:
    if not config:
        return "-"
    return ", ".join(f"{k}={v}" for k, v in config.items())


def format_speedup(ratio: float | None) -> str:
    """``2.00x``; small ratios keep a significant digit (``0.0009x``), missing ones ``n/a``."""
    if ratio is None or ratio <= 0:
        return "n/a"
    if ratio >= 0.01:
        return f"{ratio:.2f}x"
    return f"{ratio:.{-math.floor(math.log10(ratio))}f}x"  # 8e-05 -> 0.00008x


def format_ms(ms: float | None) -> str:
    if ms is None:
        return "n/a"
    if ms < 1.0:
        return f"{ms * 1000:.1f} µs"
    if ms < 1000.0:
        return f"{ms:.3f} ms"
    return f"{ms / 1000:.2f} s"


def timings_of(launch: LaunchResult) -> list[ConfigTiming]:
    """Every configuration's median time from the tuning record, in the space's order."""
    results = launch.timings
    order = list(launch.space) or list(results)
    timings = []
    for cfg in order:
        r = results.get(cfg)
        if r is None:
            timings.append(ConfigTiming(config_as_dict(cfg), None, "not measured"))
        elif r.status == "ok" and r.median_ms is not None:
            timings.append(ConfigTiming(config_as_dict(cfg), float(r.median_ms)))
        else:
            timings.append(ConfigTiming(config_as_dict(cfg), None, f"{r.status}: {r.reason}"))
    return timings


def describe_key(key: Mapping[str, Any]) -> str:
    """A short form of the record key: the user's ``key=`` if given, else the tensors' shapes."""
    if "user_key" in key:
        return f"key={key['user_key']}"
    shapes: list[str] = []
    for arg in (key.get("args") or {}).values():
        if isinstance(arg, Mapping) and "dtype" in arg:
            dims = "x".join(str(d) for d in arg.get("shape", []))
            text = f"{arg['dtype']}[{dims}]"
            if text not in shapes:
                shapes.append(text)
    return ", ".join(shapes) or "-"


class Example:
    """One gallery example's device, checks and report. Create it before defining kernels."""

    def __init__(self, name: str) -> None:
        import torch

        self.name = name
        interpret = knobs.triton_interpret_env()  # Triton's own truthiness (true, on, ...)
        self.on_gpu = bool(torch.cuda.is_available()) and not interpret
        self.device = "cuda" if self.on_gpu else "cpu"
        # `tunedsl precompile --target cuda:90` on a machine without a GPU: keep the real
        # kernels and the GPU's sizes and spaces, with tensors that hold no memory ("meta":
        # only dtype, shape and alignment matter to a cross-compile).
        self.cross_compiling = not self.on_gpu and not interpret and _precompile_target()
        if self.cross_compiling:
            self.on_gpu, self.device = True, "meta"
        elif not self.on_gpu and not interpret:
            _restart_with_interpreter(name)
        self.interpreted = not self.on_gpu
        self.correct = True
        self.check_messages: list[str] = []
        self._shared_memory: int | None = None
        torch.manual_seed(0)

    def pick(self, gpu: T, cpu: T) -> T:
        """``gpu`` on a GPU (sizes that fill it), ``cpu`` under the interpreter (small, fast)."""
        return gpu if self.on_gpu else cpu

    def use_device_scratch(self) -> None:
        """Give Triton the global memory that tensor descriptors made on the device
        (``tl.make_tensor_descriptor``) ask for at each launch: ``triton.set_allocator``
        with torch allocations on this example's device (at least 256-byte aligned)."""
        import torch
        import triton

        def scratch(size: int, alignment: int, stream: int | None) -> Any:
            return torch.empty(size, device=self.device, dtype=torch.int8)

        triton.set_allocator(scratch)

    def shared_memory_limit(self) -> int:
        """The most shared memory one program may use on this GPU (the opt-in maximum); an
        H100's when cross-compiling for one, or under the interpreter."""
        if self.cross_compiling or not self.on_gpu:
            return H100_SHARED_MEMORY
        if self._shared_memory is None:  # asked per configuration by spaces' constraints
            import torch

            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            optin = getattr(props, "shared_memory_per_block_optin", 0)
            self._shared_memory = int(optin or H100_SHARED_MEMORY)
        return self._shared_memory

    def probed_features(self, script: str, names: tuple[str, ...]) -> frozenset[str]:
        """Which of ``names`` work on this GPU, as a child process running ``script`` with
        ``--probe`` finds (a child, so that a kernel this Triton miscompiles cannot leave this
        process's GPU context unusable). The child prints ``feature NAME yes|no [why]`` per
        feature; those lines are repeated on stderr. None on the CPU or when cross-compiling."""
        if not self.on_gpu or self.cross_compiling:
            return frozenset()
        try:
            out = subprocess.run(
                probe_command(script), capture_output=True, text=True, timeout=600, check=False
            )
        except subprocess.TimeoutExpired:
            print(f"[{self.name}] the feature probe hung: none used", file=sys.stderr)
            return frozenset()
        return probe_answer(self.name, out, names)

    def poison(self, tensor: Any) -> Any:
        """Fill ``tensor`` with NaN (or the most negative integer) so unwritten elements show."""
        import torch

        if tensor.dtype.is_floating_point:
            tensor.fill_(float("nan"))
        else:
            tensor.fill_(torch.iinfo(tensor.dtype).min)
        return tensor

    def check(
        self,
        what: str,
        actual: Any,
        expected: Any,
        *,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> bool:
        """Compare ``actual`` with the PyTorch reference; remember and print a mismatch."""
        import torch

        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=False)
        except AssertionError as err:
            unwritten = ""
            if actual.dtype.is_floating_point:
                nan = int(torch.isnan(actual).sum())
                if nan:
                    unwritten = f" ({nan} elements never written: still NaN)"
            first_lines = " ".join(str(err).strip().splitlines()[:4])
            message = f"{what}: MISMATCH{unwritten}: {first_lines}"
            self.correct = False
            self.check_messages.append(message)
            print(f"[{self.name}] {message}", file=sys.stderr)
            return False
        diff = (actual.double() - expected.double()).abs().max().item() if actual.numel() else 0.0
        self.check_messages.append(f"{what}: ok (max abs error {diff:.3g})")
        return True

    def require(self, what: str, condition: bool, detail: object = "") -> bool:
        """Record a check that is not a tensor comparison (e.g. where a decision came from)."""
        if condition:
            self.check_messages.append(f"{what}: ok")
            return True
        message = f"{what}: FAILED ({detail})"
        self.correct = False
        self.check_messages.append(message)
        print(f"[{self.name}] {message}", file=sys.stderr)
        return False

    def bench(self, fn: Callable[[], Any]) -> float:
        """Milliseconds per call: do_bench's median on a GPU, wall-clock median on the CPU."""
        if self.on_gpu:
            from triton.testing import do_bench

            return float(do_bench(fn, return_mode="median"))
        fn()  # warm-up: compiles nothing under the interpreter, but fills caches
        samples = []
        for _ in range(CPU_TIMING_REPS):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000.0)
        return statistics.median(samples)

    @property
    def timing_method(self) -> str:
        if self.on_gpu:
            return "triton.testing.do_bench median"
        return f"wall-clock median of {CPU_TIMING_REPS} (Triton interpreter: not a speed measure)"

    def device_name(self) -> str:
        import torch

        if self.on_gpu:
            return str(torch.cuda.get_device_name())
        return "cpu (Triton interpreter)"

    def report(
        self,
        launch: LaunchResult,
        *,
        problem: str,
        run: Callable[[], Any],
        reference: Callable[[], Any],
        flops: float | None = None,
    ) -> ExampleResult:
        """Time the tuned launch and PyTorch, print a summary, write the gallery result.

        ``launch`` is the ``LaunchResult`` the macro returned; ``run`` repeats the tuned call
        (the tuning table answers it, so this times what a user gets); ``reference`` is the
        PyTorch computation; ``flops``, the floating-point operations of one call, adds
        both TFLOP/s on a GPU. Exits with status 1 after reporting if any check failed.
        """
        import torch
        import triton

        time_ms = self.bench(run)
        torch_ms = self.bench(reference)
        chosen = config_as_dict(launch.config)
        timings = timings_of(launch)
        first = timings[0] if timings else None
        result = ExampleResult(
            example=self.name,
            device=self.device_name(),
            interpreted=self.interpreted,
            problem=problem,
            key=describe_key(launch.key),
            config=chosen,
            config_source=launch.source,
            time_ms=time_ms,
            timing_method=self.timing_method,
            torch_time_ms=torch_ms,
            first_config=first.config if first else None,
            first_config_time_ms=first.time_ms if first else None,
            chosen_config_tuned_ms=launch.time_ms(),
            timings=timings,
            correct=self.correct and bool(self.check_messages),
            check_message="; ".join(self.check_messages) or "no check was run",
            versions={
                "torch": torch.__version__,
                "triton": triton.__version__,
                "python": sys.version.split()[0],
            },
            flops=flops,
        )
        self._print(result)
        target = gallery_result_path()
        if target:
            write_result(result, target)
        if not result.correct:
            raise SystemExit(1)
        return result

    def _print(self, r: ExampleResult) -> None:
        print(f"{r.example} on {r.device}: {r.problem}")
        print(f"  key            : {r.key if r.key is not None else '-'}")
        print(f"  chosen config  : {format_config(r.config)} (from {r.config_source or '?'})")
        print(f"  time           : {format_ms(r.time_ms)} ({r.timing_method})")
        if r.first_config is not None:
            ratio = r.speedup_vs_first
            note = f" -> speed-up of the chosen one: {format_speedup(ratio)}" if ratio else ""
            print(
                f"  first config   : {format_config(r.first_config)}: "
                f"{format_ms(r.first_config_time_ms)} (tuner's timing){note}"
            )
        else:
            print("  first config   : n/a (the record has no timings)")
        ratio = r.speedup_vs_torch
        note = f" -> speed-up of the tuned kernel: {format_speedup(ratio)}" if ratio else ""
        if r.interpreted:
            note = " (interpreter: times measure Python, not speed-ups)"
        print(f"  PyTorch        : {format_ms(r.torch_time_ms)}{note}")
        if r.tflops is not None and r.torch_tflops is not None:
            print(
                f"  throughput     : {r.tflops:.1f} TFLOP/s, PyTorch {r.torch_tflops:.1f} TFLOP/s"
            )
        print(f"  check          : {'OK' if r.correct else 'FAILED'}: {r.check_message}")
        if r.timings:
            print("  every configuration (tuner's timings):")
            for t in r.timings:
                mark = " <- chosen" if t.config == r.config else ""
                print(f"    {format_config(t.config):<48} {format_ms(t.time_ms):>12}{mark}")


def probe_command(script: str) -> list[str]:
    """``tunedsl run SCRIPT --probe`` in a child that imports only from this process's path:
    the working directory may be shared, and what another user planted there must not run."""
    return module_argv("tunedsl", "run", script, PROBE_FLAG)


def probe_answer(
    example: str, out: subprocess.CompletedProcess[str], names: tuple[str, ...]
) -> frozenset[str]:
    """The features of ``names`` a probe's child run (``out``) said yes to. Its answers are
    repeated on stderr, and so is a feature it gave none for, with the child's exit code and
    last error line: a probe that crashed leaves its features out, and says why."""
    found, answered = set(), set()
    for line in out.stdout.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) >= 3 and parts[0] == "feature" and parts[1] in names:
            print(f"[{example}] {line}", file=sys.stderr)
            answered.add(parts[1])
            if parts[2] == "yes":
                found.add(parts[1])
    missing = [n for n in names if n not in answered]
    if missing:
        last = (out.stderr or "").strip().splitlines()[-1:]
        why = f": {last[0][:300]}" if last else ""
        print(f"[{example}] the feature probe gave no answer for {', '.join(missing)} (exit "
              f"code {out.returncode}{why}): not used", file=sys.stderr)  # fmt: skip
    return frozenset(found)


def _precompile_target() -> bool:
    """True while ``tunedsl precompile --target ...`` imports this example."""
    from tunedsl.precompile.workload import active_session

    session = active_session()
    return session is not None and session.target is not None


def _restart_with_interpreter(name: str) -> None:
    """No GPU: run the real kernels through Triton's interpreter, on the CPU."""
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton" not in sys.modules:
        return  # triton will see the variable when the script imports it
    # Triton's language functions were already built for the GPU: start this same command
    # again (same interpreter, same arguments) with the variable set from the beginning.
    print(
        f"[{name}] no CUDA GPU: restarting under the Triton interpreter (TRITON_INTERPRET=1)",
        file=sys.stderr,
        flush=True,
    )
    argv = list(getattr(sys, "orig_argv", []) or [sys.executable, *sys.argv])
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *argv[1:]])
