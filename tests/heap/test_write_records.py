"""The WAL block data of heap INSERT and same-page UPDATE / HOT_UPDATE, built by the writers
from the values they wrote (``redo.insert_data`` / ``redo.hot_update_data``), equal what
reading the page back gives (``redo.xmax_data`` with ``new_off``, and the INSERT layout of
the module docstring): offsets, flags (F_FREE_LINES, with a reused line pointer and
without), the old version's infomask2 and t_ctid, and the new tuple's bytes with its
t_ctid.  Both HOT and non-HOT (an indexed column changed) updates are covered."""

from __future__ import annotations


from minidb.catalog import ColumnDef
from minidb.heap import heapam, modify, redo
from minidb.heap.heapam import heap_insert
from minidb.heap.modify import TM_OK, heap_update
from minidb.heap.prune import prune_page
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE
from minidb.storage.xloginsert import PageRecord

COLS = [ColumnDef("id", "integer"), ColumnDef("v", "integer"), ColumnDef("s", "text")]


class _Recording(PageRecord):
    logged: list = []

    def add(self, b, new=False, data=None):
        _Recording.logged.append(data)
        return super().add(b, new=new, data=data)


def _page_bytes(b, rel, block):
    bm = b.bufmgr
    buf = bm.pin_lock(rel.relfilenode, block, SHARE)
    try:
        return bytes(bm.page(buf))
    finally:
        bm.unlock_unpin(buf)


def _insert(b, rel, values):
    b.xact.begin(None)
    snap = b.xact.start_statement()
    xid = b.xact.xid_for_write()
    _Recording.logged.clear()
    tid = heap_insert(b, rel, values, xmin=xid, cmin=snap.curcid)
    page = _page_bytes(b, rel, tid[0])
    (data,) = _Recording.logged
    flags = redo.F_FREE_LINES if pg.get_flags(page) & pg.PD_HAS_FREE_LINES else 0
    assert data == redo.INSERT.pack(tid[1], flags) + bytes(pg.get_item(page, tid[1]))
    b.xact.command_done(True)
    b.xact.commit()
    return tid, page


def _update(b, rel, tid, values):
    b.xact.begin(None)
    snap = b.xact.start_statement()
    xid = b.xact.xid_for_write()
    _Recording.logged.clear()
    res, new_tid, hot = heap_update(b, rel, tid, values, snap)
    assert res == TM_OK and new_tid[0] == tid[0]
    page = _page_bytes(b, rel, tid[0])
    (data,) = _Recording.logged
    assert data == redo.xmax_data(page, tid[1], redo.F_CMAX | redo.F_PRUNE_XID, xid,
                                  snap.curcid, 0, new_tid[1])
    b.xact.command_done(True)
    b.xact.commit()
    return new_tid, hot


def test_logged_block_data_equals_the_page_read_back(inst, monkeypatch):
    inst.catalog.create_table("t", list(COLS))
    inst.catalog.create_index("t_id", "t", ["id"], unique=True)
    rel = inst.catalog.heap_rel("t")
    monkeypatch.setattr(modify, "PageRecord", _Recording)
    monkeypatch.setattr(heapam, "PageRecord", _Recording)
    b = inst.connect()
    tids = [_insert(b, rel, (k, k, "x" * k if k % 2 else None))[0] for k in range(5)]
    # HOT twice on one row, a non-HOT update (the indexed id changes) of another
    t1, hot1 = _update(b, rel, tids[1], (1, 10, "a"))
    t2, hot2 = _update(b, rel, t1, (1, 11, None))
    t3, hot3 = _update(b, rel, tids[2], (20, 2, "b"))
    assert (hot1, hot2, hot3) == (True, True, False)
    # pruning frees the middle heap-only version's line pointer: the next insert and
    # update reuse one (PD_HAS_FREE_LINES and F_FREE_LINES as the page says)
    buf = b.bufmgr.pin(rel.relfilenode, 0)
    try:
        b.bufmgr.lock_for_cleanup(buf)
        try:
            prune_page(b, rel, buf, inst.procarray.global_xmin())
        finally:
            b.bufmgr.unlock(buf)
    finally:
        b.bufmgr.unpin(buf)
    assert pg.get_flags(_page_bytes(b, rel, 0)) & pg.PD_HAS_FREE_LINES
    tid, _page = _insert(b, rel, (7, 7, "seven"))
    assert tid == (0, t1[1])   # the freed pointer was reused
    _update(b, rel, t2, (1, 12, "c"))
    _update(b, rel, tid, (7, 8, None))
    b.close()
