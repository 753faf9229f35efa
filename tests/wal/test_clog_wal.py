"""The commit log's own WAL records and the OID counter in the checkpoint.

* CLOG ZEROPAGE: a new commit-log page is logged as it is zeroed (at the first xid of the
  page); replay zeroes the page again, and the statuses after it come back from their
  commit and abort records - checked by a crash whose commit-log page never reached the
  disk *and* whose file holds stale statuses (as after a wraparound in PostgreSQL).
* CLOG TRUNCATE: the segments before a cut are removed after the record is flushed, and
  replay removes them again.
* NextOID: the checkpoint record and the control file carry the OID counter; a reopened
  directory never hands out an OID below it.
"""

from __future__ import annotations

import os

import minidb
from minidb.shmem import CTL_NEXT_OID, CTL_NEXT_XID
from minidb.txn.clog import (ABORTED, COMMITTED, IN_PROGRESS, PAGES_PER_SEGMENT,
                             XACTS_PER_PAGE, XACTS_PER_SEGMENT, segment_name)
from minidb.wal import control as ctlfile
from minidb.wal import record as rec
from minidb.wal.reader import WalReader
from tests.wal.crashkit import forget_instances

SETTINGS = dict(max_worker_processes=0, wal_segment_size=1 << 20)


def _clog_records(d: str, since: int = 0) -> list[tuple[int, bytes]]:
    cd = ctlfile.read_control(d)
    reader = WalReader(d, cd.wal_segment_size)
    return [(r.info, bytes(r.main)) for r in reader.records(since or cd.redo)
            if r.rmid == rec.RM_CLOG]


def test_zeropage_is_logged_and_replayed(tmp_path):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, **SETTINGS)
    inst = conn._instance
    cur = conn.cursor()
    cur.execute("create table t (k bigint primary key)")
    conn.commit()
    inst.checkpoint()
    redo = inst.control.redo
    # the next xid is the first of commit-log page 1
    inst.seg.control[CTL_NEXT_XID] = XACTS_PER_PAGE
    before = inst.clog.stats()["wal_records"]
    cur.execute("insert into t values (1)")
    conn.commit()
    cur.execute("insert into t values (2)")
    conn.rollback()
    assert inst.clog.stats()["wal_records"] == before + 1
    recs = _clog_records(d, redo)
    assert [(i, int.from_bytes(m, "little")) for i, m in recs] == [(rec.CLOG_ZEROPAGE, 1)]
    # stale statuses in the file where page 1 will be (never written by this run)
    inst.wal.flush(inst.wal.insert_lsn())
    inst.crash_abandon()
    forget_instances()
    with open(os.path.join(d, "pg_xact", "0000"), "r+b") as f:
        f.seek(8192)
        f.write(bytes([0xAA]) * 8192)      # every xid of page 1 "aborted"
    conn = minidb.connect(d, **SETTINGS)
    try:
        inst = conn._instance
        assert inst.recovery_stats["records"] > 0
        assert inst.clog.status(XACTS_PER_PAGE) == COMMITTED      # replayed after the zeroing
        assert inst.clog.status(XACTS_PER_PAGE + 5) == IN_PROGRESS  # zeroed, not stale
        cur = conn.cursor()
        cur.execute("select k from t order by k")
        assert cur.fetchall() == [(1,)]
    finally:
        conn.close()


def test_truncate_is_logged_flushed_and_replayed(tmp_path):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, **SETTINGS)
    inst = conn._instance
    clog = inst.clog
    inst.checkpoint()
    redo = inst.control.redo
    # statuses in three segments (pages written by the checkpoint)
    for segno in range(3):
        x = segno * XACTS_PER_SEGMENT + 10
        clog.set_status(x, ABORTED)
    inst.seg.control[CTL_NEXT_XID] = 2 * XACTS_PER_SEGMENT + 11
    inst.checkpoint()
    names = sorted(os.listdir(os.path.join(d, "pg_xact")))
    assert names == [segment_name(i) for i in range(3)]
    with inst.connect() as b:
        removed = clog.truncate_before(2 * XACTS_PER_SEGMENT + 10, slot=b.slot)
    assert removed == 2
    from minidb.wal.xlog import WAL_FLUSHED
    assert inst.wal_shared.ctl[WAL_FLUSHED] == inst.wal.insert_lsn()   # flushed before
    recs = _clog_records(d, redo)                                       # the unlink
    assert recs and recs[-1][0] == rec.CLOG_TRUNCATE
    assert int.from_bytes(recs[-1][1][:8], "little") == 2 * PAGES_PER_SEGMENT
    assert sorted(os.listdir(os.path.join(d, "pg_xact"))) == [segment_name(2)]
    # a crash; the files come back (as if the unlink had not reached the disk): replay of
    # the TRUNCATE removes them again
    inst.crash_abandon()
    forget_instances()
    for i in range(2):
        with open(os.path.join(d, "pg_xact", segment_name(i)), "wb") as f:
            f.write(bytes(8192))
    conn = minidb.connect(d, **SETTINGS)
    try:
        assert sorted(os.listdir(os.path.join(d, "pg_xact"))) == [segment_name(2)]
        assert conn._instance.clog.status(2 * XACTS_PER_SEGMENT + 10) == ABORTED
    finally:
        conn.close()


def test_next_oid_is_carried_by_the_checkpoint(tmp_path):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, **SETTINGS)
    inst = conn._instance
    cur = conn.cursor()
    cur.execute("create table t (k bigint primary key)")
    conn.commit()
    inst.seg.control[CTL_NEXT_OID] += 5000       # OIDs handed out to relations since dropped
    carried = int(inst.seg.control[CTL_NEXT_OID])
    inst.checkpoint()
    assert ctlfile.read_control(d).next_oid == carried
    conn.close()
    forget_instances()
    conn = minidb.connect(d, **SETTINGS)
    try:
        assert int(conn._instance.seg.control[CTL_NEXT_OID]) >= carried
        cur = conn.cursor()
        cur.execute("create table u (k bigint)")
        conn.commit()
        assert conn._instance.catalog.table("u").relfilenode >= carried
    finally:
        conn.close()
    # after a crash too: the end-of-recovery checkpoint keeps it
    conn = minidb.connect(d, **SETTINGS)
    inst = conn._instance
    inst.crash_abandon()
    forget_instances()
    conn = minidb.connect(d, **SETTINGS)
    try:
        assert conn._instance.recovery_stats["records"] > 0
        assert ctlfile.read_control(d).next_oid >= carried
        assert int(conn._instance.seg.control[CTL_NEXT_OID]) >= carried
    finally:
        conn.close()
