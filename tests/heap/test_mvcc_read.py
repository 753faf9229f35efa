"""MVCC read paths (``minidb.heap.mvcc``) with real transactions on an instance.

What is proven here:
  * seq_scan: an uncommitted insert is visible to its own transaction and to no other;
    after commit it is visible to snapshots taken later, not to a REPEATABLE READ
    snapshot taken before; an aborted insert is never visible (and gets XMIN_INVALID);
    a transaction sees its own rows by command id (not those of its own current or later
    commands, but those of earlier ones; a row deleted by a later command of its own
    stays visible to an earlier command's snapshot);
  * hint bits: the first scan after a commit sets them (counted, pages dirtied as hints,
    written under share locks), the second sets none; a hint set by one backend's scan
    never changes another backend's answer (RR snapshot, insert and delete), also with the
    scans running in threads at the same time;
  * statistics: one 'seq_scan' per scan and one 'seq_tup_read' per row returned;
  * MVCCFilter = the scalar rule, tuple by tuple, on hypothesis-generated pages (mask and
    the t_infomask left behind), including its hint-bit shortcuts;
  * heap_hot_search over HOT chains made by heap_update: the version each snapshot sees,
    the chain followed through a redirect, a broken chain, LP_DEAD / LP_UNUSED roots, a
    block past the end, a non-HOT update; ``all_dead`` true only when every member is dead
    to everyone (and false while an old snapshot could still see a member);
    heap_fetch_visible's decoding, and its exact-TID rule for a heap-only tuple.

Pruning is off in the HOT tests (the chains must stay as built; pruning's own effects are
tested with it).  Not proven: anything about speed (bench/dead_tuples_scan.py).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb.catalog import ColumnDef
from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted
from minidb.heap import pgstat
from minidb.heap.heapam import HeapScan, heap_insert
from minidb.heap.layout import decode_header
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE, HEAP_XMAX_COMMITTED,
                                 HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY, HEAP_XMIN_COMMITTED,
                                 HEAP_XMIN_INVALID)
from minidb.heap.mvcc import MVCCFilter, heap_fetch_visible, heap_hot_search, seq_scan
from minidb.instance import Instance
from minidb.session import Session
from minidb.storage import page as pg
from minidb.storage.buf_internals import BM_DIRTY
from minidb.storage.bufmgr import EXCLUSIVE, SHARE
from minidb.txn.clog import ABORTED, COMMITTED, FIRST_NORMAL_XID, IN_PROGRESS
from minidb.txn.procarray import Snapshot
from minidb.txn.visibility import satisfies_mvcc

XMIN_C, XMIN_I = HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID
XMAX_C, XMAX_I, LOCK = HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY


# -- helpers -------------------------------------------------------------------------------------
@pytest.fixture
def inst(tmp_path):
    i = Instance(tmp_path / "data", shared_buffers=128, deadlock_timeout=100,
                 heap_page_pruning=False)
    try:
        yield i
    finally:
        i.close()


def make(inst, name="t"):
    inst.catalog.create_table(name, [ColumnDef("id", "integer"), ColumnDef("val", "integer")])
    return inst.catalog.heap_rel(name)


def scan_ids(s: Session, rel, snap=None) -> tuple[list[int], MVCCFilter]:
    """ids visible to ``snap`` (default: a new statement of the session), and the filter."""
    xact = s.xact
    own = snap is None
    if own:
        snap = xact.start_statement()
    scan = seq_scan(s.backend, rel, ["id"], snap)
    ids = []
    for batch in scan:
        ids.extend(batch.columns[0][0].tolist())
    if own:
        xact.command_done(False)
        if not xact.explicit:
            xact.commit()
    return sorted(ids), scan.filter


def ids(s: Session, rel, snap=None) -> list[int]:
    return scan_ids(s, rel, snap)[0]


def header(inst, rel, tid) -> dict:
    with inst.connect() as be:
        bm = be.bufmgr
        b = bm.pin(rel.relfilenode, tid[0])
        try:
            bm.lock(b, SHARE)
            page = bm.page(b)
            lp_off, flags, _ = pg.get_item_id(page, tid[1])
            h = decode_header(page, lp_off) if flags == pg.LP_NORMAL else None
            bm.unlock(b)
        finally:
            bm.unpin(b)
    return h


def dirty(inst, rel, block) -> bool:
    with inst.connect() as be:
        bm = be.bufmgr
        b = bm.pin(rel.relfilenode, block)
        try:
            return bool(inst.seg.buf_flags[b] & BM_DIRTY)
        finally:
            bm.unpin(b)


def hot_search(s: Session, rel, tid, snap=None, horizon=None):
    inst = s.instance
    own = snap is None
    if own:
        snap = s.xact.start_statement()
    try:
        return heap_hot_search(s.backend.bufmgr, rel, tid, snap, inst.clog, inst.procarray,
                               horizon)
    finally:
        if own:
            s.xact.command_done(False)
            if not s.xact.explicit:
                s.xact.commit()


def edit_page(inst, rel, block, fn):
    """Run ``fn(page)`` on a block under a cleanup lock (as pruning would), mark dirty."""
    with inst.connect() as be:
        bm = be.bufmgr
        b = bm.pin(rel.relfilenode, block)
        try:
            bm.lock_for_cleanup(b)
            try:
                fn(bm.page(b))
                bm.mark_dirty(b)
            finally:
                bm.unlock(b)
        finally:
            bm.unpin(b)


# -- seq_scan: who sees what ----------------------------------------------------------------------
def test_uncommitted_insert_is_seen_by_its_transaction_only(inst, assert_no_pins):
    rel = make(inst)
    with Session(inst) as w, Session(inst) as r:
        w.insert("t", (1, 0))
        w.begin()
        w.insert("t", (2, 0))
        assert ids(w, rel) == [1, 2]
        assert ids(r, rel) == [1]
        w.commit()
        assert ids(r, rel) == [1, 2]
    assert_no_pins(inst)


def test_commit_is_seen_by_later_snapshots_only(inst):
    rel = make(inst)
    with Session(inst) as w, Session(inst) as rr, Session(inst) as rc:
        w.begin()
        w.insert("t", (1, 0))
        rr.begin("repeatable read")
        rc.begin("read committed")
        assert ids(rr, rel) == [] and ids(rc, rel) == []      # snapshots taken now
        held = rc.xact.start_statement()                       # an RC statement in flight
        w.commit()
        assert ids(rr, rel) == []                              # RR: its snapshot is older
        assert ids(rc, rel, held) == []                        # the old statement: no
        rc.xact.command_done(False)
        assert ids(rc, rel) == [1]                             # RC: a new statement, yes
        rr.commit()
        assert ids(rr, rel) == [1]                             # a new transaction, yes
        rc.commit()


def test_aborted_insert_is_never_visible_and_gets_xmin_invalid(inst):
    rel = make(inst)
    with Session(inst) as w, Session(inst) as r:
        w.begin()
        tid = w.insert("t", (1, 0))
        r.begin("repeatable read")
        assert ids(r, rel) == []
        w.rollback()
        got, f = scan_ids(r, rel)
        assert got == [] and f.hint_writes == 0        # r's snapshot still sees it running
        r.commit()
        got, f = scan_ids(r, rel)
        assert got == [] and f.hint_writes == 1        # now decided: aborted
        assert header(inst, rel, tid)["infomask"] & (XMIN_I | XMIN_C) == XMIN_I
        assert ids(w, rel) == []
        assert scan_ids(r, rel)[1].hint_writes == 0


def test_own_rows_by_command_id(inst):
    rel = make(inst)
    with Session(inst) as s, Session(inst) as other:
        s.begin()
        s.insert("t", (1, 0))                           # command 0
        # command 1: one statement that inserts; its snapshot does not see its own insert
        snap1 = s.xact.start_statement()
        assert snap1.curcid == 1
        xid = s.xact.xid_for_write()
        heap_insert(s.backend, rel, (2, 0), xmin=xid, cmin=snap1.curcid)
        assert ids(s, rel, snap1) == [1]                # sees command 0, not itself
        s.xact.command_done(True)
        # command 2 inserts 3 and deletes 1; command 1's snapshot sees neither change
        s.insert("t", (3, 0))
        s.delete("t", lambda row: row[0] == 1)
        assert ids(s, rel, snap1) == [1]
        assert ids(s, rel) == [2, 3]                    # a new command sees them all
        assert ids(other, rel) == []
        s.commit()
        assert ids(other, rel) == [2, 3]


# -- hint bits ------------------------------------------------------------------------------------
def test_first_scan_sets_hint_bits_second_sets_none(inst):
    rel = make(inst)
    with Session(inst) as s:
        n = s.insert_many("t", [(i, i) for i in range(1200)])
        blocks = inst.smgr.nblocks(rel.relfilenode)
        assert n == 1200 and blocks >= 3
        with inst.connect() as be:
            be.bufmgr.flush_buffers(rel.relfilenode)      # clean pages: hints must dirty
        assert not any(dirty(inst, rel, b) for b in range(blocks))
        got, f = scan_ids(s, rel)
        assert got == list(range(1200))
        assert f.hint_writes == 1200 and f.tuples_checked == 1200
        assert all(dirty(inst, rel, b) for b in range(blocks))
        assert header(inst, rel, (0, 1))["infomask"] & XMIN_C
        with inst.connect() as be:
            be.bufmgr.flush_buffers(rel.relfilenode)
        got, f = scan_ids(s, rel)
        assert got == list(range(1200))
        assert f.hint_writes == 0 and f.fast_batches >= 1
        assert not any(dirty(inst, rel, b) for b in range(blocks))
        # a delete: the first scan after it sets XMAX_COMMITTED on the dead versions only
        s.delete("t", lambda row: row[0] % 3 == 0)
        got, f = scan_ids(s, rel)
        assert got == [i for i in range(1200) if i % 3] and f.hint_writes == 400
        got, f = scan_ids(s, rel)
        assert f.hint_writes == 0 and len(got) == 800


def test_scan_statistics(inst):
    rel = make(inst)
    with Session(inst) as s:
        s.insert_many("t", [(i, 0) for i in range(50)])
        s.delete("t", lambda row: row[0] < 10)
        before = pgstat.read(inst.seg, inst.locks.stats, rel.oid)
        assert ids(s, rel) == list(range(10, 50))
        assert ids(s, rel) == list(range(10, 50))
        after = pgstat.read(inst.seg, inst.locks.stats, rel.oid)
    assert after["seq_scan"] - before["seq_scan"] == 2
    assert after["seq_tup_read"] - before["seq_tup_read"] == 80


def test_a_hint_set_by_one_backend_never_changes_another_answer(inst):
    rel = make(inst)
    with Session(inst) as w, Session(inst) as rr, Session(inst) as hinter:
        tid_old = w.insert("t", (1, 0))
        assert ids(hinter, rel) == [1]                  # row 1 fully hinted
        rr.begin("repeatable read")
        assert ids(rr, rel) == [1]
        # after rr's snapshot: delete row 1, insert row 2, both committed
        w.delete("t", lambda row: row[0] == 1)
        tid_new = w.insert("t", (2, 0))
        got, f = scan_ids(hinter, rel)                  # a newer snapshot: sets the bits
        assert got == [2] and f.hint_writes == 2
        assert header(inst, rel, tid_new)["infomask"] & XMIN_C         # row 10's case
        assert header(inst, rel, tid_old)["infomask"] & XMAX_C         # row 16's case
        got, f = scan_ids(rr, rel)
        assert got == [1] and f.hint_writes == 0        # rr's answer is unchanged
        assert heap_fetch_visible(rr.backend, rel, tid_old,
                                  rr.xact.current_snapshot()) == (1, 0)
        assert heap_fetch_visible(rr.backend, rel, tid_new,
                                  rr.xact.current_snapshot()) is None
        rr.xact.command_done(False)
        rr.commit()
        assert ids(rr, rel) == [2]


def test_hint_bits_from_concurrent_scans_in_threads_change_no_answer(inst, assert_no_pins):
    """One thread holds an RR snapshot and scans again and again while another commits
    inserts and deletes and a third scans with fresh snapshots (setting hint bits)."""
    rel = make(inst)
    with Session(inst) as setup:
        setup.insert_many("t", [(i, 0) for i in range(300)])
    errors, answers = [], []
    go = threading.Event()
    stop = threading.Event()

    def rr_reader():
        try:
            with Session(inst) as s:
                s.begin("repeatable read")
                first = ids(s, rel)
                go.set()
                while not stop.is_set():
                    answers.append(ids(s, rel) == first)
                answers.append(ids(s, rel) == first)
                s.commit()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
            go.set()

    def writer():
        try:
            go.wait()
            with Session(inst) as s:
                for k in range(20):
                    s.insert_many("t", [(1000 + 10 * k + j, 0) for j in range(10)])
                    s.delete("t", lambda row, k=k: 10 * k <= row[0] < 10 * k + 10)
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    def hinter():
        try:
            go.wait()
            with Session(inst) as s:
                while not stop.is_set():
                    ids(s, rel)
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=f) for f in (rr_reader, writer, hinter)]
    for t in threads:
        t.start()
    threads[1].join(60)
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(answers) >= 2 and all(answers)
    with Session(inst) as s:
        assert ids(s, rel) == list(range(200, 300)) + [1000 + i for i in range(200)]
    assert_no_pins(inst)


# -- MVCCFilter = the scalar rule, on generated pages ---------------------------------------------
class _Clog:
    def __init__(self, st):
        self.st = st

    def status(self, xid):
        if xid < FIRST_NORMAL_XID:
            return COMMITTED if xid else ABORTED
        return self.st.get(xid, IN_PROGRESS)

    def statuses(self, xids):
        return np.array([self.status(int(x)) for x in np.asarray(xids).tolist()],
                        dtype=np.uint8)

    def commit_hints_ok(self, xid=None) -> bool:
        return True  # every commit record flushed (synchronous commit)


POOL = list(range(3, 11))


@st.composite
def page_world(draw):
    clog = _Clog({x: draw(st.sampled_from([IN_PROGRESS, COMMITTED, ABORTED])) for x in POOL})
    xmin = draw(st.integers(3, 11))
    xmax = draw(st.integers(xmin, 12))
    xip = sorted(draw(st.sets(st.integers(xmin, xmax - 1)))) if xmax > xmin else []
    me = draw(st.sampled_from([0] + POOL))
    xip = [x for x in xip if x != me]
    snap = Snapshot(xmin, xmax, np.array(xip, dtype=np.int64), draw(st.integers(0, 3)), me)
    # bias toward the patterns the filter's shortcuts decide (old hinted versions)
    bits = st.one_of(
        st.just(XMIN_C | XMAX_I), st.just(XMIN_C | XMAX_C), st.just(XMIN_C | LOCK),
        st.sets(st.sampled_from([XMIN_C, XMIN_I, XMAX_C, XMAX_I, LOCK])).map(sum))
    xids = st.sampled_from([2] + POOL + [11, 12])
    tuples = draw(st.lists(st.tuples(xids, st.sampled_from([0] + POOL + [11, 12]),
                                     st.integers(0, 4), st.integers(0, 4), bits),
                           min_size=1, max_size=120))
    return clog, snap, tuples


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("scratch") / "data", shared_buffers=32)
    try:
        rel = make(inst, "scratch")
        be = inst.connect()
        _, bufs = be.bufmgr.extend(rel.relfilenode, 2)     # two pages to write tuples on
        for b in bufs:
            pg.init_page(be.bufmgr.page(b))
            be.bufmgr.mark_dirty(b)
            be.bufmgr.unlock(b)
            be.bufmgr.unpin(b)
        yield inst, rel, be
    finally:
        be.close()
        inst.close()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=page_world())
def test_filter_matches_the_scalar_rule_on_generated_pages(scratch, world):
    _, rel, be = scratch
    clog, snap, tuples = world
    bm = be.bufmgr
    # lay the tuples out over two pages (so batches span pages), ids = positions
    per_page = (len(tuples) + 1) // 2
    where = []
    for block in (0, 1):
        b = bm.pin(rel.relfilenode, block)
        try:
            bm.lock(b, EXCLUSIVE)
            page = bm.page(b)
            pg.init_page(page)
            for i in range(block * per_page, min(len(tuples), (block + 1) * per_page)):
                xmin, xmax, cmin, cmax, im = tuples[i]
                data = bytearray(rel.layout.encode((i, 0), xmin=xmin, cmin=cmin))
                off = pg.add_item(page, bytes(data))
                lp_off = pg.get_item_id(page, off)[0]
                base = int.from_bytes(page[lp_off + 32:lp_off + 34].tobytes(), "little")
                base &= ~(XMIN_C | XMIN_I | XMAX_C | XMAX_I | LOCK) & 0xFFFF
                page[lp_off + 8:lp_off + 16] = np.frombuffer(int(xmax).to_bytes(8, "little"),
                                                              np.uint8)
                page[lp_off + 20:lp_off + 24] = np.frombuffer(int(cmax).to_bytes(4, "little"),
                                                              np.uint8)
                page[lp_off + 32:lp_off + 34] = np.frombuffer((base | im).to_bytes(2, "little"),
                                                              np.uint8)
                where.append((b, lp_off))
            bm.mark_dirty(b)
            bm.unlock(b)
        finally:
            bm.unpin(b)
    f = MVCCFilter(bm, snap, clog)
    seen = []
    for batch in HeapScan(be, rel, [0], tuple_filter=f, batch_pages=2):
        seen.extend(batch.columns[0][0].tolist())
    expect_ids, expect_hints = [], 0
    flat = bm.seg.pool_flat
    for i, t in enumerate(tuples):
        v, h = satisfies_mvcc(*t, snap, clog)
        if v:
            expect_ids.append(i)
        b, lp_off = where[i]
        at = b * BLCKSZ + lp_off + 32
        im_now = int(flat[at]) | int(flat[at + 1]) << 8
        assert (im_now & (XMIN_C | XMIN_I | XMAX_C | XMAX_I | LOCK)) == t[4] | h, (i, t, h)
        expect_hints += bool(h)
    assert sorted(seen) == expect_ids
    assert f.hint_writes == expect_hints


# -- heap_hot_search ------------------------------------------------------------------------------
def _chain(inst, rel, n_updates=3):
    """A row updated ``n_updates`` times (HOT, each committed); returns (root tid, tids of
    every version, an RR session per version holding a snapshot that sees it)."""
    sessions = []
    with Session(inst) as w:
        root = w.insert("t", (1, 0))
        tids = [root]
        for k in range(1, n_updates + 1):
            s = Session(inst)
            s.begin("repeatable read")
            assert ids(s, rel) == [1]
            sessions.append(s)
            w.update("t", None, lambda row, k=k: (row[0], k))
            got = w.select_tids("t")
            assert len(got) == 1 and got[0][1] == (1, k)
            tids.append(got[0][0])
    last = Session(inst)
    last.begin("repeatable read")
    ids(last, rel)
    sessions.append(last)
    return root, tids, sessions


def test_hot_search_returns_the_version_each_snapshot_sees(inst, assert_no_pins):
    rel = make(inst)
    root, tids, sessions = _chain(inst, rel, 3)
    assert len({t[0] for t in tids}) == 1 and len(set(tids)) == 4    # one page, 4 versions
    for t in tids[:-1]:
        h = header(inst, rel, t)
        assert h["infomask2"] & HEAP_HOT_UPDATED
    for t in tids[1:]:
        assert header(inst, rel, t)["infomask2"] & HEAP_ONLY_TUPLE
    for k, s in enumerate(sessions):
        found, data, all_dead = hot_search(s, rel, root, s.xact.current_snapshot())
        assert found == tids[k] and not all_dead
        assert rel.layout.decode(data) == (1, k)
        assert heap_fetch_visible(s.backend, rel, root, s.xact.current_snapshot()) == (1, k)
    # the walk hinted the committed updaters (XMAX_COMMITTED on the old versions)
    assert header(inst, rel, tids[0])["infomask"] & XMAX_C
    for s in sessions:
        s.xact.command_done(False)
        s.commit()
        s.close()
    assert_no_pins(inst)


def test_hot_search_all_dead_only_when_every_member_is_dead_to_everyone(inst):
    rel = make(inst)
    root, tids, sessions = _chain(inst, rel, 2)
    for s in sessions:
        s.xact.command_done(False)
        s.commit()
    old = sessions[0]
    old.begin("repeatable read")
    old_snap = old.xact.start_statement()
    with Session(inst) as w:
        w.delete("t", None)
    # an old snapshot (taken before the delete) still sees the last version: not all dead
    found, _, all_dead = hot_search(old, rel, root, old_snap)
    assert found == tids[2] and not all_dead
    # a new snapshot sees nothing, but the old one holds the horizon back
    with Session(inst) as r:
        found, data, all_dead = hot_search(r, rel, root)
        assert found is None and data is None and not all_dead
    old.xact.command_done(False)
    old.commit()
    with Session(inst) as r:
        found, data, all_dead = hot_search(r, rel, root)
        assert found is None and all_dead                # every member surely dead now
        # the same with a horizon given that is too old: not dead
        assert hot_search(r, rel, root, horizon=FIRST_NORMAL_XID)[2] is False
    for s in sessions:
        s.close()


def test_hot_search_in_progress_update(inst):
    rel = make(inst)
    with Session(inst) as w, Session(inst) as r:
        root = w.insert("t", (1, 0))
        w.begin()
        w.update("t", None, lambda row: (1, 5))
        new = w.select_tids("t")[0][0]
        assert new != root
        found, data, all_dead = hot_search(r, rel, root)
        assert found == root and rel.layout.decode(data) == (1, 0) and not all_dead
        found, data, all_dead = hot_search(w, rel, root, w.xact.current_snapshot())
        assert found == new and rel.layout.decode(data) == (1, 5)
        w.xact.command_done(False)
        w.rollback()
        found, data, all_dead = hot_search(r, rel, root)
        assert found == root and rel.layout.decode(data) == (1, 0)
        # the aborted version is dead to everyone; the root is not
        assert header(inst, rel, root)["infomask"] & XMAX_I


def test_hot_search_follows_a_redirect_and_stops_at_dead_and_unused(inst):
    rel = make(inst)
    root, tids, sessions = _chain(inst, rel, 2)
    for s in sessions:
        s.xact.command_done(False)
        s.commit()
        s.close()
    block = root[0]

    def prune_like(page):  # what pruning leaves: root -> redirect to the survivor
        pg.set_item_unused(page, tids[1][1])
        pg.set_item_redirect(page, root[1], tids[2][1])
    edit_page(inst, rel, block, prune_like)
    with Session(inst) as r:
        found, data, all_dead = hot_search(r, rel, root)
        assert found == tids[2] and rel.layout.decode(data) == (1, 2) and not all_dead
        assert heap_fetch_visible(r.backend, rel, root, r.xact.current_snapshot()) == (1, 2)
        r.xact.command_done(False)
        r.commit()
        # the old middle slot, now unused: nothing, and no verdict
        assert hot_search(r, rel, tids[1]) == (None, None, False)
    edit_page(inst, rel, block, lambda page: pg.set_item_dead(page, root[1], False))
    with Session(inst) as r:
        assert hot_search(r, rel, root) == (None, None, True)
        assert hot_search(r, rel, (block, 200)) == (None, None, False)     # no such item
        # past the end of the relation: an index (or HOT chain) pointing there is damage,
        # PostgreSQL's "could not read block N" (XX001), not a silent miss
        with pytest.raises(DataCorrupted, match="could not read block 5"):
            hot_search(r, rel, (block + 5, 1))


def test_hot_search_stops_at_a_broken_chain(inst):
    rel = make(inst)
    root, tids, sessions = _chain(inst, rel, 2)
    for s in sessions:
        s.xact.command_done(False)
        s.commit()
        s.close()
    # the middle member's xmin no longer matches its predecessor's xmax (a reused slot)
    def break_it(page):
        lp_off = pg.get_item_id(page, tids[1][1])[0]
        page[lp_off:lp_off + 8] = np.frombuffer((2).to_bytes(8, "little"), np.uint8)
    edit_page(inst, rel, root[0], break_it)
    with Session(inst) as r:
        found, data, all_dead = hot_search(r, rel, root)
        # the root is dead to everyone and the walk ends there
        assert found is None and data is None and all_dead
        # heap-only members asked for directly: not a chain root, no verdict
        assert hot_search(r, rel, tids[2]) == (None, None, False)
        # heap_fetch_visible checks exactly such a TID
        snap = r.xact.start_statement()
        assert heap_fetch_visible(r.backend, rel, tids[2], snap) == (1, 2)
        assert heap_fetch_visible(r.backend, rel, tids[1], snap) is None  # deleted version
        r.xact.command_done(False)
        r.commit()


def test_hot_search_non_hot_update_ends_the_chain(tmp_path):
    with Instance(tmp_path / "d", shared_buffers=64, heap_page_pruning=False,
                  hot_updates=False) as inst:
        rel = make(inst)
        with Session(inst) as w, Session(inst) as r:
            root = w.insert("t", (1, 0))
            w.update("t", None, lambda row: (1, 1))
            new = w.select_tids("t")[0][0]
            assert not header(inst, rel, root)["infomask2"] & HEAP_HOT_UPDATED
            assert not header(inst, rel, new)["infomask2"] & HEAP_ONLY_TUPLE
            found, data, all_dead = hot_search(r, rel, root)
            assert found is None and all_dead        # the old version alone is the chain
            found, data, all_dead = hot_search(r, rel, new)
            assert found == new and rel.layout.decode(data) == (1, 1)


def _reference_walk(inst, rel, tids, snap):
    """The version ``snap`` sees among ``tids`` (a chain's members in order), by the scalar
    rule member by member, writing nothing."""
    with inst.connect() as be:
        bm = be.bufmgr
        b = bm.pin(rel.relfilenode, tids[0][0])
        try:
            bm.lock(b, SHARE)
            try:
                for t in tids:
                    page = bm.page(b)
                    lp_off, flags, _ = pg.get_item_id(page, t[1])
                    h = decode_header(page, lp_off)
                    vis, _ = satisfies_mvcc(h["xmin"], h["xmax"], h["cmin"], h["cmax"],
                                            h["infomask"], snap, inst.clog)
                    if vis:
                        return t
            finally:
                bm.unlock(b)
        finally:
            bm.unpin(b)
    return None


def test_hot_search_skips_unhinted_dead_members_while_commits_are_unflushed(tmp_path):
    """With asynchronous commit records unflushed (commit_hints_ok() false: the COMMITTED
    hints of recent xids are deferred), a member whose committed deleter is older than the
    snapshot's xmin is passed with one commit-log read: the walk finds the version the
    scalar rule finds member by member, for snapshots taken along the chain, with an
    aborted update in it; it asks commit_hints_ok(xid) of no skipped member.  Once the WAL
    is flushed, the walk sets the hints as before."""
    with Instance(tmp_path / "d", shared_buffers=64, heap_page_pruning=False,
                  max_worker_processes=0, wal_writer_delay=10000) as inst:
        rel = make(inst)
        inst.checkpoint()
        w = Session(inst, synchronous_commit=False)
        root = w.insert("t", (1, 0))
        w.commit()
        tids, snaps = [root], []
        for k in range(1, 8):
            s = Session(inst)
            s.begin("repeatable read")
            assert ids(s, rel) == [1]
            snaps.append(s)
            w.begin()
            w.update("t", None, lambda row, k=k: (row[0], k))
            tids.append(w.select_tids("t")[0][0])
            if k == 4:
                w.rollback()          # an aborted update: its version is dead, the chain ends
                tids.pop()
                continue
            w.commit()
        assert inst.wal_shared.async_pending() and not inst.clog.commit_hints_ok()
        with Session(inst) as last:
            last.begin("repeatable read")
            ids(last, rel)
            snaps.append(last)
            before = inst.clog.stats()["hint_checks"]
            for s in snaps:
                snap = s.xact.current_snapshot()
                found, data, all_dead = hot_search(s, rel, root, snap)
                assert found == _reference_walk(inst, rel, tids, snap)
                assert found is not None and not all_dead
            # the newest snapshot passes 5 dead members; each skip asks no commit_hints_ok
            checks = inst.clog.stats()["hint_checks"] - before
            found, _, _ = hot_search(last, rel, root, last.xact.current_snapshot())
            assert found == tids[-1]
            assert inst.clog.stats()["hint_checks"] - before - checks <= 2
            assert not header(inst, rel, tids[1])["infomask"] & XMAX_C
            inst.wal.flush(inst.wal.insert_lsn())
            found, _, _ = hot_search(last, rel, root, last.xact.current_snapshot())
            assert found == tids[-1]
            assert header(inst, rel, tids[1])["infomask"] & XMAX_C     # hinted as before
            for s in snaps:
                s.xact.command_done(False)
                s.commit()
        for s in snaps[:-1]:
            s.close()
        w.close()
