"""SetHintBits' rule under synchronous_commit = off: a reader does not set a COMMITTED hint
bit for a transaction whose commit record is not yet flushed (a page carrying it could
reach the disk first, and a crash that loses the commit would leave the row's inserter
aborted but its row hinted committed); once the WAL is flushed the next reader sets it."""

from __future__ import annotations

from minidb.catalog import ColumnDef
from minidb.heap.layout import decode_header
from minidb.instance import Instance
from minidb.session import Session
from minidb.storage import page as pg
from minidb.storage.htup import HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID


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
