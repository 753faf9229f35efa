"""Logical heap and B-tree leaf records rebuild the page byte for byte (PostgreSQL's
wal_consistency_checking).

A workload of inserts (new pages too), HOT and non-HOT updates, updates whose new version
goes to another page, deletes, row locks, rolled-back updates and a VACUUM runs after a
checkpoint; the table's pages are copied out of shared buffers at the end; the instance is
dropped as a power loss would drop it (no data page written since the checkpoint), and
recovery replays the log.  Every heap page must then equal its copy with the hints masked:
pd_lsn, pd_checksum, pd_prune_xid, the PD_PAGE_FULL / PD_ALL_VISIBLE flags and the
infomask's commit hint bits (heap_mask's list); and so must every page of the two indexes
(the wide keys of ``t_pad`` split leaves), with killed items and BTP_HAS_GARBAGE masked
(btree_mask).  With ``full_page_writes`` off every block
of the workload is replayed from its record (no images); with it on (and a second checkpoint
midway), the first change of each page after that checkpoint is an image and the rest
replays on top of it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import minidb
from minidb import recovery
from minidb.config import BLCKSZ
from minidb.index import btpage as bt
from minidb.index.rel import open_index
from minidb.storage import page as pg
from minidb.storage.htup import (HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMIN_COMMITTED,
                                 HEAP_XMIN_INVALID)
from minidb.wal import dump
from minidb.wal import record as rec
from tests.wal.crashkit import abandon

SETTINGS = dict(max_worker_processes=0, shared_buffers=256, wal_segment_size=1 << 20,
                wal_buffers=64)
_HINTS = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID | HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID
_INFOMASK = 32   # t_infomask's offset in the tuple header


def masked(page: np.ndarray, index: bool = False) -> np.ndarray:
    """A copy of a heap (or B-tree) page without what may differ between a primary and its
    replay: for an index page, killed items (LP_DEAD) and BTP_HAS_GARBAGE."""
    p = page.copy()
    p[0:10] = 0                       # pd_lsn, pd_checksum
    flags = pg.get_flags(p) & ~(pg.PD_PAGE_FULL | pg.PD_ALL_VISIBLE)
    pg.set_flags(p, flags)
    p[20:24] = 0                      # pd_prune_xid
    if pg.page_is_new(p):
        return p
    if index:
        bt.set_flags(p, bt.get_flags(p) & ~bt.BTP_HAS_GARBAGE)
    for off in range(1, pg.max_offset(p) + 1):
        lp_off, state, lp_len = pg.get_item_id(p, off)
        if index:
            if state == pg.LP_DEAD:
                pg.set_item_id(p, off, lp_off, pg.LP_NORMAL, lp_len)
        elif state == pg.LP_NORMAL:
            at = lp_off + _INFOMASK
            im = int(p[at]) | int(p[at + 1]) << 8
            im &= ~_HINTS
            p[at], p[at + 1] = im & 0xFF, im >> 8
    return p


def _pages(conn, table: str, index: str | None = None) -> dict[int, np.ndarray]:
    inst = conn._instance
    with inst.connect() as b:
        rfn = (open_index(b, index) if index else inst.catalog.heap_rel(table)).relfilenode
        bm = b.bufmgr
        out = {}
        for blk in range(bm.smgr.nblocks(rfn)):
            buf = bm.pin(rfn, blk)
            try:
                out[blk] = bm.page(buf).copy()
            finally:
                bm.unpin(buf)
        return out


def _workload(conn, rng: random.Random, checkpoint_midway: bool) -> None:
    cur = conn.cursor()
    keys = list(range(200))
    for k in keys:
        cur.execute("insert into t values (?, ?, ?)", (k, k, "p" * rng.randint(1, 150)))
    conn.commit()
    for step in range(60):
        r = rng.random()
        k = rng.choice(keys)
        if r < 0.3:
            cur.execute("update t set v = v + 1 where k = ?", (k,))          # HOT
        elif r < 0.45:
            cur.execute("update t set pad = ? where k = ?", ("q" * rng.randint(200, 600), k))
        elif r < 0.55:
            new = max(keys) + 1                                                 # key change
            cur.execute("update t set k = ? where k = ?", (new, k))
            keys[keys.index(k)] = new
        elif r < 0.65:
            cur.execute("select k from t where k = ? for update", (k,))         # LOCK
            cur.fetchall()
            cur.execute("update t set v = 0 where k = ?", (k,))
        elif r < 0.75:
            cur.execute("delete from t where k = ?", (k,))
            keys.remove(k)
        elif r < 0.85:
            new = max(keys) + 1
            cur.execute("insert into t values (?, ?, ?)", (new, 0, "n" * rng.randint(1, 300)))
            keys.append(new)
        if rng.random() < 0.15:
            conn.rollback()      # an aborted update leaves a forward link a later change resets
            cur.execute("select k from t order by k")
            keys = [row[0] for row in cur.fetchall()]
        else:
            conn.commit()
        if step == 30:
            conn.autocommit = True
            cur.execute("vacuum t")
            if checkpoint_midway:   # the next change of each page logs an image
                cur.execute("checkpoint")
            conn.autocommit = False
    cur.execute("update t set v = v + 1 where k = ?", (keys[0],))   # the last record: a commit
    conn.commit()


def _ops_logged(d: str) -> set[str]:
    """The names of the Heap / Btree records with a logical block; each one's waldump
    description is read from its block data."""
    seen = set()
    try:
        for r in dump.records(d, dump.DumpOptions(rmgrs=("Heap", "Btree"))):
            if any(b.logical for b in r.blocks):
                name = rec.op_name(r.rmid, r.info)
                seen.add(name)
                desc = dump.describe(r)
                assert (" items " if name == "INSERT_LEAF" else
                        " tuple " if name.startswith("INSERT") else " xmax ") in desc, desc
    except dump.DumpError:
        pass
    return seen


@pytest.mark.parametrize("fpw", [False, True])
def test_replayed_heap_pages_equal_the_primary(tmp_path, monkeypatch, fpw):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, full_page_writes=fpw, **SETTINGS)
    cur = conn.cursor()
    conn.autocommit = True
    cur.execute("create table t (k int primary key, v int, pad text)")
    cur.execute("create index t_pad on t (pad)")
    cur.execute("checkpoint")
    conn.autocommit = False
    _workload(conn, random.Random(16), checkpoint_midway=fpw)
    before = _pages(conn, "t")
    before_index = {ix: _pages(conn, "t", ix) for ix in ("t_pkey", "t_pad")}
    assert len(before) >= 3 and len(before_index["t_pad"]) >= 4
    abandon(conn)
    assert {"INSERT", "INSERT+INIT", "UPDATE", "HOT_UPDATE", "DELETE", "LOCK",
            "INSERT_LEAF"} <= _ops_logged(d)

    calls = {}
    for key, fn in list(recovery.LOGICAL_REDO.items()):
        def counting(page, blk, r, fn=fn):
            name = rec.op_name(r.rmid, r.info)
            calls[name] = calls.get(name, 0) + 1
            fn(page, blk, r)
        monkeypatch.setitem(recovery.LOGICAL_REDO, key, counting)
    conn = minidb.connect(d, full_page_writes=fpw, **SETTINGS)
    try:
        after = _pages(conn, "t")
        after_index = {ix: _pages(conn, "t", ix) for ix in ("t_pkey", "t_pad")}
    finally:
        conn.close()
    # every kind was replayed from its record (with images: not the first change of a page)
    assert sum(calls.values()) > (200 if not fpw else 20)
    assert {"INSERT", "UPDATE", "HOT_UPDATE", "LOCK", "INSERT_LEAF"} <= set(calls)
    if not fpw:
        assert "INSERT+INIT" in calls          # a new page is never an image
    compared = [("t", before, after)] + [(ix, before_index[ix], after_index[ix])
                                         for ix in before_index]
    for what, old, new in compared:
        assert sorted(new) == sorted(old)
        for blk in old:
            a, b = masked(old[blk], what != "t"), masked(new[blk], what != "t")
            if not np.array_equal(a, b):
                diff = np.nonzero(a != b)[0]
                raise AssertionError(f"{what} block {blk} differs at bytes "
                                     f"{diff[:20].tolist()} (of {BLCKSZ}):\n"
                                     f"{pg.dump_page(new[blk])}")


@pytest.mark.parametrize("fpw", [False, True])
def test_update_to_another_page_is_one_record_with_both_pages(tmp_path, monkeypatch, fpw):
    """An update whose new version does not fit on its page logs LOCK, then ONE Heap UPDATE
    with block 0 the new version's page (UPDATE+INIT when the update added that page) and
    block 1 the old one - no INSERT of its own; replay of those records leaves the pages
    the primary left (a new page at the end, and a page with room found in the map)."""
    d = str(tmp_path / "data")
    conn = minidb.connect(d, full_page_writes=fpw, **SETTINGS)
    cur = conn.cursor()
    conn.autocommit = True
    cur.execute("create table t (k int primary key, v int, pad text)")
    for k in range(40):
        cur.execute("insert into t values (?, ?, ?)", (k, k, "p" * 700))
    cur.execute("delete from t where k >= 20 and k < 30")   # room on a middle page, later
    cur.execute("vacuum t")
    cur.execute("checkpoint")
    conn.autocommit = False
    for k in (0, 1, 2, 3, 35, 36):
        cur.execute("update t set pad = ? where k = ?", ("u" * 1500, k))
    conn.commit()
    cur.execute("delete from t where k = 39")   # the last record: a commit
    conn.commit()
    before = _pages(conn, "t")
    abandon(conn)

    updates, inserts = [], {}
    try:
        for r in dump.records(d, dump.DumpOptions(rmgrs=("Heap",))):
            name = rec.op_name(r.rmid, r.info)
            if name.startswith("UPDATE") and len(r.blocks) == 2:
                updates.append((name, r))
                assert " ; new off " in dump.describe(r) and " on another page" in \
                    dump.describe(r), dump.describe(r)
            elif name.startswith("INSERT"):
                rfn = r.blocks[0].relfilenode
                inserts[rfn] = inserts.get(rfn, 0) + 1
    except dump.DumpError:
        pass
    assert len(updates) == 6
    assert {n for n, _ in updates} == {"UPDATE", "UPDATE+INIT"}
    for _n, r in updates:
        new, old = r.blocks
        assert (new.id, old.id) == (0, 1) and new.block != old.block
        assert new.relfilenode == old.relfilenode
    # the 40 loaded rows and nothing for the six updates
    assert inserts[updates[0][1].blocks[0].relfilenode] == 40

    calls = []
    for key, fn in list(recovery.LOGICAL_REDO.items()):
        def counting(page, blk, r, fn=fn):
            calls.append((rec.op_name(r.rmid, r.info), blk.id, len(r.blocks)))
            fn(page, blk, r)
        monkeypatch.setitem(recovery.LOGICAL_REDO, key, counting)
    conn = minidb.connect(d, full_page_writes=fpw, **SETTINGS)
    try:
        after = _pages(conn, "t")
        cur = conn.cursor()
        cur.execute("select k, v, length(pad) from t order by k")
        rows = cur.fetchall()
    finally:
        conn.close()
    assert rows == [(k, k, 1500 if k in (0, 1, 2, 3, 35, 36) else 700)
                    for k in range(39) if not 20 <= k < 30]
    replayed = {(n, i) for n, i, nb in calls if nb == 2}
    if not fpw:
        assert {("UPDATE", 0), ("UPDATE", 1), ("UPDATE+INIT", 0), ("UPDATE+INIT", 1)} \
            <= replayed
    else:
        assert ("UPDATE+INIT", 0) in replayed   # a new page is never an image
    assert sorted(after) == sorted(before)
    for blk in before:
        a, b = masked(before[blk]), masked(after[blk])
        if not np.array_equal(a, b):
            diff = np.nonzero(a != b)[0]
            raise AssertionError(f"block {blk} differs at bytes {diff[:20].tolist()}:\n"
                                 f"{pg.dump_page(after[blk])}")
