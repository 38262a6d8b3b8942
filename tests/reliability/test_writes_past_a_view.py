"""A configuration that writes past a tensor view's extent while tuning in process: the
caller's data around the view (in the same storage, named by no argument) is as it was
after the tuning. A configuration that lost, or that ``verify=`` rejected, had left it as it
wrote it, a silent wrong result. And views of one storage picked per configuration (rows of
one stacked tensor) are each restored as memory of their own, and views of two storages
over one memory are each kept, and sent to an isolated worker, whole. Real kernels under
Triton's interpreter, real views."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv

pytestmark = pytest.mark.needs_triton


@triton.jit
def fill_ones(out, n, BLOCK: tl.constexpr, PADDED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if PADDED:  # a configuration's bug: masked to the padded size, and a wrong value
        end = tl.cdiv(n, BLOCK) * BLOCK
        tl.store(out + offs, tl.full([BLOCK], 2.0, tl.float32), mask=offs < end)
    else:
        tl.store(out + offs, tl.full([BLOCK], 1.0, tl.float32), mask=offs < n)


def test_a_rejected_configuration_writing_past_a_slice_leaves_the_data_around_it() -> None:
    storage = torch.cat([torch.full((256,), 7.0), torch.zeros(200), torch.full((568,), 9.0)])
    view = storage[256:456]
    n = view.numel()
    expected = storage.clone()
    expected[256:456] = 1.0
    autotune_launch(
        fill_ones,
        space={"BLOCK": [8, 64], "PADDED": [False, True]},  # PADDED with 64: 56 past the end
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=(view, n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "PADDED": cfg.PADDED},
        verify=lambda args: {"out": torch.ones(n)},
        name="fill-slice",
    )
    assert torch.equal(storage, expected)  # the 56 values after the slice had become 2.0


@triton.jit
def fill_rows(out, rows, cols, stride, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if WIDE:  # a configuration's bug: the row's block, not its columns, and a wrong value
        tl.store(out + row * stride + offs, tl.full([BLOCK], 2.0, tl.float32))
    else:
        tl.store(out + row * stride + offs, tl.full([BLOCK], 1.0, tl.float32), mask=offs < cols)


def test_a_configuration_writing_past_a_column_slice_leaves_the_other_columns() -> None:
    # q of a fused qkv: its rows' neighbours are k's and v's columns, inside q's span.
    qkv = torch.arange(8 * 48, dtype=torch.float32).reshape(8, 48)
    q = qkv[:, :16]
    expected = qkv.clone()
    expected[:, :16] = 1.0
    autotune_launch(
        fill_rows,
        space={"BLOCK": [16, 32], "WIDE": [False, True]},  # WIDE with 32: 16 columns of k
        grid=lambda cfg: (8,),
        args=(q, 8, 16, q.stride(0)),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "WIDE": cfg.WIDE},
        verify=lambda args: {"out": torch.ones(8, 16)},
        name="fill-columns",
    )
    assert torch.equal(qkv, expected)


def test_only_views_are_kept_and_a_window_is_bounded() -> None:
    from tunedsl.backends.view_spans import MIN_PAD_BYTES, AroundViews

    whole = torch.zeros(1000)
    assert AroundViews([whole, whole.view(10, 100), torch.ones(3)]).kept == []  # no copy
    big = torch.zeros(16 * MIN_PAD_BYTES // 4)  # 16 MiB of float32
    middle = big[len(big) // 2 : len(big) // 2 + 256]
    (window, _), *others = AroundViews([middle, big[len(big) // 2 + 128 :][:64]]).kept
    assert others == []  # two views that meet: one window
    assert window.numel() == 1024 + 2 * MIN_PAD_BYTES  # the views' span and a pad each side


@triton.jit
def add_one(out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(out + offs, mask=offs < n) + 1.0, mask=offs < n)


def test_a_row_of_one_tensor_picked_per_configuration_is_restored_as_its_own() -> None:
    """A buffer picked per configuration from the rows of one stacked tensor
    (``outs[cfg.variant]``): each row is memory of its own, in the first configuration's
    storage. Each is restored before every launch (``pre_hook`` sees the caller's 5.0, not
    the sums of the launches before), and after the tuning the rows the chosen configuration
    does not write hold the caller's values: a row more than the kept window away from the
    first configuration's (1.2 MB rows) had been left holding the tuning's sums."""
    n = 300_000
    rows = torch.full((3, n), 5.0)
    seen: dict[int, set[float]] = {0: set(), 1: set(), 2: set()}

    def hook(args: dict[str, object]) -> None:
        out = args["out"]
        assert isinstance(out, torch.Tensor)
        seen[(out.data_ptr() - rows.data_ptr()) // out.nbytes].update(out.unique().tolist())

    res = autotune_launch(
        add_one,
        space={"variant": [0, 1, 2], "BLOCK": [8192, 16384]},
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=lambda cfg: (rows[cfg.variant], n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK},
        restore_value=["out"],
        pre_hook=hook,
        name="rows-per-configuration",
    )
    assert res.source == "tuned"
    assert seen == {0: {5.0}, 1: {5.0}, 2: {5.0}}
    expected = torch.full((3, n), 5.0)
    expected[res.config.variant] = 6.0
    assert torch.equal(rows, expected)


def test_a_rejected_configuration_writing_past_its_own_slot_leaves_the_data_after_it() -> None:
    """A buffer picked per configuration from slots of one workspace, the second slot 4 MiB
    past the first (beyond the window kept around the first configuration's): the
    configuration on the second slot writes 56 values past it (masked to the padded size)
    and ``verify=`` rejects it. The workspace after its slot is as it was after the tuning:
    a window is kept around each configuration's own tensor too, copied before its first
    launch (the 56 values had been left as it wrote them)."""
    n, far = 200, 1 << 20
    workspace = torch.full((far + 1024,), 9.0)
    slots = {0: workspace[:n], 1: workspace[far : far + n]}
    expected = workspace.clone()
    expected[:n] = 1.0
    res = autotune_launch(
        fill_ones,
        space=[{"slot": 0, "BLOCK": 8, "PADDED": False}, {"slot": 1, "BLOCK": 64, "PADDED": True}],
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=lambda cfg: (slots[cfg.slot], n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "PADDED": cfg.PADDED},
        verify=True,
        name="fill-far-slot",
    )
    assert res.config.slot == 0
    assert [r.status for r in res.timings.values()] == ["ok", "rejected"]
    assert torch.equal(workspace, expected)


def test_where_two_kept_windows_meet_the_older_copy_is_put_back() -> None:
    """The first configuration writes 56 values past its slot and is rejected; the second
    slot, 4 KiB further, gets its window copied before its first launch, after the first
    configuration wrote there, and the two windows meet. The data after the first slot is
    as the caller had it after the tuning: the second window keeps only what the first does
    not hold, and the first's copy (taken before any launch) is what is put back there."""
    n = 200
    workspace = torch.full((1 << 20,), 9.0)
    slots = {0: workspace[:n], 1: workspace[1024 : 1024 + n]}
    expected = workspace.clone()
    expected[1024 : 1024 + n] = 1.0
    res = autotune_launch(
        fill_ones,
        space=[{"slot": 0, "BLOCK": 64, "PADDED": True}, {"slot": 1, "BLOCK": 8, "PADDED": False}],
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=lambda cfg: (slots[cfg.slot], n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "PADDED": cfg.PADDED},
        verify=lambda args: {"out": torch.ones(n)},
        name="fill-meeting-slots",
    )
    assert res.config.slot == 1
    assert [r.status for r in res.timings.values()] == ["rejected", "ok"]
    assert torch.equal(workspace, expected)


@triton.jit
def add_ones(out, n, BLOCK: tl.constexpr, PADDED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if PADDED:  # a configuration's bug: masked to the padded size, and a wrong value
        end = tl.cdiv(n, BLOCK) * BLOCK
        tl.store(out + offs, tl.load(out + offs, mask=offs < end) + 2.0, mask=offs < end)
    else:
        tl.store(out + offs, tl.load(out + offs, mask=offs < n) + 1.0, mask=offs < n)


def test_a_configuration_writing_into_the_next_ones_slot_leaves_it_as_the_caller_had_it() -> None:
    """The first configuration adds into 56 values past its slot, the start of the slot
    the second configuration adds into, and is rejected; the second is chosen. Its slot is
    the caller's values plus one: the second configuration's own copy of its slot, taken
    before its first launch (after the first configuration wrote there), had been put back
    after the copy of the memory around the first slot, taken before any launch; the
    chosen launch then added to the first configuration's sums, silently."""
    n = 200
    workspace = torch.full((1 << 20,), 9.0)
    slots = {0: workspace[:n], 1: workspace[n : 2 * n]}
    expected = workspace.clone()
    expected[n : 2 * n] = 10.0
    res = autotune_launch(
        add_ones,
        space=[{"slot": 0, "BLOCK": 64, "PADDED": True}, {"slot": 1, "BLOCK": 8, "PADDED": False}],
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=lambda cfg: (slots[cfg.slot], n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "PADDED": cfg.PADDED},
        restore_value=["out"],
        verify=lambda args: {"out": torch.full((n,), 10.0)},
        name="add-into-the-next-slot",
    )
    assert res.config.slot == 1
    assert [r.status for r in res.timings.values()] == ["rejected", "ok"]
    assert torch.equal(workspace, expected)


def test_views_of_two_storages_over_one_memory_each_get_a_window_that_fits() -> None:
    """``head`` is a second storage over the first 1200 bytes of ``whole``'s memory
    (``torch.from_dlpack``; two ``torch.from_numpy`` of an array and of its slice are the
    same): one address, two sizes. The windows around a view of each are kept and put back,
    each on its own storage: the window of ``whole``'s view had been taken from ``head``'s
    storage, where it does not fit, a RuntimeError from inside the tuning. (Triton's
    interpreter cannot launch on such a pair; on a GPU: tests/gpu.)"""
    from tunedsl.backends.view_spans import AroundViews

    whole = torch.arange(1000, dtype=torch.float32)
    head = torch.from_dlpack(whole[:300])
    assert head.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
    expected = whole.clone()
    around = AroundViews([head[0:100], whole[600:700]])
    whole.fill_(-1.0)  # stray writes everywhere around both views
    around.put_back()
    assert torch.equal(whole, expected)


def test_where_windows_of_two_storages_over_one_memory_meet_the_older_copy_is_put_back() -> None:
    """A view of ``whole`` is kept before any launch (its window: all of ``whole``); a
    configuration writes over the first 300 values; a later configuration passes a view of
    ``head``, a second storage over that memory, whose window is copied then, stray values
    and all. After the tuning the memory is as the caller had it: the older copy is written
    last (the newer one was, and left the stray values in place)."""
    from tunedsl.backends.view_spans import AroundViews

    whole = torch.arange(1000, dtype=torch.float32)
    expected = whole.clone()
    around = AroundViews([whole[600:700]])
    whole[:300] = -1.0  # an earlier configuration, past its view
    head = torch.from_dlpack(whole[:300])
    around.add(head[100:200])  # kept now: what ``whole``'s window holds is another storage's
    whole[:300] = -2.0  # the later configuration's launches
    around.put_back()
    assert torch.equal(whole, expected)


def test_a_later_tensor_of_a_second_storage_is_put_back_before_its_copy_is_taken() -> None:
    """The tensor a later configuration passes lies in a second storage over the memory of a
    kept window (``from_dlpack`` of a slice): before its own copy is taken, its memory is
    put back from that window's copy, found by address (found by storage, the values an
    earlier configuration wrote there stayed, and the later one ran on them)."""
    from tunedsl.backends.view_spans import AroundViews

    whole = torch.arange(1000, dtype=torch.float32)
    expected = whole.clone()
    around = AroundViews([whole[600:700]])
    whole[:300] = -1.0  # an earlier configuration, past its view
    later = torch.from_dlpack(whole[:300])[100:200]
    around.put_back_under(later)
    assert torch.equal(later, expected[100:200])
    assert torch.equal(whole[:100], torch.full((100,), -1.0))  # only its own memory, now


def test_views_of_two_storages_over_one_memory_reach_an_isolated_worker_whole() -> None:
    """The same pair sent to an ``isolate=True`` worker: each view is rebuilt there with the
    caller's values. Storages were told apart by their address alone, so only the smaller
    one was copied, and the view of the larger one, past its end, was rebuilt on that copy
    grown with memory nobody wrote: the worker measured on values that were not the call's."""
    from tunedsl.backends.isolated_transfer import pack_inputs, rebuild_storages, rebuild_variant
    from tunedsl.model.config import Config
    from tunedsl.model.variant import Variant

    whole = torch.arange(1000, dtype=torch.float32)
    head = torch.from_dlpack(whole[:300])
    small, large = head[0:100], whole[600:700]
    variant = Variant(Config(a=1), (small, large, 100), {}, (1,), {})
    storages, packed = pack_inputs([variant])
    rebuilt = rebuild_variant(packed[0], rebuild_storages(storages, None))
    assert torch.equal(rebuilt.args[0], small)
    assert torch.equal(rebuilt.args[1], large)


@pytest.mark.parametrize("first_is_whole", [False, True], ids=["earlier-own", "first"])
def test_a_later_configurations_view_of_an_earlier_ones_whole_tensor_runs_on_the_callers_values(
    first_is_whole: bool,
) -> None:
    """An earlier configuration passes ``whole`` (its whole storage, so no window is kept
    around it) and adds one into its first 200 values; a later one passes ``whole[:200]``.
    The later one's own copy was taken after the earlier one's writes: it ran on them, and
    they were put back into ``whole`` after the tuning, the chosen launch adding to them (or,
    the chosen one writing elsewhere, left there), silently. Now that memory is put back
    from the earlier configuration's copy first, and ``whole`` holds the caller's values
    plus what the chosen launch adds."""
    n = 200
    other = torch.full((n,), 9.0)
    whole = torch.full((1000,), 9.0)
    slots = {0: whole, 1: whole[:n]} if first_is_whole else {0: other, 1: whole, 2: whole[:n]}
    space = [{"slot": s, "BLOCK": 256 if s == 0 else 8} for s in slots]
    res = autotune_launch(
        add_ones,
        space=space,
        grid=lambda cfg: (cdiv(n, cfg.BLOCK),),
        args=lambda cfg: (slots[cfg.slot], n),
        kwargs=lambda cfg: {"BLOCK": cfg.BLOCK, "PADDED": False},
        restore_value=["out"],
        name=f"a-view-of-an-earlier-whole-tensor-{first_is_whole}",
    )
    assert len(res.timings) == len(slots)
    expected = torch.full((1000,), 9.0)
    if res.config.slot != 0 or first_is_whole:  # the chosen launch added into whole[:200]
        expected[:n] = 10.0
    assert torch.equal(whole, expected), whole[:n].unique()
    if not first_is_whole:
        assert torch.equal(other, torch.full((n,), 10.0 if res.config.slot == 0 else 9.0))
