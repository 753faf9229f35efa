"""SetHintBits' rule under synchronous_commit = off: a reader does not set a COMMITTED hint
bit for a transaction whose commit record is not yet flushed (a page carrying it could
reach the disk first, and a crash that loses the commit would leave the row's inserter
aborted but its row hinted committed); once the WAL is flushed the next reader sets it.
The rule is per transaction: the commit log keeps a commit LSN per group of 32 xids."""

from __future__ import annotations

from minidb.catalog import ColumnDef
from minidb.heap.layout import decode_header
from minidb.instance import Instance
from minidb.session import Session
from minidb.storage import page as pg
from minidb.storage.htup import HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID
from minidb.txn.clog import XACTS_PER_LSN_GROUP


def _infomask(inst, rfn: int) -> int:
    with inst.connect() as b:
        buf = b.bufmgr.pin(rfn, 0)
        try:
            return decode_header(pg.get_item(b.bufmgr.page(buf), 1))["infomask"]
        finally:
            b.bufmgr.unpin(buf)


def test_no_committed_hint_before_the_commit_record_is_flushed(tmp_path):
    inst = Instance(tmp_path / "data", max_worker_processes=0, wal_writer_delay=10000)
    try:
        inst.catalog.create_table("t", [ColumnDef("k", "bigint", True)])
        rfn = inst.catalog.table("t").relfilenode
        inst.checkpoint()
        s = Session(inst, synchronous_commit=False)
        s.insert("t", (1,))
        s.commit()
        assert inst.wal_shared.async_pending()
        assert not inst.clog.commit_hints_ok()
        r = Session(inst)
        assert r.select("t") == [(1,)]   # visible: the answer is the same
        r.commit()
        assert _infomask(inst, rfn) & (HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID) == 0
        inst.wal.flush(inst.wal.insert_lsn())
        assert inst.clog.commit_hints_ok()
        assert r.select("t") == [(1,)]
        r.commit()
        assert _infomask(inst, rfn) & HEAP_XMIN_COMMITTED
        s.close()
        r.close()
    finally:
        inst.close()


def _burn_xids(inst, n: int) -> None:
    """Move the xid counter on by ``n`` (within the commit log's current page; nothing
    else runs)."""
    from minidb.shmem import CTL_NEXT_XID
    inst.seg.control[CTL_NEXT_XID] += n


def test_the_rule_is_per_transaction(tmp_path):
    """Two asynchronous commits in different groups of 32 xids; the WAL is flushed past
    the first one's commit record only.  The first one's rows get their COMMITTED hint, the
    second one's do not (counted: hint_checks, hints_deferred) - the coarse rule it
    replaces refused both.  After the WAL writer's flush both are hinted."""
    inst = Instance(tmp_path / "data", max_worker_processes=0, wal_writer_delay=10000)
    try:
        inst.catalog.create_table("a", [ColumnDef("k", "bigint", True)])
        inst.catalog.create_table("b", [ColumnDef("k", "bigint", True)])
        ra, rb = inst.catalog.table("a").relfilenode, inst.catalog.table("b").relfilenode
        inst.checkpoint()
        s = Session(inst, synchronous_commit=False)
        s.insert("a", (1,))
        s.commit()
        inst.wal.flush(inst.wal.insert_lsn())      # a's commit record is on disk
        _burn_xids(inst, XACTS_PER_LSN_GROUP)      # b's xid is in the next group
        s.insert("b", (2,))
        s.commit()                                 # b's is not
        assert inst.wal_shared.async_pending()
        before = inst.clog.stats()
        r = Session(inst)
        assert r.select("a") == [(1,)]
        assert r.select("b") == [(2,)]
        r.commit()
        after = inst.clog.stats()
        assert _infomask(inst, ra) & HEAP_XMIN_COMMITTED           # flushed: hinted
        assert _infomask(inst, rb) & (HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID) == 0
        assert after["hint_checks"] - before["hint_checks"] >= 2
        assert after["hints_deferred"] - before["hints_deferred"] >= 1
        inst.wal.flush(inst.wal.insert_lsn())      # what the WAL writer does
        assert r.select("b") == [(2,)]
        r.commit()
        assert _infomask(inst, rb) & HEAP_XMIN_COMMITTED
        s.close()
        r.close()
    finally:
        inst.close()


def test_group_lsns_unit(tmp_path):
    """commit_hints_ok / commit_hints_mask against the group LSNs, with the WAL's flushed
    and asynchronous positions set by hand."""
    from minidb.txn.clog import COMMITTED, XACTS_PER_LSN_GROUP
    from minidb.wal.xlog import WAL_ASYNC, WAL_FLUSHED
    import numpy as np
    inst = Instance(tmp_path / "data", max_worker_processes=0)
    try:
        clog = inst.clog
        ctl = inst.seg.wal_ctl
        saved = int(ctl[WAL_FLUSHED]), int(ctl[WAL_ASYNC])
        base = 4 * XACTS_PER_LSN_GROUP + 5       # page 0, groups 4 and 5
        x1, x2, x3 = base, base + 1, base + XACTS_PER_LSN_GROUP
        top = inst.wal.insert_lsn()            # positions inside the log
        clog.set_status(x1, COMMITTED, lsn=top - 500)
        clog.set_status(x3, COMMITTED, lsn=top)
        try:
            ctl[WAL_FLUSHED], ctl[WAL_ASYNC] = top - 100, top
            assert clog.commit_hints_ok(x1) and clog.commit_hints_ok(x2)   # group 4 flushed
            assert not clog.commit_hints_ok(x3)                              # group 5 not
            assert not clog.commit_hints_ok()
            assert clog.commit_hints_mask(np.array([x1, x3, x2])).tolist() == [True, False, True]
            ctl[WAL_FLUSHED] = top
            assert clog.commit_hints_ok(x3) and clog.commit_hints_mask(np.array([x3])) is True
        finally:
            ctl[WAL_FLUSHED], ctl[WAL_ASYNC] = saved
    finally:
        inst.close()


def test_async_commit_raises_the_mark_in_its_own_insertion(tmp_path):
    """An asynchronous commit's record raises the async-commit mark (WAL_ASYNC) to its end
    inside the insertion that reserved its space (``WalHandle.insert(...,
    async_commit=True)``); a synchronous commit leaves the mark alone."""
    from minidb.wal.xlog import WAL_ASYNC, WAL_CURR
    inst = Instance(tmp_path / "data", max_worker_processes=0, wal_writer_delay=10000)
    try:
        inst.catalog.create_table("t", [ColumnDef("k", "bigint", True)])
        ctl = inst.seg.wal_ctl

        s = Session(inst, synchronous_commit=False)
        for k in range(3):
            s.insert("t", (k,))
            s.commit()
            assert int(ctl[WAL_ASYNC]) == int(ctl[WAL_CURR])   # the commit record's end
            assert inst.wal_shared.async_pending()
        mark = int(ctl[WAL_ASYNC])
        r = Session(inst)
        r.insert("t", (9,))
        r.commit()
        assert int(ctl[WAL_ASYNC]) == mark and int(ctl[WAL_CURR]) > mark
    finally:
        inst.close()
