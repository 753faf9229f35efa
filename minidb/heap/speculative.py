"""Killing a speculatively inserted tuple (PostgreSQL's ``heap_abort_speculative``).

INSERT ... ON CONFLICT inserts its row into the heap before its index entries
(``minidb.exec.onconflict``).  When an arbiter index then finds that another transaction
got the key first, the row must vanish for everyone at once - not merely be deleted by
this transaction, which would leave it visible to nobody yet still "inserted by a running
transaction" to other inserters' unique checks, making them wait for this transaction.
PostgreSQL sets the tuple's xmin to InvalidTransactionId; minidb sets the HEAP_XMIN_INVALID
bit (the "inserter aborted" hint), which every visibility test reads before anything else,
so the tuple is dead to all snapshots, to the unique checks (``satisfies_vacuum``: DEAD)
and to pruning.  The change is WAL-logged (a Heap DELETE record carrying the page delta),
and the page's prune hint is set.

Departure: PostgreSQL also keeps a *speculative token* in the tuple's t_ctid so that a
concurrent inserter waits for the insertion to be confirmed or killed, not for the whole
transaction; minidb's inserters wait for the transaction (the row's index entries are in
by the time anyone can see them, and a killed row is dead before its entries are found).
"""

from __future__ import annotations

import struct

from minidb.errors import InternalError
from minidb.heap.heapam import HeapRel
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE
from minidb.storage.htup import HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID
from minidb.storage.xloginsert import PageRecord
from minidb.wal.record import RM_HEAP, XLOG_HEAP_DELETE

__all__ = ["heap_abort_speculative"]

_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")
_OFF_XMIN, _OFF_INFOMASK = 0, 32


def heap_abort_speculative(backend, rel: HeapRel, tid) -> None:
    """Make this transaction's tuple at ``tid`` dead to everyone, now."""
    bm = backend.bufmgr
    block, off = int(tid[0]), int(tid[1])
    b = bm.pin_lock(rel.relfilenode, block, EXCLUSIVE)
    try:
        page = bm.page(b)
        if off > pg.max_offset(page) or pg.get_item_id(page, off)[1] != pg.LP_NORMAL:
            raise InternalError(f'speculative tuple ({block},{off}) of "{rel.name}" is gone')
        item = pg.get_item(page, off)
        xid = backend.xact.xid_for_write()  # the level's xid: a subxid inside a savepoint
        if _U64.unpack_from(item, _OFF_XMIN)[0] != xid:
            raise InternalError(f'tuple ({block},{off}) of "{rel.name}" is not this '
                                "transaction's speculative insertion")
        wr = PageRecord(bm).add(b)
        im = _U16.unpack_from(item, _OFF_INFOMASK)[0]
        _U16.pack_into(item, _OFF_INFOMASK, (im & ~HEAP_XMIN_COMMITTED) | HEAP_XMIN_INVALID)
        old = pg.get_prune_xid(page)
        if old == 0 or xid < old:
            pg.set_prune_xid(page, xid)
        wr.log(RM_HEAP, XLOG_HEAP_DELETE, xid, struct.pack("<H", off))
    finally:
        bm.unlock_unpin(b)
