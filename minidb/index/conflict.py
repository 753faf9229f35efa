"""ON CONFLICT's pre-check: is there a row with this key in a unique index?
(PostgreSQL's ``ExecCheckIndexConstraints`` for the arbiter indexes.)

``find_conflict(backend, index, row)`` descends to the leaf for the key of ``row`` and runs
the unique check an insert would (``minidb.index.unique.check_unique``: the heap's
verdict on every entry with the key, under the leaf's lock): a running inserter or deleter
of the key is waited for and the check starts over; a live row (committed, or this
transaction's own) is the conflict, returned as the heap TID its entry points to (the root
of its HOT chain: the caller follows the chain to the live version); no live row, None.
Nothing is inserted.  A key with a NULL never conflicts.

The insert that follows a clean pre-check is *speculative* (``minidb.exec.onconflict``):
the row goes into the heap, then its index entries; if an arbiter index now finds a
conflict (another transaction inserted the key in between and committed, or this
statement's wait ended with it committed), the heap row is killed at once
(``minidb.heap.speculative.heap_abort_speculative``) and the row starts over from the
pre-check.
"""

from __future__ import annotations

from minidb.errors import UniqueViolation
from minidb.index.rel import open_index
from minidb.index.search import release, search
from minidb.index.unique import check_unique
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE

__all__ = ["find_conflict"]


def find_conflict(backend, index, row) -> tuple[int, int] | None:
    """The heap TID of a live row whose key in unique ``index`` equals ``row``'s, or None
    (waiting for running transactions that insert or delete the key)."""
    from minidb.index.insert import finish_split
    irel = open_index(backend, index)
    if irel.row_filter is not None and not irel.row_filter([row])[0]:
        return None             # a partial index the row would not be in: no conflict
    keyvals = irel.key_of_row(row)
    if any(v is None for v in keyvals):
        return None
    key = irel.codec.encode(keyvals)
    hrel = backend.catalog.heap_rel(irel.table)
    bm = backend.bufmgr
    settings = backend.settings

    def finish(_bm, irel, b, blk, stack):
        finish_split(backend, irel, b, blk, stack)

    while True:
        b, _blk, data, _stack = search(bm, irel, key, write=True, finish=finish)
        try:
            xwait = check_unique(backend, irel, hrel, b, data, key, keyvals, None)
        except UniqueViolation as e:
            release(bm, b)
            return _chain_start(bm, hrel, e.conflict_tid)
        except BaseException:
            release(bm, b)
            raise
        release(bm, b)
        if not xwait:
            return None
        backend.instance.procarray.wait_for(
            backend.slot, xwait, lock_timeout_ms=settings.lock_timeout,
            deadlock_timeout_ms=settings.deadlock_timeout,
            max_wait_ms=settings.lock_wait_timeout_ms,
            what=f' (ON CONFLICT check of index "{irel.name}")')


def _chain_start(bm, hrel, tid):
    """The first tuple of the HOT chain an index entry names: its root, or where a pruned
    root's redirect points."""
    block, off = tid
    b = bm.pin_lock(hrel.relfilenode, block, SHARE)
    try:
        page = bm.page(b)
        if off <= pg.max_offset(page):
            lp_off, flags, _len = pg.get_item_id(page, off)
            if flags == pg.LP_REDIRECT:
                off = lp_off
    finally:
        bm.unlock_unpin(b)
    return block, off
