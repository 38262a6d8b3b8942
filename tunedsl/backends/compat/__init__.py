"""Triton/PyTorch boundary layer: every access to a private or unstable Triton internal.

One package, by topic: ``gate`` (the version gate, the interpreter, JITFunction facts),
``launch`` (launching, the target, binding and packing a call), ``compiling`` (the compile
pool's async split, Triton's hash and cache warm-up, shared memory, the launcher built
ahead), ``cache`` (Triton's cache key, file naming, stored binaries, the trust check of its
directory), ``driver_gate`` (Triton's driver, started only after that check), ``dynamo``
(PyTorch Dynamo's hooks for tracing a site) and ``autograd`` (a tensor's version counter
kept across tuning's restores). Callers use the
names re-exported here.

tunedsl reaches below Triton's public API in a few places (the direct launcher, stored
binaries, the compile pool's async split, cross-compiling). Each such access is one small
function here, with a comment naming the Triton versions it was checked on; no other module
of tunedsl names a private Triton or PyTorch attribute (``tests/unit/test_compat.py`` greps
the source tree). A Triton upgrade is then checked here, function by function.

**Version gate.** The internals are used only on the tested Triton versions
(:data:`TESTED_TRITON`, inclusive, by major.minor). On any other version
:func:`internals_usable` is False, with one :class:`UntestedTritonWarning`: the direct
launcher, stored binaries and the compile pool's async split turn themselves off, and
launches and compiles go through Triton's public JIT path (``kernel[grid](...)``,
``JITFunction.warmup``). Cross-compiling (``precompile --target``) has no public path; it
is still attempted and reports a failure as a failed configuration.

Everything imports triton lazily, inside the functions: ``import tunedsl`` never loads it.
"""

from __future__ import annotations

from tunedsl.backends.compat.autograd import keeping_version  # noqa: F401 (re-exported)
from tunedsl.backends.compat.cache import (  # noqa: F401 (re-exported)
    binary_extension,
    cache_file_stem,
    cache_key_with,
    check_triton_cache,
    compile_disabled,
    compiled_binary,
    compiled_files,
    compiled_kernel,
    is_compiler_library,
    kernel_hash,
    triton_cache_dir,
    triton_cache_has,
    triton_cache_key,
)
from tunedsl.backends.compat.compiling import (  # noqa: F401 (re-exported)
    async_compile_mode,
    free_jit_locks,
    is_build_failure,
    keyed_async_mode,
    max_shared_memory,
    out_of_resources,
    prebuild_launcher,
    ptxas_gpu_names,
    route_compile_temporaries,
    shared_memory_overrun,
    start_warming,
    stop_over_shared_memory,
    triton_key,
    use_triton_key,
    warm_compile_caches,
    with_heuristics,
)
from tunedsl.backends.compat.driver_gate import active_driver  # noqa: F401 (re-exported)
from tunedsl.backends.compat.gate import (  # noqa: F401 (re-exported)
    TESTED_TRITON,
    backend_option_names,
    constexpr_params,
    gate,
    has_pre_run_hooks,
    internals_usable,
    interpreting,
    is_interpreted_function,
    is_jit_function,
    is_signature_type,
    jit_declared_options,
    jit_line_free_hash,
    jit_source,
    jit_source_hash,
    launch_option_names,
    param_specs,
    salt_jit_hash,
    untested_message,
    version_tested,
)
from tunedsl.backends.compat.launch import (  # noqa: F401 (re-exported)
    LAUNCH_HOOKED_CODE,
    LAUNCHER_TAKES_INT_POINTERS,
    LaunchParts,
    _launcher_form,
    backend_hash,
    binding_jit,
    cache_invalidating_env,
    cache_invalidating_items,
    codegen_env,
    current_target,
    device_and_stream,
    direct_launch_parts,
    jit_run,
    jit_warmup,
    launch_hooked,
    launch_key,
    layout_check,
    load_module,
    make_binder,
    mock_tensor,
    options_dict,
    pack_args,
    resolve,
    run_kwargs,
    runtime_knobs,
    target_before_driver,
    wait_compiled,
)
from tunedsl.errors import UntestedTritonWarning  # noqa: F401 (re-exported)
