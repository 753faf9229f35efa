"""Redo of Heap2 PRUNE and VACUUM rebuilds the heap pages the primary left, byte for byte
(PostgreSQL's wal_consistency_checking idea).

Both records are *logical* (``PageRecord.add(buf, data=...)``: the offsets redirected, made
dead, made unused, and the page's new pd_prune_xid), replayed by
``minidb.heap.prune.redo_prune`` / ``minidb.heap.vacuum.redo_vacuum`` through
``minidb.recovery.LOGICAL_REDO``.  Later records of the same page may still be byte deltas
computed on the primary's page, so a redo that left any other byte would corrupt the page
silently.  The check: a checkpoint, then a workload with ``full_page_writes`` off (so no
record carries an image and every block is replayed from its record) that prunes
opportunistically (HOT chains, deletes, aborted updates) and VACUUMs; the heap pages as
they are in shared buffers at the end are kept, the instance is dropped without writing a
data page, and the recovered pages must equal them with the bits PostgreSQL's
``heap_mask`` treats as hints masked: pd_checksum (computed at write), the tuples'
commit-status hint bits (set by readers, not logged) and PD_PAGE_FULL (set by an UPDATE that
found no room, a hint to prune).
"""

from __future__ import annotations

import struct

import numpy as np

import minidb
from minidb.storage import page as pg
from minidb.storage.htup import (HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMIN_COMMITTED,
                                 HEAP_XMIN_INVALID)
from minidb.wal import control as ctlfile
from minidb.wal import record as rec
from minidb.wal.reader import WalReader
from tests.wal.crashkit import forget_instances

SETTINGS = dict(max_worker_processes=0, wal_segment_size=1 << 20, shared_buffers=256,
                full_page_writes=False, checkpoint_timeout=3600)
_HINTS = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID | HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID
_U16 = struct.Struct("<H")
DELETED = [31, 32, 34, 35, 37, 38]   # keys the updates do not touch (those are 0, 3, 6 ...)


def mask_heap_page(page) -> bytes:
    """The page without what may differ between the primary and redo (heap_mask)."""
    p = np.frombuffer(bytes(page), dtype=np.uint8).copy()
    _U16.pack_into(p, 8, 0)                                            # pd_checksum
    _U16.pack_into(p, 10, _U16.unpack_from(p, 10)[0] & ~pg.PD_PAGE_FULL)
    if not pg.page_is_new(p):
        for _off, lp_off, flags, _len in pg.items(p):
            if flags == pg.LP_NORMAL:
                im = _U16.unpack_from(p, lp_off + 32)[0]
                _U16.pack_into(p, lp_off + 32, im & ~_HINTS)
    return bytes(p)


def _heap_pages(inst, rfn: int) -> list[bytes]:
    b = inst.connect()
    try:
        bm = b.bufmgr
        out = []
        for block in range(inst.smgr.nblocks(rfn)):
            buf = bm.pin(rfn, block)
            try:
                out.append(bytes(bm.page(buf)))
            finally:
                bm.unpin(buf)
        return out
    finally:
        b.close()


def _heap2_blocks(d: str, since: int, rfn: int) -> dict[str, list]:
    """The Heap2 PRUNE / VACUUM block references of ``rfn`` logged since ``since``."""
    cd = ctlfile.read_control(d)
    got: dict[str, list] = {"PRUNE": [], "VACUUM": []}
    for r in WalReader(d, cd.wal_segment_size).records(since):
        if r.rmid != rec.RM_HEAP2:
            continue
        name = rec.op_name(r.rmid, r.info)
        if name in got:
            got[name] += [blk for blk in r.blocks if blk.relfilenode == rfn]
    return got


def _workload(cur, conn) -> None:
    filler = "x" * 150
    for i in range(40):
        cur.execute("insert into t values (?, 0, ?)", (i, filler))
    conn.commit()
    for rnd in range(60):
        for i in range(0, 40, 3):
            cur.execute("update t set v = v + 1 where k = ?", (i,))
        conn.commit()
        if rnd % 7 == 3:   # an aborted HOT update leaves a dead heap-only tuple
            cur.execute("update t set v = -1 where k = 1")
            conn.rollback()
        if rnd % 10 == 5:  # whole chains die: LP_DEAD roots for VACUUM
            cur.execute("delete from t where k = ?", (DELETED[rnd // 10],))
            cur.execute("insert into t values (?, 0, ?)", (100 + rnd, filler))
            conn.commit()
        if rnd == 30:
            conn.autocommit = True
            cur.execute("vacuum t")
            conn.autocommit = False


def test_prune_and_vacuum_redo_rebuild_the_pages(tmp_path):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, **SETTINGS)
    inst = conn._instance
    cur = conn.cursor()
    cur.execute("create table t (k integer primary key, v integer, f text)")
    conn.commit()
    rfn = inst.catalog.heap_rel("t").relfilenode
    inst.checkpoint()
    redo = inst.control.redo
    _workload(cur, conn)
    inst.wal.flush(inst.wal.insert_lsn())
    primary = _heap_pages(inst, rfn)
    inst.crash_abandon()
    forget_instances()

    logged = _heap2_blocks(d, redo, rfn)
    assert len(logged["PRUNE"]) >= 10 and len(logged["VACUUM"]) >= 1, \
        {k: len(v) for k, v in logged.items()}
    assert all(blk.logical and not blk.has_image for v in logged.values() for blk in v)

    conn = minidb.connect(d, **SETTINGS)
    try:
        inst = conn._instance
        assert inst.recovery_stats["records"] > 0
        recovered = _heap_pages(inst, rfn)
        assert len(recovered) == len(primary)
        for block, (a, b) in enumerate(zip(primary, recovered)):
            assert pg.get_lsn(np.frombuffer(a, np.uint8)) == \
                pg.get_lsn(np.frombuffer(b, np.uint8)), block
            assert mask_heap_page(a) == mask_heap_page(b), f"block {block} differs after redo"
        cur = conn.cursor()
        cur.execute("select count(*), sum(v) from t")
        n, total = cur.fetchone()
        assert n == 40 and total == 60 * 14
    finally:
        conn.close()
