"""INSERT ... ON CONFLICT: speculative insertion, as PostgreSQL 9.5 runs it
(nodeModifyTable.c's ExecInsert / ExecOnConflictUpdate).

For each row proposed for insertion (its defaults filled in), until it is settled:

1. **pre-check** every arbiter index (``indexam.find_conflict``, minidb.index.conflict):
   a running transaction that inserts or deletes the key is waited for; a live row with
   the key is the conflict;
2. a conflict with **DO NOTHING**: the row is skipped.  With **DO UPDATE**: the conflicting
   row's live version is fetched (the index entry names its HOT chain's root), the
   ``WHERE`` is tested on (existing row, EXCLUDED), and the row is updated with the ``SET``
   values through the executor's update loop (``minidb.heap.epq.modify_rows``: it waits for
   a running updater and, under READ COMMITTED, goes on with the newest version if it still
   has the key and passes the WHERE).  If the row vanished meanwhile (deleted, or its key
   changed), start over from 1.  A row this statement already inserted or updated is
   21000 ("cannot affect row a second time");
3. no conflict: **speculative insertion** - the heap tuple, then its index entries; if an
   arbiter index now reports the key taken (a transaction inserted it after the pre-check
   and committed), the heap tuple is killed at once
   (``minidb.heap.speculative.heap_abort_speculative``) and the row starts over from 1.  A
   conflict in a unique index that is not an arbiter is an ordinary 23505.

Under REPEATABLE READ a conflicting row the transaction's snapshot cannot see is a
serialization failure (40001), as PostgreSQL's ExecCheckTupleVisible.  RETURNING returns
the rows inserted or updated (not the skipped ones).  The rows are handled one at a time
(no bulk path).
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.exec import indexam
from minidb.exec.chunk import Chunk, column_to_list, rows_to_chunk
from minidb.exec.compile import K, evaluate, truth
from minidb.exec.datatypes import from_repr
from minidb.exec.returning import returning_of
from minidb.exec import ri
from minidb.exec.checks import row_checker
from minidb.heap.epq import modify_rows
from minidb.heap.heapam import heap_insert
from minidb.heap.modify import follow_update_chain, heap_fetch_raw
from minidb.heap.speculative import heap_abort_speculative
from minidb.txn import visibility as vis
from minidb.txn.xact import READ_COMMITTED

__all__ = ["insert_on_conflict"]

MAX_RETRIES = 1000


def insert_on_conflict(node, ectx):
    """InsertNode.execute with ``node.on_conflict`` set (a generator: RETURNING chunks)."""
    backend = ectx.backend
    catalog = backend.catalog
    oc = node.on_conflict
    entry = node.entry
    name = entry.table.name
    rel = catalog.heap_rel(name)
    tdef = catalog.table(name)
    indexes = list(tdef.indexes)
    checker = row_checker(ectx, node.entry)       # CHECK constraints, row by row here
    fk_inserted = [] if tdef.foreign_keys else None   # for the foreign keys, at the end
    fk_pairs = [] if ri.involved(tdef) else None
    arbiters = list(oc.arbiters)
    ncols = len(entry.columns)
    ttypes = [t for _, t in entry.columns]
    snap = ectx.snapshot
    xid = backend.xact.xid_for_write()
    cid = snap.curcid
    one = Chunk([], 1)
    fill, per_row = node.default_fillers(ectx)
    # DO UPDATE's expressions read (existing row, EXCLUDED) side by side
    both = {(entry.index, a): a for a in range(ncols)}
    both.update({(oc.excluded_index, a): ncols + a for a in range(ncols)})
    sets = [(a, ectx.compile(e, both)) for a, e in oc.assignments]
    where = ectx.compile(oc.where, both) if oc.where is not None else None
    ret = returning_of(node, ectx)
    touched: set = set()       # (index, key) of the rows this statement inserted / updated
    stats = backend.pgstat
    strict = backend.xact.isolation != READ_COMMITTED

    def keys_of(row):
        return [(ix, indexam.index_key(backend, ix, row)) for ix in arbiters]

    def update_values(existing, proposed):
        ch = rows_to_chunk([list(existing) + list(proposed)], ttypes + ttypes)
        new = list(existing)
        for a, c in sets:
            new[a] = column_to_list(*evaluate(c, ch), ttypes[a])[0]
        if checker is not None:
            checker.check([new])
        return new

    def passes(existing, proposed) -> bool:
        if where is None:
            return True
        if isinstance(where, K):
            return bool(where.value)
        ch = rows_to_chunk([list(existing) + list(proposed)], ttypes + ttypes)
        return bool(truth(where, ch)[0])

    def settle(row) -> str:
        """'inserted', 'updated', 'skipped' or 'retry' for one proposed row."""
        conflict = None
        for ix in arbiters:
            tid = indexam.find_conflict(backend, ix, row)
            if tid is not None:
                conflict = (ix, tid)
                break
        if conflict is not None:
            ix, tid = conflict
            newest = follow_update_chain(backend, rel, tid)
            got = heap_fetch_raw(backend, rel, newest) if newest is not None else None
            if got is None:
                return "retry"
            h, existing = got
            if (ix, indexam.index_key(backend, ix, existing)) in touched and oc.action == "update":
                raise errors.CardinalityViolation(
                    "ON CONFLICT DO UPDATE command cannot affect row a second time",
                    ) from None
            if strict:
                visible, _ = vis.satisfies_mvcc(h["xmin"], h["xmax"], h["cmin"], h["cmax"],
                                                h["infomask"], snap, backend.xact.procarray.clog)
                if not visible:
                    raise errors.SerializationFailure(
                        "could not serialize access due to concurrent update")
            if oc.action == "nothing":
                return "skipped"
            if not passes(existing, row):
                return "skipped"
            key = indexam.index_key(backend, ix, existing)
            done = []

            def recheck(r):
                return indexam.index_key(backend, ix, r) == key and passes(r, row)

            def on_done(_tid, old_row, new_tid, hot, new_row):
                if new_tid is not None and not hot:
                    indexam.insert_entries(backend, indexes, new_row, new_tid)
                done.append(new_row)
                if fk_pairs is not None:
                    fk_pairs.append((old_row, new_row))

            n = modify_rows(backend, rel, snap, [(newest, existing)], recheck, "update",
                            lambda r: update_values(r, row), on_done=on_done)
            if not n:
                return "retry"
            new_row = done[0]
            touched.update(keys_of(new_row))
            if ret is not None:
                ret.add(new_row)
            return "updated"
        if checker is not None:
            checker.check([row])
        tid = heap_insert(backend, rel, row, xmin=xid, cmin=cid)
        try:
            indexam.insert_entries(backend, indexes, row, tid)
        except errors.UniqueViolation as e:
            if getattr(e, "index_name", None) not in arbiters:
                raise
            heap_abort_speculative(backend, rel, tid)
            return "retry"
        touched.update(keys_of(row))
        if ret is not None:
            ret.add(row)
        if fk_inserted is not None:
            fk_inserted.append(row)
        return "inserted"

    n = inserted = 0
    it = node.children[0].run(ectx)
    try:
        for chunk in it:
            cols = [column_to_list(v, m, ttypes[a])
                    for (v, m), a in zip(chunk.cols, node.attnos)]
            for r in range(chunk.n):
                row = [None] * ncols
                for a, v in fill.items():
                    row[a] = v
                for a, c in per_row.items():
                    row[a] = _value(c, one)
                for col, a in zip(cols, node.attnos):
                    row[a] = col[r]
                for _ in range(MAX_RETRIES):
                    outcome = settle(row)
                    if outcome != "retry":
                        break
                else:  # pragma: no cover
                    raise errors.InternalError("ON CONFLICT: the row was retried too often")
                if outcome == "inserted":
                    inserted += 1
                if outcome in ("inserted", "updated"):
                    n += 1
            if ret is not None:
                ectx.rows_affected = n
                out = ret.chunk()
                if out is not None:
                    yield out
        if fk_inserted:
            ri.after_insert(backend, tdef, fk_inserted, snap)
        if fk_pairs:
            ri.after_update(backend, tdef, fk_pairs, snap)
    finally:
        it.close()
        if inserted:
            stats.count(rel.oid, "ins", inserted)
    ectx.rows_affected = n


def _value(c, one_row):
    if isinstance(c, K):
        return from_repr(c.value, c.type)
    v, m = c.fn(one_row, None)
    return column_to_list(v, m, c.type)[0]
