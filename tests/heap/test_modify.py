"""heap_delete / heap_update / heap_lock_tuple and the update chain, called directly.

What is proven here (tuple headers read back from the pages, visibility through scans of
other backends' snapshots):
  * a delete sets xmax/cmax, clears the xmax hint bits, sets pd_prune_xid, and is seen by
    each snapshot exactly as MVCC says (own later command, other backend before and after
    commit);
  * updates build a t_ctid chain whose links satisfy xmin == previous xmax, new versions
    carry HEAP_UPDATED, and ``follow_update_chain`` finds the newest version, stops at an
    aborted or running updater, and says None for a deleted row or a broken chain;
  * HOT: an update changing no indexed column, with room on the page, stays on the page
    with HEAP_HOT_UPDATED / HEAP_ONLY_TUPLE; with ``hot_updates`` off, or an indexed column
    changed, it is not HOT; an update that does not fit goes to another page, marks the old
    one PD_PAGE_FULL, and while it places the new version holds no content lock and
    keeps the old version locked (xmax = me, LOCK_ONLY);
  * TM results: SELF_MODIFIED for a second change in one command, INVISIBLE for a version
    an earlier command changed; a writer meeting a running modifier waits for it (its
    wait is visible in the proc array) and then gets TM_UPDATED + the newer TID (READ
    COMMITTED), SerializationFailure (REPEATABLE READ), or TM_OK if the other aborted;
  * row locks: readers still see a locked row, writers wait, lock_timeout ends the wait
    with LockNotAvailable and leaves no trace in the wait-for graph;
  * pgstat counts 'upd', 'hot_upd', 'del'; nothing stays pinned or locked; check_heap holds.

Not proven here: the READ COMMITTED re-check of a WHERE clause (tests/test_session.py),
pruning of the versions left behind (tests for minidb.heap.prune).
"""

from __future__ import annotations

import threading
import time

import pytest

from minidb.catalog import ColumnDef
from minidb.errors import InternalError, LockNotAvailable, SerializationFailure
from minidb.heap.check import check_heap
from minidb.heap.heapam import HeapRel
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_KEYS_UPDATED, HEAP_ONLY_TUPLE, HEAP_UPDATED,
                                 HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY)
from minidb.heap import modify
from minidb.heap.modify import (TM_DELETED, TM_INVISIBLE, TM_OK, TM_SELF_MODIFIED,
                                TM_UPDATED, follow_update_chain, heap_delete, heap_fetch_raw,
                                heap_lock_tuple, heap_update)
from minidb.heap.mvcc import seq_scan
from minidb.session import Session
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE

COLS = [ColumnDef("id", "integer"), ColumnDef("v", "integer"), ColumnDef("s", "text")]


# -- helpers -------------------------------------------------------------------------------------

def make(inst, name="t", rows=((1, 10, "a"),)):
    """Create ``name`` and load ``rows`` in one committed transaction; (rel, tids)."""
    inst.catalog.create_table(name, list(COLS))
    with Session(inst) as s:
        tids = [s.insert(name, r) for r in rows]
    return inst.catalog.heap_rel(name), tids


def header(b, rel, tid):
    got = heap_fetch_raw(b, rel, tid)
    assert got is not None, f"no normal tuple at {tid}"
    return got[0]


def visible_rows(b, rel):
    """Rows the backend's next statement sees (one statement, no writes)."""
    snap = b.xact.start_statement()
    rows = []
    for batch in seq_scan(b, rel, [0, 1, 2], snap):
        cols = [c[0].tolist() for c in batch.columns]
        rows.extend(zip(*cols))
    b.xact.command_done(False)
    if not b.xact.explicit:
        b.xact.commit()
    return sorted(rows)


class Bg(threading.Thread):
    """Run ``fn`` in a thread; ``outcome()`` joins and returns (result, exception)."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None
        self.start()

    def run(self):
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def outcome(self, timeout=30.0):
        self.join(timeout)
        assert not self.is_alive(), "background statement did not finish"
        return self.result, self.error


def wait_until(pred, timeout=20.0):
    """Poll a state predicate (never a duration) until it holds."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition never reached"
        time.sleep(0.002)


def waits_for(inst, b, xid) -> bool:
    return int(inst.seg.proc_wait_xid[b.slot]) == xid


def begin_stmt(b, isolation=None):
    b.xact.begin(isolation)
    return b.xact.start_statement()


# -- delete -------------------------------------------------------------------------------------

def test_delete_sets_xmax_and_visibility_follows_mvcc(inst, assert_no_pins):
    rel, (tid,) = make(inst)
    b1, b2 = inst.connect(), inst.connect()
    snap = begin_stmt(b1)
    assert heap_delete(b1, rel, tid, snap) == (TM_OK, None)
    b1.xact.command_done(True)
    xid = b1.xact.xid
    h = header(b1, rel, tid)
    assert h["xmax"] == xid and h["cmax"] == 0 and h["ctid"] == tid
    assert not h["infomask"] & (HEAP_XMAX_INVALID | HEAP_XMAX_COMMITTED | HEAP_XMAX_LOCK_ONLY)
    assert h["infomask2"] & HEAP_KEYS_UPDATED
    bb = b1.bufmgr.pin(rel.relfilenode, tid[0])
    assert pg.get_prune_xid(b1.bufmgr.page(bb)) == xid
    b1.bufmgr.unpin(bb)

    assert visible_rows(b1, rel) == []              # my next command no longer sees it
    assert visible_rows(b2, rel) == [(1, 10, "a")]  # others do until I commit
    b2.xact.begin("repeatable read")
    assert visible_rows(b2, rel) == [(1, 10, "a")]
    b1.xact.commit()
    assert visible_rows(b2, rel) == [(1, 10, "a")]  # RR keeps its snapshot
    b2.xact.commit()
    assert visible_rows(b2, rel) == []
    assert check_heap(b1, rel) == 1
    b1.close(), b2.close()
    assert_no_pins(inst)


def test_deleted_row_is_deleted_for_later_writers(inst, assert_no_pins):
    rel, (tid,) = make(inst)
    b1, b2 = inst.connect(), inst.connect()
    snap2 = begin_stmt(b2)                            # b2 saw the row before the delete
    snap = begin_stmt(b1)
    heap_delete(b1, rel, tid, snap)
    b1.xact.commit()
    assert heap_update(b2, rel, tid, (1, 11, "a"), snap2) == (TM_DELETED, None, False)
    assert heap_delete(b2, rel, tid, snap2) == (TM_DELETED, None)
    b2.xact.rollback()
    b3 = inst.connect()
    snap3 = begin_stmt(b3, "repeatable read")
    with pytest.raises(SerializationFailure, match="concurrent delete"):
        heap_lock_tuple(b3, rel, tid, snap3)
    b3.xact.rollback()
    for b in (b1, b2, b3):
        b.close()
    assert_no_pins(inst)


# -- update chains ---------------------------------------------------------------------------------

def test_update_chain_links_and_follow(inst, assert_no_pins):
    rel, (tid0,) = make(inst)
    b = inst.connect()
    tids, xids = [tid0], []
    for k in range(3):
        snap = begin_stmt(b)
        res, new_tid, hot = heap_update(b, rel, tids[-1], (1, 11 + k, "a"), snap)
        assert res == TM_OK and hot
        xids.append(b.xact.xid)
        b.xact.commit()
        tids.append(new_tid)
    for old, new, xid in zip(tids, tids[1:], xids):
        ho, hn = header(b, rel, old), header(b, rel, new)
        assert ho["ctid"] == new and ho["xmax"] == xid == hn["xmin"]
        assert hn["infomask"] & HEAP_UPDATED
        assert ho["infomask2"] & HEAP_HOT_UPDATED and hn["infomask2"] & HEAP_ONLY_TUPLE
    assert not header(b, rel, tid0)["infomask"] & HEAP_UPDATED
    assert header(b, rel, tids[-1])["ctid"] == tids[-1]   # the newest links to itself
    for t in tids:
        assert follow_update_chain(b, rel, t) == tids[-1]
    assert visible_rows(b, rel) == [(1, 13, "a")]

    # an aborted update at the end: the chain ends at the last committed version
    snap = begin_stmt(b)
    res, aborted_tid, _ = heap_update(b, rel, tids[-1], (1, 99, "a"), snap)
    assert res == TM_OK
    b.xact.rollback()
    assert follow_update_chain(b, rel, tid0) == tids[-1]

    # ... and a later update overwrites xmax and the forward link
    snap = begin_stmt(b)
    res, t5, _ = heap_update(b, rel, tids[-1], (1, 14, "a"), snap)
    assert res == TM_OK and t5 != aborted_tid
    # a running updater: the chain stops before it (a writer would wait there)
    other = inst.connect()
    assert follow_update_chain(other, rel, tid0) == tids[-1]
    other.close()
    b.xact.commit()
    assert follow_update_chain(b, rel, tid0) == t5

    # deleted at the end: None
    snap = begin_stmt(b)
    assert heap_delete(b, rel, t5, snap)[0] == TM_OK
    b.xact.commit()
    assert follow_update_chain(b, rel, tid0) is None
    assert follow_update_chain(b, rel, tids[1]) is None
    assert check_heap(b, rel) == 6
    b.close()
    assert_no_pins(inst)


def test_follow_chain_broken_link_is_none(inst):
    rel, (tid0,) = make(inst)
    b = inst.connect()
    snap = begin_stmt(b)
    _, t1, _ = heap_update(b, rel, tid0, (1, 11, "a"), snap)
    b.xact.commit()
    assert follow_update_chain(b, rel, tid0) == t1
    # break the link: the next version's xmin no longer equals the previous xmax
    buf = b.bufmgr.pin(rel.relfilenode, t1[0])
    b.bufmgr.lock(buf, 2)
    item = pg.get_item(b.bufmgr.page(buf), t1[1])
    item[0:8] = (12345).to_bytes(8, "little")
    b.bufmgr.mark_dirty(buf)
    b.bufmgr.unlock(buf)
    b.bufmgr.unpin(buf)
    assert follow_update_chain(b, rel, tid0) is None
    b.close()


# -- HOT -------------------------------------------------------------------------------------------

def test_hot_update_stays_on_page_with_flags(inst):
    rel, (tid,) = make(inst)
    b = inst.connect()
    snap = begin_stmt(b)
    res, new, hot = heap_update(b, rel, tid, (1, 20, "b"), snap)
    assert res == TM_OK and hot and new[0] == tid[0] and new != tid
    b.xact.commit()
    assert header(b, rel, tid)["infomask2"] & HEAP_HOT_UPDATED
    assert header(b, rel, new)["infomask2"] & HEAP_ONLY_TUPLE
    assert not header(b, rel, tid)["infomask2"] & HEAP_KEYS_UPDATED
    assert visible_rows(b, rel) == [(1, 20, "b")]
    b.close()


def test_hot_off_is_not_hot(inst):
    rel, (tid,) = make(inst)
    b = inst.connect(hot_updates=False)
    snap = begin_stmt(b)
    res, new, hot = heap_update(b, rel, tid, (1, 20, "b"), snap)
    assert res == TM_OK and not hot
    b.xact.commit()
    assert new[0] == tid[0]  # it still fits on the page: same page, as in PostgreSQL
    assert not header(b, rel, tid)["infomask2"] & HEAP_HOT_UPDATED
    assert not header(b, rel, new)["infomask2"] & HEAP_ONLY_TUPLE
    stats = Session(inst)
    b.close()
    assert stats.table_stats("t")["n_tup_hot_upd"] == 0
    assert stats.table_stats("t")["n_tup_upd"] == 1
    stats.close()


def test_indexed_column_change_is_not_hot(inst):
    base, (tid,) = make(inst)
    rel = HeapRel(base.name, base.relfilenode, base.layout, base.oid, frozenset({0}))
    b = inst.connect()
    snap = begin_stmt(b)
    res, t1, hot = heap_update(b, rel, tid, (1, 20, "b"), snap)   # id unchanged
    assert res == TM_OK and hot
    b.xact.command_done(True)
    snap = b.xact.start_statement()
    res, t2, hot = heap_update(b, rel, t1, (2, 20, "b"), snap)    # id changed
    assert res == TM_OK and not hot
    b.xact.commit()
    h1 = header(b, rel, t1)
    assert h1["infomask2"] & HEAP_ONLY_TUPLE and not h1["infomask2"] & HEAP_HOT_UPDATED
    assert h1["infomask2"] & HEAP_KEYS_UPDATED and h1["ctid"] == t2
    assert not header(b, rel, t2)["infomask2"] & HEAP_ONLY_TUPLE
    b.close()
    with Session(inst) as s:
        st = s.table_stats("t")
    assert (st["n_tup_upd"], st["n_tup_hot_upd"]) == (2, 1)


def test_update_that_does_not_fit_goes_elsewhere_locking_both_pages_in_order(
        inst, monkeypatch, assert_no_pins):
    inst.catalog.create_table("t", list(COLS))
    rel = inst.catalog.heap_rel("t")
    with Session(inst) as s:
        tid = s.insert("t", (1, 0, "x"))
        # fill block 0 almost completely
        while True:
            t = s.insert("t", (2, 0, "y" * 400))
            if t[0] != 0:
                break
    b = inst.connect()
    seen = {}
    real_buffer_for = modify.buffer_for_update
    locks = []
    real_lock, real_cond = b.bufmgr.lock, b.bufmgr.conditional_lock

    def spying_buffer_for(backend, r, n, other, other_block, other_avail):
        # the old version locked by me (LOCK logged), no content lock held, pinned
        seen["header"] = header(b, rel, tid)
        seen["locks_held"] = int((inst.seg.backend_locks[b.slot] != 0).sum())
        seen["pins_held"] = int((inst.seg.backend_pins[b.slot] != 0).sum())
        got = real_buffer_for(backend, r, n, other, other_block, other_avail)
        # both pages exclusively locked on return
        seen["locks_after"] = int((inst.seg.backend_locks[b.slot] != 0).sum())
        return got

    def lock(buf, mode):
        locks.append(b.bufmgr.buffer_tag(buf)[2])
        return real_lock(buf, mode)

    def conditional_lock(buf, mode):
        locks.append(b.bufmgr.buffer_tag(buf)[2])
        return real_cond(buf, mode)

    monkeypatch.setattr(modify, "buffer_for_update", spying_buffer_for)
    monkeypatch.setattr(b.bufmgr, "lock", lock)
    monkeypatch.setattr(b.bufmgr, "conditional_lock", conditional_lock)
    snap = begin_stmt(b)
    res, new, hot = heap_update(b, rel, tid, (1, 1, "z" * 2000), snap)
    xid = b.xact.xid
    assert res == TM_OK and not hot and new[0] != 0
    h = seen["header"]
    assert h["xmax"] == xid and h["infomask"] & HEAP_XMAX_LOCK_ONLY
    assert seen["locks_held"] == 0 and seen["pins_held"] == 1  # the old page, pinned only
    assert seen["locks_after"] == 2
    assert locks == sorted(locks) and locks[0] == 0   # the old page (block 0) first
    b.xact.commit()
    h = header(b, rel, tid)
    assert h["xmax"] == xid and not h["infomask"] & HEAP_XMAX_LOCK_ONLY and h["ctid"] == new
    assert not h["infomask2"] & HEAP_HOT_UPDATED
    buf = b.bufmgr.pin(rel.relfilenode, 0)
    b.bufmgr.lock(buf, SHARE)
    assert pg.get_flags(b.bufmgr.page(buf)) & pg.PD_PAGE_FULL
    assert pg.get_prune_xid(b.bufmgr.page(buf)) == xid
    b.bufmgr.unlock(buf)
    b.bufmgr.unpin(buf)
    assert follow_update_chain(b, rel, tid) == new
    assert (1, 1, "z" * 2000) in visible_rows(b, rel)
    assert (1, 0, "x") not in visible_rows(b, rel)
    check_heap(b, rel)
    b.close()
    assert_no_pins(inst)


# -- own changes -------------------------------------------------------------------------------------

def test_self_modified_and_invisible(inst):
    rel, (tid,) = make(inst)
    b = inst.connect()
    snap = begin_stmt(b)
    res, new, _ = heap_update(b, rel, tid, (1, 11, "a"), snap)
    assert res == TM_OK
    # the same command meets the old version again: already changed by this command
    assert heap_update(b, rel, tid, (1, 12, "a"), snap)[0] == TM_SELF_MODIFIED
    assert heap_delete(b, rel, tid, snap)[0] == TM_SELF_MODIFIED
    # the new version was inserted by this command: invisible to it
    assert heap_update(b, rel, new, (1, 12, "a"), snap)[0] == TM_INVISIBLE
    b.xact.command_done(True)
    snap = b.xact.start_statement()
    # a later command: the old version was changed by an earlier one
    assert heap_delete(b, rel, tid, snap)[0] == TM_INVISIBLE
    assert heap_update(b, rel, new, (1, 12, "a"), snap)[0] == TM_OK
    b.xact.commit()
    assert visible_rows(b, rel) == [(1, 12, "a")]
    b.close()


def test_bad_tid_is_an_error(inst, assert_no_pins):
    rel, (tid,) = make(inst)
    b = inst.connect()
    snap = begin_stmt(b)
    with pytest.raises(InternalError):
        heap_delete(b, rel, (0, 99), snap)
    with pytest.raises(InternalError):
        heap_update(b, rel, (5, 1), (1, 1, "a"), snap)
    b.xact.rollback()
    b.close()
    assert_no_pins(inst)


# -- waiting for a running modifier -------------------------------------------------------------------

@pytest.mark.parametrize("ending", ["commit", "rollback"])
def test_writer_waits_for_running_updater_read_committed(inst, ending, assert_no_pins):
    rel, (tid,) = make(inst)
    b1, b2 = inst.connect(deadlock_timeout=100), inst.connect(deadlock_timeout=100)
    snap1 = begin_stmt(b1)
    _, t1, _ = heap_update(b1, rel, tid, (1, 11, "a"), snap1)
    snap2 = begin_stmt(b2)                       # b2 sees the old version
    bg = Bg(lambda: heap_update(b2, rel, tid, (1, 50, "b"), snap2))
    wait_until(lambda: waits_for(inst, b2, b1.xact.xid))
    assert bg.is_alive()
    getattr(b1.xact, ending)()
    (res, t, hot), err = bg.outcome()
    assert err is None
    if ending == "commit":
        assert (res, t, hot) == (TM_UPDATED, t1, False)
    else:
        assert res == TM_OK and hot
    b2.xact.commit()
    assert visible_rows(b2, rel) == ([(1, 11, "a")] if ending == "commit" else [(1, 50, "b")])
    b1.close(), b2.close()
    assert_no_pins(inst)


def test_writer_waits_then_serialization_failure_repeatable_read(inst):
    rel, (tid,) = make(inst)
    b1, b2 = inst.connect(), inst.connect()
    snap2 = begin_stmt(b2, "repeatable read")
    snap1 = begin_stmt(b1)
    heap_delete(b1, rel, tid, snap1)
    bg = Bg(lambda: heap_update(b2, rel, tid, (1, 50, "b"), snap2))
    wait_until(lambda: waits_for(inst, b2, b1.xact.xid))
    b1.xact.commit()
    _, err = bg.outcome()
    assert isinstance(err, SerializationFailure) and err.sqlstate == "40001"
    b2.xact.rollback()
    b1.close(), b2.close()


def test_row_lock_blocks_writers_not_readers(inst, assert_no_pins):
    rel, (tid,) = make(inst)
    b1, b2 = inst.connect(), inst.connect()
    snap1 = begin_stmt(b1)
    assert heap_lock_tuple(b1, rel, tid, snap1) == (TM_OK, None)
    h = header(b1, rel, tid)
    assert h["xmax"] == b1.xact.xid and h["infomask"] & HEAP_XMAX_LOCK_ONLY
    assert heap_lock_tuple(b1, rel, tid, snap1) == (TM_OK, None)   # again: no change
    assert visible_rows(b2, rel) == [(1, 10, "a")]                 # readers see it
    snap2 = begin_stmt(b2)
    bg = Bg(lambda: heap_delete(b2, rel, tid, snap2))
    wait_until(lambda: waits_for(inst, b2, b1.xact.xid))
    # the locker itself may update the row it locked
    res, t1, _ = heap_update(b1, rel, tid, (1, 11, "a"), snap1)
    assert res == TM_OK
    b1.xact.commit()
    assert bg.outcome() == ((TM_UPDATED, t1), None)
    b2.xact.rollback()
    b1.close(), b2.close()
    assert_no_pins(inst)


def test_lock_released_by_commit_lets_writer_go(inst):
    rel, (tid,) = make(inst)
    b1, b2 = inst.connect(), inst.connect()
    snap1 = begin_stmt(b1)
    heap_lock_tuple(b1, rel, tid, snap1)
    snap2 = begin_stmt(b2)
    bg = Bg(lambda: heap_update(b2, rel, tid, (1, 12, "a"), snap2))
    wait_until(lambda: waits_for(inst, b2, b1.xact.xid))
    b1.xact.commit()                 # a committed locker leaves the row unchanged
    (res, _t, _hot), err = bg.outcome()
    assert err is None and res == TM_OK
    b2.xact.commit()
    assert visible_rows(b2, rel) == [(1, 12, "a")]
    b1.close(), b2.close()


def test_lock_timeout(inst, assert_no_pins):
    rel, (tid,) = make(inst)
    b1, b2 = inst.connect(), inst.connect(lock_timeout=50)
    snap1 = begin_stmt(b1)
    heap_update(b1, rel, tid, (1, 11, "a"), snap1)
    snap2 = begin_stmt(b2)
    with pytest.raises(LockNotAvailable) as ei:
        heap_delete(b2, rel, tid, snap2)
    assert ei.value.sqlstate == "55P03"
    assert int(inst.seg.proc_wait_xid[b2.slot]) == 0
    assert int(inst.seg.proc_xact_waiters[b1.slot]) == 0
    b2.xact.rollback()
    b1.xact.commit()
    b1.close(), b2.close()
    assert_no_pins(inst)


# -- statistics -------------------------------------------------------------------------------------

def test_pgstat_counts_writes(inst):
    rel, tids = make(inst, rows=[(i, 0, "x") for i in range(5)])
    b = inst.connect()
    snap = begin_stmt(b)
    for t in tids[:3]:
        heap_update(b, rel, t, (9, 9, "y"), snap)
    for t in tids[3:]:
        heap_delete(b, rel, t, snap)
    b.xact.commit()
    b.close()
    with Session(inst) as s:
        st = s.table_stats("t")
    assert (st["n_tup_ins"], st["n_tup_upd"], st["n_tup_hot_upd"], st["n_tup_del"]) == (5, 3, 3, 2)
    assert (st["n_live_tup"], st["n_dead_tup"]) == (3, 5)


def test_keys_changed_by_bytes_agrees_with_the_decoded_comparison():
    """``_keys_changed`` decides from the indexed columns' stored bytes when its types allow;
    its answer is the one the comparison of decoded values gives (the rule before the byte
    shortcut), over random rows with NULLs, NaN, -0.0, char padding and every column subset
    as the indexed columns."""
    import itertools
    import math
    import random

    from minidb.heap.layout import Column, RowLayout

    layout = RowLayout([Column("i", "integer"), Column("t", "text"), Column("d", "double precision"),
                        Column("c", "char(3)"), Column("b", "boolean"), Column("s", "smallint")])
    pools = [[None, 0, 1, -7], [None, "", "a", "ab"], [None, 0.0, -0.0, 1.5, math.nan],
             [None, "a", "a  ", "ab"], [None, True, False], [None, 0, 3]]

    def reference(rel, old, new, new_values):   # decode both and compare
        o, n = layout.decode(old), layout.decode(new)
        return any(o[c] != n[c] for c in rel.indexed_columns)

    rng = random.Random(16)
    subsets = [frozenset(s) for k in (1, 2) for s in itertools.combinations(range(6), k)]
    for _ in range(600):
        old_vals = [rng.choice(p) for p in pools]
        new_vals = [v if rng.random() < 0.6 else rng.choice(p) for v, p in zip(old_vals, pools)]
        rel = HeapRel("k", 1, layout, indexed_columns=rng.choice(subsets))
        old = memoryview(bytearray(layout.encode(old_vals)))
        new = bytearray(layout.encode(new_vals))
        assert modify._keys_changed(rel, old, new, new_vals) == reference(
            rel, old, new, new_vals), (sorted(rel.indexed_columns), old_vals, new_vals)
