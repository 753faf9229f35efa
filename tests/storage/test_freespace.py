"""The free-space map: one category byte per heap page in the ``_fsm`` fork.

What is proven here:
  * ``record`` / ``get`` store free space in 32-byte categories (rounded down, capped at 255),
    across FSM pages, and ``get`` of an unknown block is 0 without creating anything;
  * ``search`` returns a block whose category guarantees the request, honours ``start`` and
    wraps around, never returns a block at or beyond ``nblocks``, and reads only FSM pages,
    never heap pages (counted);
  * ``heap_insert`` uses the map: a new backend fills recorded free space before extending,
    and a map entry that overstates a page's room is corrected, not followed forever;
  * bulk loads record each new page's real free space; ``truncate`` forgets blocks.

Not proven: behaviour of concurrent searchers (the FSM is a hint; heap tests cover
concurrent inserts).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minidb.config import BLCKSZ
from minidb.heap.check import check_heap
from minidb.heap.heapam import MAX_HEAP_TUPLES_PER_PAGE, heap_bulk_insert, heap_insert
from minidb.storage import freespace as fsm
from minidb.storage import page as pg
from minidb.storage.smgr import FSM_FORKNUM, MAIN_FORKNUM

SLOTS = fsm.SLOTS_PER_PAGE


@pytest.fixture
def rfn(instance, make_table):
    return make_table(instance, "t", [("a", "integer"), ("s", "text")]).relfilenode


def test_record_and_get_round_to_categories(backend, rfn):
    bm = backend.bufmgr
    assert fsm.get(bm, rfn, 7) == 0  # nothing recorded, and nothing created by asking
    assert bm.smgr.nblocks(rfn, FSM_FORKNUM) == 0
    fsm.record(bm, rfn, 7, 1000)
    assert fsm.get(bm, rfn, 7) == 992  # floor(1000 / 32) * 32: a lower bound
    fsm.record(bm, rfn, 8, 31)
    assert fsm.get(bm, rfn, 8) == 0
    fsm.record(bm, rfn, 9, 100_000)
    assert fsm.get(bm, rfn, 9) == 255 * 32
    fsm.record(bm, rfn, 10, -5)
    assert fsm.get(bm, rfn, 10) == 0
    fsm.record(bm, rfn, 7, 64)  # a later record replaces
    assert fsm.get(bm, rfn, 7) == 64
    fsm.record_many(bm, rfn, np.array([1, 2, SLOTS + 3]), np.array([320, 640, 960]))
    assert [fsm.get(bm, rfn, b) for b in (1, 2, SLOTS + 3)] == [320, 640, 960]
    assert bm.smgr.nblocks(rfn, FSM_FORKNUM) == 2  # block SLOTS + 3 is on FSM page 1
    assert fsm.get(bm, rfn, 5 * SLOTS) == 0
    assert bm.holds_nothing()


def test_categories_survive_reopen(tmp_path, make_table):
    from minidb.instance import Instance
    with Instance(tmp_path / "data", shared_buffers=16) as inst:
        rfn = make_table(inst, "t", [("a", "integer")]).relfilenode
        with inst.connect() as b:
            fsm.record(b.bufmgr, rfn, 3, 4000)
    with Instance(tmp_path / "data", shared_buffers=16) as inst:
        with inst.connect() as b:
            assert fsm.get(b.bufmgr, rfn, 3) == 4000 // 32 * 32
            assert b.counters()["buffers_read"] == 1


def test_search_semantics(backend, rfn):
    bm = backend.bufmgr
    assert fsm.search(bm, rfn, 100, nblocks=10) == -1  # no map yet
    fsm.record_many(bm, rfn, np.arange(10), np.array([0, 127, 128, 0, 0, 500, 0, 0, 128, 0]))
    # need 100 -> category ceil(100/32) = 4 = 128 bytes: block 1 (127, category 3) is too small
    assert fsm.search(bm, rfn, 100, nblocks=10) == 2
    assert fsm.search(bm, rfn, 128, nblocks=10) == 2
    assert fsm.search(bm, rfn, 129, nblocks=10) == 5
    assert fsm.search(bm, rfn, 100, nblocks=10, start=3) == 5
    assert fsm.search(bm, rfn, 100, nblocks=10, start=6) == 8
    assert fsm.search(bm, rfn, 100, nblocks=10, start=9) == 2  # wraps around
    assert fsm.search(bm, rfn, 600, nblocks=10) == -1
    # blocks at or beyond nblocks are never returned (the map may know more than the caller)
    assert fsm.search(bm, rfn, 400, nblocks=5) == -1
    assert fsm.search(bm, rfn, 100, nblocks=2) == -1
    # ...and do not hide blocks below the start: wrap-around still finds block 2
    assert fsm.search(bm, rfn, 100, nblocks=5, start=3) == 2
    assert fsm.search(bm, rfn, 100, nblocks=9, start=6) == 8
    assert bm.holds_nothing()


def test_search_across_fsm_pages(backend, rfn):
    bm = backend.bufmgr
    far = SLOTS + 17
    fsm.record(bm, rfn, far, 2000)
    fsm.record(bm, rfn, 4, 2000)
    assert fsm.search(bm, rfn, 1000, nblocks=far + 1) == 4
    assert fsm.search(bm, rfn, 1000, nblocks=far + 1, start=5) == far
    assert fsm.search(bm, rfn, 1000, nblocks=far + 1, start=far + 1) == 4
    assert fsm.search(bm, rfn, 1000, nblocks=far) == 4


def test_search_reads_only_fsm_pages(instance, make_table, backend):
    bm = backend.bufmgr
    rel = make_table(instance, "big", [("a", "bigint"), ("s", "text")])
    n = 20000
    heap_bulk_insert(backend, rel, {"a": np.arange(n), "s": ["s" * 60] * n}, n, xmin=1)
    nblocks = bm.smgr.nblocks(rel.relfilenode)
    assert nblocks > 2 * 64
    fsm.record(bm, rel.relfilenode, nblocks - 3, 5000)
    instance.checkpoint()
    bm.drop_relation_buffers(rel.relfilenode)  # an empty pool: every page would be a read

    pinned = []
    real_pin = bm.pin

    def logging_pin(rfn, block, fork=MAIN_FORKNUM, strategy=None):
        pinned.append((rfn, fork, block))
        return real_pin(rfn, block, fork=fork, strategy=strategy)

    real_pin_slow = bm._pin_slow

    def logging_pin_slow(rfn, block, fork, strategy, tag, bucket, p, missed, lock_mode=0):
        if lock_mode:   # pin_lock's read of a missing page (pin's own calls are logged above)
            pinned.append((rfn, fork, block))
        return real_pin_slow(rfn, block, fork, strategy, tag, bucket, p, missed, lock_mode)

    bm.pin = logging_pin
    bm._pin_slow = logging_pin_slow
    try:
        c = bm.counters()
        assert fsm.search(bm, rel.relfilenode, 4000, nblocks) == nblocks - 3
        d = {k: bm.counters()[k] - c[k] for k in c}
    finally:
        del bm.pin
        del bm._pin_slow
    assert all(fork == FSM_FORKNUM for _, fork, _ in pinned), pinned
    assert d["buffers_read"] + d["buffers_hit"] == len(pinned) == 1


def test_heap_insert_fills_recorded_free_space_before_extending(instance, make_table):
    rel = make_table(instance, "wide", [("a", "integer"), ("s", "text")])
    with instance.connect() as b:
        for i in range(10):  # about 3000-byte rows: 2 per page, 2000 bytes left on each
            heap_insert(b, rel, (i, "w" * 3000), xmin=1)
        nblocks = b.bufmgr.smgr.nblocks(rel.relfilenode)
        assert nblocks == 5
        room = [fsm.get(b.bufmgr, rel.relfilenode, blk) for blk in range(nblocks)]
    # the page the first backend was still filling is recorded only when it leaves it;
    # the full ones were recorded when a row did not fit
    assert all(r >= 1900 for r in room[:-1]), room
    with instance.connect() as b2:  # no remembered target: it must ask the map
        c = b2.counters()
        tids = [heap_insert(b2, rel, (100 + i, "n" * 100), xmin=2) for i in range(12)]
        assert b2.bufmgr.smgr.nblocks(rel.relfilenode) == nblocks  # no new page
        assert b2.counters()["buffers_extended"] == c["buffers_extended"]
        assert {t[0] for t in tids} <= set(range(nblocks))
        assert check_heap(b2, rel) == 22


def test_an_overstating_map_entry_is_corrected(instance, make_table):
    rel = make_table(instance, "t2", [("a", "integer"), ("s", "text")])
    with instance.connect() as b:
        bm = b.bufmgr
        while bm.smgr.nblocks(rel.relfilenode) < 3:
            heap_insert(b, rel, (1, "f" * 500), xmin=1)
        fsm.record(bm, rel.relfilenode, 0, 8000)  # block 0 is full; the map says empty
        buf = bm.pin(rel.relfilenode, 0)
        real = pg.heap_free_space(bm.page(buf), MAX_HEAP_TUPLES_PER_PAGE)
        bm.unpin(buf)
        assert real < 500
    with instance.connect() as b2:
        block, _ = heap_insert(b2, rel, (2, "g" * 500), xmin=2)
        assert block != 0
        assert fsm.get(b2.bufmgr, rel.relfilenode, 0) == real // 32 * 32  # corrected


def test_bulk_insert_records_each_new_page(instance, make_table, backend):
    bm = backend.bufmgr
    rel = make_table(instance, "bulk", [("a", "bigint"), ("s", "text")])
    n = 3000
    heap_bulk_insert(backend, rel, {"a": np.arange(n), "s": [f"v{i}" * (i % 9) for i in range(n)]},
                     n, xmin=1)
    for blk in range(bm.smgr.nblocks(rel.relfilenode)):
        buf = bm.pin(rel.relfilenode, blk)
        real = pg.heap_free_space(bm.page(buf), MAX_HEAP_TUPLES_PER_PAGE)
        bm.unpin(buf)
        assert fsm.get(bm, rel.relfilenode, blk) == min(255, real // 32) * 32, blk


def test_truncate_forgets_blocks(backend, rfn):
    bm = backend.bufmgr
    fsm.record_many(bm, rfn, np.arange(SLOTS + 50), np.full(SLOTS + 50, 4096))
    assert bm.smgr.nblocks(rfn, FSM_FORKNUM) == 2
    fsm.truncate(bm, rfn, 10)
    assert bm.smgr.nblocks(rfn, FSM_FORKNUM) == 1
    assert fsm.get(bm, rfn, 9) == 4096 and fsm.get(bm, rfn, 10) == 0
    assert fsm.get(bm, rfn, SLOTS + 1) == 0
    assert fsm.search(bm, rfn, 100, nblocks=SLOTS + 50, start=10) == 0
    assert BLCKSZ - pg.PAGE_HEADER_SIZE == SLOTS


@pytest.mark.parametrize("two_pages", [False, True])
def test_record_and_search_is_record_then_search(backend, rfn, two_pages):
    """``record_and_search`` (an insert that found its target full) leaves the same map and
    returns the same block as ``record`` followed by ``search``, with one map-page visit
    fewer when the search starts on the page it wrote; nothing stays pinned or locked."""
    bm = backend.bufmgr
    rng = np.random.default_rng(16)
    nblocks = SLOTS + 40 if two_pages else 60
    # the blocks the trials record (the rest of the map stays 0): 30 on the second page
    blocks = np.array(list(range(30)) + list(range(nblocks - 30, nblocks)))
    for trial in range(40):
        avails = rng.choice([0, 40, 200, 1000, 5000], size=len(blocks), p=[.5, .2, .1, .1, .1])
        fsm.record_many(bm, rfn, blocks, avails)
        full = int(rng.choice(blocks))
        avail = int(rng.choice([0, 100, 3000]))
        need = int(rng.choice([64, 500, 4000]))
        start = int(rng.choice([full + 1, 0, nblocks - 1]))
        fsm.record(bm, rfn, full, avail)
        c = bm.counters()
        want = fsm.search(bm, rfn, need, nblocks, start=start)
        plain = bm.counters()["buffers_hit"] - c["buffers_hit"] + 1   # + record's visit
        map_before = [fsm.get(bm, rfn, b) for b in blocks.tolist()]
        fsm.record(bm, rfn, full, 8000)   # undo the record, so the fused call writes it
        c = bm.counters()
        got = fsm.record_and_search(bm, rfn, full, avail, need, nblocks, start=start)
        fused = bm.counters()["buffers_hit"] - c["buffers_hit"]
        assert got == want, (trial, full, avail, need, start)
        assert [fsm.get(bm, rfn, b) for b in blocks.tolist()] == map_before
        same_page = min(start // SLOTS, (nblocks - 1) // SLOTS) == full // SLOTS
        assert fused == plain - (1 if same_page else 0), (trial, fused, plain)
        assert bm.holds_nothing()


@settings(max_examples=200, deadline=None)
@given(cats=st.lists(st.integers(0, 255), max_size=64), a=st.integers(0, 70),
       z=st.integers(0, 70), want=st.integers(0, 255))
def test_first_at_least_is_the_first_hit(cats, a, z, want):
    arr = np.array(cats, dtype=np.uint8)
    hits = [i for i in range(a, min(z, len(cats))) if cats[i] >= want]
    assert fsm._first_at_least(arr, a, z, want) == (hits[0] if hits else -1)
