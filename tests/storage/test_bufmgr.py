"""The shared buffer manager: pins, content locks, waits, replacement, write-back, errors.

What is proven here:
  * pins are counted twice (private per backend, shared per buffer) and released exactly;
  * content locks: share/share compatible, exclusive excludes both, a waiter sleeps until
    another thread's backend releases, a wait past ``lock_wait_timeout_ms`` raises
    ``LockNotAvailable`` and leaves nothing behind; cleanup locks respect other pins;
  * a reader of a page another backend is reading in waits for that read instead of reading
    it twice, and retries when that read fails; a reader of a block being added waits for the
    extender instead of reading the zero page from disk;
  * the clock sweep keeps hot pages, never evicts pinned ones, and gives up with
    ``InsufficientResources`` after at most two turns when every buffer is pinned;
  * the bulk-read ring recycles its own few buffers and leaves the rest of the pool alone;
  * flush writes each dirty page once (with a valid checksum), drop forgets without writing;
  * a short relation file gives ``IOError_`` naming the file and block;
  * the fused calls: ``pin_lock`` / ``unlock_unpin`` leave exactly the pins, locks and
    counts of the pairs (a miss reads, a held lock is waited for, one release wakes a lock
    waiter and a cleanup waiter); ``read_recent`` pins only a buffer whose tag still names
    the block;
  * the free list hands out never-used buffers in order without moving the clock hand;
  * a hypothesis state machine: writes, reads, flushes, eviction pressure and instance
    reopens against a dict model, with no pin held between steps.

Not proven: fairness of waits, behaviour when a backend process dies holding pins (no reaper
exists yet), anything about speed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, invariant, rule,
                                 run_state_machine_as_test)

from minidb.config import BLCKSZ
from minidb.errors import InsufficientResources, IOError_, LockNotAvailable
from minidb.heap.heapam import HeapScan, heap_bulk_insert
from minidb.instance import Instance
from minidb.shmem import CTL_CLOCK_HAND
from minidb.storage import page as pg
from minidb.storage.buf_internals import BM_DIRTY, BM_MAX_USAGE_COUNT, BM_PIN_COUNT_WAITER
from minidb.storage.buf_table import make_tag
from minidb.storage.bufmgr import EXCLUSIVE, SHARE, UNLOCKED
from minidb.storage.freelist import AccessStrategy
from minidb.storage.smgr import FSM_FORKNUM, MAIN_FORKNUM

VALUE_OFFSET = 4096  # where tests write their marker into a page (inside the free space)


# -- helpers -------------------------------------------------------------------------------------


def add_pages(bm, rfn: int, n: int, fork: int = MAIN_FORKNUM) -> None:
    """Extend a relation by ``n`` initialised pages, each holding its block number."""
    for _ in range(n):
        block, bufs = bm.extend(rfn, 1, fork=fork)
        page = bm.page(bufs[0])
        pg.init_page(page)
        page[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0] = block
        bm.mark_dirty(bufs[0])
        bm.unlock(bufs[0])
        bm.unpin(bufs[0])


def read_value(bm, rfn: int, block: int) -> int:
    b = bm.pin(rfn, block)
    bm.lock(b, SHARE)
    v = int(bm.page(b)[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0])
    bm.unlock(b)
    bm.unpin(b)
    return v


def write_value(bm, rfn: int, block: int, value: int) -> None:
    b = bm.pin(rfn, block)
    bm.lock(b, EXCLUSIVE)
    bm.page(b)[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0] = value
    pg.bump_lsn(bm.page(b))
    bm.mark_dirty(b)
    bm.unlock(b)
    bm.unpin(b)


def cached(inst, rfn: int, block: int, fork: int = MAIN_FORKNUM) -> bool:
    return bool((inst.seg.buf_tag == make_tag(rfn, fork, block)).any())


def buffer_of(inst, rfn: int, block: int) -> int:
    hit = np.flatnonzero(inst.seg.buf_tag == make_tag(rfn, MAIN_FORKNUM, block))
    assert hit.size == 1
    return int(hit[0])


def wait_until(cond, what: str, limit: float = 10.0) -> None:
    """Poll for a state another thread reaches (bounded, so a bug fails instead of hanging)."""
    end = time.monotonic() + limit
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.001)


def is_waiting(inst, backend, buf: int | None = None) -> bool:
    w = inst.seg.buf_waiters if buf is None else inst.seg.buf_waiters[buf:buf + 1]
    return bool((w & np.uint64(1 << backend.slot)).any())


class Runner(threading.Thread):
    """Run ``fn`` in a thread, keep its result or exception."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None
        self.done = threading.Event()

    def run(self):
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.done.set()

    def finish(self):
        self.join(10)
        assert not self.is_alive(), "thread did not finish"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def table(instance, make_table):
    """A relation with 8 initialised pages (no tuples), its relfilenode."""
    rel = make_table(instance, "t", [("a", "integer")])
    with instance.connect() as b:
        add_pages(b.bufmgr, rel.relfilenode, 8)
    return rel.relfilenode


@pytest.fixture
def two_backends(instance):
    a, b = instance.connect(), instance.connect(lock_wait_timeout_ms=200)
    yield a, b
    a.close()
    b.close()


# -- 7. pins and content locks ---------------------------------------------------------------------


def test_pins_are_counted_privately_and_shared_once(instance, table, two_backends,
                                                    assert_no_pins):
    a, b = (x.bufmgr for x in two_backends)
    seg = instance.seg
    buf = a.pin(table, 3)
    assert a.pin(table, 3) == buf
    assert seg.buf_refcount[buf] == 1 and seg.backend_pins[a.slot, buf] == 2
    assert b.pin(table, 3) == buf
    assert seg.buf_refcount[buf] == 2 and seg.backend_pins[b.slot, buf] == 1
    a.incr_pin(buf)
    assert seg.backend_pins[a.slot, buf] == 3 and seg.buf_refcount[buf] == 2
    for _ in range(3):
        a.unpin(buf)
    assert seg.buf_refcount[buf] == 1 and seg.backend_pins[a.slot, buf] == 0
    with pytest.raises(AssertionError, match="not pinned"):
        a.unpin(buf)
    b.unpin(buf)
    assert_no_pins(instance)


def test_share_locks_are_compatible_and_exclusive_excludes(instance, table, two_backends):
    a, b = (x.bufmgr for x in two_backends)
    buf = a.pin(table, 0)
    b.pin(table, 0)
    a.lock(buf, SHARE)
    b.lock(buf, SHARE)  # does not wait
    assert instance.seg.buf_lock_shared[buf] == 2
    with pytest.raises(AssertionError, match="taken twice"):
        a.lock(buf, SHARE)
    b.unlock(buf)
    assert not b.conditional_lock(buf, EXCLUSIVE)  # a still shares it
    assert b.held[buf] == UNLOCKED
    a.unlock(buf)
    assert b.conditional_lock(buf, EXCLUSIVE)
    assert instance.seg.buf_lock_excl[buf] == b.slot
    assert not a.conditional_lock(buf, SHARE)
    assert not a.conditional_lock(buf, EXCLUSIVE)
    b.unlock(buf)
    with pytest.raises(AssertionError, match="not locked"):
        b.unlock(buf)
    a.unpin(buf)
    b.unpin(buf)


@pytest.mark.parametrize("held, wanted", [(SHARE, EXCLUSIVE), (EXCLUSIVE, SHARE),
                                          (EXCLUSIVE, EXCLUSIVE)])
def test_lock_waits_for_holder_in_another_thread(instance, table, held, wanted, assert_no_pins):
    a = instance.connect()
    b = instance.connect()  # default timeout: this wait must end by the release, not a timeout
    buf = a.bufmgr.pin(table, 1)
    a.bufmgr.lock(buf, held)

    def waiter():
        bb = b.bufmgr.pin(table, 1)
        b.bufmgr.lock(bb, wanted)
        mode = int(b.bufmgr.held[bb])
        b.bufmgr.unlock(bb)
        b.bufmgr.unpin(bb)
        return mode

    t = Runner(waiter)
    t.start()
    wait_until(lambda: is_waiting(instance, b, buf), "the second backend sleeps on the buffer")
    assert not t.done.is_set()
    assert b.bufmgr.held[buf] == UNLOCKED
    a.bufmgr.unlock(buf)  # wakes the waiter
    assert t.finish() == wanted
    a.bufmgr.unpin(buf)
    a.close()
    b.close()
    assert_no_pins(instance)


def test_lock_wait_past_the_timeout_raises_and_leaves_nothing(instance, table, two_backends,
                                                              assert_no_pins):
    a, b = (x.bufmgr for x in two_backends)  # b: lock_wait_timeout_ms=200
    buf = a.pin(table, 2)
    a.lock(buf, SHARE)
    b.pin(table, 2)
    with pytest.raises(LockNotAvailable) as ei:
        b.lock(buf, EXCLUSIVE)
    msg = str(ei.value)
    assert "200 ms" in msg and "block 2" in msg and '"t"' in msg, msg
    assert ei.value.sqlstate == "55P03"
    assert b.held[buf] == UNLOCKED
    assert not is_waiting(instance, two_backends[1], buf)
    assert instance.seg.buf_lock_shared[buf] == 1  # a's lock is untouched
    a.unlock(buf)
    b.lock(buf, EXCLUSIVE)  # and the buffer works again
    b.unlock(buf)
    a.unpin(buf)
    b.unpin(buf)
    assert_no_pins(instance)


def test_cleanup_lock_respects_other_pins(instance, table, two_backends, assert_no_pins):
    a, b = (x.bufmgr for x in two_backends)
    buf = a.pin(table, 4)
    b.pin(table, 4)
    assert not b.try_cleanup_lock(buf)
    assert b.held[buf] == UNLOCKED and instance.seg.buf_lock_excl[buf] == -1
    a.unpin(buf)
    assert b.try_cleanup_lock(buf)
    assert b.held[buf] == EXCLUSIVE
    b.unlock(buf)
    b.incr_pin(buf)
    assert not b.try_cleanup_lock(buf)  # our own second pin counts too
    b.unpin(buf)

    # lock_for_cleanup waits until the other backend's pin goes
    a.pin(table, 4)

    def cleaner():
        b.lock_for_cleanup(buf)
        ok = instance.seg.buf_refcount[buf] == 1
        b.unlock(buf)
        return ok

    t = Runner(cleaner)
    t.start()
    wait_until(lambda: instance.seg.buf_flags[buf] & BM_PIN_COUNT_WAITER,
               "the cleaner announces it waits for pins")
    assert not t.done.is_set()
    a.unpin(buf)
    assert t.finish()
    b.unpin(buf)
    assert_no_pins(instance)


def test_mark_dirty_requires_an_exclusive_lock(instance, table, backend):
    bm = backend.bufmgr
    buf = bm.pin(table, 5)
    with pytest.raises(AssertionError, match="exclusive"):
        bm.mark_dirty(buf)
    bm.lock(buf, SHARE)
    with pytest.raises(AssertionError, match="exclusive"):
        bm.mark_dirty(buf)
    bm.mark_dirty_hint(buf)  # a hint needs only the share lock
    assert instance.seg.buf_flags[buf] & BM_DIRTY
    bm.unlock(buf)
    with pytest.raises(AssertionError):
        bm.mark_dirty_hint(buf)
    bm.unpin(buf)


def test_release_all_releases_every_pin_and_lock(instance, table, backend, assert_no_pins):
    bm = backend.bufmgr
    b0 = bm.pin(table, 0)
    bm.pin(table, 0)
    b1 = bm.pin(table, 1)
    b2 = bm.pin(table, 2)
    bm.lock(b1, SHARE)
    bm.lock(b2, EXCLUSIVE)
    seg, slot = instance.seg, bm.slot
    assert seg.backend_pins[slot, [b0, b1, b2]].tolist() == [2, 1, 1]
    assert seg.buf_refcount[[b0, b1, b2]].tolist() == [1, 1, 1]
    assert seg.buf_lock_shared[b1] == 1 and seg.buf_lock_excl[b2] == slot
    assert not bm.holds_nothing()
    bm.release_all()
    assert bm.holds_nothing()
    assert seg.backend_pins[slot, [b0, b1, b2]].tolist() == [0, 0, 0]
    assert seg.buf_refcount[[b0, b1, b2]].tolist() == [0, 0, 0]
    assert seg.buf_lock_shared[b1] == 0 and seg.buf_lock_excl[b2] == -1
    assert bm.held[b1] == UNLOCKED and bm.held[b2] == UNLOCKED
    assert_no_pins(instance)
    # the buffers are usable by anyone afterwards
    with instance.connect() as other:
        other.bufmgr.lock(other.bufmgr.pin(table, 2), EXCLUSIVE)
        other.bufmgr.release_all()


def test_backend_close_releases_what_it_holds(instance, table, assert_no_pins):
    b = instance.connect()
    b.bufmgr.lock(b.bufmgr.pin(table, 0), EXCLUSIVE)
    b.bufmgr.pin(table, 1)
    b.close()
    assert_no_pins(instance)


# -- reads: waiting for another backend's I/O ----------------------------------------------------


def _empty_pool(instance, rfn):
    instance.checkpoint()
    with instance.connect() as b:
        b.bufmgr.drop_relation_buffers(rfn)
    assert not any(cached(instance, rfn, blk) for blk in range(8))


@pytest.mark.parametrize("first_read_fails", [False, True])
def test_second_reader_waits_for_the_first_read(instance, table, monkeypatch, assert_no_pins,
                                                first_read_fails):
    _empty_pool(instance, table)
    a, b = instance.connect(), instance.connect()
    entered, gate = threading.Event(), threading.Event()
    orig = instance.smgr.read_blocks
    reader_thread = []

    def slow_read(rfn, fork, first, buffers):
        if threading.current_thread() is reader_thread[0]:
            entered.set()
            assert gate.wait(10)
            if first_read_fails:
                raise IOError_("injected read failure")
        return orig(rfn, fork, first, buffers)

    monkeypatch.setattr(instance.smgr, "read_blocks", slow_read)

    def read_with(backend):
        return lambda: (backend.bufmgr.pin(table, 6), read_value(backend.bufmgr, table, 6))

    ta = Runner(read_with(a))
    reader_thread.append(ta)
    ta.start()
    assert entered.wait(10)
    tb = Runner(read_with(b))
    tb.start()
    wait_until(lambda: is_waiting(instance, b), "the second reader waits for the first read")
    gate.set()
    buf_b, value_b = tb.finish()
    assert value_b == 6
    if first_read_fails:
        with pytest.raises(IOError_, match="injected"):
            ta.finish()
        assert a.counters()["buffers_read"] == 0
        assert b.counters()["buffers_read"] == 1  # the waiter retried and read it itself
    else:
        buf_a, value_a = ta.finish()
        assert buf_a == buf_b and value_a == 6
        assert a.counters()["buffers_read"] + b.counters()["buffers_read"] == 1  # read once
        a.bufmgr.unpin(buf_a)
    b.bufmgr.unpin(buf_b)
    assert a.bufmgr.holds_nothing()
    a.close()
    b.close()
    assert_no_pins(instance)


def test_reader_of_a_block_being_added_waits_for_the_extender(instance, table, monkeypatch,
                                                              assert_no_pins):
    """A backend that sees the relation's new size and pins the new block must not read the
    zero page from disk under the extender (which then found "its" block already in the
    pool and failed an assertion); it waits and then sees the initialised page."""
    a, b = instance.connect(), instance.connect()
    orig = instance.smgr.extend
    readers = []

    def reader(block):
        buf = b.bufmgr.pin(table, block)
        b.bufmgr.lock(buf, SHARE)
        page = b.bufmgr.page(buf).copy()
        b.bufmgr.unlock(buf)
        b.bufmgr.unpin(buf)
        return page

    def extend_and_race(rfn, fork, first, count=1):
        orig(rfn, fork, first, count)
        if rfn == table and fork == MAIN_FORKNUM and not readers:
            assert instance.smgr.nblocks(rfn) == first + count  # the new size is visible
            t = Runner(lambda: reader(first))
            readers.append(t)
            t.start()
            wait_until(lambda: t.done.is_set() or is_waiting(instance, b),
                       "the reader has read the block or waits for it")

    monkeypatch.setattr(instance.smgr, "extend", extend_and_race)
    add_pages(a.bufmgr, table, 1)
    monkeypatch.undo()
    page = readers[0].finish()
    assert not pg.page_is_new(page)
    assert page[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0] == 8  # block 8's marker
    a.close()
    b.close()
    assert_no_pins(instance)


def test_short_file_read_names_the_file(instance, table, backend, assert_no_pins):
    _empty_pool(instance, table)
    path = instance.smgr.path(table)
    os.truncate(path, 5 * BLCKSZ + 100)
    bm = backend.bufmgr
    assert read_value(bm, table, 4) == 4
    with pytest.raises(IOError_) as ei:
        bm.pin(table, 5)
    msg = str(ei.value)
    assert path in msg and "block 5" in msg and "read only 100 of 8192" in msg, msg
    with pytest.raises(IOError_, match="read only 0 of 8192"):
        bm.pin(table, 7)
    assert not cached(instance, table, 5) and not cached(instance, table, 7)
    assert bm.holds_nothing()
    assert_no_pins(instance)
    os.truncate(path, 8 * BLCKSZ)  # let the instance close cleanly (blocks 5.. now zero)


# -- replacement -----------------------------------------------------------------------------------


def test_every_buffer_pinned_gives_a_clear_error(tmp_path, make_table, assert_no_pins):
    with Instance(tmp_path / "data", shared_buffers=16) as inst:
        rel = make_table(inst, "t", [("a", "integer")])
        with inst.connect() as b:
            bm = b.bufmgr
            add_pages(bm, rel.relfilenode, 20)
            bufs = [bm.pin(rel.relfilenode, blk) for blk in range(16)]
            assert len(set(bufs)) == 16
            hand = int(inst.seg.control[CTL_CLOCK_HAND])
            with pytest.raises(InsufficientResources, match="no unpinned buffers available"):
                bm.pin(rel.relfilenode, 16)
            # promptly: the clock hand gave up within two turns over the pool
            assert int(inst.seg.control[CTL_CLOCK_HAND]) - hand <= 2 * 16
            assert not cached(inst, rel.relfilenode, 16)
            for buf in bufs:
                bm.unpin(buf)
            assert_no_pins(inst)
            assert read_value(bm, rel.relfilenode, 16) == 16
            assert read_value(bm, rel.relfilenode, 0) == 0


def test_pinned_pages_are_never_evicted(tmp_path, make_table):
    with Instance(tmp_path / "data", shared_buffers=16) as inst:
        rfn = make_table(inst, "t", [("a", "integer")]).relfilenode
        with inst.connect() as b:
            bm = b.bufmgr
            add_pages(bm, rfn, 60)
            held = [bm.pin(rfn, blk) for blk in (3, 30)]
            for blk in range(60):
                assert read_value(bm, rfn, blk) == blk
            assert b.counters()["buffers_evicted"] > 40
            assert buffer_of(inst, rfn, 3) == held[0] and buffer_of(inst, rfn, 30) == held[1]
            for buf in held:
                bm.unpin(buf)


def test_clock_sweep_usage_counts(tmp_path, make_table):
    with Instance(tmp_path / "data", shared_buffers=16) as inst:
        rfn = make_table(inst, "t", [("a", "integer")]).relfilenode
        with inst.connect() as b:
            bm = b.bufmgr
            add_pages(bm, rfn, 60)
            usage = inst.seg.buf_usage
            # each pin through the default strategy raises the count, up to the maximum
            buf = bm.pin(rfn, 59)
            bm.unpin(buf)
            u0 = int(usage[buf])
            for _ in range(10):
                bm.unpin(bm.pin(rfn, 59))
            assert u0 < BM_MAX_USAGE_COUNT and usage[buf] == BM_MAX_USAGE_COUNT
            # a ring pin of a cached page raises the count to 1 at most
            ring = AccessStrategy("bulkread", 256, 16)
            usage[buf] = 0
            bm.unpin(bm.pin(rfn, 59, strategy=ring))
            assert usage[buf] == 1
            usage[buf] = 3
            bm.unpin(bm.pin(rfn, 59, strategy=ring))
            assert usage[buf] == 3

            # a hot page (usage 5) outlives cold pages read after it
            for _ in range(5):
                bm.unpin(bm.pin(rfn, 0))
            for blk in range(1, 14):
                read_value(bm, rfn, blk)
            assert cached(inst, rfn, 0) and cached(inst, rfn, 1)
            for blk in range(14, 30):  # about one turn of the clock over 16 buffers
                read_value(bm, rfn, blk)
            assert cached(inst, rfn, 0), "the hot page was evicted"
            assert not cached(inst, rfn, 1), "a cold page outlived a turn of the clock"
            assert usage[buffer_of(inst, rfn, 0)] < BM_MAX_USAGE_COUNT  # passed, decremented


def test_ring_scan_leaves_the_rest_of_the_pool_alone(instance, make_table, backend):
    bm = backend.bufmgr
    big = make_table(instance, "big", [("a", "bigint"), ("s", "text")])
    small = make_table(instance, "small", [("a", "bigint"), ("s", "text")])
    heap_bulk_insert(backend, big, {"a": np.arange(12000), "s": ["x" * 100] * 12000}, 12000,
                     xmin=1)
    heap_bulk_insert(backend, small, {"a": np.arange(150), "s": ["y" * 100] * 150}, 150, xmin=1)
    nbig = bm.smgr.nblocks(big.relfilenode)
    nsmall = bm.smgr.nblocks(small.relfilenode)
    assert nbig > 3 * 64 and nsmall <= 4

    def count(rel, **kw):
        return sum(len(batch) for batch in HeapScan(backend, rel, [0], **kw))

    def delta(before):
        now = bm.counters()
        return {k: now[k] - before[k] for k in now}

    for use_ring in (True, False):
        instance.checkpoint()
        bm.drop_relation_buffers(big.relfilenode)
        bm.drop_relation_buffers(small.relfilenode)
        for _ in range(3):  # warm the small table (usage count 3)
            assert count(small) == 150
        c = bm.counters()
        # without a ring, batch_pages must bound how many buffers the scan pins at once
        kw = {} if use_ring else {"batch_pages": 8}
        assert count(big, use_ring=use_ring, **kw) == 12000
        d = delta(c)
        assert d["buffers_read"] == nbig
        c = bm.counters()
        assert count(small) == 150
        after = delta(c)
        if use_ring:
            ring = AccessStrategy("bulkread", backend.settings.bulkread_ring_kb, bm.nbuffers)
            assert d["ring_reused"] >= nbig - 2 * ring.nbuffers
            big_cached = sum(cached(instance, big.relfilenode, blk) for blk in range(nbig))
            assert big_cached <= 2 * ring.nbuffers
            assert after["buffers_read"] == 0 and after["buffers_hit"] == nsmall
        else:  # the contrast that shows the test can fail: no ring, the pool is flushed
            assert d["ring_reused"] == 0
            assert after["buffers_read"] == nsmall


def test_scan_when_the_pool_is_full_of_the_tables_pages(tmp_path, make_table):
    with Instance(tmp_path / "data", shared_buffers=16) as inst:
        rel = make_table(inst, "t", [("a", "bigint"), ("s", "text")])
        with inst.connect() as b:
            bm = b.bufmgr
            heap_bulk_insert(b, rel, {"a": np.arange(4000), "s": ["x" * 100] * 4000}, 4000,
                             xmin=1)
            inst.checkpoint()
            bm.drop_relation_buffers(rel.relfilenode)
            for blk in range(16):  # the table's first 16 pages fill the pool
                bm.unpin(bm.pin(rel.relfilenode, blk))
            assert sum(len(batch) for batch in HeapScan(b, rel, [0])) == 4000


# -- write-back and dropping -------------------------------------------------------------------


def test_flush_writes_each_dirty_page_once(instance, make_table, table, backend):
    bm = backend.bufmgr
    other = make_table(instance, "other", [("a", "integer")]).relfilenode
    add_pages(bm, other, 2)
    instance.checkpoint()
    assert bm.flush_buffers() == 0
    c0 = bm.counters()["buffers_written"]
    for blk in (1, 3, 5):
        write_value(bm, table, blk, 1000 + blk)
    write_value(bm, other, 0, 7)
    assert bm.flush_buffers(other) == 1  # one relation only
    assert bm.flush_buffers() == 3
    assert bm.counters()["buffers_written"] - c0 == 4
    assert bm.flush_buffers() == 0  # nothing is dirty any more
    assert bm.counters()["buffers_written"] - c0 == 4
    assert not (instance.seg.buf_flags & BM_DIRTY).any()
    # the file has the new contents, with a valid checksum
    with open(instance.smgr.path(table), "rb") as f:
        for blk in range(8):
            f.seek(blk * BLCKSZ)
            page = np.frombuffer(f.read(BLCKSZ), dtype=np.uint8)
            assert pg.verify_checksums(page, [blk])[0]
            want = 1000 + blk if blk in (1, 3, 5) else blk
            assert page[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0] == want


def test_drop_relation_buffers_forgets_without_writing(instance, table, backend,
                                                      assert_no_pins):
    bm = backend.bufmgr
    instance.checkpoint()
    for blk in range(8):
        write_value(bm, table, blk, -blk)  # dirty, never written
    c0 = bm.counters()["buffers_written"]
    held = bm.pin(table, 6)
    with pytest.raises(InsufficientResources, match="still pinned"):
        bm.drop_relation_buffers(table, from_block=4)
    bm.unpin(held)
    bm.drop_relation_buffers(table, from_block=4)
    assert [cached(instance, table, blk) for blk in range(8)] == [True] * 4 + [False] * 4
    assert bm.counters()["buffers_written"] == c0
    assert [read_value(bm, table, blk) for blk in range(4, 8)] == [4, 5, 6, 7]  # disk's
    assert [read_value(bm, table, blk) for blk in range(4)] == [0, -1, -2, -3]  # pool's
    # the FSM fork only
    from minidb.storage import freespace
    freespace.record(bm, table, 0, 100)
    assert cached(instance, table, 0, FSM_FORKNUM)
    bm.drop_relation_buffers(table, fork=FSM_FORKNUM)
    assert not cached(instance, table, 0, FSM_FORKNUM) and cached(instance, table, 0)
    bm.drop_relation_buffers(table)
    assert not (instance.seg.buf_tag >> 34 == table).any()
    assert_no_pins(instance)


def test_failed_write_keeps_the_page_dirty_and_names_the_file(instance, table, backend,
                                                             monkeypatch, assert_no_pins):
    import errno
    bm = backend.bufmgr
    instance.checkpoint()
    write_value(bm, table, 2, 4242)
    c0 = bm.counters()["buffers_written"]

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", disk_full)
    with pytest.raises(IOError_) as ei:
        bm.flush_buffers()
    msg = str(ei.value)
    assert instance.smgr.path(table) in msg and "block 2" in msg and "No space" in msg, msg
    monkeypatch.undo()
    buf = buffer_of(instance, table, 2)
    assert instance.seg.buf_flags[buf] & BM_DIRTY  # not lost: still to be written
    assert bm.counters()["buffers_written"] == c0
    assert_no_pins(instance)
    assert bm.flush_buffers() == 1  # the disk has room again
    with open(instance.smgr.path(table), "rb") as f:
        f.seek(2 * BLCKSZ + VALUE_OFFSET)
        assert int.from_bytes(f.read(8), "little", signed=True) == 4242


def test_failed_extension_leaves_file_and_pool_as_they_were(instance, table, backend,
                                                            monkeypatch, assert_no_pins):
    import errno
    bm = backend.bufmgr
    size = os.path.getsize(instance.smgr.path(table))
    real = os.pwrite

    def half_then_full(fd, data, offset):
        real(fd, data[:BLCKSZ // 2], offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", half_then_full)
    with pytest.raises(IOError_, match="could not extend file .* by 3 blocks: No space"):
        bm.extend(table, 3)
    monkeypatch.undo()
    assert os.path.getsize(instance.smgr.path(table)) == size  # whole blocks only
    assert not any(cached(instance, table, blk) for blk in (8, 9, 10))
    assert bm.holds_nothing()
    assert_no_pins(instance)
    add_pages(bm, table, 1)  # and extension works again, at the right block
    assert read_value(bm, table, 8) == 8


# -- 8. the buffer pool against a dict -------------------------------------------------------------

MAX_BLOCK = 40
# fewer partition locks and backend slots: an instance opens (creating every lock) in a few
# ms, and the machine opens one or more per example
SMALL = dict(buffer_partitions=8, max_connections=4, max_worker_processes=0)


def test_buffer_pool_state_machine(tmp_path, make_table):
    base = str(tmp_path)

    class BufferPoolMachine(RuleBasedStateMachine):
        """Relation 'a' holds one int64 per page (the model: block -> value); relation 'b'
        only exists to push a's pages out of the 16-buffer pool."""

        def __init__(self):
            super().__init__()
            self.dir = tempfile.mkdtemp(dir=base)
            self.inst = Instance(os.path.join(self.dir, "data"), shared_buffers=16, **SMALL)
            self.a = make_table(self.inst, "a", [("x", "bigint")]).relfilenode
            self.b = make_table(self.inst, "b", [("x", "bigint")]).relfilenode
            self.backend = self.inst.connect()
            add_pages(self.backend.bufmgr, self.b, 40)
            self.model: dict[int, int] = {}
            self.nblocks = 0

        @property
        def bm(self):
            return self.backend.bufmgr

        @rule(block=st.integers(0, MAX_BLOCK - 1), value=st.integers(-2**63, 2**63 - 1))
        def write(self, block, value):
            while self.nblocks <= block:
                add_pages(self.bm, self.a, 1)
                self.model[self.nblocks] = self.nblocks
                self.nblocks += 1
            write_value(self.bm, self.a, block, value)
            self.model[block] = value

        @rule(block=st.integers(0, MAX_BLOCK - 1))
        def read(self, block):
            if block < self.nblocks:
                assert read_value(self.bm, self.a, block) == self.model[block]

        @rule()
        def read_all(self):
            assert self.bm.smgr.nblocks(self.a) == self.nblocks
            for block in range(self.nblocks):
                assert read_value(self.bm, self.a, block) == self.model[block]

        @rule()
        def flush(self):
            self.bm.flush_buffers()
            assert not (self.inst.seg.buf_flags & BM_DIRTY).any()

        @rule(n=st.integers(4, 40))
        def evict_pressure(self, n):
            for block in range(n):
                assert read_value(self.bm, self.b, block) == block

        @rule(shared_buffers=st.sampled_from([16, 24]))
        def reopen(self, shared_buffers):
            self.backend.close()
            self.inst.close()
            self.inst = Instance(os.path.join(self.dir, "data"), shared_buffers=shared_buffers,
                                 **SMALL)
            self.backend = self.inst.connect()

        @invariant()
        def no_pins_between_steps(self):
            assert self.bm.holds_nothing()
            assert not self.inst.seg.buf_refcount.any()
            assert (self.inst.seg.buf_lock_excl == -1).all()
            assert not self.inst.seg.buf_lock_shared.any()
            assert self.backend.counters()["checksum_failures"] == 0

        def teardown(self):
            try:
                self.backend.close()
                self.inst.close()
            finally:
                shutil.rmtree(self.dir, ignore_errors=True)

    run_state_machine_as_test(
        BufferPoolMachine,
        settings=settings(max_examples=20, stateful_step_count=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]))


# -- a process that dies inside a critical section ---------------------------------------------


def test_partition_lock_left_by_a_killed_process_ends_in_an_error(instance, table, backend,
                                                                   monkeypatch):
    """A child SIGKILLed while it holds a buffer-mapping partition lock cannot release it;
    the next process that needs that partition gets LWLockTimeout naming the lock after
    LWLOCK_TIMEOUT_S, not a hang (PostgreSQL would crash-restart here)."""
    import signal

    from minidb import shmem
    from minidb.errors import LWLockTimeout

    monkeypatch.setattr(shmem, "LWLOCK_TIMEOUT_S", 0.3)
    _, p = backend.bufmgr.table.hash(make_tag(table, MAIN_FORKNUM, 0))
    lock = instance.locks.partition[p]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        lock.acquire()
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    try:
        with pytest.raises(LWLockTimeout, match=f"buffer mapping partition {p} lock"):
            read_value(backend.bufmgr, table, 0)
        assert not lock.acquire(False)  # still held by the dead child
    finally:
        lock.release()  # as a restart would: the instance can close cleanly
    assert read_value(backend.bufmgr, table, 0) == 0  # the partition works again


# -- fused pin + lock, the recent-buffer hint, the free list -----------------------------------


def test_pin_lock_and_unlock_unpin_do_what_the_pairs_do(instance, table, two_backends,
                                                        assert_no_pins):
    a, b = (x.bufmgr for x in two_backends)
    seg = instance.seg
    hits = a.counters()["buffers_hit"]
    buf = a.pin_lock(table, 2, SHARE)
    assert buffer_of(instance, table, 2) == buf
    assert seg.backend_pins[a.slot, buf] == 1 and seg.buf_refcount[buf] == 1
    assert a.held[buf] == SHARE and seg.buf_lock_shared[buf] == 1
    assert a.counters()["buffers_hit"] == hits + 1  # block 2 was in the pool
    with pytest.raises(AssertionError, match="taken twice"):
        a.pin_lock(table, 2, SHARE)
    assert seg.backend_pins[a.slot, buf] == 1  # the failed call left its pin nowhere
    a.incr_pin(buf)  # a second pin survives unlock_unpin
    a.unlock_unpin(buf)
    assert a.held[buf] == UNLOCKED and seg.buf_lock_shared[buf] == 0
    assert seg.backend_pins[a.slot, buf] == 1 and seg.buf_refcount[buf] == 1
    a.unpin(buf)
    # exclusive: the other backend can take neither mode meanwhile
    buf = a.pin_lock(table, 2, EXCLUSIVE)
    assert seg.buf_lock_excl[buf] == a.slot
    assert not b.conditional_lock(b.pin(table, 2), SHARE)
    b.unpin(buf)
    a.unlock_unpin(buf)
    with pytest.raises(AssertionError, match="not locked"):
        a.unlock_unpin(buf)
    # a miss reads the page like pin() does
    a.flush_buffers(table)
    a.drop_relation_buffers(table, from_block=5)
    reads = a.counters()["buffers_read"]
    buf = a.pin_lock(table, 5, SHARE)
    assert a.counters()["buffers_read"] == reads + 1
    assert int(a.page(buf)[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0]) == 5
    a.unlock_unpin(buf)
    assert_no_pins(instance)


@pytest.mark.parametrize("mode", [SHARE, EXCLUSIVE])
def test_pin_lock_miss_locks_as_the_page_becomes_valid(instance, table, two_backends, mode,
                                                       assert_no_pins):
    """A miss of pin_lock takes the content lock in the step that makes the read page valid
    (no separate ``lock`` call), with the counts and lock state of pin + lock."""
    a, b = (x.bufmgr for x in two_backends)
    seg = instance.seg
    a.flush_buffers(table)
    a.drop_relation_buffers(table, from_block=4)
    c = a.counters()

    def no_lock(*args):
        raise AssertionError("the miss took its lock separately")

    a.lock = no_lock
    try:
        buf = a.pin_lock(table, 4, mode)
    finally:
        del a.lock
    d = {k: a.counters()[k] - c[k] for k in ("buffers_read", "buffers_hit")}
    assert d == {"buffers_read": 1, "buffers_hit": 0}
    assert int(a.page(buf)[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0]) == 4
    assert seg.backend_pins[a.slot, buf] == 1 and seg.buf_refcount[buf] == 1
    assert a.held[buf] == mode
    if mode == SHARE:
        assert seg.buf_lock_shared[buf] == 1 and seg.buf_lock_excl[buf] < 0
        other = b.pin(table, 4)
        assert b.conditional_lock(other, SHARE)   # share locks are compatible
        b.unlock(other)
        assert not b.conditional_lock(other, EXCLUSIVE)
    else:
        assert seg.buf_lock_excl[buf] == a.slot and seg.buf_lock_shared[buf] == 0
        other = b.pin(table, 4)
        assert not b.conditional_lock(other, SHARE)
    b.unpin(other)
    a.unlock_unpin(buf)
    assert a.held[buf] == UNLOCKED and seg.buf_lock_shared[buf] == 0
    assert seg.buf_lock_excl[buf] < 0
    assert_no_pins(instance)


def test_read_recent_checks_the_hint_against_the_tag(instance, table, backend, assert_no_pins):
    bm = backend.bufmgr
    buf = bm.pin_lock(table, 6, SHARE)
    bm.unlock_unpin(buf)
    hits = backend.counters()["buffers_hit"]
    assert bm.read_recent(table, 6, buf, EXCLUSIVE) == buf
    assert bm.held[buf] == EXCLUSIVE and instance.seg.buf_refcount[buf] == 1
    assert backend.counters()["buffers_hit"] == hits + 1
    bm.unlock_unpin(buf)
    # a hint naming another page, or no buffer at all: None, nothing pinned or counted
    other = bm.pin(table, 7)
    bm.unpin(other)
    hits = backend.counters()["buffers_hit"]
    for hint in (other, -1, bm.nbuffers, 10**9):
        assert bm.read_recent(table, 6, hint, SHARE) is None
    assert bm.read_recent(table, 6, buf, SHARE, fork=FSM_FORKNUM) is None
    assert backend.counters()["buffers_hit"] == hits
    assert_no_pins(instance)
    # the page left the pool: its old buffer is no hint any more
    bm.drop_relation_buffers(table, from_block=6)
    assert bm.read_recent(table, 6, buf, SHARE) is None
    assert_no_pins(instance)


@pytest.mark.parametrize("fused", [False, True])
def test_pin_lock_waits_for_an_exclusive_holder_and_unlock_unpin_wakes(
        instance, table, fused, assert_no_pins):
    a = instance.connect()
    b = instance.connect()
    buf = a.bufmgr.pin_lock(table, 1, EXCLUSIVE)
    hint = buf if fused else -1

    def waiter():
        bb = b.bufmgr.read_recent(table, 1, hint, SHARE) or b.bufmgr.pin_lock(table, 1, SHARE)
        mode = int(b.bufmgr.held[bb])
        b.bufmgr.unlock_unpin(bb)
        return mode

    t = Runner(waiter)
    t.start()
    wait_until(lambda: is_waiting(instance, b, buf), "the second backend sleeps on the buffer")
    assert instance.seg.backend_pins[b.slot, buf] == 1  # pinned while it waits for the lock
    a.bufmgr.unlock_unpin(buf)  # wakes the waiter
    assert t.finish() == SHARE
    a.close()
    b.close()
    assert_no_pins(instance)


def test_unlock_unpin_wakes_a_cleanup_waiter(instance, table, two_backends, assert_no_pins):
    a, b = (x.bufmgr for x in two_backends)
    buf = b.pin(table, 4)
    a.pin_lock(table, 4, SHARE)

    def cleaner():
        b.lock_for_cleanup(buf)
        ok = instance.seg.buf_refcount[buf] == 1
        b.unlock(buf)
        return ok

    t = Runner(cleaner)
    t.start()
    wait_until(lambda: is_waiting(instance, b, buf), "the cleaner sleeps on the buffer")
    a.unlock_unpin(buf)  # one wake-up for the lock and the pin, both gone
    assert t.finish()
    b.unpin(buf)
    assert_no_pins(instance)


def test_pin_run_share_and_unlock_unpin_batch_do_what_the_pairs_do(tmp_path, make_table,
                                                                   assert_no_pins, request):
    """``pin_run(share=True)`` pins and share-locks like ``pin_run`` + ``lock_share_batch``
    (hits locked in the pinning pass, a page read and a page another backend holds
    exclusively locked afterwards, waiting for it); ``unlock_unpin_batch`` releases like
    ``unlock_batch`` + ``unpin_batch`` and wakes a cleanup waiter and a lock waiter."""
    instance = Instance(tmp_path / "big", shared_buffers=1024)  # max_batch_pins >= 8
    request.addfinalizer(instance.close)
    rel = make_table(instance, "t", [("a", "integer")])
    table = rel.relfilenode
    a, b = instance.connect(), instance.connect()
    seg = instance.seg
    bm = a.bufmgr
    assert bm.max_batch_pins >= 8
    add_pages(bm, table, 8)
    bm.flush_buffers(table)
    bm.drop_relation_buffers(table, from_block=6)  # blocks 6, 7 must be read
    held = b.bufmgr.pin_lock(table, 3, EXCLUSIVE)
    hits, reads = a.counters()["buffers_hit"], a.counters()["buffers_read"]
    out = []
    t = Runner(lambda: out.append(bm.pin_run(table, 0, 8, share=True)))
    t.start()
    wait_until(lambda: is_waiting(instance, a, held), "the scan sleeps on block 3")
    b.bufmgr.unlock_unpin(held)
    t.finish()
    bufs = out[0]
    assert [buffer_of(instance, table, k) for k in range(8)] == bufs.tolist()
    assert (bm.held[bufs] == SHARE).all() and (seg.buf_lock_shared[bufs] == 1).all()
    assert (seg.backend_pins[a.slot, bufs] == 1).all() and (seg.buf_refcount[bufs] == 1).all()
    assert a.counters()["buffers_hit"] == hits + 6
    assert a.counters()["buffers_read"] == reads + 2
    assert [int(bm.page(x)[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0])
            for x in bufs.tolist()] == list(range(8))
    # waiters: a cleanup lock on block 1 (another backend pins nothing else), an exclusive
    # lock on block 5; one unlock_unpin_batch wakes both
    c1 = b.bufmgr.pin(table, 1)
    c = instance.connect()
    c5 = c.bufmgr.pin(table, 5)

    def cleaner():
        b.bufmgr.lock_for_cleanup(c1)
        ok = seg.buf_refcount[c1] == 1
        b.bufmgr.unlock_unpin(c1)
        return ok

    def writer():
        c.bufmgr.lock(c5, EXCLUSIVE)
        c.bufmgr.unlock_unpin(c5)
        return True

    t1, t2 = Runner(cleaner), Runner(writer)
    t1.start()
    t2.start()
    wait_until(lambda: is_waiting(instance, b, c1) and is_waiting(instance, c, c5),
               "both waiters sleep")
    bm.incr_pin(int(bufs[2]))  # a second pin survives the batch release
    bm.unlock_unpin_batch(bufs)
    assert t1.finish() and t2.finish()
    assert (bm.held[bufs] == UNLOCKED).all() and (seg.buf_lock_shared[bufs] == 0).all()
    assert seg.backend_pins[a.slot, bufs[2]] == 1 and seg.buf_refcount[bufs[2]] == 1
    bm.unpin(int(bufs[2]))
    with pytest.raises(AssertionError, match="not locked"):
        bm.unlock_unpin_batch(bufs[:1])
    for x in (a, b, c):
        x.close()
    assert_no_pins(instance)


def test_free_list_hands_out_never_used_buffers_in_order(tmp_path, make_table):
    """An empty pool fills from the free list: buffers 0, 1, 2 ... as the sweep would have
    chosen them, without moving the clock hand; once it is empty the sweep takes over."""
    with Instance(tmp_path / "data", shared_buffers=16) as inst:
        rfn = make_table(inst, "t", [("a", "integer")]).relfilenode
        seg = inst.seg
        with inst.connect() as b:
            bm = b.bufmgr
            used = int(seg.buf_never_used[0])
            assert used == int(np.count_nonzero(seg.buf_tag >= 0)) < 16
            add_pages(bm, rfn, 3)
            assert int(seg.buf_never_used[0]) == used + 3
            assert [buffer_of(inst, rfn, blk) for blk in range(3)] == list(range(used, used + 3))
            assert int(seg.control[CTL_CLOCK_HAND]) == 0
            add_pages(bm, rfn, 30)  # fills the pool, then evicts through the sweep
            assert int(seg.buf_never_used[0]) == 16
            assert int(seg.control[CTL_CLOCK_HAND]) > 0
            assert b.counters()["buffers_evicted"] > 0
            for blk in range(33):
                assert read_value(bm, rfn, blk) == blk


# -- batches: free partitions first, busy ones after (no convoy) --------------------------------


def _group_parts(bm, rfn: int, ngroups: int) -> list[int]:
    """The mapping partition of each group of 16 consecutive blocks."""
    return [bm.table.hash(make_tag(rfn, MAIN_FORKNUM, 16 * g))[1] for g in range(ngroups)]


def _held_elsewhere(instance, p: int, fn, bm):
    """Run ``fn`` in a thread while partition ``p``'s lock is held here; wait until the
    batch found it busy (counter), check what ``check`` says meanwhile, then let it go."""
    busy0 = bm.counters()["partition_lock_busy"]
    lock = instance.locks.partition[p]
    lock.acquire()
    try:
        r = Runner(fn)
        r.start()
        wait_until(lambda: bm.counters()["partition_lock_busy"] > busy0,
                   "the batch found the partition busy")
        snapshot = instance.seg.buf_refcount.copy(), instance.seg.buf_lock_shared.copy()
    finally:
        lock.release()
    return r.finish(), snapshot


@pytest.fixture
def roomy(tmp_path):
    """An instance whose backends may pin 64 pages at once (max_batch_pins), and a backend."""
    inst = Instance(tmp_path / "roomy", shared_buffers=1024, max_connections=4,
                    max_worker_processes=2)
    b = inst.connect()
    assert b.bufmgr.max_batch_pins >= 64
    try:
        yield inst, b
    finally:
        b.close()
        inst.close()


def test_batches_do_free_partitions_first_and_wait_for_busy_ones(roomy, make_table,
                                                                 assert_no_pins):
    instance, backend = roomy
    rel = make_table(instance, "t64", [("a", "integer")])
    rfn, bm, seg = rel.relfilenode, backend.bufmgr, instance.seg
    add_pages(bm, rfn, 64)
    parts = _group_parts(bm, rfn, 4)
    busy = parts[0]
    free_groups = [g for g in range(4) if parts[g] != busy]
    assert free_groups, "all four groups hash to one partition"
    hits = bm.counters()["buffers_hit"]
    bufs, (refc, shared) = _held_elsewhere(
        instance, busy, lambda: bm.pin_run(rfn, 0, 64, share=True), bm)
    # while the busy partition was held, the other groups were pinned and locked already
    for g in free_groups:
        b = buffer_of(instance, rfn, 16 * g)
        assert refc[b] == 1 and shared[b] == 1
    b0 = buffer_of(instance, rfn, 0)
    assert refc[b0] == 0 and shared[b0] == 0
    # and the result is what one round gives
    assert len(bufs) == 64 and bm.counters()["buffers_hit"] == hits + 64
    assert [int(bm.page(b)[VALUE_OFFSET:VALUE_OFFSET + 8].view("<i8")[0])
            for b in bufs.tolist()] == list(range(64))
    assert (seg.buf_refcount[bufs] == 1).all() and (bm.held[bufs] == SHARE).all()
    assert (seg.buf_lock_shared[bufs] == 1).all()
    # the releases split the same way
    _held_elsewhere(instance, busy, lambda: bm.unlock_unpin_batch(bufs), bm)
    assert_no_pins(instance)
    bufs = bm.pin_run(rfn, 0, 64)
    _held_elsewhere(instance, busy, lambda: bm.lock_share_batch(bufs), bm)
    assert (bm.held[bufs] == SHARE).all() and (seg.buf_lock_shared[bufs] == 1).all()
    bm.unlock_batch(bufs)
    _held_elsewhere(instance, busy, lambda: bm.unpin_batch(bufs), bm)
    assert_no_pins(instance)


def test_ring_cut_of_a_batch_done_in_two_rounds(roomy, make_table, assert_no_pins):
    """A ring batch with more misses than half its ring stops before them (pin_run's cut);
    done in two rounds (a busy partition), the hits past the cut are let go again: the same
    batch, pins and counters as one round gives."""
    instance, backend = roomy
    rel = make_table(instance, "t64", [("a", "integer")])
    rfn, bm, seg = rel.relfilenode, backend.bufmgr, instance.seg
    add_pages(bm, rfn, 64)
    parts = _group_parts(bm, rfn, 4)
    strategy = AccessStrategy("bulkread", 128, bm.nbuffers)  # 16 buffers: cut after 8 misses
    results = []
    for contended in (False, True):
        bm.flush_buffers(rfn)
        bm.drop_relation_buffers(rfn, from_block=16)
        for block in range(32, 64):  # blocks 16..31 cold, the rest warm
            read_value(bm, rfn, block)
        c0 = bm.counters()
        if contended:
            bufs, _ = _held_elsewhere(
                instance, parts[0], lambda: bm.pin_run(rfn, 0, 64, strategy=strategy), bm)
        else:
            bufs = bm.pin_run(rfn, 0, 64, strategy=strategy)
        c1 = bm.counters()
        assert len(bufs) == 24  # 16 hits, then 8 reads
        assert (seg.buf_refcount[bufs] == 1).all()
        assert int(seg.buf_refcount.sum()) == 24  # nothing past the cut stays pinned
        results.append((c1["buffers_hit"] - c0["buffers_hit"],
                        c1["buffers_read"] - c0["buffers_read"]))
        bm.unpin_batch(bufs)
        assert_no_pins(instance)
    assert results == [(16, 8), (16, 8)]


@pytest.mark.parametrize("fused", [True, False], ids=["pin_run share", "lock_share_batch"])
def test_batch_share_lock_holds_no_later_page_while_it_waits(tmp_path, make_table, fused,
                                                             assert_no_pins):
    """A writer holds page 2 and then wants page 5 (two heap pages, lower block first, as an
    UPDATE to another page does); a scan's batch over pages 0-7 that finds page 2 locked
    must wait for it holding nothing past it, so the writer gets page 5 and both finish.
    (It used to share-lock every free page of the batch, 5 included, and then wait for 2.)"""
    # a pool large enough for a batch of 8 pins (max_batch_pins: NBuffers / backend slots)
    instance = Instance(tmp_path / "data", shared_buffers=256, max_connections=8)
    table = make_table(instance, "t", [("a", "integer")]).relfilenode
    with instance.connect() as c:
        add_pages(c.bufmgr, table, 8)
    a = instance.connect()
    b = instance.connect()
    low = a.bufmgr.pin_lock(table, 2, EXCLUSIVE)

    def scan():
        if fused:
            bufs = b.bufmgr.pin_run(table, 0, 8, share=True)
        else:
            bufs = b.bufmgr.pin_run(table, 0, 8)
            b.bufmgr.lock_share_batch(bufs)
        modes = [int(b.bufmgr.held[x]) for x in bufs.tolist()]
        b.bufmgr.unlock_unpin_batch(bufs)
        return modes

    t = Runner(scan)
    t.start()
    wait_until(lambda: is_waiting(instance, b, low), "the scan waits for page 2")
    high = a.bufmgr.pin(table, 5)
    assert a.bufmgr.conditional_lock(high, EXCLUSIVE), "the waiting scan holds page 5"
    a.bufmgr.unlock_unpin(high)
    a.bufmgr.unlock_unpin(low)
    assert t.finish() == [SHARE] * 8
    a.close()
    b.close()
    assert_no_pins(instance)
    instance.close()
