"""The B-tree's logical INSERT_LEAF record and its redo routine (nbtxlog.c's
btree_xlog_insert).

A leaf insert (``insert.insert_entry`` without a split, and each page-batch of
``insert.insert_entries``) registers the leaf with ``PageRecord.add(buf, data=...)``:
the items it added and where, so no before-image is copied and no delta computed.
Block data (little-endian): ``count u16``, then per item ``offnum u16 | length u16 |
item bytes``, in the order they were added (each offset counts the items added before it).
Redo adds them with ``PageAddItem``'s index rule (a line pointer opened at the offset, the
ones after it shifted up), which leaves the page byte for byte as the insert left it: an
append of several items at once (``insert._append_items``) builds what that many
``add_item`` calls build.

INSERT_UPPER (a downlink, which also clears the child's INCOMPLETE_SPLIT flag), the splits,
a new root, and simple deletion stay page deltas or images (minidb/wal/README.md).
Departure: PostgreSQL's xl_btree_insert carries one item; a batch of a bulk index insert
here is one record per page.
"""

from __future__ import annotations

import struct

from minidb.errors import InternalError
from minidb.storage import page as pg
from minidb.wal import record as rec

COUNT = struct.Struct("<H")
ITEM = struct.Struct("<HH")   # offset number, length; then the item


def insert_data(placed) -> bytes:
    """INSERT_LEAF's block data for ``placed``: (offset, item bytes) in insertion order."""
    parts = [COUNT.pack(len(placed))]
    for off, it in placed:
        parts.append(ITEM.pack(off, len(it)))
        parts.append(it)
    return b"".join(parts)


def redo_insert_leaf(page, blk, r) -> None:
    data = memoryview(blk.data)
    (n,) = COUNT.unpack_from(data, 0)
    pos = COUNT.size
    for _ in range(n):
        off, ln = ITEM.unpack_from(data, pos)
        pos += ITEM.size
        got = pg.add_item(page, data[pos:pos + ln], offset=off, heap=False)
        if got != off:  # pragma: no cover - add_item with an offset returns it
            raise InternalError(f"INSERT_LEAF redo placed an item at {got}, not {off}")
        pos += ln


def redo_routines() -> dict:
    """(rmgr, opcode) -> routine, for ``minidb.recovery.LOGICAL_REDO``."""
    return {(rec.RM_BTREE, rec.XLOG_BTREE_INSERT_LEAF): redo_insert_leaf}
