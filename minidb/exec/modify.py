"""Nodes that write: INSERT, UPDATE, DELETE, and the row locks of SELECT ... FOR UPDATE.

**Insert** takes rows from VALUES (``ValuesNode``) or from a query, fills the columns not
given with their DEFAULT (or NULL), and inserts each row with ``heapam.heap_insert``
(the FSM finds it a page), then one entry per index of the table
(``minidb.index.insert_entry``: a unique index checks for a live duplicate there and
raises UniqueViolation).  A batch of at least ``BULK_INSERT_MIN_ROWS`` rows (whose
missing columns have constant defaults) takes the bulk path instead (``bulk_insert``):
``heap_bulk_insert`` (rows encoded by numpy, appended on new pages, one WAL record per
page), then the index entries of the whole batch in key order.  The bulk loads of the
SQL layer (many-row VALUES, executemany, COPY FROM: ``minidb.sql.bulkload``) arrive here
as such batches.

**Update / Delete / LockRows** get the rows to change from a scan below them (with the
heap TIDs of the versions the statement's snapshot saw) and hand them to
``minidb.heap.epq.modify_rows`` - the same loop ``Session.update``/``delete`` use: wait for
a running modifier, and under READ COMMITTED re-check the WHERE clause on the newest
version of a row that changed meanwhile (EvalPlanQual), computing an UPDATE's new values
again from that version; under REPEATABLE READ such a row is a serialization failure
(40001).  The loop lives in the heap package, below both this module and
``minidb.session`` (which may not import the executor); these nodes supply it the
compiled re-check (``where``), the new values (``set_fn``) and the index maintenance
(``on_done``).  The new values of the rows the scan found are computed for a whole batch at once;
a re-checked row is evaluated alone.  After a non-HOT update, every index of the table
gets an entry for the new version (a HOT update needs none: the chain's root keeps them).
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
from minidb.exec import indexam, ri
from minidb.exec.chunk import Chunk, chunk_to_rows, column_from_values, column_to_list, \
    rows_to_chunk
from minidb.exec.datatypes import from_repr
from minidb.exec.checks import row_checker
from minidb.exec.compile import K, evaluate, truth
from minidb.exec.expr import and_all
from minidb.exec.nodes import PlanNode
from minidb.exec.returning import returning_of as _returning_of
from minidb.heap.epq import modify_rows
from minidb.heap.heapam import heap_bulk_insert, heap_insert

__all__ = ["DEFAULT", "ValuesNode", "InsertNode", "UpdateNode", "DeleteNode", "LockRowsNode",
           "BULK_INSERT_MIN_ROWS", "bulk_insert"]

BULK_INSERT_MIN_ROWS = 2000


class _Default:
    """DEFAULT in a VALUES list (the binder puts it where a value was not given)."""

    def __repr__(self):
        return "DEFAULT"


DEFAULT = _Default()


def _value(c, one_row):
    """Python value of a compiled expression evaluated for a single row."""
    if isinstance(c, K):
        return from_repr(c.value, c.type)
    v, m = c.fn(one_row, None)
    return column_to_list(v, m, c.type)[0]


class ValuesNode(PlanNode):
    """The rows of INSERT ... VALUES, already in the target columns' types."""

    def __init__(self, rows, types, defaults):
        super().__init__([], [("v", i) for i in range(len(types))], types)
        self.value_rows = rows          # [[Expr | DEFAULT]]
        self.defaults = defaults        # per output position: Expr or None

    @property
    def label(self):
        return "Result" if len(self.value_rows) == 1 else 'Values Scan on "*VALUES*"'

    def execute(self, ectx):
        one = Chunk([], 1)
        cache = {}
        out = [[] for _ in self.types]
        for row in self.value_rows:
            for i, e in enumerate(row):
                if e is DEFAULT:
                    d = self.defaults[i]
                    if d is None:
                        out[i].append(None)
                        continue
                    e = d
                c = cache.get(id(e))
                if c is None:
                    c = cache[id(e)] = ectx.compile(e, {})
                out[i].append(_value(c, one))
        n = len(self.value_rows)
        cols = [column_from_values(vals, t) for vals, t in zip(out, self.types)]
        yield Chunk(cols, n)


class InsertNode(PlanNode):

    def __init__(self, entry, attnos, child, defaults):
        super().__init__([child], [], [])
        self.entry = entry
        self.attnos = list(attnos)
        self.defaults = defaults        # attno -> Expr
        self.count = 0

    def title(self):
        return f"Insert on {self.entry.table.name}"

    on_conflict = None      # minidb.sql.onconflict.OnConflict (the planner sets it)

    def default_fillers(self, ectx) -> tuple[dict, dict]:
        """The columns a row is not given: ``fill`` (attno -> value: NULL or a constant
        default, computed once) and ``per_row`` (attno -> compiled default evaluated for
        each row: ``nextval``, ``random()`` ...)."""
        fill, per_row = {}, {}
        for a in range(len(self.entry.columns)):
            if a in self.attnos:
                continue
            d = self.defaults.get(a)
            if d is None:
                fill[a] = None
                continue
            c = ectx.compile(d, {})
            if isinstance(c, K):
                fill[a] = from_repr(c.value, c.type)
            else:
                per_row[a] = c
        return fill, per_row

    def execute(self, ectx):
        if self.on_conflict is not None:
            from minidb.exec.onconflict import insert_on_conflict
            yield from insert_on_conflict(self, ectx)
            return
        backend = ectx.backend
        catalog = backend.catalog
        name = self.entry.table.name
        rel = catalog.heap_rel(name)
        tdef = catalog.table(name)
        indexes = list(tdef.indexes)
        ncols = len(self.entry.columns)
        ttypes = [t for _, t in self.entry.columns]
        snap = ectx.snapshot
        xid = backend.xact.xid_for_write()
        cid = snap.curcid
        one = Chunk([], 1)
        fill, per_row = self.default_fillers(ectx)
        child = self.children[0]
        stats = backend.pgstat
        ret = _returning_of(self, ectx)
        checker = row_checker(ectx, self.entry)
        n = 0
        written = [] if tdef.foreign_keys else None   # rows for the foreign-key checks
        it = child.run(ectx)
        try:
            for chunk in it:
                cols = [column_to_list(v, m, ttypes[a])
                        for (v, m), a in zip(chunk.cols, self.attnos)]
                rows = None
                if checker is not None:  # (per-row defaults - nextval - evaluated once)
                    rows = _full_rows(cols, self.attnos, fill, per_row, one, ncols, chunk.n)
                    checker.check(rows)
                if chunk.n >= BULK_INSERT_MIN_ROWS and not per_row and ret is None:
                    data = {self.entry.columns[a][0]: col for col, a in zip(cols, self.attnos)}
                    for a, v in fill.items():
                        if v is not None:
                            data[self.entry.columns[a][0]] = [v] * chunk.n
                    bulk_insert(backend, rel, indexes, data, chunk.n, xid, cid)
                    n += chunk.n
                    if written is not None:
                        names = [c for c, _ in self.entry.columns]
                        written.extend(zip(*[data.get(c, [None] * chunk.n) for c in names]))
                    continue
                if rows is None:
                    rows = _full_rows(cols, self.attnos, fill, per_row, one, ncols, chunk.n)
                for row in rows:
                    tid = heap_insert(backend, rel, row, xmin=xid, cmin=cid)
                    n += 1
                    indexam.insert_entries(backend, indexes, row, tid)
                    if ret is not None:
                        ret.add(row)
                    if written is not None:
                        written.append(row)
                if ret is not None:
                    ectx.rows_affected = n
                    out = ret.chunk()
                    if out is not None:
                        yield out
            if written:
                ri.after_insert(backend, tdef, written, snap)
        finally:
            it.close()
            if n:
                stats.count(rel.oid, "ins", n)
        ectx.rows_affected = n


def _full_rows(cols, attnos, fill, per_row, one, ncols, n) -> list:
    """The rows a chunk inserts, every column filled (for the CHECK constraints)."""
    rows = []
    for r in range(n):
        row = [None] * ncols
        for a, v in fill.items():
            row[a] = v
        for a, c in per_row.items():
            row[a] = _value(c, one)
        for col, a in zip(cols, attnos):
            row[a] = col[r]
        rows.append(row)
    return rows


def bulk_insert(backend, rel, indexes, data: dict, nrows: int, xid: int, cid: int) -> None:
    """Insert ``nrows`` rows given column by column (``data``: column name -> values, a
    missing column NULL) through the heap's bulk path, then their index entries.

    The rows go to new pages with one WAL record per page (``heap_bulk_insert``); each
    index then gets the batch's entries in key order (``indexam.insert_entries_bulk``: one
    descent and one WAL record per leaf page the batch lands on, where nothing needs a
    closer look).  A unique violation raises after the heap rows are written: the
    statement fails and its transaction's rows are never visible, as with a row-at-a-time
    insert."""
    if not indexes:
        heap_bulk_insert(backend, rel, data, nrows, xmin=xid, cmin=cid)
        return
    blocks, offsets = heap_bulk_insert(backend, rel, data, nrows, xmin=xid, cmin=cid,
                                       return_tids=True)
    indexam.insert_entries_bulk(backend, indexes, rel.layout, data, nrows, blocks, offsets)


class _Writer(PlanNode):
    """Shared by UpdateNode, DeleteNode and LockRowsNode."""
    kind = "?"

    def __init__(self, entry, child, recheck_quals):
        super().__init__([child], child.keys, child.types)
        self.entry = entry
        self.recheck_quals = list(recheck_quals)

    def _setup(self, ectx):
        backend = ectx.backend
        name = self.entry.table.name
        self.rel_now = backend.catalog.heap_rel(name)
        full = {(self.entry.index, a): a for a in range(len(self.entry.columns))}
        self.full_types = [t for _, t in self.entry.columns]
        q = ectx.compile(and_all(self.recheck_quals), full) if self.recheck_quals else None
        if getattr(self, "joined", False):
            # UPDATE ... FROM / DELETE ... USING: a row changed concurrently is not re-joined
            # (minidb.sql.updfrom): 40001
            def where(row):
                raise errors.SerializationFailure(
                    "could not serialize access due to concurrent update")
            return where

        def where(row):
            if q is None:
                return True
            if isinstance(q, K):
                return bool(q.value)
            ch = rows_to_chunk([row], self.full_types)
            return bool(truth(q, ch)[0])
        return where


class UpdateNode(_Writer):
    kind = "update"

    def __init__(self, entry, child, assignments, recheck_quals):
        super().__init__(entry, child, recheck_quals)
        self.keys, self.types = [], []
        self.assignments = list(assignments)   # [(attno, Expr over the full row)]

    def title(self):
        return f"Update on {self.entry.table.name}"

    def execute(self, ectx):
        where = self._setup(ectx)
        backend = ectx.backend
        rel = self.rel_now
        tdef = backend.catalog.table(self.entry.table.name)
        indexes = list(tdef.indexes)
        pairs = [] if ri.involved(tdef) else None   # (old, new) for the foreign keys
        child = self.children[0]
        layout = child.layout()
        full = {(self.entry.index, a): a for a in range(len(self.entry.columns))}
        comp = [(a, ectx.compile(e, layout)) for a, e in self.assignments]
        comp_full = [] if getattr(self, "joined", False) else \
            [(a, ectx.compile(e, full)) for a, e in self.assignments]
        types = self.full_types
        positions = [layout[(self.entry.index, a)] for a in range(len(types))]
        rindex = self.entry.index
        ret = _returning_of(self, ectx)
        checker = row_checker(ectx, self.entry)

        def new_row_of(row, computed):
            new = list(row)
            for a, v in computed:
                new[a] = v
            return new

        n = 0
        it = child.run(ectx)
        try:
            for chunk in it:
                rows = chunk_to_rows(Chunk([chunk.cols[p] for p in positions], chunk.n), types)
                newcols = [(a, column_to_list(*evaluate(c, chunk), types[a])) for a, c in comp]
                precomputed = {}
                for r, row in enumerate(rows):
                    precomputed[id(row)] = new_row_of(row, [(a, col[r]) for a, col in newcols])
                if checker is not None:
                    checker.check(list(precomputed.values()))
                blocks, offsets = chunk.tids[rindex]

                def set_fn(row, _pre=precomputed):
                    got = _pre.get(id(row))
                    if got is not None:
                        return got
                    one = rows_to_chunk([row], types)
                    new = new_row_of(row, [(a, column_to_list(*evaluate(c, one), types[a])[0])
                                           for a, c in comp_full])
                    if checker is not None:
                        checker.check([new])      # a concurrently updated row's new version
                    return new

                if ret is not None and ret.extra_keys:     # UPDATE ... FROM ... RETURNING
                    extras = ret.extras_of(chunk, layout)
                    at = {id(row): r for r, row in enumerate(rows)}

                def on_done(tid, row, new_tid, hot, new_row):
                    if new_tid is not None and not hot:
                        indexam.insert_entries(backend, indexes, new_row, new_tid)
                    if ret is not None:
                        if ret.extra_keys:
                            r = at[id(row)]
                            ret.add(list(new_row) + [col[r] for col in extras])
                        else:
                            ret.add(new_row)
                    if pairs is not None:
                        pairs.append((row, new_row))

                cands = zip(zip(blocks.tolist(), offsets.tolist()), rows)
                n += modify_rows(backend, rel, ectx.snapshot, cands, where, "update", set_fn,
                                 on_done=on_done)
                if ret is not None:
                    ectx.rows_affected = n
                    out = ret.chunk()
                    if out is not None:
                        yield out
            if pairs:
                ri.after_update(backend, tdef, pairs, ectx.snapshot)
        finally:
            it.close()
        ectx.rows_affected = n


class DeleteNode(_Writer):
    kind = "delete"

    def __init__(self, entry, child, recheck_quals):
        super().__init__(entry, child, recheck_quals)
        self.keys, self.types = [], []

    def title(self):
        return f"Delete on {self.entry.table.name}"

    def execute(self, ectx):
        where = self._setup(ectx)
        rindex = self.entry.index
        backend = ectx.backend
        tdef = backend.catalog.table(self.entry.table.name)
        gone = [] if tdef.referenced_by else None   # deleted rows for the foreign keys
        ret = _returning_of(self, ectx)
        if ret is not None:
            layout = self.children[0].layout()
            positions = [layout[(rindex, a)] for a in range(len(self.full_types))]

        extra = {}        # DELETE ... USING ... RETURNING: the joined row's other columns

        def done(tid, row, *_):
            if gone is not None:
                gone.append(ri.old_row(backend, self.rel_now, tid))
            if ret is not None:
                if extra:
                    r = extra["at"][id(row)]
                    ret.add(list(row) + [col[r] for col in extra["cols"]])
                else:
                    ret.add(row)
        on_done = done if gone is not None or ret is not None else None
        n = 0
        it = self.children[0].run(ectx)
        try:
            for chunk in it:
                blocks, offsets = chunk.tids[rindex]
                tids = zip(blocks.tolist(), offsets.tolist())
                if ret is None:
                    cands = ((tid, None) for tid in tids)
                else:
                    rows = chunk_to_rows(Chunk([chunk.cols[p] for p in positions], chunk.n),
                                         self.full_types)
                    if ret.extra_keys:
                        extra["cols"] = ret.extras_of(chunk, layout)
                        extra["at"] = {id(row): r for r, row in enumerate(rows)}
                    cands = zip(tids, rows)
                n += modify_rows(backend, self.rel_now, ectx.snapshot, cands, where,
                                 "delete", None, on_done=on_done)
                if ret is not None:
                    ectx.rows_affected = n
                    out = ret.chunk()
                    if out is not None:
                        yield out
            if gone:
                ri.after_delete(backend, tdef, gone, ectx.snapshot)
        finally:
            it.close()
        ectx.rows_affected = n


class LockRowsNode(_Writer):
    """SELECT ... FOR UPDATE / NO KEY UPDATE / SHARE / KEY SHARE: lock each row in
    ``lock_mode`` (re-checked under READ COMMITTED) and return the version that was locked;
    ``wait_policy`` "nowait" raises 55P03 on a conflict, "skip" (SKIP LOCKED) leaves the row
    out.  It sits under a Limit, as PostgreSQL's, so LIMIT counts the rows locked."""
    label = "LockRows"
    kind = "lock"

    def __init__(self, entry, child, recheck_quals, lock_mode="update", wait_policy="block"):
        super().__init__(entry, child, recheck_quals)
        self.lock_mode, self.wait_policy = lock_mode, wait_policy

    def execute(self, ectx):
        where = self._setup(ectx)
        child = self.children[0]
        layout = child.layout()
        types = self.full_types
        positions = [layout[(self.entry.index, a)] for a in range(len(types))]
        rindex = self.entry.index
        it = child.run(ectx)
        try:
            for chunk in it:
                rows = chunk_to_rows(Chunk([chunk.cols[p] for p in positions], chunk.n), types)
                blocks, offsets = chunk.tids[rindex]
                done = []
                modify_rows(ectx.backend, self.rel_now, ectx.snapshot,
                            zip(zip(blocks.tolist(), offsets.tolist()), rows), where, "lock",
                            None, on_done=lambda tid, row, *_: done.append((tid, row)),
                            lock_mode=self.lock_mode, wait_policy=self.wait_policy)
                if not done:
                    continue
                ectx.wrote = True
                t = {rindex: (np.array([d[0][0] for d in done], np.int64),
                              np.array([d[0][1] for d in done], np.int64))}
                out = rows_to_chunk([d[1] for d in done], types, tids=t)
                # back to the child's column order
                inv = {a: i for i, a in enumerate(range(len(types)))}
                cols = [out.cols[inv[k[1]]] for k in child.keys]
                yield Chunk(cols, out.n, t)
        finally:
            it.close()


assert errors
