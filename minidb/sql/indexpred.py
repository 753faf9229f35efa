"""Partial and expression indexes: a predicate's SQL bound to its table, evaluated on
rows, and proved implied by a query's WHERE (PostgreSQL's ``predtest.c``, for the common
cases); an expression column's SQL bound, evaluated on rows for the index's keys, and
matched against a query's expressions.

**Expression columns** (``CREATE INDEX ON t (lower(name))``, ``pg_index.indexprs``) are
registered with the index layer the same way (``set_expression_compiler``): an expression
index's ``IndexRel`` gets a ``key_fn`` that computes the key tuples of rows (plain columns
copied, expressions evaluated), and the key codec gets the expressions' result types.  The
planner binds the expressions to the query's range entry (``index_targets``) and treats a
clause ``expr op value`` whose ``expr`` equals an index expression (the same bound tree:
``lower(name) = 'x'``) as it treats ``col op value`` on a plain column.  The expressions
must be immutable (random(), now() ... are refused with 42P17, as PostgreSQL does).

``CREATE INDEX ... WHERE pred`` stores ``pred`` as SQL text (``pg_index.indpred``).  The
index layer cannot evaluate SQL, so this module registers a compiler with it at import
(``minidb.index.rel.set_predicate_compiler``): an ``IndexRel`` of a partial index gets a
``row_filter`` - rows in, one bool per row out (NULL counts as false, as in PostgreSQL) -
that the build, ``insert_entry``, the bulk load's index insertion and amcheck's
heapallindexed pass apply, so the index holds exactly the rows that satisfy ``pred``.  A
unique partial index therefore enforces uniqueness only among those rows.

**Implication** (``predicate_implied``): the planner considers a partial index for a
table only when the query's restriction clauses (its WHERE conjuncts on that table) imply
every conjunct of the predicate.  A predicate conjunct P is implied when some clause Q

* equals P (the same bound expression: ``status = 'open'`` and ``status = 'open'``);
* and P compare one column with constants (``=  <>  <  <=  >  >=``, the column on either
  side), and Q's range lies inside P's: ``a > 10`` implies ``a > 5`` and ``a >= 10`` and
  ``a <> 3``, ``a = 7`` implies ``a < 9``, ``a BETWEEN 1 AND 4`` (two clauses) implies
  ``a < 5`` (PostgreSQL's btree operator-strategy table);
* or P is ``col IS NOT NULL`` and Q is a comparison (strict: it is never true for NULL)
  of that column.

A clause with a parameter proves nothing (its value can change with each execution), so
the engine's simple parameterization keeps the literals of statements on tables with a
partial index in their text (``has_partial_index``).  Anything else (OR, functions of the
column, other operators) is not proved: the index is then not used, never used wrongly.
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors

from minidb.exec import datatypes as dtm
from minidb.exec.chunk import rows_to_chunk
from minidb.exec.compile import K, compile_expr, evaluate
from minidb.exec.expr import ColRef, Compare, IsNull, Param, column_keys, conjuncts, walk
from minidb.index.rel import set_expression_compiler, set_predicate_compiler
from minidb.sql.binder import Binder, RangeEntry
from minidb.sql.parser.translate import parse_expression_text
from minidb.types import parse_type

__all__ = ["bind_predicate", "predicate_implied", "predicate_filter", "has_partial_index",
           "usable_partial_index", "bind_index_expr", "index_targets", "expression_keys"]


def _entry(table, index: int = 0, alias: str | None = None) -> RangeEntry:
    cols = [(c.name, parse_type(c.type)) for c in table.columns]
    return RangeEntry(index, alias or table.name, table, cols, [c.not_null for c in table.columns])


def bind_predicate(catalog, table, text: str, index: int = 0, alias: str | None = None):
    """The bound boolean expression of predicate ``text`` on ``table`` (range-table
    ``index``).  Refuses what PostgreSQL refuses in an index predicate: subqueries,
    aggregates, parameters, volatile functions (random(), now())."""
    node = parse_expression_text(text)
    e = Binder(catalog).boolean(node, [_entry(table, index, alias)], "index predicate")
    _check_immutable(e, "index predicate")
    return e


def bind_index_expr(catalog, table, text: str, index: int = 0, alias: str | None = None):
    """The bound expression of index column ``text`` on ``table`` (immutable only)."""
    e = Binder(catalog).expr(parse_expression_text(text), [_entry(table, index, alias)])
    _check_immutable(e, "index expression")
    return e


def _check_immutable(e, what: str) -> None:
    for n in walk(e):
        kind = type(n).__name__
        if kind in ("SubLink", "AggCall", "WinCall", "SRFCall", "OuterRef") or isinstance(n, Param):
            raise errors.NotSupportedError(
                f"cannot use {'subquery' if kind == 'SubLink' else 'this expression'} in "
                f"{what}")
        if kind == "Func" and n.name in _VOLATILE:
            raise errors.InvalidObjectDefinition(
                f"functions in {what} must be marked IMMUTABLE")


_VOLATILE = frozenset({"random", "now", "current_timestamp", "current_date", "clock_timestamp",
                       "statement_timestamp", "transaction_timestamp", "localtimestamp",
                       "current_time", "localtime", "timeofday", "nextval", "setseed",
                       "gen_random_uuid"})


def predicate_filter(catalog, table, text: str):
    """rows (tuples of all of ``table``'s columns) -> [bool]: which satisfy ``text``."""
    e = bind_predicate(catalog, table, text)
    ncols = len(table.columns)
    compiled = compile_expr(e, {(0, a): a for a in range(ncols)})
    types = [parse_type(c.type) for c in table.columns]

    def row_filter(rows) -> list:
        if not rows:
            return []
        if isinstance(compiled, K):
            return [bool(compiled.value)] * len(rows)
        chunk = rows_to_chunk(list(rows), types)
        vals, mask = evaluate(compiled, chunk)
        ok = np.asarray(vals, dtype=bool)
        if mask is not None:
            ok = ok & ~np.asarray(mask, dtype=bool)
        return ok.tolist()

    return row_filter


set_predicate_compiler(predicate_filter)


def expression_keys(catalog, table, columns, exprs):
    """(type spellings, rows -> [key tuple]) of an index with expression columns."""
    from minidb.exec.chunk import column_to_list
    ncols = len(table.columns)
    layout = {(0, a): a for a in range(ncols)}
    types = [parse_type(c.type) for c in table.columns]
    parts = []          # per key column: ("col", position) or ("expr", compiled, type)
    out_types = []
    for c, text in zip(columns, exprs):
        if text is None:
            a = table.column_index(c)
            parts.append(("col", a))
            out_types.append(table.columns[a].type)
        else:
            e = bind_index_expr(catalog, table, text)
            parts.append(("expr", compile_expr(e, layout), e.type))
            out_types.append(str(e.type))

    def key_fn(rows) -> list:
        if not rows:
            return []
        chunk = rows_to_chunk(list(rows), types)
        cols = []
        for p in parts:
            if p[0] == "col":
                cols.append([r[p[1]] for r in rows])
            elif isinstance(p[1], K):
                cols.append([dtm.from_repr(p[1].value, p[2])] * len(rows))
            else:
                vals, mask = evaluate(p[1], chunk)
                cols.append(column_to_list(vals, mask, p[2]))
        return list(zip(*cols))

    return out_types, key_fn


set_expression_compiler(expression_keys)


def index_targets(catalog, idef, entry) -> list:
    """Per index column, what a clause must compare for the index to search it: the
    column's position in ``entry`` (an int) or the bound expression; None when an
    expression does not bind (a column renamed since: the index is then not used)."""
    exprs = getattr(idef, "exprs", None) or [None] * len(idef.columns)
    out = []
    for c, text in zip(idef.columns, exprs):
        if text is None:
            out.append(entry.attno(c))
            continue
        try:
            out.append(bind_index_expr(catalog, entry.table, text, entry.index, entry.alias))
        except Exception:
            return None
    return out


# -- implication -------------------------------------------------------------------------------
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<>": "<>"}


def _const(e):
    """The Python value of a constant expression, else None (a parameter is not one)."""
    if column_keys(e) or any(isinstance(n, Param) for n in walk(e)):
        return None
    try:
        c = compile_expr(e, {})
    except Exception:
        return None
    if not isinstance(c, K) or c.value is None:
        return None
    return dtm.from_repr(c.value, e.type)


def _comparison(e):
    """(column key, op, value) for ``col op const`` / ``const op col``, else None."""
    if not isinstance(e, Compare) or e.op not in _FLIP:
        return None
    if isinstance(e.left, ColRef) and not column_keys(e.right):
        v = _const(e.right)
        return None if v is None else (e.left.key, e.op, v)
    if isinstance(e.right, ColRef) and not column_keys(e.left):
        v = _const(e.left)
        return None if v is None else (e.right.key, _FLIP[e.op], v)
    return None


def _range_implies(q, p) -> bool:
    """Does ``x qop qv`` imply ``x pop pv`` (same column)?"""
    qop, qv = q
    pop, pv = p
    try:
        if pop == "=":
            return qop == "=" and qv == pv
        if pop == "<>":
            return (qop == "=" and qv != pv) or (qop == "<" and qv <= pv) or \
                (qop == "<=" and qv < pv) or (qop == ">" and qv >= pv) or \
                (qop == ">=" and qv > pv)
        if pop == "<":
            return (qop == "<" and qv <= pv) or (qop in ("<=", "=") and qv < pv)
        if pop == "<=":
            return qop in ("<", "<=", "=") and qv <= pv
        if pop == ">":
            return (qop == ">" and qv >= pv) or (qop in (">=", "=") and qv > pv)
        if pop == ">=":
            return qop in (">", ">=", "=") and qv >= pv
    except TypeError:
        return False
    return False


def _implied(p, quals) -> bool:
    if any(q == p for q in quals):
        return True
    if isinstance(p, IsNull) and p.negated and isinstance(p.arg, ColRef):
        return any((c := _comparison(q)) is not None and c[0] == p.arg.key for q in quals)
    pc = _comparison(p)
    if pc is None:
        return False
    for q in quals:
        qc = _comparison(q)
        if qc is not None and qc[0] == pc[0] and _range_implies(qc[1:], pc[1:]):
            return True
    return False


def predicate_implied(pred, quals) -> bool:
    """Do the restriction clauses ``quals`` (bound conjuncts) imply ``pred`` (bound)?"""
    return all(_implied(p, quals) for p in conjuncts(pred))


def usable_partial_index(catalog, idef, entry, quals) -> bool:
    """May the planner use index ``idef`` for range entry ``entry`` whose restriction
    clauses are ``quals``?  Always for a plain index; a partial one when its predicate is
    implied."""
    if idef.predicate is None:
        return True
    try:
        pred = bind_predicate(catalog, entry.table, idef.predicate, entry.index, entry.alias)
    except Exception:
        return False
    return predicate_implied(pred, quals)


def has_partial_index(catalog, bound) -> bool:
    """Does a table of the bound statement have a partial index?  (The engine then keeps the
    statement's literals: a parameter proves no predicate.)"""
    entries = list(getattr(bound, "rtable", None) or [])
    one = getattr(bound, "entry", None)
    if one is not None:
        entries.append(one)
    for e in entries:
        t = getattr(e, "table", None)
        if t is None:
            continue
        for name in getattr(t, "indexes", ()):
            idef = catalog.indexes.get(name)
            if idef is not None and idef.predicate is not None:
                return True
    return False
