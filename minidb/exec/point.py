"""The point path: a cached plan of a one-row statement compiled into one closure.

A prepared point select spends a third of its time in the executor's generality: a new
``ExecContext``, every expression compiled again with the parameters bound, the index
bounds checked for fit, a one-row numpy chunk built and taken apart again.  For the plans
below, ``compile_point(plan)`` returns ``run(session, snapshot, params) -> (result,
wrote)`` - the body ``Session.statement`` brackets, as the engine's general path is - made
once per cached plan (the engine keeps it on the plan, so it is dropped with the plan when
the catalog, a plan setting or a table's size makes the engine plan again):

=================================  ===========================================================
plan                               closure
=================================  ===========================================================
Project(Index Scan), equality on   key values from the parameters -> ``fetch_equal``
a prefix of the index, no filter   (the index scan's steps without a scan object: B-tree
                                   descent, the leaf's items, the HOT chain walk of each
                                   TID with the plan's ``PagePruner``, index tuple
                                   killing) -> the projected columns of each row
Update / Delete (Index Scan),      the same lookup for the row(s), then ``heap.epq.modify_rows``
equality on every column of a      - the real write path: row locks and waits, the READ
unique index, no filter            COMMITTED re-check (EvalPlanQual) with the compiled
                                   condition, ``heap_update``'s HOT decision - and the index
                                   entries of a non-HOT new version
Insert (one-row VALUES)            the row from the parameters, constants and defaults ->
                                   ``heap_insert`` and one entry per index
=================================  ===========================================================

The closure only *calls* the layers below - the B-tree scan, the HOT chain walk and its
visibility test, pruning, heap_update / heap_delete / heap_insert, the index insertion - so
every counter (buffer hits and reads, ``index_heap_fetches``, ``index_items_killed``,
pgstat's idx_scan / idx_tup_fetch / upd / hot_upd / del / ins) moves exactly as on the
general path, and every setting those layers read (``kill_index_tuples`` included) holds.
What it leaves out is only the executor's own work.  EXPLAIN shows the plan; the closure
runs that plan's scan (EXPLAIN ANALYZE runs the nodes, to measure them).

Expressions are compiled here to plain Python on one row (``_scalar``), for a small set:
columns, parameters, constants, integer ``+ - *`` with the general path's range errors,
widening integer casts (integer -> bigint: the value as it is), ``=`` on integers and text
(the re-check of a unique key), and the *constants of a transaction*: ``now()``,
``CURRENT_DATE``, ``CURRENT_TIME`` and casts of them and of constants - TPC-B's
``CURRENT_TIMESTAMP`` into a ``timestamp`` column is ``now()::timestamp``, a timestamptz ->
timestamp cast in the session's TimeZone.  Those are folded by the general path's own
``compile_expr`` (so the value, and any error, is its value) once per transaction start and
time zone, and reused for the transaction's later executions.  A plan with anything else (a
filter, another cast, a CASE, ``random()``, LIMIT, a subquery, FOR UPDATE, RETURNING, a
column type outside int / float / bool / text / timestamp) is not compiled:
``compile_point`` returns None and the plan runs through its nodes.  The values are the ones
the general path computes (its one-row chunks convert int, float, bool, text and timestamp
values to numpy and back without change); ``tests/exec/test_point.py`` compares the two
paths' rows and counters with hypothesis, casts and time zones included.
"""

from __future__ import annotations

import datetime as _dt

import minidb.errors as errors
import minidb.index as ix
from minidb.exec import datatypes as dt
from minidb.exec import expr as X
from minidb.exec import indexam
from minidb.exec.compile import K, bind_param, compile_expr
from minidb.exec.modify import DEFAULT, DeleteNode, InsertNode, UpdateNode, ValuesNode
from minidb.exec.nodes import ProjectNode
from minidb.exec.scan import IndexScanNode
from minidb.heap.epq import modify_rows
from minidb.heap.heapam import heap_insert
from minidb.heap.prune import PagePruner
from minidb.index.scan import fetch_equal
from minidb.types import session_timezone

__all__ = ["compile_point"]

_FAMILIES = ("int", "float", "bool", "text", "ts")
# a key value the index column cannot hold: no row can match (indexam._fits' errors)
_NO_FIT = (errors.DataError, errors.DatatypeMismatch, OverflowError, TypeError)
_INT_RANGE = {"integer": (dt.INT4_MIN, dt.INT4_MAX, "integer out of range"),
              "bigint": (dt.INT8_MIN, dt.INT8_MAX, "bigint out of range")}


class _NotPoint(Exception):
    """The plan (or an expression of it) is not one the point path compiles."""


def compile_point(plan):
    """``run(session, snapshot, params) -> (result, wrote)`` for a point plan (see the module
    docstring), or None when the plan must run through its nodes."""
    try:
        if plan.kind != "select" and _has_foreign_keys(plan):
            return None   # the writer nodes run the foreign-key checks (minidb.exec.ri)
        if plan.kind == "select":
            return _compile_select(plan)
        if plan.kind in ("update", "delete"):
            return _compile_write(plan)
        if plan.kind == "insert":
            return _compile_insert(plan)
    except _NotPoint:
        return None
    return None


def _has_foreign_keys(plan) -> bool:
    t = getattr(getattr(plan.root, "entry", None), "table", None)
    return bool(getattr(t, "foreign_keys", None) or getattr(t, "referenced_by", None))


# -- expressions on one row ------------------------------------------------------------------------
def _ok_type(t) -> bool:
    try:
        return dt.family(t) in _FAMILIES
    except (KeyError, AttributeError):
        return False


# functions without arguments whose value is fixed for a transaction and a time zone
_XACT_FUNCS = ("now", "current_date", "current_time")


def _xact_constant(e) -> bool:
    """Is ``e`` a value of the transaction: constants, now()-like functions and casts of
    them (``CURRENT_TIMESTAMP`` into a timestamp column is ``now()::timestamp``)?"""
    if isinstance(e, X.Const):
        return True
    if isinstance(e, X.Func):
        return not e.args and e.name in _XACT_FUNCS
    if isinstance(e, X.Cast):
        return _xact_constant(e.arg)
    return False


def _is_local_now(e) -> bool:
    """``now()::timestamp`` (CURRENT_TIMESTAMP into a timestamp column) or LOCALTIMESTAMP."""
    if e.type.name != "timestamp":
        return False
    if isinstance(e, X.Cast):
        e = e.arg
        if e.type.name != "timestamptz":
            return False
    return isinstance(e, X.Func) and e.name == "now" and not e.args


def local_now(start, zone):
    """The transaction start ``start`` (the clock's naive local time) as a timestamp in
    ``zone``: what the general path's now() -> timestamptz microseconds -> the cast to
    timestamp (``astimezone`` of the session's zone) -> the timestamp's microseconds
    computes, without the two integer round trips (``fold`` 0, as a datetime made from
    microseconds has)."""
    return start.astimezone().astimezone(zone).replace(tzinfo=None, fold=0)


def _of_transaction(e):
    """fn(row, params, xact) -> the value of a transaction constant (``_xact_constant``):
    ``compile_expr`` folds it to a constant, as the general path does, once per transaction
    start and time zone (the casts of timestamptz read the session's TimeZone); TPC-B's
    ``now()::timestamp`` directly (``local_now``: one per transaction)."""
    t = e.type
    if _is_local_now(e):
        def local(row, params, xact):
            return local_now(xact.start_time or _dt.datetime.now(), session_timezone())
        return local
    memo = [None, None]         # (start time, zone), value

    def fn(row, params, xact):
        key = (xact.start_time, session_timezone())
        if memo[0] != key or key[0] is None:
            c = compile_expr(e, {}, (), key[0])
            if not isinstance(c, K):
                raise errors.InternalError(f"{X.deparse(e)} is not a constant")
            memo[1] = dt.from_repr(c.value, t)
            memo[0] = key
        return memo[1]
    return fn


def _int_widening(src, dst) -> bool:
    """An integer of ``src`` is the same integer of ``dst`` (integer -> bigint ...): the
    general path's vector passes on unchanged."""
    return _ok_type(src) and dt.family(src) == "int" and dt.family(dst) == "int" \
        and dt.implicitly_castable(src, dst)


def _scalar(e, rindex, *, row_ok: bool):
    """fn(row, params, xact) -> the Python value of ``e`` (the general path's value)."""
    if not _ok_type(e.type):
        raise _NotPoint
    t = e.type
    if isinstance(e, (X.Func, X.Cast)) and _xact_constant(e):
        return _of_transaction(e)
    if isinstance(e, X.Cast):
        # a widening integer cast (integer -> bigint ...) keeps the value: the general path
        # passes the vector on unchanged
        if _int_widening(e.arg.type, t):
            return _scalar(e.arg, rindex, row_ok=row_ok)
        raise _NotPoint
    if isinstance(e, X.Param):
        i = e.index
        if dt.family(t) == "ts":
            return lambda row, params, xact: dt.from_repr(dt.to_repr(bind_param(params[i], t),
                                                                     t), t)
        if t.name in _INT_RANGE:
            lo, hi, _msg = _INT_RANGE[t.name]

            def int_param(row, params, xact):
                v = params[i]
                # a plain int in range is bind_param's answer as it is
                if type(v) is int and lo <= v <= hi:
                    return v
                return bind_param(v, t)
            return int_param
        return lambda row, params, xact: bind_param(params[i], t)
    if isinstance(e, X.Const):
        v = dt.from_repr(dt.to_repr(e.value, t), t)
        return lambda row, params, xact: v
    if isinstance(e, X.ColRef):
        if not row_ok or not (isinstance(e.key, tuple) and e.key[0] == rindex):
            raise _NotPoint
        a = e.key[1]
        return lambda row, params, xact: row[a]
    if isinstance(e, X.Arith) and e.op in ("+", "-", "*") and t.name in _INT_RANGE \
            and dt.family(e.left.type) == "int" and dt.family(e.right.type) == "int":
        lo, hi, msg = _INT_RANGE[t.name]
        a = _scalar(e.left, rindex, row_ok=row_ok)
        b = _scalar(e.right, rindex, row_ok=row_ok)
        op = e.op

        def arith(row, params, xact):
            x, y = a(row, params, xact), b(row, params, xact)
            if x is None or y is None:
                return None
            r = x + y if op == "+" else (x - y if op == "-" else x * y)
            if r < lo or r > hi:
                raise errors.NumericValueOutOfRange(msg)
            return r
        return arith
    raise _NotPoint


def _predicate(quals, rindex):
    """where(row, params, xact) -> bool for ``col = value`` conditions (a key's re-check)."""
    tests = []
    for q in quals:
        if not (isinstance(q, X.Compare) and q.op == "="):
            raise _NotPoint
        fl, fr = dt.family(q.left.type), dt.family(q.right.type)
        if not ((fl == fr == "int") or (fl == fr == "text" and "char" not in
                                          (q.left.type.name, q.right.type.name))):
            raise _NotPoint
        tests.append((_scalar(q.left, rindex, row_ok=True),
                      _scalar(q.right, rindex, row_ok=True)))

    def where(row, params, xact):
        for a, b in tests:
            x, y = a(row, params, xact), b(row, params, xact)
            if x is None or y is None or x != y:
                return False
        return True
    return where


# -- the index lookup ---------------------------------------------------------------------------------
def _point_scan(scan):
    """(key getters, ``_Rels``) of an Index Scan that is a pure equality
    lookup (no range, no filter)."""
    if not isinstance(scan, IndexScanNode) or scan.lower or scan.upper or scan.quals \
            or not scan.eq or scan.backward or scan.initplans or scan.subplans:
        raise _NotPoint
    if len(scan.eq) > len(scan.index.columns):
        raise _NotPoint
    keys = [_scalar(e, None, row_ok=False) for e in scan.eq]
    return keys, _Rels(scan.index.name, scan.entry.table.name)


class _Rels:
    """The index and heap relations of a compiled plan, opened once per backend: valid as
    long as the plan is (the engine plans again when the catalog version changes), with
    the heap's buffer hints of the lookups (block -> buffer, ``fetch_equal``'s
    ``heap_hints``) and the plan's pruning hook."""
    __slots__ = ("index_name", "table", "backend", "irel", "rel", "indexes", "heap_hints",
                 "pruner")

    def __init__(self, index_name, table):
        self.index_name, self.table = index_name, table
        self.backend = None

    def open(self, backend):
        if self.backend is not backend:
            catalog = backend.catalog
            self.irel = ix.open_index(backend, self.index_name) if self.index_name else None
            self.rel = catalog.heap_rel(self.table)
            self.indexes = list(catalog.table(self.table).indexes)
            self.heap_hints = {}
            self.pruner = PagePruner(backend, self.rel)
            self.backend = backend
        return self


def _lookup(session, snap, params, keys, rels):
    """(backend, heap rel, [(tid, row)]) of the rows whose key equals the parameters'."""
    backend = session.backend
    xact = backend.xact
    if len(keys) == 1:
        k = keys[0](None, params, xact)
        if k is None:
            return backend, None, []
        key = (k,)
    else:
        key = tuple([k(None, params, xact) for k in keys])
        if None in key:
            return backend, None, []
    r = rels if rels.backend is backend else rels.open(backend)
    irel = r.irel
    try:
        bound = irel.codec.encode_prefix(key)
    except _NO_FIT:
        return backend, None, []
    rel = r.rel
    return backend, rel, fetch_equal(backend, irel, rel, key, snap, r.pruner, r.heap_hints,
                                     bound=bound)


# -- SELECT ----------------------------------------------------------------------------------------------
def _compile_select(plan):
    root = plan.root
    if not isinstance(root, ProjectNode) or root.initplans or root.subplans:
        raise _NotPoint
    scan = root.children[0]
    keys, rels = _point_scan(scan)
    rindex = scan.entry.index
    out = []
    for e in root.exprs:
        if not (isinstance(e, X.ColRef) and isinstance(e.key, tuple) and e.key[0] == rindex
                and _ok_type(e.type)):
            raise _NotPoint
        out.append(e.key[1])
    if len(out) == 1:
        a0 = out[0]

        def project(row):
            return (row[a0],)
    else:
        def project(row):
            return tuple([row[a] for a in out])

    if len(keys) != 1:
        def run(session, snap, params):
            _b, _r, found = _lookup(session, snap, params, keys, rels)
            return [project(row) for _tid, row in found], False
        return run
    key0 = keys[0]

    def run1(session, snap, params):
        # _lookup for a one-column key, inline (one call fewer per point select)
        backend = session.backend
        k = key0(None, params, backend.xact)
        if k is None:
            return [], False
        key = (k,)
        r = rels if rels.backend is backend else rels.open(backend)
        irel = r.irel
        try:
            bound = irel.codec.encode_prefix(key)
        except _NO_FIT:
            return [], False
        found = fetch_equal(backend, irel, r.rel, key, snap, r.pruner, r.heap_hints,
                            bound=bound)
        return [project(row) for _tid, row in found], False
    return run1


# -- UPDATE / DELETE by a unique key --------------------------------------------------------------------
def _compile_write(plan):
    root = plan.root
    if not isinstance(root, (UpdateNode, DeleteNode)) or root.initplans or root.subplans:
        raise _NotPoint
    scan = root.children[0]
    keys, rels = _point_scan(scan)
    idef = scan.index
    if not idef.unique or len(scan.eq) != len(idef.columns):
        raise _NotPoint
    rindex = root.entry.index
    ncols = len(root.entry.columns)
    if not all(_ok_type(t) for _, t in root.entry.columns):
        raise _NotPoint
    where_c = _predicate(root.recheck_quals, rindex)
    kind = root.kind
    sets = []
    if kind == "update":
        for a, e in root.assignments:
            if not (0 <= a < ncols) or e.type != root.entry.columns[a][1]:
                raise _NotPoint
            sets.append((a, _scalar(e, rindex, row_ok=True)))

    def run(session, snap, params):
        backend, rel, found = _lookup(session, snap, params, keys, rels)
        if not found:
            return 0, False
        xact = backend.xact

        def where(row):
            return where_c(row, params, xact)

        if kind != "update":
            n = modify_rows(backend, rel, snap, found, where, kind, None)
            return n, n > 0

        def set_fn(row):
            new = list(row)
            for a, f in sets:
                new[a] = f(row, params, xact)
            return new

        def on_done(tid, row, new_tid, hot, new_row):
            if new_tid is not None and not hot:
                indexam.insert_entries(backend, rels.indexes, new_row, new_tid)
        n = modify_rows(backend, rel, snap, found, where, kind, set_fn, on_done=on_done)
        return n, n > 0
    return run


# -- INSERT ... VALUES (one row) --------------------------------------------------------------------------
def _compile_insert(plan):
    root = plan.root
    if not isinstance(root, InsertNode) or root.initplans or root.subplans:
        raise _NotPoint
    values = root.children[0]
    if not isinstance(values, ValuesNode) or len(values.value_rows) != 1 \
            or values.initplans or values.subplans:
        raise _NotPoint
    columns = root.entry.columns
    ncols = len(columns)
    if not all(_ok_type(t) for _, t in columns):
        raise _NotPoint
    fill = [None] * ncols      # columns not given: their constant default
    for a in range(ncols):
        if a in root.attnos:
            continue
        d = root.defaults.get(a)
        if d is not None:
            if not isinstance(d, X.Const) or d.type != columns[a][1]:
                raise _NotPoint
            fill[a] = _scalar(d, None, row_ok=False)(None, (), None)
    given = []
    for i, (e, a) in enumerate(zip(values.value_rows[0], root.attnos)):
        if e is DEFAULT:
            e = values.defaults[i]
            if e is None:
                given.append((a, None))
                continue
        if values.types[i] != columns[a][1] or (e.type != columns[a][1]
                                                 and not _int_widening(e.type, columns[a][1])):
            raise _NotPoint
        given.append((a, _scalar(e, None, row_ok=False)))
    rels = _Rels(None, root.entry.table.name)

    def run(session, snap, params):
        backend = session.backend
        xact = backend.xact
        r = rels.open(backend)
        rel = r.rel
        row = list(fill)
        for a, f in given:
            row[a] = None if f is None else f(None, params, xact)
        xid = xact.xid_for_write()
        tid = heap_insert(backend, rel, row, xmin=xid, cmin=snap.curcid)
        # counted before the index entries, as InsertNode does: a unique violation there
        # leaves an inserted (dead) tuple behind
        backend.pgstat.count(rel.oid, "ins", 1)
        indexam.insert_entries(backend, r.indexes, row, tid)
        return 1, True
    return run
