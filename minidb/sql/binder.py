"""The binder: names to columns, types to every expression (PostgreSQL's parse analysis).

Input: a statement of ``minidb.sql.ast``; output: a *bound* statement whose expressions
are ``minidb.exec.expr`` nodes with result types, ready for the planner.  What it decides:

* **Names.**  The FROM list becomes a *range table* (``RangeEntry`` per table, numbered in
  order; a name of PostgreSQL's catalog - pg_class, pg_namespace, information_schema.tables
  ... - is a ``virtual`` entry, ``minidb.catalog.pgcatalog``, whose rows are computed when
  scanned; ``::regclass`` / ``::regtype`` / ``::oid`` are ``_catalog_cast``).  ``a`` is
  looked up in every entry (two hits: AmbiguousColumn), ``t.a`` in the entry named ``t``
  (its alias, else its table name).  A base column becomes
  ``ColRef(key=(range index, attno))``.
* **Types** (``minidb.exec.datatypes``).  Arithmetic on integer/bigint/double promotes as
  PostgreSQL does; comparisons need comparable families (numbers with numbers, strings with
  strings, booleans, timestamps); an untyped string literal takes the type of the other
  side (``ts > '2020-01-01'``, ``id = '5'``) and is read then and there; anything else is
  DatatypeMismatch (42804).  char(n) values are compared without their trailing blanks.
* **Parameters** (``?``): typed from their context as PostgreSQL infers ``$n`` types (the
  column compared with, the column assigned to, bigint for LIMIT); without a context, from
  the Python type of the value given (the plan cache keys plans by those types).
* **Grouping.**  With GROUP BY or an aggregate, every expression above the aggregation is
  rewritten to read the aggregation's output: a GROUP BY expression becomes
  ``ColRef(("g", i))``, an aggregate call ``ColRef(("a", j))`` (identical calls share one
  slot); a base column left over is a GroupingError (42803).  GROUPING SETS / ROLLUP /
  CUBE expand to ``grouping_sets`` (tuples of indexes into the distinct GROUP BY
  expressions); ``grouping()`` becomes a constant or a CASE over ``ColRef(("gset", 0))``.
* **Window frames** (``_frame``): PostgreSQL's checks of the bounds and offsets; the frame
  rides on the ``WinCall`` as a ``WinFrame``.
* **ORDER BY / GROUP BY** accept an output position (``ORDER BY 2``) and an output column
  name, as PostgreSQL does.
* **Subqueries, joins, set operations.**  Range indexes are unique across the statement
  (``_Ctx``), so a correlated subquery's outer column becomes ``OuterRef`` with the outer
  key and its ``SubLink`` lists what it reads from the enclosing query.  The FROM list is
  a tree of ``FromRel`` / ``FromJoin`` (RIGHT bound as LEFT with the sides swapped);
  USING / NATURAL merge columns in the ``Scope``.  Window calls and generate_series in the
  select list are rewritten to ``ColRef(("w", k))`` / ``ColRef(("srf", k))``.  UNION /
  INTERSECT / EXCEPT give ``BoundSetOp``; WITH gives ``CTEDef`` s (``BoundRecursive`` for
  WITH RECURSIVE).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import uuid as _uuid
from dataclasses import dataclass, field

import minidb.errors as errors
from minidb.catalog import pgcatalog
from minidb.exec import datatypes as dtm
from minidb.exec.datatypes import (BIGINT, BOOLEAN, BYTEA, DATE, DOUBLE, INTEGER, INTERVAL,
                                   NUMERIC, TEXT, TIME, TIMESTAMP, TIMESTAMPTZ, UNKNOWN, UUID,
                                   family)
from minidb.exec.datatypes import ArrayType
from minidb.exec.expr import (AggCall, Arith, BoolOp, Case, Cast, ColRef, Compare, Concat,
                              Const, DistinctFrom, Func, InList, IsNull, Like, Neg, Not,
                              GroupingFunc, OuterRef, Param, Regex, SRFCall, SubLink, SubPlan, WinCall,
                              WinFrame, walk)
from minidb.exec.modify import DEFAULT
from minidb.sql import ast
from minidb.types import no_exponent, parse_type

__all__ = ["Binder", "RangeEntry", "BoundSelect", "BoundSetOp", "BoundInsert", "BoundUpdate",
           "BoundDelete", "DEFAULT", "FromRel", "FromJoin", "CTEDef"]

_AGG_NAMES = {"count", "sum", "avg", "min", "max", "string_agg", "array_agg", "bool_and",
              "bool_or", "every", "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp",
              "var_pop"}
_GROUPING_HERE = "grouping operations are not allowed here"
_WINDOW_ONLY = {"row_number", "rank", "dense_rank", "lag", "lead", "first_value", "last_value",
                "nth_value", "ntile", "percent_rank", "cume_dist"}
pgcatalog.register_functions(_AGG_NAMES, "a")       # pg_proc's aggregates and window
pgcatalog.register_functions(_WINDOW_ONLY, "w")     # functions


class _Ctx:
    """What the binders of one statement share: range-table numbering (unique across
    subqueries, so a correlated subquery's outer columns keep their keys), the tables read
    (for locks), the subquery plans to make, the WITH lists in scope."""

    def __init__(self):
        self.next_rel = 0
        self.tables: dict = {}            # oid -> TableDef
        self.subplans: list = []          # SubPlan holders
        self.ctes: list = []              # stack of {name: CTEDef}
        self.cte_defs: list = []


class Scope(list):
    """The range entries visible to expressions, plus JOIN ... USING's merged columns
    (``merged``: name -> expression) and the columns ``*`` expands to (``star``)."""

    def __init__(self, entries=()):
        super().__init__(entries)
        self.merged: dict = {}
        self.star: list = []


@dataclass
class CTEDef:
    """A WITH query: bound once, planned once, read by every CTE Scan that names it."""
    name: str
    columns: list                     # [(name, SqlType)]
    bound: object                     # BoundSelect / BoundSetOp (/ BoundRecursive)
    recursive: bool = False
    plan: object = None               # the planner's SubPlan-like holder
    number: int = 0


@dataclass
class FromRel:
    index: int


@dataclass
class FromJoin:
    kind: str                         # inner left full semi anti, lateral / lateral left
    left: object
    right: object
    quals: list
    lateral: list = field(default_factory=list)   # lateral: the left's ColRefs right reads


@dataclass
class BoundRecursive:
    """WITH RECURSIVE's query: the non-recursive term, then the recursive one run on the
    work table until it returns nothing."""
    left: object
    right: object
    all: bool
    names: list
    types: list
    cte: object = None
    param_types: dict = field(default_factory=dict)




@dataclass
class RangeEntry:
    index: int
    alias: str
    table: object            # catalog.TableDef (None for the kinds below)
    columns: list            # [(name, SqlType)]
    not_null: list           # [bool]
    kind: str = "table"      # table subquery cte function worktable virtual
    sub: object = None       # subquery: its bound query; cte: CTEDef; function: (name, args);
    #                          virtual: the pgcatalog.VirtualRel
    hidden: set = field(default_factory=set)   # names merged by USING (unqualified lookup)
    checks: list = field(default_factory=list)  # a write's target: [(name, Expr)] CHECKs
    lateral: list | None = None  # a LATERAL subquery: the ColRefs of earlier items it reads

    def attno(self, name: str) -> int:
        for i, (n, _) in enumerate(self.columns):
            if n == name:
                return i
        return -1

    def colref(self, attno: int) -> ColRef:
        name, t = self.columns[attno]
        return ColRef((self.index, attno), t, name, self.alias)


@dataclass
class BoundSelect:
    rtable: list
    quals: list                       # conjuncts of WHERE and the JOIN ON conditions
    targets: list                     # [(name, Expr)] over the input, or over agg output
    group_by: list = field(default_factory=list)     # Exprs over the input
    grouping_sets: list | None = None # GROUPING SETS / ROLLUP / CUBE: [(group index, ...)]
    aggs: list = field(default_factory=list)         # AggCalls over the input
    having: object = None             # over the agg output
    grouped: bool = False
    order_by: list = field(default_factory=list)     # [(Expr, desc, nulls_first)]
    distinct: bool = False
    order_refs: list = field(default_factory=list)   # DISTINCT: output positions of keys
    limit: object = None
    offset: object = None
    for_update: bool = False          # a row-locking clause: LockRows on rtable[0]
    lock_mode: str = "update"         # minidb.heap.multixact.LOCK_MODES
    lock_wait: str = "block"          # block / nowait / skip
    param_types: dict = field(default_factory=dict)
    from_items: list = field(default_factory=list)   # FromRel / FromJoin (comma list)
    windows: list = field(default_factory=list)      # WinCalls, read as ColRef(("w", k))
    srfs: list = field(default_factory=list)         # SRFCalls, read as ColRef(("srf", k))
    distinct_on: list = field(default_factory=list)  # Exprs over the input
    tables: list = field(default_factory=list)       # every table the statement reads
    subplans: list = field(default_factory=list)
    ctes: list = field(default_factory=list)

    @property
    def names(self):
        return [n for n, _ in self.targets]

    @property
    def types(self):
        return [e.type for _, e in self.targets]


@dataclass
class BoundSetOp:
    op: str                           # union intersect except
    all: bool
    left: object
    right: object
    names: list
    types: list
    order_by: list = field(default_factory=list)     # over ColRef(("out", i))
    limit: object = None
    offset: object = None
    param_types: dict = field(default_factory=dict)
    tables: list = field(default_factory=list)
    subplans: list = field(default_factory=list)
    ctes: list = field(default_factory=list)
    rtable: list = field(default_factory=list)
    for_update: bool = False


@dataclass
class BoundInsert:
    entry: RangeEntry
    attnos: list                      # target columns, in the order values come
    rows: list | None                 # [[Expr | DEFAULT]]
    select: BoundSelect | None
    defaults: dict                    # attno -> Expr (columns with a DEFAULT)
    param_types: dict = field(default_factory=dict)
    returning: list = field(default_factory=list)   # [(name, Expr over the target row)]
    on_conflict: object = None        # minidb.sql.onconflict.OnConflict


@dataclass
class BoundUpdate:
    entry: RangeEntry
    assignments: list                 # [(attno, Expr)]
    quals: list
    param_types: dict = field(default_factory=dict)
    returning: list = field(default_factory=list)
    join: object = None               # UPDATE ... FROM: BoundSelect (minidb.sql.updfrom)


@dataclass
class BoundDelete:
    entry: RangeEntry
    quals: list
    param_types: dict = field(default_factory=dict)
    returning: list = field(default_factory=list)
    join: object = None               # DELETE ... USING: BoundSelect (minidb.sql.updfrom)


def _free_lateral(node, scope) -> list:
    """The columns outside FROM item ``node`` that the LATERAL subqueries inside it read."""
    inside = _tree_indexes(node)
    out = []
    for e in scope:
        if e.index in inside and e.lateral:
            out.extend(r for r in e.lateral if r.key[0] not in inside and r not in out)
    return out


def _tree_indexes(n) -> set:
    if isinstance(n, FromJoin):
        return _tree_indexes(n.left) | _tree_indexes(n.right)
    return {n.index}


def _lateral_error(ref, scope):
    alias = next((e.alias for e in scope if e.index == ref.key[0]), "?")
    return errors.ProgrammingError(
        f'invalid reference to FROM-clause entry for table "{alias}"\nDETAIL:  The combining '
        "JOIN type must be INNER or LEFT for a LATERAL reference.", sqlstate="42P10")


def _lock_clause(b) -> str:
    """The row-locking clause as written: FOR UPDATE / FOR NO KEY UPDATE / FOR [KEY] SHARE."""
    return "FOR " + b.lock_mode.upper()


def _dup_alias(name):
    return errors.ProgrammingError(f'table name "{name}" specified more than once',
                                   sqlstate="42712")


class Binder:
    """Binds one statement.  ``param_sig``: the Python types of the parameter values."""

    def __init__(self, catalog, param_sig=(), default_parser=None, parent=None,
                 parent_scope=None, ctx=None):
        self.catalog = catalog
        self.param_sig = tuple(param_sig)
        self.param_types: dict[int, object] = {}
        self.default_parser = default_parser
        self.parent = parent              # the enclosing query's binder (a subquery)
        self.parent_scope = parent_scope
        self.ctx = ctx if ctx is not None else _Ctx()
        self.outer_refs: list = []        # enclosing queries' columns this query reads
        self._win_ok = False
        self._srf_ok = False

    def _child(self, scope=None, correlated=True) -> "Binder":
        """A binder for a subquery of this query (sharing parameters and numbering)."""
        c = Binder(self.catalog, self.param_sig, self.default_parser,
                   parent=self if correlated else self.parent,
                   parent_scope=scope if correlated else self.parent_scope, ctx=self.ctx)
        c.param_types = self.param_types
        return c

    def _finish(self, b):
        b.tables = list(self.ctx.tables.values())
        b.subplans = list(self.ctx.subplans)
        b.ctes = list(self.ctx.cte_defs)
        b.param_types = dict(self.param_types)
        return b
    # -- statements ------------------------------------------------------------------------------
    def bind(self, stmt):
        if isinstance(stmt, (ast.SelectStmt, ast.SetOpStmt)):
            return self._finish(self.query(stmt))
        if isinstance(stmt, ast.InsertStmt):
            b = self.insert(stmt)
        elif isinstance(stmt, ast.UpdateStmt):
            b = self.update(stmt)
        elif isinstance(stmt, ast.DeleteStmt):
            b = self.delete(stmt)
        else:
            raise errors.InternalError(f"cannot bind {type(stmt).__name__}")
        b.tables = list(self.ctx.tables.values())
        b.subplans = list(self.ctx.subplans)
        b.ctes = list(self.ctx.cte_defs)
        return b

    def _entry(self, index: int, name: str, alias: str | None, col_aliases=None) -> RangeEntry:
        index = self.ctx.next_rel
        self.ctx.next_rel += 1
        for frame in reversed(self.ctx.ctes):
            cte = frame.get(name)
            if cte is not None:
                cols = _renamed(list(cte.columns), col_aliases, alias or name)
                kind = "worktable" if cte.bound is None else "cte"
                return RangeEntry(index, alias or name, None, cols, [False] * len(cols), kind,
                                  cte)
        vrel = _virtual_relation(name)
        if vrel is not None:
            return _virtual_entry(index, vrel, alias or name.split(".")[-1], col_aliases)
        if self.catalog.views and self.catalog.view(name) is not None:
            from minidb.sql.rewrite import check_not_view
            check_not_view(self.catalog, name, "change")
        t = self.catalog.table(name)
        self.ctx.tables[t.oid] = t
        cols = _renamed([(c.name, parse_type(c.type)) for c in t.columns], col_aliases,
                        alias or name)
        return RangeEntry(index, alias or name, t, cols, [c.not_null for c in t.columns])

    def _view(self, item):
        """The subquery a FROM name stands for if it names a view (not a CTE):
        ``minidb.sql.rewrite.expand``."""
        if not self.catalog.views or any(item.name in f for f in self.ctx.ctes):
            return None
        from minidb.sql.rewrite import expand
        return expand(self.catalog, item)

    def query(self, s):
        if isinstance(s, ast.SetOpStmt):
            return self.setop(s)
        return self.select(s)

    def _push_ctes(self, with_) -> bool:
        if not with_:
            return False
        frame: dict = {}
        self.ctx.ctes.append(frame)
        for c in with_:
            if c.name in frame:
                raise errors.ProgrammingError(
                    f'WITH query name "{c.name}" specified more than once', sqlstate="42712")
            child = self._child(correlated=False)
            child.outer_refs = self.outer_refs
            if c.recursive and isinstance(c.query, ast.SetOpStmt) and c.query.op == "union" \
                    and _names_table(c.query.right, c.name):
                bound = child._recursive(c, frame)
            else:
                bound = child.query(c.query)
                cols = list(zip(bound.names, bound.types))
                if c.columns:
                    if len(c.columns) > len(cols):
                        raise errors.ProgrammingError(
                            f'WITH query "{c.name}" has {len(cols)} columns available but '
                            f'{len(c.columns)} columns specified', sqlstate="42P10")
                    cols = [(c.columns[i] if i < len(c.columns) else n, t)
                            for i, (n, t) in enumerate(cols)]
                frame[c.name] = CTEDef(c.name, cols, bound)
            self.ctx.cte_defs.append(frame[c.name])
        return True

    def _recursive(self, c, frame):
        """WITH RECURSIVE name AS (non-recursive UNION [ALL] recursive)."""
        q = c.query
        left = self.query(q.left)
        cols = list(zip(left.names, left.types))
        if c.columns:
            if len(c.columns) != len(cols):
                raise errors.ProgrammingError(
                    f'WITH query "{c.name}" has {len(cols)} columns available but '
                    f'{len(c.columns)} columns specified', sqlstate="42P10")
            cols = [(c.columns[i], t) for i, (_, t) in enumerate(cols)]
        work = CTEDef(c.name, cols, None, True)
        frame[c.name] = work
        right = self._child(correlated=False)
        right.outer_refs = self.outer_refs
        rb = right.query(q.right)
        if len(rb.types) != len(cols):
            raise errors.ProgrammingError("each UNION query must have the same number of "
                                          "columns", sqlstate="42601")
        for (n, t), u in zip(cols, rb.types):
            if family(t) != family(u) and not {family(t), family(u)} <= {"int", "float"}:
                raise errors.DatatypeMismatch(
                    f'recursive query "{c.name}" column has type {t} in non-recursive term '
                    f"but type {u} overall")
        rec = BoundRecursive(left, rb, q.all, [n for n, _ in cols], [t for _, t in cols])
        cte = CTEDef(c.name, cols, rec, True)
        rec.cte = work
        work.plan = None
        frame[c.name] = cte
        cte.work = work
        return rec

    def setop(self, s: ast.SetOpStmt) -> BoundSetOp:
        pushed = self._push_ctes(s.with_)
        try:
            left = self.query(s.left)
            right = self.query(s.right)
            word = s.op.upper()
            if len(left.types) != len(right.types):
                raise errors.ProgrammingError(
                    f"each {word} query must have the same number of columns", sqlstate="42601")
            types = []
            for a, b_ in zip(left.types, right.types):
                t = self._common([a, b_], word)
                types.append(TEXT if family(t) == "text" else t)
            b = BoundSetOp(s.op, s.all, left, right, list(left.names), types)
            outs = [ColRef(("out", i), t, n, "") for i, (n, t) in enumerate(zip(b.names, types))]
            for o in s.order_by:
                e = o.expr
                if isinstance(e, ast.Lit) and e.kind == "int":
                    if not 1 <= e.value <= len(outs):
                        raise errors.InvalidColumnReference(
                            f"ORDER BY position {e.value} is not in select list")
                    ex = outs[e.value - 1]
                elif isinstance(e, ast.Name) and len(e.parts) == 1 and e.parts[0] in b.names:
                    ex = outs[b.names.index(e.parts[0])]
                else:
                    raise errors.NotSupportedError(
                        f"invalid {word} ORDER BY clause: only result column names can be "
                        "used, not expressions or functions")
                nf = o.nulls_first if o.nulls_first is not None else o.desc
                b.order_by.append((ex, o.desc, nf))
            if s.limit is not None:
                b.limit = self._limit(s.limit, "LIMIT")
            if s.offset is not None:
                b.offset = self._limit(s.offset, "OFFSET")
            b.param_types = dict(self.param_types)
            return b
        finally:
            if pushed:
                self.ctx.ctes.pop()

    def select(self, s: ast.SelectStmt) -> BoundSelect:
        pushed = self._push_ctes(s.with_)
        try:
            return self._select(s)
        finally:
            if pushed:
                self.ctx.ctes.pop()

    def _select(self, s: ast.SelectStmt) -> BoundSelect:
        # binding order matters: a parameter's type is fixed by its first context
        items, quals, scope = self._from_list(s.from_)
        rtable = list(scope)
        if s.where is not None:
            quals.extend(_conjuncts(self.boolean(s.where, scope, "WHERE")))
        self._win_ok = self._srf_ok = True
        try:
            targets = self._targets(s.targets, scope)
        finally:
            self._srf_ok = False
        b = BoundSelect(rtable=rtable, quals=quals, targets=targets, for_update=s.for_update,
                        lock_mode=s.lock_mode, lock_wait=s.lock_wait)
        b.from_items = items
        # GROUP BY (positions and output names allowed)
        self._win_ok = False
        group, sets = self._group_clause(s.group_by, scope, targets)
        b.grouping_sets = sets
        # ORDER BY
        order = []
        self._win_ok = True
        try:
            for o in s.order_by:
                ex = self._order_item(o.expr, scope, targets)
                nf = o.nulls_first if o.nulls_first is not None else o.desc
                order.append((ex, o.desc, nf))
            don = [self._order_item(d, scope, targets) for d in s.distinct_on]
        finally:
            self._win_ok = False
        having = self.boolean(s.having, scope, "HAVING", agg_ok=True) \
            if s.having is not None else None
        b.order_by = self._aggregation(b, group, order, having, don, sets)
        self._windows(b)
        self._set_returning(b)
        if s.distinct:
            self._distinct(b)
        if b.distinct_on:
            self._check_distinct_on(b)
        if s.for_update:
            what = _lock_clause(b)
            for name in s.lock_of:
                if all(e.alias != name for e in rtable):
                    raise errors.UndefinedTable(
                        f'relation "{name}" in {what} clause not found in FROM clause')
            if len(rtable) != 1 or rtable[0].kind != "table":
                raise errors.NotSupportedError(f"{what} is supported on a single table only")
            if b.windows:
                raise errors.NotSupportedError(f"{what} is not allowed with window functions")
            if b.srfs:
                raise errors.NotSupportedError(
                    f"{what} is not allowed with set-returning functions in the target list")
            if b.distinct_on:
                raise errors.NotSupportedError(f"{what} is not allowed with DISTINCT clause")
        if s.limit is not None:
            b.limit = self._limit(s.limit, "LIMIT")
        if s.offset is not None:
            b.offset = self._limit(s.offset, "OFFSET")
        b.param_types = dict(self.param_types)
        return b

    def _windows(self, b):
        """Window calls of the select list and ORDER BY -> ColRef(("w", k)) over the
        WindowAgg nodes' output."""
        wins = []
        for ex in [t for _, t in b.targets] + [e for e, _, _ in b.order_by]:
            for n in walk(ex):
                if isinstance(n, WinCall) and n not in wins:
                    wins.append(n)
        if not wins:
            return
        b.windows = wins
        m = {w: ColRef(("w", k), w.type, w.name, "") for k, w in enumerate(wins)}
        b.targets = [(n, _replace(e, m)) for n, e in b.targets]
        b.order_by = [(_replace(e, m), d, nf) for e, d, nf in b.order_by]
        b.distinct_on = [_replace(e, m) for e in b.distinct_on]

    def _set_returning(self, b):
        srfs = []
        for _, t in b.targets:
            for n in walk(t):
                if isinstance(n, SRFCall) and n not in srfs:
                    srfs.append(n)
        if not srfs:
            return
        for _, t in b.targets:
            if isinstance(t, SRFCall):
                continue
            for n in walk(t):
                if isinstance(n, SRFCall):
                    raise errors.NotSupportedError(
                        f"{n.name}() inside an expression of the select list is not "
                        "supported (put it in FROM)")
        b.srfs = srfs
        m = {f: ColRef(("srf", k), f.type, f.name, "") for k, f in enumerate(srfs)}
        b.targets = [(n, _replace(e, m)) for n, e in b.targets]
        b.order_by = [(_replace(e, m), d, nf) for e, d, nf in b.order_by]

    def _check_distinct_on(self, b):
        keys = b.distinct_on
        lead = [e for e, _, _ in b.order_by[:len(keys)]]
        if b.order_by and (len(lead) < len(keys) and any(e not in keys for e in lead)
                           or len(lead) == len(keys) and set(lead) != set(keys)):
            raise errors.ProgrammingError(
                "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
                sqlstate="42P10")

    def _from_list(self, items):
        """The FROM list: its items as a tree (``FromRel`` / ``FromJoin``; RIGHT joins are
        turned into LEFT joins with the sides swapped), the conjuncts of the top level's
        inner JOIN ... ON conditions, and the scope (entries, USING's merged columns,
        ``*``'s columns)."""
        scope = Scope()
        quals: list = []

        def add(item, top):
            if isinstance(item, ast.TableRef):
                sub = self._view(item)
                if sub is not None:           # a view: its query, as a subquery
                    return add(sub, top)
                alias = item.alias or item.name
                if any(e.alias == alias for e in scope):
                    raise _dup_alias(alias)
                e = self._entry(0, item.name, item.alias, item.col_aliases)
                scope.append(e)
                return FromRel(e.index), [(n, e.colref(i)) for i, (n, _) in
                                          enumerate(e.columns)]
            if isinstance(item, ast.SubqueryRef):
                if any(e.alias == item.alias for e in scope):
                    raise _dup_alias(item.alias)
                if item.lateral:        # reads the items before it: correlated to them
                    child = self._child(scope)
                else:
                    child = self._child(correlated=False)
                    child.outer_refs = self.outer_refs
                bq = child.query(item.query)
                cols = _renamed(list(zip(bq.names, bq.types)), item.col_aliases, item.alias)
                e = RangeEntry(self.ctx.next_rel, item.alias, None, cols, [False] * len(cols),
                               "subquery", bq)
                if item.lateral:
                    e.lateral = self._lateral_refs(child.outer_refs, scope)
                self.ctx.next_rel += 1
                scope.append(e)
                return FromRel(e.index), [(n, e.colref(i)) for i, (n, _) in
                                          enumerate(e.columns)]
            if isinstance(item, ast.FunctionRef):
                return self._function_rel(item, scope)
            ln, lcols = add(item.left, False)
            rn, rcols = add(item.right, False)
            kind = item.kind
            using = item.using
            if item.natural:
                rnames = {n for n, _ in rcols}
                using = [n for n, _ in lcols if n in rnames]
            if using is not None:
                conds, merged_cols = [], []
                for name in using:
                    lx = [x for n, x in lcols if n == name]
                    rx = [x for n, x in rcols if n == name]
                    for side, hits in (("left", lx), ("right", rx)):
                        if not hits:
                            raise errors.UndefinedColumn(
                                f'column "{name}" specified in USING clause does not exist '
                                f"in {side} table")
                        if len(hits) > 1:
                            raise errors.AmbiguousColumn(
                                f'common column name "{name}" appears more than once in '
                                f"{side} table")
                    cmp = self._compare("=", lx[0], rx[0])
                    conds.append(cmp)
                    if kind == "full":
                        t = self._common([lx[0].type, rx[0].type], "JOIN/USING")
                        merged = Func("coalesce", (lx[0], rx[0]), t)
                    else:
                        merged = rx[0] if kind == "right" else lx[0]
                    merged_cols.append((name, merged))
                    scope.merged[name] = merged
                    for x in (lx[0], rx[0]):
                        for ent in scope:
                            if isinstance(x, ColRef) and x.key[0] == ent.index:
                                ent.hidden.add(name)
                cols = merged_cols + [(n, x) for n, x in lcols if n not in using] + \
                    [(n, x) for n, x in rcols if n not in using]
                on = conds
            else:
                on = _conjuncts(self.boolean(item.on, scope, "JOIN/ON")) \
                    if item.on is not None else []
                cols = lcols + rcols
            inside = _tree_indexes(ln)
            refs = [r for r in _free_lateral(rn, scope) if r.key[0] in inside]
            if refs:            # the right side reads the left: a lateral join
                if kind not in ("inner", "left"):
                    raise _lateral_error(refs[0], scope)
                return FromJoin("lateral" if kind == "inner" else "lateral left", ln, rn,
                                on, refs), cols
            if kind == "right":
                return FromJoin("left", rn, ln, on), cols
            return FromJoin(kind, ln, rn, on), cols

        tree = []
        for item in items:
            node, cols = add(item, True)
            refs = _free_lateral(node, scope)
            if refs:        # LATERAL after a comma: a lateral join with everything before
                left = tree[0]
                for t in tree[1:]:
                    left = FromJoin("inner", left, t, [])
                tree = [FromJoin("lateral", left, node, [], refs)]
            else:
                tree.append(node)
            scope.star.extend(cols)
        # inner joins at the top level: their ON conditions are WHERE conditions
        flat = []

        def flatten(n):
            if isinstance(n, FromJoin) and n.kind == "inner":
                flatten(n.left)
                flatten(n.right)
                quals.extend(n.quals)
            else:
                flat.append(n)
        for n in tree:
            flatten(n)
        return flat, quals, scope

    @staticmethod
    def _lateral_refs(refs, scope) -> list:
        """The columns of this query's FROM items (``scope``) a LATERAL subquery read (its
        binder's ``outer_refs``; references to enclosing queries stay ``OuterRef`` s)."""
        local = {e.index for e in scope}
        out = []
        for r in refs:
            if isinstance(r, OuterRef):
                continue
            if not isinstance(r, ColRef) or r.key[0] not in local:
                raise errors.NotSupportedError(
                    "a LATERAL reference to a column merged by USING is not supported")
            if r not in out:
                out.append(r)
        return out

    def _function_rel(self, item, scope):
        f = item.func
        if f.name not in ("generate_series", "unnest"):
            raise errors.NotSupportedError(f"function {f.name}() in FROM is not supported "
                                           "(generate_series and unnest are)")
        if f.filter is not None or f.distinct or f.star:
            raise errors.ProgrammingError("syntax error in FROM function call", sqlstate="42601")
        # a function in FROM is LATERAL (PostgreSQL): its arguments may read the items before
        # it, which become its parameters (FromJoin "lateral", minidb.exec.lateral)
        child = self._child(scope)
        call = child._generate_series(f, Scope()) if f.name == "generate_series" else \
            child._unnest(f, Scope())
        lateral = self._lateral_refs(child.outer_refs, scope)
        alias = item.alias or f.name
        if any(e.alias == alias for e in scope):
            raise _dup_alias(alias)
        colname = (item.col_aliases or [item.alias or f.name])[0]
        if item.col_aliases and len(item.col_aliases) > 1:
            raise errors.ProgrammingError(f'table "{alias}" has 1 columns available but '
                                          f"{len(item.col_aliases)} columns specified",
                                          sqlstate="42P10")
        e = RangeEntry(self.ctx.next_rel, alias, None, [(colname, call.type)], [False],
                       "function", call)
        e.lateral = lateral or None
        self.ctx.next_rel += 1
        scope.append(e)
        return FromRel(e.index), [(colname, e.colref(0))]

    def _array_cat(self, a, b):
        """array || array (PostgreSQL's array_cat: a NULL side gives the other side)."""
        if a.type is UNKNOWN or b.type is UNKNOWN or a.type != b.type:
            raise errors.DatatypeMismatch(f"operator does not exist: {a.type} || {b.type}")
        return Func("array_cat", (a, b), a.type)

    def _unnest(self, f, scope) -> SRFCall:
        """unnest(array) in FROM: its elements, one row each (the argument may read the
        enclosing query's columns, as psql's \\d+ does, and the FROM items before it)."""
        args = [self.expr(a, scope) for a in f.args]
        if len(args) != 1 or not isinstance(args[0].type, ArrayType):
            sig = ", ".join(str(a.type) for a in args)
            raise errors.UndefinedFunction(f"function unnest({sig}) does not exist")
        return SRFCall("unnest", (args[0],), args[0].type.elem)

    def _generate_series(self, f, scope) -> SRFCall:
        args = [self.expr(a, scope) for a in f.args]
        types = [a.type for a in args]
        sig = ", ".join(str(t) for t in types)
        if len(args) not in (2, 3):
            raise errors.UndefinedFunction(f"function generate_series({sig}) does not exist")
        if any(family(t) == "ts" for t in types[:2]) or (
                all(t is UNKNOWN for t in types[:2]) and len(args) == 3):
            a0 = self._coerce_unknown(args[0], TIMESTAMP) if types[0] is UNKNOWN else args[0]
            a1 = self._coerce_unknown(args[1], TIMESTAMP) if types[1] is UNKNOWN else args[1]
            if family(a0.type) != "ts" or family(a1.type) != "ts" or len(args) != 3:
                raise errors.UndefinedFunction(f"function generate_series({sig}) does not exist")
            step = args[2]
            if isinstance(step, Const) and step.type == INTERVAL and step.value is not None:
                iv = step.value
                step = Const(f"{iv.months} months {iv.mdays * 86_400_000_000 + iv.usecs} us",
                             UNKNOWN)
            if not isinstance(step, Const) or not isinstance(step.value, str):
                raise errors.NotSupportedError("generate_series over timestamps needs an "
                                               "interval literal as its step ('1 day')")
            return SRFCall("generate_series", (a0, a1, Const(_interval(step.value), UNKNOWN)),
                           TIMESTAMP)
        conv = []
        for a in args:
            if a.type is UNKNOWN:
                a = self._coerce_unknown(a, INTEGER)
            if family(a.type) not in ("int", "float"):
                raise errors.UndefinedFunction(f"function generate_series({sig}) does not exist")
            conv.append(a)
        t = conv[0].type
        for a in conv[1:]:
            t = dtm.common_numeric(t, a.type)
        return SRFCall("generate_series", tuple(conv), t)

    def _targets(self, items, scope) -> list:
        """The select list as [(output name, Expr)], ``*`` and ``t.*`` expanded."""
        targets = []
        for node, alias in items:
            if isinstance(node, ast.StarE):
                if node.table is None:
                    cols = scope.star if isinstance(scope, Scope) else \
                        [(c[0], e.colref(i)) for e in scope for i, c in enumerate(e.columns)]
                    if not cols and not scope:
                        raise errors.ProgrammingError(
                            "SELECT * with no tables specified is not valid", sqlstate="42601")
                    targets.extend(cols)
                    continue
                e = self._find_entry(scope, node.table)
                for i in range(len(e.columns)):
                    targets.append((e.columns[i][0], e.colref(i)))
                continue
            ex = self.expr(node, scope, agg_ok=True)
            targets.append((alias or _default_name(node), ex))
        return targets

    def _group_clause(self, items, scope, targets):
        """GROUP BY -> (the distinct grouping expressions, the grouping sets as tuples of
        their indexes, or None for a plain GROUP BY).  As PostgreSQL's
        expand_grouping_sets: the items' sets are crossed (each set of the first with each
        of the second ...); ROLLUP (a, b) is (a, b), (a), (); CUBE (a, b) is (a, b), (a),
        (b), (); GROUPING SETS concatenates its items' sets."""
        if not any(isinstance(g, ast.GroupingSetE) for g in items):
            return [self._group_item(g, scope, targets) for g in items], None
        group, sets = [], [()]
        for g in items:
            sets = [a + b for a in sets for b in self._expand_sets(g)]
        out = []
        for st in sets:
            idx = []
            for it in st:
                ex = self._group_item(it, scope, targets)
                if ex not in group:
                    group.append(ex)
                k = group.index(ex)
                if k not in idx:
                    idx.append(k)
            out.append(tuple(sorted(idx)))
        if len(out) > 4096:
            raise errors.ProgramLimitExceeded("too many grouping sets present (maximum 4096)")
        return group, out

    def _expand_sets(self, g) -> list:
        """The grouping sets of one GROUP BY item, as tuples of ast expressions."""
        if not isinstance(g, ast.GroupingSetE):
            return [(g,)]
        if g.kind == "rollup":
            return [sum(g.items[:k], ()) for k in range(len(g.items), -1, -1)]
        if g.kind == "cube":
            n = len(g.items)
            return [sum((g.items[i] for i in range(n) if mask >> (n - 1 - i) & 1), ())
                    for mask in range((1 << n) - 1, -1, -1)]
        out = []
        for it in g.items:
            out += self._expand_sets(it) if isinstance(it, ast.GroupingSetE) else [it]
        return out

    def _aggregation(self, b: BoundSelect, group, order, having, distinct_on=(),
                     sets=None) -> list:
        """Collects the aggregate calls of the select list, ORDER BY and HAVING; with
        GROUP BY, aggregates or HAVING, marks ``b`` grouped and rewrites what is above the
        aggregation to read its output.  Returns the (rewritten) ORDER BY."""
        aggs = []
        for ex in [t for _, t in b.targets] + [e for e, _, _ in order] + list(distinct_on) + \
                ([having] if having is not None else []):
            for n in walk(ex):
                if isinstance(n, AggCall) and n not in aggs:
                    aggs.append(n)
        b.distinct_on = list(distinct_on)
        if sets is None and not group and not aggs and having is None and any(
                isinstance(n, GroupingFunc) for _, t in b.targets for n in walk(t)):
            raise errors.GroupingError("arguments to GROUPING must be grouping expressions "
                                       "of the associated query level")
        if group or aggs or having is not None or sets is not None:
            b.grouped = True
            b.group_by = group
            b.aggs = aggs
            rw = _GroupRewriter(group, aggs, sets)
            b.targets = [(n, rw.rewrite(e)) for n, e in b.targets]
            order = [(rw.rewrite(e), d, nf) for e, d, nf in order]
            b.distinct_on = [rw.rewrite(e) for e in distinct_on]
            b.having = rw.rewrite(having) if having is not None else None
            if b.for_update:
                raise errors.NotSupportedError(
                    f"{_lock_clause(b)} is not allowed with "
                    + ("GROUP BY clause" if group else "aggregate functions"))
        return order

    def _distinct(self, b: BoundSelect) -> None:
        """SELECT DISTINCT: every ORDER BY key must be an output column (its position is
        noted in ``order_refs``)."""
        b.distinct = True
        tex = [e for _, e in b.targets]
        for e, _, _ in b.order_by:
            if e not in tex:
                raise errors.InvalidColumnReference(
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list")
            b.order_refs.append(tex.index(e))
        if b.for_update:
            raise errors.NotSupportedError(f"{_lock_clause(b)} is not allowed with DISTINCT clause")

    def _limit(self, node, what):
        e = self.expr(node, [], ctx=BIGINT)
        if e.type is UNKNOWN:
            e = self._coerce_unknown(e, BIGINT)
        if family(e.type) != "int":
            raise errors.DatatypeMismatch(f"argument of {what} must be type bigint, not type "
                                          f"{e.type}")
        return e

    def _group_item(self, g, scope, targets):
        if isinstance(g, ast.Lit) and g.kind == "int":
            k = g.value
            if not 1 <= k <= len(targets):
                raise errors.InvalidColumnReference(f"GROUP BY position {k} is not in select list")
            ex = targets[k - 1][1]
        elif isinstance(g, ast.Name) and len(g.parts) == 1 and \
                not any(e.attno(g.parts[0]) >= 0 for e in scope):
            hits = [t for n, t in targets if n == g.parts[0]]
            if not hits:
                ex = self.expr(g, scope)            # raises UndefinedColumn
            else:
                ex = hits[0]
        else:
            ex = self.expr(g, scope)
        if any(isinstance(n, AggCall) for n in walk(ex)):
            raise errors.GroupingError("aggregate functions are not allowed in GROUP BY")
        return ex

    def _order_item(self, o, scope, targets):
        if isinstance(o, ast.Lit) and o.kind == "int":
            k = o.value
            if not 1 <= k <= len(targets):
                raise errors.InvalidColumnReference(f"ORDER BY position {k} is not in select list")
            return targets[k - 1][1]
        if isinstance(o, ast.Name) and len(o.parts) == 1:
            hits = [t for n, t in targets if n == o.parts[0]]
            if len(hits) > 1 and any(h != hits[0] for h in hits):
                raise errors.AmbiguousColumn(f'ORDER BY "{o.parts[0]}" is ambiguous')
            if hits:
                return hits[0]
        return self.expr(o, scope, agg_ok=True)

    def insert(self, s: ast.InsertStmt) -> BoundInsert:
        entry = self._entry(0, s.table, None)
        ncols = len(entry.columns)
        if s.columns is None:
            attnos = list(range(ncols))
        else:
            attnos = []
            for c in s.columns:
                a = entry.attno(c)
                if a < 0:
                    raise errors.UndefinedColumn(
                        f'column "{c}" of relation "{s.table}" does not exist')
                if a in attnos:
                    raise errors.DuplicateColumn(f'column "{c}" specified more than once')
                attnos.append(a)
        defaults = self.defaults(entry)
        rows = None
        sel = None
        if s.values is not None:
            rows = []
            width = None
            for r in s.values:
                if len(r) > len(attnos):
                    raise errors.SyntaxError_("INSERT has more expressions than target columns")
                if s.columns is not None and len(r) < len(attnos):
                    raise errors.SyntaxError_("INSERT has more target columns than expressions")
                if width is not None and len(r) != width:
                    raise errors.SyntaxError_("VALUES lists must all be the same length")
                width = len(r)
                out = []
                for node, a in zip(r, attnos):
                    if isinstance(node, ast.DefaultE):
                        out.append(DEFAULT)
                        continue
                    name, t = entry.columns[a]
                    e = self.expr(node, [], ctx=t)
                    out.append(self.assignable(e, t, name))
                rows.append(out)
            if width is not None and width < len(attnos):
                attnos = attnos[:width]
        else:
            sel = Binder(self.catalog, self.param_sig, self.default_parser, ctx=self.ctx)
            sel.param_types = self.param_types
            q = s.select
            if isinstance(q, ast.SetOpStmt) or (isinstance(q, ast.SelectStmt) and q.with_):
                q = ast.SelectStmt(targets=[(ast.StarE(None), None)],
                                   from_=[ast.SubqueryRef(q, "*SELECT*", None)])
            bs = sel._finish(sel.select(q))
            if len(bs.targets) > len(attnos):
                raise errors.SyntaxError_("INSERT has more expressions than target columns")
            if len(bs.targets) < len(attnos):
                if s.columns is not None:
                    raise errors.SyntaxError_("INSERT has more target columns than expressions")
                attnos = attnos[:len(bs.targets)]
            new_targets = []
            for (n, e), a in zip(bs.targets, attnos):
                name, t = entry.columns[a]
                new_targets.append((n, self.assignable(e, t, name)))
            bs.targets = new_targets
            sel_bound = bs
            sel = sel_bound
        entry.checks = self.check_constraints(entry)
        if s.overriding or any(c.identity for c in entry.table.columns):
            from minidb.sql.identity import check_identity_insert
            rows = check_identity_insert(entry.table, attnos, rows, s.overriding)
        oc = None
        if s.on_conflict is not None:
            from minidb.sql.onconflict import bind_on_conflict
            oc = bind_on_conflict(self, s, entry)
        ret = self.returning(s.returning, entry)
        return BoundInsert(entry, attnos, rows, sel, defaults, dict(self.param_types), ret, oc)

    def set_list(self, entry, assignments, scope, rel_name: str) -> list:
        """UPDATE's (and ON CONFLICT DO UPDATE's) ``SET col = expr, ...`` over ``entry``:
        [(attno, Expr)], each converted to its column's type; ``DEFAULT`` is the column's
        default (NULL without one); identity columns' rules (428C9)."""
        defaults = None
        assigns = []
        seen = set()
        for col, node in assignments:
            a = entry.attno(col)
            if a < 0:
                raise errors.UndefinedColumn(
                    f'column "{col}" of relation "{rel_name}" does not exist')
            if a in seen:
                raise errors.ProgrammingError(f'multiple assignments to same column "{col}"',
                                              sqlstate="42601")
            seen.add(a)
            name, t = entry.columns[a]
            if entry.table.columns[a].identity:
                from minidb.sql.identity import check_identity_update
                check_identity_update(entry.table, a, isinstance(node, ast.DefaultE))
            if isinstance(node, ast.DefaultE):
                if defaults is None:
                    defaults = self.defaults(entry)
                e = defaults.get(a, Const(None, t))
            else:
                e = self.expr(node, scope, ctx=t)
            assigns.append((a, self.assignable(e, t, name)))
        return assigns

    def update(self, s: ast.UpdateStmt) -> BoundUpdate:
        join = None
        if s.from_:
            from minidb.sql import updfrom
            entry, scope, join = updfrom.bind_from(self, BoundSelect, s.table, s.alias,
                                                   s.from_)
        else:
            entry = self._entry(0, s.table, s.alias)
            scope = [entry]
        assigns = self.set_list(entry, s.assignments, scope, s.table)
        quals = _conjuncts(self.boolean(s.where, scope, "WHERE")) if s.where is not None else []
        entry.checks = self.check_constraints(entry)
        if join is not None:
            ret = self.returning(s.returning, entry, scope)
            updfrom.finish(join, entry, quals, [e for _, e in assigns] + [e for _, e in ret])
            return BoundUpdate(entry, assigns, [], dict(self.param_types), ret, join=join)
        ret = self.returning(s.returning, entry)
        return BoundUpdate(entry, assigns, quals, dict(self.param_types), ret)

    def delete(self, s: ast.DeleteStmt) -> BoundDelete:
        if s.using:
            from minidb.sql import updfrom
            entry, scope, join = updfrom.bind_from(self, BoundSelect, s.table, s.alias,
                                                   s.using)
            quals = _conjuncts(self.boolean(s.where, scope, "WHERE")) \
                if s.where is not None else []
            ret = self.returning(s.returning, entry, scope)
            updfrom.finish(join, entry, quals, [e for _, e in ret])
            return BoundDelete(entry, [], dict(self.param_types), ret, join=join)
        entry = self._entry(0, s.table, s.alias)
        quals = _conjuncts(self.boolean(s.where, [entry], "WHERE")) if s.where is not None else []
        ret = self.returning(s.returning, entry)
        return BoundDelete(entry, quals, dict(self.param_types), ret)

    def returning(self, items, entry, scope=None) -> list:
        """RETURNING's list over the target table's row (``*`` expanded); with ``scope``
        (UPDATE ... FROM, DELETE ... USING) over every FROM item's row, ``*`` being all
        their columns, as PostgreSQL."""
        if not items:
            return []
        targets = self._targets(items, scope if scope is not None else [entry])
        for _, ex in targets:
            if any(isinstance(n, (AggCall, WinCall)) for n in walk(ex)):
                raise errors.GroupingError("aggregate functions are not allowed in RETURNING")
            if any(isinstance(n, (SubLink, SubPlan)) for n in walk(ex)):
                raise errors.NotSupportedError("subqueries in RETURNING are not supported")
        return targets

    def check_constraints(self, entry: RangeEntry) -> list:
        """[(name, bound boolean Expr over ``entry``)] of the target table's CHECKs
        (``minidb.sql.checks``; the executor's ``minidb.exec.checks`` tests them)."""
        t = entry.table
        if t is None or not getattr(t, "checks", None):
            return []
        b = Binder(self.catalog)
        return [(c.name, b.boolean(self.default_parser(c.expr), [entry], "CHECK"))
                for c in t.checks]

    def defaults(self, entry: RangeEntry) -> dict:
        out = {}
        for i, c in enumerate(entry.table.columns):
            if c.default is not None:
                node = self.default_parser(c.default)
                name, t = entry.columns[i]
                e = Binder(self.catalog).expr(node, [], ctx=t)
                out[i] = self.assignable(e, t, name)
        return out

    # -- expressions -----------------------------------------------------------------------------
    def boolean(self, node, scope, what, agg_ok=False):
        try:
            e = self.expr(node, scope, ctx=BOOLEAN, agg_ok=agg_ok)
        except errors.GroupingError as ex:
            if str(ex) == _GROUPING_HERE:     # name the clause, as PostgreSQL does
                raise errors.GroupingError(f"grouping operations are not allowed in {what}") \
                    from None
            raise
        if e.type is UNKNOWN:
            e = self._coerce_unknown(e, BOOLEAN)
        if e.type.name != "boolean":
            raise errors.DatatypeMismatch(f"argument of {what} must be type boolean, not type "
                                          f"{e.type}")
        if not agg_ok and any(isinstance(n, AggCall) for n in walk(e)):
            raise errors.GroupingError(f"aggregate functions are not allowed in {what}")
        return e

    def expr(self, n, scope, ctx=None, agg_ok=False):
        e = self._expr(n, scope, ctx, agg_ok)
        return e

    def _find_entry(self, scope, name: str) -> RangeEntry:
        for e in scope:
            if e.alias == name:
                return e
        raise errors.UndefinedTable(f'missing FROM-clause entry for table "{name}"')

    def _expr(self, n, scope, ctx=None, agg_ok=False):
        x = lambda node, c=None: self.expr(node, scope, c, agg_ok)  # noqa: E731
        if isinstance(n, ast.Name):
            return self._column(n, scope)
        if isinstance(n, ast.Lit):
            return _literal(n)
        if isinstance(n, ast.Placeholder):
            return Param(n.index, self._param_type(n.index, ctx))
        if isinstance(n, ast.BinOp):
            return self._binop(n, x)
        if isinstance(n, ast.UnOp):
            if n.op == "not":
                a = self._bool_arg(x(n.arg, BOOLEAN), "NOT")
                return Not(a)
            a = x(n.arg, ctx)
            if n.op == "+":             # only the number types have a unary + (PostgreSQL)
                if a.type is UNKNOWN:
                    return self._coerce_unknown(a, DOUBLE)
                if family(a.type) not in ("int", "float", "num"):
                    err = errors.UndefinedFunction(f"operator does not exist: + {a.type}")
                    err.hint = ("No operator matches the given name and argument type. You "
                                "might need to add an explicit type cast.")
                    raise err
                return a
            if a.type is UNKNOWN:
                a = self._coerce_unknown(a, DOUBLE if "." in str(getattr(a, "value", "")) else INTEGER)
            if family(a.type) not in ("int", "float", "num", "interval"):
                raise errors.DatatypeMismatch(f"operator does not exist: - {a.type}")
            if isinstance(a, Const):
                return Const(-a.value if a.value is not None else None, a.type)
            return Neg(a, a.type if a.type.name != "boolean" else INTEGER)
        if isinstance(n, ast.IsNullE):
            return IsNull(x(n.arg), n.negated)
        if isinstance(n, ast.IsBoolE):
            a = self._bool_arg(x(n.arg, BOOLEAN), "IS TRUE")
            notnull = IsNull(a, True)
            core = BoolOp("and", (notnull, a if n.value else Not(a)))
            return Not(core) if n.negated else core
        if isinstance(n, ast.BetweenE):
            a = x(n.arg)
            lo = x(n.low, a.type if a.type is not UNKNOWN else None)
            hi = x(n.high, a.type if a.type is not UNKNOWN else None)
            if n.negated:
                return BoolOp("or", (self._compare("<", a, lo), self._compare(">", a, hi)))
            return BoolOp("and", (self._compare(">=", a, lo), self._compare("<=", a, hi)))
        if isinstance(n, ast.InE):
            a = x(n.arg)
            items = [x(i, a.type if a.type is not UNKNOWN else None) for i in n.items]
            if a.type is UNKNOWN:
                t = self._common([i.type for i in items], "IN")
                a = self._coerce_unknown(a, t)
            conv = []
            for i in items:
                cmp = self._compare("=", a, i)
                conv.append(cmp.right)
                a = cmp.left
            return InList(a, tuple(conv), n.negated)
        if isinstance(n, ast.LikeE):
            a = x(n.arg, TEXT)
            p = x(n.pattern, TEXT)
            a = self._text_arg(a, "LIKE")
            p = self._text_arg(p, "LIKE")
            esc = "\\"
            if n.escape is not None:
                ev = x(n.escape, TEXT)
                if not isinstance(ev, Const) or not isinstance(ev.value, str):
                    raise errors.NotSupportedError("a LIKE ESCAPE that is not a string "
                                                   "constant is not supported")
                esc = ev.value
                if len(esc) > 1:
                    raise errors.DataError("invalid escape string", sqlstate="22025")
            return Like(a, p, n.negated, n.case_insensitive, escape=esc)
        if isinstance(n, ast.RegexE):
            a = self._text_arg(x(n.arg, TEXT), "~")
            p = self._text_arg(x(n.pattern, TEXT), "~")
            return Regex(a, p, n.negated, n.case_insensitive)
        if isinstance(n, ast.DistinctFromE):
            a = x(n.left)
            b = x(n.right, _ctx_of(a))
            if a.type is UNKNOWN and b.type is not UNKNOWN:
                a = self._coerce_unknown(a, b.type)
            cmp = self._compare("=", a, b)
            return DistinctFrom(cmp.left, cmp.right, n.negated)
        if isinstance(n, ast.SubqueryE):
            return self._sublink(n, scope, agg_ok)
        if isinstance(n, ast.WindowE):
            return self._window(n, scope)
        if isinstance(n, ast.CastE) and n.type_name in _CATALOG_CASTS:
            return self._catalog_cast(n.type_name, x(n.arg))
        if isinstance(n, ast.CastE):
            t = parse_type(n.type_name)
            a = x(n.arg, t)
            if a.type is UNKNOWN and isinstance(a, Const):
                return Const(dtm.cast_value(a.value, UNKNOWN, t), t)
            if isinstance(a, Param):
                return Param(a.index, a.type) if a.type == t else Cast(a, t)
            _check_castable(a.type, t)
            return Cast(a, t)
        if isinstance(n, ast.FuncE):
            return self._func(n, scope, ctx, agg_ok)
        if isinstance(n, ast.CaseE):
            return self._case(n, x)
        if isinstance(n, ast.StarE):
            raise errors.ProgrammingError("* is not allowed here", sqlstate="42601")
        if isinstance(n, ast.DefaultE):
            raise errors.ProgrammingError("DEFAULT is not allowed in this context",
                                          sqlstate="42601")
        raise errors.NotSupportedError(f"expression {type(n).__name__} is not supported")

    def _catalog_cast(self, type_name: str, a):
        """``x::oid`` (an integer), ``oid::regclass`` / ``::regtype`` / ``::regnamespace``
        (the object's name, as text), ``'name'::regclass`` (the relation's OID)."""
        if type_name == "oid":
            a = self._coerce_unknown(a, INTEGER) if a.type is UNKNOWN else a
            if family(a.type) != "int":
                raise errors.DatatypeMismatch(f"cannot cast type {a.type} to oid")
            return a
        if type_name in ("regclass", "regtype") and family(a.type) in ("text", "unknown"):
            a = self._coerce_unknown(a, TEXT) if a.type is UNKNOWN else a
            return Func(f"{type_name}_in", (a,), INTEGER)
        if family(a.type) != "int":
            raise errors.DatatypeMismatch(f"cannot cast type {a.type} to {type_name}")
        return Func(f"{type_name}_out", (a,), TEXT)

    def _column(self, n: ast.Name, scope):
        if len(n.parts) == 2:
            ents = [e for e in scope if e.alias == n.parts[0]]
            if not ents:
                if self.parent is not None:
                    return self._outer(n)
                raise errors.UndefinedTable(
                    f'missing FROM-clause entry for table "{n.parts[0]}"')
            e = ents[0]
            a = e.attno(n.parts[1])
            if a < 0:
                raise errors.UndefinedColumn(f"column {n.parts[0]}.{n.parts[1]} does not exist")
            return e.colref(a)
        if len(n.parts) != 1:
            raise errors.NotSupportedError(f"name {n} is not supported")
        name = n.parts[0]
        merged = getattr(scope, "merged", None)
        if merged and name in merged:
            return merged[name]
        hits = [(e, e.attno(name)) for e in scope
                if e.attno(name) >= 0 and name not in e.hidden]
        if not hits:
            if self.parent is not None:
                return self._outer(n)
            raise errors.UndefinedColumn(f'column "{name}" does not exist')
        if len(hits) > 1:
            raise errors.AmbiguousColumn(f'column reference "{name}" is ambiguous')
        e, a = hits[0]
        return e.colref(a)

    def _outer(self, n: ast.Name):
        """A name of an enclosing query (a correlated subquery's outer reference)."""
        try:
            r = self.parent._column(n, self.parent_scope if self.parent_scope is not None
                                    else [])
        except errors.UndefinedTable:
            raise errors.UndefinedTable(
                f'missing FROM-clause entry for table "{n.parts[0]}"') from None
        except errors.UndefinedColumn:
            raise errors.UndefinedColumn(f'column "{n}" does not exist') from None
        if r not in self.outer_refs:
            self.outer_refs.append(r)
        return r if isinstance(r, OuterRef) else OuterRef(r, r.type)

    def _param_type(self, index: int, ctx):
        if index in self.param_types:
            return self.param_types[index]
        py = self.param_sig[index] if index < len(self.param_sig) else type(None)
        natural = _PARAM_TYPES.get(py)
        if ctx is not None and ctx is not UNKNOWN:
            f = family(ctx)
            ok = (py in (type(None), str) or natural is None
                  or family(natural) == f or (family(natural), f) in _PARAM_WIDENS)
            t = ctx if ok else natural
            if ctx.name in ("char", "varchar"):
                t = TEXT if ok else natural
        else:
            t = natural or TEXT
        self.param_types[index] = t
        return t

    def _binop(self, n: ast.BinOp, x):
        op = n.op
        # bind the side that has a type of its own first: a parameter or an untyped literal
        # on the other side takes it
        left_first = not _needs_context(n.left) or _needs_context(n.right)
        if op in ("and", "or"):
            a = self._bool_arg(x(n.left, BOOLEAN), op.upper())
            b = self._bool_arg(x(n.right, BOOLEAN), op.upper())
            args = []
            for e in (a, b):
                if isinstance(e, BoolOp) and e.op == op:
                    args.extend(e.args)
                else:
                    args.append(e)
            return BoolOp(op, tuple(args))
        if left_first:
            a = x(n.left)
            b = x(n.right, _ctx_of(a))
        else:
            b = x(n.right)
            a = x(n.left, _ctx_of(b))
        if op in ("=", "<>", "<", "<=", ">", ">="):
            return self._compare(op, a, b)
        if op == "||":
            if a.type is UNKNOWN:
                a = self._coerce_unknown(a, TEXT)
            if b.type is UNKNOWN:
                b = self._coerce_unknown(b, TEXT)
            if family(a.type) == "array" or family(b.type) == "array":
                return self._array_cat(a, b)
            if family(a.type) != "text" and family(b.type) != "text":
                raise errors.DatatypeMismatch(f"operator does not exist: {a.type} || {b.type}")
            a = a if family(a.type) == "text" else _to_text(a)
            b = b if family(b.type) == "text" else _to_text(b)
            return Concat(_strip_char(a), _strip_char(b))
        # arithmetic
        if a.type is UNKNOWN and b.type is UNKNOWN:
            raise errors.DatatypeMismatch(f"operator is not unique: unknown {op} unknown")
        if a.type is UNKNOWN:
            a = self._coerce_unknown(a, b.type)
        if b.type is UNKNOWN:
            b = self._coerce_unknown(b, a.type)
        rt, ta, tb = dtm.arith_plan(op, a.type, b.type)
        if ta is not None:
            a = self._implicit_cast(a, ta)
        if tb is not None:
            b = self._implicit_cast(b, tb)
        return Arith(op, a, b, rt)

    def _implicit_cast(self, e, t):
        """``e`` converted to ``t`` by one of PostgreSQL's implicit casts (a constant is
        converted now)."""
        if e.type == t:
            return e
        if isinstance(e, Const):
            return Const(dtm.cast_value(e.value, e.type, t), t)
        return Cast(e, t)

    def _compare(self, op, a, b, keep_sides=False):
        """``a op b`` with PostgreSQL's operand conversions.  ``keep_sides``: ``a`` stays
        the left operand and ``b`` the right (an IN subquery's test, whose right side is
        the subquery's column): no rewriting of an integer compared with a numeric
        constant."""
        if a.type is UNKNOWN and b.type is UNKNOWN:
            a, b = self._coerce_unknown(a, TEXT), self._coerce_unknown(b, TEXT)
        elif a.type is UNKNOWN:
            a = self._coerce_unknown(a, b.type)
        elif b.type is UNKNOWN:
            b = self._coerce_unknown(b, a.type)
        fa, fb = family(a.type), family(b.type)
        if fa == "text" and fb == "text":
            return Compare(op, _strip_char(a), _strip_char(b))
        t = dtm.common_type(a.type, b.type)
        if t is None or fa in ("array", "unknown") or fb in ("array", "unknown"):
            raise errors.DatatypeMismatch(f"operator does not exist: {a.type} {op} {b.type}")
        if fa != fb or family(t) not in ("int", "float"):
            int_vs_num = None if keep_sides else _int_against_numeric(op, a, b)
            if int_vs_num is not None:
                return int_vs_num
            if family(a.type) != family(t) or (family(t) not in ("int", "float")
                                               and a.type.name != t.name):
                a = self._implicit_cast(a, t)
            if family(b.type) != family(t) or (family(t) not in ("int", "float")
                                               and b.type.name != t.name):
                b = self._implicit_cast(b, t)
        return Compare(op, a, b)

    def _coerce_unknown(self, e, t):
        """An untyped literal (or NULL) given type ``t``."""
        if isinstance(e, Const):
            if t is UNKNOWN:
                t = TEXT
            if t.name in ("char", "varchar"):
                t = TEXT
            return Const(dtm.cast_value(e.value, UNKNOWN, t), t)
        return e

    def _bool_arg(self, e, what):
        if e.type is UNKNOWN:
            e = self._coerce_unknown(e, BOOLEAN)
        if e.type.name != "boolean":
            raise errors.DatatypeMismatch(f"argument of {what} must be type boolean, not type "
                                          f"{e.type}")
        return e

    def _text_arg(self, e, what):
        if e.type is UNKNOWN:
            e = self._coerce_unknown(e, TEXT)
        if family(e.type) != "text":
            raise errors.UndefinedFunction(f"operator does not exist: {e.type} ~~ text "
                                           f"({what} needs strings)")
        return _strip_char(e)

    def _common(self, types, what):
        known = [t for t in types if t is not UNKNOWN]
        if not known:
            return TEXT
        fams = {family(t) for t in known}
        if fams <= set(dtm.NUMBER_FAMILIES) or fams <= set(dtm.DATETIME_FAMILIES) \
                or fams == {"time", "interval"}:
            t = known[0]
            for u in known[1:]:
                t = dtm.common_type(t, u)
            return t
        if len(fams) > 1:
            a, b = known[0], next(t for t in known if family(t) != family(known[0]))
            raise errors.DatatypeMismatch(f"{what} types {a} and {b} cannot be matched")
        f = fams.pop()
        if f == "text":
            return TEXT
        return known[0]

    def _sublink(self, n: ast.SubqueryE, scope, agg_ok):
        child = self._child(scope)
        bq = child.query(n.query)
        holder = SubPlan(bq)
        self.ctx.subplans.append(holder)
        local = {e.index for e in scope}
        outer = []
        for r in child.outer_refs:
            if isinstance(r, OuterRef):
                outer.append(r)
            elif all(isinstance(k[0], int) and k[0] in local
                     for k in (c.key for c in walk(r) if isinstance(c, ColRef))):
                outer.append(r)
            else:
                outer.append(OuterRef(r, r.type))
        holder.outer_keys = [OuterRef(r, r.type).key if not isinstance(r, OuterRef) else r.key
                             for r in child.outer_refs]
        holder.test = None
        ncols = len(bq.types)
        if n.kind == "exists":
            return SubLink("exists", holder, None, False, tuple(outer), BOOLEAN)
        if ncols != 1:
            raise errors.ProgrammingError("subquery must return only one column" if
                                          n.kind == "scalar" else
                                          "subquery has too many columns", sqlstate="42601")
        st = bq.types[0]
        if n.kind == "scalar":
            return SubLink("scalar", holder, None, False, tuple(outer), st)
        if n.kind == "array":
            if family(st) == "array":
                raise errors.NotSupportedError("ARRAY(subquery) of arrays is not supported")
            return SubLink("array", holder, None, False, tuple(outer), ArrayType(st))
        a = self.expr(n.arg, scope, _ctx_of_type(st), agg_ok)
        cmp = self._compare("=", a, ColRef(("sub", 0), st, bq.names[0], ""), keep_sides=True)
        holder.test = cmp
        return SubLink("in", holder, cmp.left, n.negated, tuple(outer), BOOLEAN)

    def _window(self, n: ast.WindowE, scope):
        if not self._win_ok:
            raise errors.ProgrammingError("window functions are not allowed here",
                                          sqlstate="42P20")
        f = n.func
        name = f.name
        if f.distinct:
            raise errors.NotSupportedError("DISTINCT is not implemented for window functions")
        if f.filter is not None or f.order:
            raise errors.NotSupportedError("FILTER / ORDER BY inside a window function call "
                                           "is not supported")
        self._win_ok = False
        try:
            args = [self.expr(a, scope, None, agg_ok=True) for a in f.args]
            part = tuple(self.expr(p, scope, None, agg_ok=True) for p in n.partition)
            order = [(self.expr(o.expr, scope, None, agg_ok=True), o.desc,
                      o.nulls_first if o.nulls_first is not None else o.desc) for o in n.order]
        finally:
            self._win_ok = True
        sig = ", ".join(str(a.type) for a in args)
        if name in ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist"):
            if args:
                raise errors.UndefinedFunction(f"function {name}({sig}) does not exist")
            rt = DOUBLE if name in ("percent_rank", "cume_dist") else BIGINT
        elif name == "ntile":
            if len(args) != 1 or family(args[0].type) != "int":
                raise errors.UndefinedFunction(f"function {name}({sig}) does not exist")
            rt = INTEGER
        elif name in ("lag", "lead", "first_value", "last_value", "nth_value"):
            most = {"lag": 3, "lead": 3, "nth_value": 2}.get(name, 1)
            if not args or len(args) > most or (name == "nth_value" and len(args) != 2):
                raise errors.UndefinedFunction(f"function {name}({sig}) does not exist")
            if args[0].type is UNKNOWN:
                args[0] = self._coerce_unknown(args[0], TEXT)
            rt = args[0].type
            if family(rt) == "text":
                args[0] = _strip_char(args[0])
                rt = TEXT
            if len(args) >= 2:
                if args[1].type is UNKNOWN:
                    args[1] = self._coerce_unknown(args[1], INTEGER)
                if family(args[1].type) != "int":
                    raise errors.UndefinedFunction(f"function {name}({sig}) does not exist")
            if len(args) == 3:
                d = args[2]
                if d.type is UNKNOWN:
                    d = self._coerce_unknown(d, rt)
                cmp = self._compare("=", Const(None, rt), d)
                args[2] = cmp.right
                if family(rt) == "int" and family(d.type) == "float":
                    raise errors.UndefinedFunction(f"function {name}({sig}) does not exist")
        elif name in ("count", "sum", "avg", "min", "max"):
            if f.star and name == "count":
                args = []
                rt = BIGINT
            else:
                agg = self._func(ast.FuncE(name, f.args), scope, None, True)
                if not isinstance(agg, AggCall):
                    raise errors.UndefinedFunction(f"function {name}({sig}) does not exist")
                args = [agg.arg]
                rt = agg.type
        else:
            raise errors.UndefinedFunction(f"function {name}({sig}) does not exist" if
                                           name not in _AGG_NAMES else
                                           f"{name}() as a window function is not supported")
        frame = self._frame(n.frame, order, scope) if n.frame is not None else None
        return WinCall(name, tuple(args), part, tuple(e for e, _, _ in order),
                       tuple(d for _, d, _ in order), tuple(nf for _, _, nf in order), rt,
                       frame)

    _BOUND_RANK = {"unbounded_preceding": 0, "preceding": 1, "current": 2, "following": 3,
                   "unbounded_following": 4}

    def _frame(self, fr: ast.FrameE, order, scope) -> WinFrame:
        """A frame clause checked as PostgreSQL's transformFrameOffset and the grammar do:
        the bounds in order, GROUPS with ORDER BY, RANGE with an offset over exactly one
        ORDER BY column of a type with in_range support; offsets without variables, bigint
        for ROWS / GROUPS, the ORDER BY column's type for RANGE."""
        def bad(msg, state="42P20"):
            return errors.ProgrammingError(msg, sqlstate=state)
        if fr.start == "unbounded_following":
            raise bad("frame start cannot be UNBOUNDED FOLLOWING")
        if fr.end == "unbounded_preceding":
            raise bad("frame end cannot be UNBOUNDED PRECEDING")
        rs, re_ = self._BOUND_RANK[fr.start], self._BOUND_RANK[fr.end]
        if fr.start == "current" and re_ < 2:
            raise bad("frame starting from current row cannot have preceding rows")
        if fr.start == "following" and re_ < 3:
            raise bad("frame starting from following row cannot have preceding rows")
        assert rs <= re_ or fr.start == "following"
        if fr.kind == "groups" and not order:
            raise bad("GROUPS mode requires an ORDER BY clause")
        offs = [o for o in (fr.start_off, fr.end_off) if o is not None]
        okey = None
        if fr.kind == "range" and offs:
            if len(order) != 1:
                raise bad("RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY "
                          "column")
            okey = order[0][0].type
        bound = []
        for o in (fr.start_off, fr.end_off):
            if o is None:
                bound.append(None)
                continue
            e = self.expr(o, scope, None)
            if any(isinstance(x, (ColRef, OuterRef, AggCall, WinCall, SubLink))
                   for x in walk(e)):
                raise errors.InvalidColumnReference(
                    f"argument of {fr.kind.upper()} must not contain variables")
            if okey is None:
                if e.type is UNKNOWN:
                    e = self._coerce_unknown(e, BIGINT)
                if family(e.type) == "num":
                    e = Cast(e, BIGINT)
                if family(e.type) != "int":
                    raise errors.DatatypeMismatch(f"argument of {fr.kind.upper()} must be type "
                                                  f"bigint, not type {e.type}")
            else:
                kf = family(okey)
                if e.type is UNKNOWN:
                    e = self._coerce_unknown(e, INTERVAL if kf in ("ts", "tstz", "date",
                                                                   "time") else okey)
                ef = family(e.type)
                ok = (kf == "int" and ef == "int") or (kf == "float" and ef in
                                                          ("int", "float", "num")) or \
                    (kf == "num" and ef in ("int", "num")) or \
                    (kf in ("ts", "tstz", "date", "time") and ef == "interval")
                if not ok:
                    raise errors.NotSupportedError(
                        f"RANGE with offset PRECEDING/FOLLOWING is not supported for column "
                        f"type {okey} and offset type {e.type}")
            bound.append(e)
        return WinFrame(fr.kind, fr.start, bound[0], fr.end, bound[1], fr.exclude)

    def _func(self, n: ast.FuncE, scope, ctx, agg_ok):
        name = n.name
        if name == "every":
            name = "bool_and"
        if name in _AGG_NAMES:
            return self._agg(n, name, scope, agg_ok)
        if name == "grouping":
            if not agg_ok:
                raise errors.GroupingError(_GROUPING_HERE)
            if not n.args or len(n.args) > 31:
                raise errors.ProgrammingError("GROUPING must have fewer than 32 arguments",
                                              sqlstate="54023")
            return GroupingFunc(tuple(self.expr(a, scope) for a in n.args), INTEGER)
        if name in _WINDOW_ONLY:
            raise errors.ProgrammingError(f"window function {name} requires an OVER clause",
                                          sqlstate="42809")
        if n.distinct or n.star or n.filter is not None or n.order:
            raise errors.ProgrammingError(f"DISTINCT, ORDER BY or FILTER specified, but {name} "
                                          "is not an aggregate function", sqlstate="42809")
        if name == "generate_series":
            if not self._srf_ok:
                raise errors.NotSupportedError(
                    "generate_series() is supported in FROM and at the top of the select "
                    "list only")
            return self._generate_series(n, scope)
        args = [self.expr(a, scope, None, agg_ok) for a in n.args]
        from minidb.sql.functions import bind_function
        out = bind_function(self, name, args)
        if out is not None:
            return out
        if name not in ("abs", "lower", "upper", "length", "coalesce", "nullif", "btrim",
                        "now"):
            raise _no_function(name, args)
        if name == "now":
            if args:
                raise errors.UndefinedFunction("function now() takes no arguments")
            return Func("now", (), TIMESTAMPTZ)
        if name == "coalesce":
            if not args:
                raise errors.UndefinedFunction("coalesce needs arguments")
            t = self._common([a.type for a in args], "COALESCE")
            args = [self.to_common(a, t) for a in args]
            if family(t) == "text":
                args = [_strip_char(a) for a in args]
            return Func("coalesce", tuple(args), t)
        if name == "nullif":
            if len(args) != 2:
                raise errors.UndefinedFunction("function nullif takes two arguments")
            cmp = self._compare("=", args[0], args[1])
            return Func("nullif", (cmp.left, cmp.right), cmp.left.type)
        if len(args) != 1:
            raise errors.UndefinedFunction(f"function {name} takes one argument")
        a = args[0]
        if a.type is UNKNOWN:
            a = self._coerce_unknown(a, TEXT if name != "abs" else DOUBLE)
        f = family(a.type)
        if name == "abs":
            if f not in ("int", "float", "num"):
                raise errors.UndefinedFunction(f"function abs({a.type}) does not exist")
            return Func("abs", (a,), a.type if f != "num" else NUMERIC)
        if f != "text":
            raise errors.UndefinedFunction(f"function {name}({a.type}) does not exist")
        a = _strip_char(a) if name != "length" else a
        if name == "btrim" and len(args) != 1:
            raise _no_function(name, args)
        if name == "length":
            if a.type.name == "char":
                a = Func("rtrim_char", (a,), TEXT)
            return Func("length", (a,), INTEGER)
        return Func(name, (a,), TEXT)

    def _agg(self, n: ast.FuncE, name, scope, agg_ok):
        if not agg_ok:
            raise errors.GroupingError(f"aggregate functions are not allowed here ({name})")
        filt = None
        if n.filter is not None:
            filt = self.boolean(n.filter, scope, "FILTER")
        order = [(self.expr(o.expr, scope, None, agg_ok=False), o.desc,
                  o.nulls_first if o.nulls_first is not None else o.desc) for o in n.order]
        okw = dict(filter=filt, order=tuple(e for e, _, _ in order),
                   order_desc=tuple(d for _, d, _ in order),
                   order_nf=tuple(nf for _, _, nf in order))
        if n.star:
            return AggCall("count", None, False, BIGINT, **okw)
        args = [self.expr(a, scope, None, agg_ok=False) for a in n.args]
        want = 2 if name == "string_agg" else 1
        if len(args) != want:
            raise _no_function(name, args)
        a = args[0]
        if a.type is UNKNOWN:
            a = self._coerce_unknown(a, TEXT)
        f = family(a.type)
        extra = ()
        if name == "count":
            rt = BIGINT
        elif name in ("sum", "avg"):
            if f not in ("int", "float", "num", "interval"):
                raise _no_function(name, [a])
            if f in ("num", "interval"):
                rt = NUMERIC if f == "num" else INTERVAL
            elif name == "sum" and a.type.name == "real":
                rt = a.type                      # sum(real) is real
            else:
                rt = DOUBLE if (name == "avg" or f == "float") else BIGINT
        elif name in ("min", "max"):
            if f in ("bool", "array", "uuid", "bytea"):
                raise _no_function(name, [a])
            rt = TEXT if f == "text" else a.type
            a = _strip_char(a) if f == "text" else a
        elif name == "string_agg":
            sep = args[1]
            if sep.type is UNKNOWN:
                sep = self._coerce_unknown(sep, TEXT)
            if f != "text" or family(sep.type) != "text":
                raise _no_function(name, [a, sep])
            a = _strip_char(a)
            extra = (_strip_char(sep),)
            rt = TEXT
        elif name == "array_agg":
            if f == "array":
                raise errors.NotSupportedError("array_agg of arrays is not supported")
            rt = ArrayType(TEXT if f == "text" else a.type)
            a = _strip_char(a) if f == "text" else a
        elif name in ("bool_and", "bool_or"):
            if f != "bool":
                raise _no_function(name, [a])
            rt = BOOLEAN
        else:                                    # stddev, variance and their forms
            if f not in ("int", "float", "num"):
                raise _no_function(name, [a])
            rt = DOUBLE
        return AggCall(name, a, n.distinct, rt, extra, **okw)

    def _case(self, n: ast.CaseE, x):
        operand = x(n.operand) if n.operand is not None else None
        whens = []
        for w, t in n.whens:
            if operand is not None:
                cond = self._compare("=", operand, x(w, _ctx_of(operand)))
            else:
                cond = self._bool_arg(x(w, BOOLEAN), "CASE/WHEN")
            whens.append([cond, x(t)])
        default = x(n.default) if n.default is not None else None
        results = [r for _, r in whens] + ([default] if default is not None else [])
        rt = self._common([r.type for r in results], "CASE")
        whens = [(c, self.to_common(r, rt)) for c, r in whens]
        if default is not None:
            default = self.to_common(default, rt)
        return Case(tuple(whens), default, rt)

    def to_common(self, e, t):
        """``e`` (one of several values that meet in type ``t``: CASE results, COALESCE
        arguments) converted to ``t`` where its vector form differs."""
        if e.type is UNKNOWN:
            return self._coerce_unknown(e, t)
        fe, ft = family(e.type), family(t)
        if fe == ft and (ft in ("int", "float", "text", "bool", "array")
                         or e.type.name == t.name):
            return e
        return self._implicit_cast(e, t)

    def assignable(self, e, t, column: str):
        """``e`` as a value for a column of type ``t`` (assignment cast rules)."""
        if e.type is UNKNOWN:
            if isinstance(e, Const):
                return Const(dtm.cast_value(e.value, UNKNOWN, t, explicit=False, column=column), t)
            return e
        fs, fd = family(e.type), family(t)
        if fs == fd and fd not in ("text", "num", "float", "int"):
            return e
        if fs == fd and fd in ("int", "float", "num") and dtm.implicitly_castable(e.type, t) \
                and (fd != "num" or t.length is None):
            return e
        if fs == fd == "text":
            return e
        if dtm.assignment_castable(e.type, t):
            if isinstance(e, Const):
                return Const(dtm.cast_value(e.value, e.type, t, explicit=False, column=column), t)
            return Cast(e, t if fd != "text" else TEXT)
        raise errors.DatatypeMismatch(
            f'column "{column}" is of type {t} but expression is of type {e.type}')


def _no_function(name, args):
    sig = ", ".join(str(a.type) for a in args)
    return errors.UndefinedFunction(
        f"function {name}({sig}) does not exist")


def _ctx_of_type(t):
    return None if t is UNKNOWN else t


def _replace(e, mapping: dict):
    """``e`` with every subtree found in ``mapping`` replaced."""
    if e in mapping:
        return mapping[e]
    return _map_children(e, lambda c: _replace(c, mapping))


def _renamed(cols, aliases, alias):
    if not aliases:
        return cols
    if len(aliases) > len(cols):
        raise errors.ProgrammingError(f'table "{alias}" has {len(cols)} columns available '
                                      f"but {len(aliases)} columns specified", sqlstate="42P10")
    return [(aliases[i] if i < len(aliases) else n, t) for i, (n, t) in enumerate(cols)]


def _names_table(q, name) -> bool:
    """Does query ``q`` name table ``name`` in a FROM list (recursive CTE detection)?"""
    if isinstance(q, ast.SetOpStmt):
        return _names_table(q.left, name) or _names_table(q.right, name)

    def item(i):
        if isinstance(i, ast.TableRef):
            return i.name == name
        if isinstance(i, ast.JoinRef):
            return item(i.left) or item(i.right)
        if isinstance(i, ast.SubqueryRef):
            return _names_table(i.query, name)
        return False
    return any(item(i) for i in q.from_)


def _interval(text: str) -> tuple:
    """An interval literal as (months, microseconds) (generate_series's step)."""
    import re as _re
    units = {"microsecond": (0, 1), "millisecond": (0, 1000), "second": (0, 10 ** 6),
             "minute": (0, 60 * 10 ** 6), "hour": (0, 3600 * 10 ** 6),
             "day": (0, 86400 * 10 ** 6), "week": (0, 7 * 86400 * 10 ** 6),
             "month": (1, 0), "year": (12, 0), "mon": (1, 0), "min": (0, 60 * 10 ** 6),
             "sec": (0, 10 ** 6), "ms": (0, 1000), "us": (0, 1), "h": (0, 3600 * 10 ** 6),
             "d": (0, 86400 * 10 ** 6)}
    months = micros = 0
    s = text.strip().lower()
    pos = 0
    found = False
    for m in _re.finditer(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)", s):
        if s[pos:m.start()].strip():
            break
        u = m.group(2)
        u = u[:-1] if u.endswith("s") and u[:-1] in units else u
        if u not in units:
            raise errors.InvalidTextRepresentation(
                f'invalid input syntax for type interval: "{text}"')
        mo, us = units[u]
        v = float(m.group(1))
        months += int(v * mo)
        micros += int(round(v * us))
        pos = m.end()
        found = True
    if not found or s[pos:].strip():
        hms = _re.fullmatch(r"(\d+):(\d+)(?::(\d+(?:\.\d+)?))?", s)
        if hms:
            micros = (int(hms.group(1)) * 3600 + int(hms.group(2)) * 60) * 10 ** 6 + \
                int(round(float(hms.group(3) or 0) * 10 ** 6))
            return (0, micros)
        raise errors.InvalidTextRepresentation(f'invalid input syntax for type interval: '
                                               f'"{text}"')
    return (months, micros)


class _GroupRewriter:
    """Rewrites expressions above the aggregation to read its output (see the docstring)."""

    def __init__(self, group, aggs, sets=None):
        self.group = group
        self.aggs = aggs
        self.sets = sets

    def rewrite(self, e):
        from minidb.exec.expr import deparse
        for i, g in enumerate(self.group):
            if e == g:
                return ColRef(("g", i), g.type, deparse(g), "")
        if isinstance(e, GroupingFunc):
            return self._grouping(e)
        if isinstance(e, AggCall):
            j = self.aggs.index(e)
            return ColRef(("a", j), e.type, deparse(e), "")
        if isinstance(e, ColRef):
            if isinstance(e.key[0], int):
                name = f"{e.rel}.{e.name}" if e.rel else e.name
                raise errors.GroupingError(f'column "{name}" must appear in the GROUP BY clause '
                                           "or be used in an aggregate function")
            return e
        if isinstance(e, OuterRef):
            return e
        return _map_children(e, self.rewrite)


    def _grouping(self, e):
        """grouping(a, b, ...): bit (n-1-k) set when argument k is not grouped in the row's
        grouping set - a constant 0 for a plain GROUP BY, else a CASE over the grouping set
        number the aggregation emits as ``("gset", 0)``."""
        idx = []
        for a in e.args:
            if a not in self.group:
                raise errors.GroupingError("arguments to GROUPING must be grouping "
                                           "expressions of the associated query level")
            idx.append(self.group.index(a))
        if self.sets is None:
            return Const(0, INTEGER)
        n = len(idx)
        values = [sum(1 << (n - 1 - k) for k, i in enumerate(idx) if i not in st)
                  for st in self.sets]
        if len(set(values)) == 1:
            return Const(values[0], INTEGER)
        gset = ColRef(("gset", 0), INTEGER, "grouping set", "")
        whens = tuple((Compare("=", gset, Const(k, INTEGER)), Const(v, INTEGER))
                      for k, v in enumerate(values))
        return Case(whens, Const(0, INTEGER), INTEGER)


def _map_children(e, f):
    import dataclasses
    from minidb.exec import expr as X
    if isinstance(e, (X.ColRef, X.Const, X.Param, X.OuterRef)):
        return e
    changes = {}
    for fld in dataclasses.fields(e):
        v = getattr(e, fld.name)
        if isinstance(v, X.Expr):
            changes[fld.name] = f(v)
        elif isinstance(v, tuple) and v and isinstance(v[0], X.Expr):
            changes[fld.name] = tuple(f(i) for i in v)
        elif isinstance(v, tuple) and v and isinstance(v[0], tuple) and \
                all(isinstance(i, X.Expr) for pair in v for i in pair):
            changes[fld.name] = tuple(tuple(f(i) for i in pair) for pair in v)
    return dataclasses.replace(e, **changes) if changes else e


def _conjuncts(e):
    if isinstance(e, BoolOp) and e.op == "and":
        out = []
        for a in e.args:
            out += _conjuncts(a)
        return out
    return [e]


def _needs_context(n) -> bool:
    return isinstance(n, ast.Placeholder) or (isinstance(n, ast.Lit) and n.kind in ("str", "null"))


def _ctx_of(e):
    return None if e.type is UNKNOWN else e.type


def _literal(n: ast.Lit):
    if n.kind == "int":
        v = n.value
        if dtm.INT4_MIN <= v <= dtm.INT4_MAX:
            return Const(v, INTEGER)
        if dtm.INT8_MIN <= v <= dtm.INT8_MAX:
            return Const(v, BIGINT)
        return Const(decimal.Decimal(v), NUMERIC)     # PostgreSQL: numeric
    if n.kind == "float":
        # a decimal literal (1.5, 1e3) is numeric, exact, as in PostgreSQL
        v = n.value if isinstance(n.value, decimal.Decimal) else decimal.Decimal(repr(n.value))
        return Const(no_exponent(v), NUMERIC)
    if n.kind == "bool":
        return Const(bool(n.value), BOOLEAN)
    if n.kind == "str":
        return Const(n.value, UNKNOWN)
    return Const(None, UNKNOWN)


def _strip_char(e):
    """char(n) compares without trailing blanks (bpchar semantics)."""
    if e.type.name == "char":
        return Func("rtrim_char", (e,), TEXT)
    return e


def _to_text(e):
    if isinstance(e, Const):
        return Const(None if e.value is None else dtm.format_value(e.value, e.type), TEXT)
    return Cast(e, TEXT)


def _check_castable(src, dst) -> None:
    if family(src) == "array" or not dtm.explicitly_castable(src, dst):
        raise errors.DatatypeMismatch(f"cannot cast type {src} to {dst}")


# Python type of a DB-API parameter -> the SQL type it has when the context gives none
_PARAM_TYPES = {int: BIGINT, float: DOUBLE, str: TEXT, bool: BOOLEAN,
                _dt.datetime: TIMESTAMP, _dt.date: DATE, _dt.time: TIME,
                _dt.timedelta: INTERVAL, decimal.Decimal: NUMERIC, bytes: BYTEA,
                bytearray: BYTEA, memoryview: BYTEA, _uuid.UUID: UUID}
# (family of the parameter's own type, family the context wants) taken as the context's
_PARAM_WIDENS = {("int", "float"), ("int", "num"), ("num", "float"), ("float", "num"),
                 ("date", "ts"), ("date", "tstz"), ("ts", "tstz")}


def _int_against_numeric(op, a, b):
    """``int_col op 1.5``: compared as integers (x < 1.5 is x <= 1, x = 1.5 is false), so
    that an integer column is not converted to numeric row by row.  None when the
    operands are not an integer expression and a finite numeric constant."""
    if family(a.type) == "int" and family(b.type) == "num" and isinstance(b, Const):
        col, c, flip = a, b.value, False
    elif family(b.type) == "int" and family(a.type) == "num" and isinstance(a, Const):
        col, c, flip = b, a.value, True
    else:
        return None
    if c is None or not c.is_finite():
        return None
    if flip:
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    fl = int(c.to_integral_value(rounding=decimal.ROUND_FLOOR))
    integral = fl == c
    if not integral:
        if op in ("=", "<>"):       # never equal: FALSE (TRUE for <>), NULL for a NULL
            return Compare("<>" if op == "=" else "=", col, col)
        op = {"<": "<=", ">=": ">"}.get(op, op)
    lo, hi = dtm.INT8_MIN, dtm.INT8_MAX
    if fl < lo or fl > hi:
        return None
    return Compare(op, col, Const(fl, BIGINT))


def _default_name(node) -> str:
    if isinstance(node, ast.Name):
        return node.parts[-1]
    if isinstance(node, ast.FuncE):
        return node.name
    if isinstance(node, ast.CastE):
        inner = _default_name(node.arg)
        if inner != "?column?":
            return inner
        base = node.type_name.split("(")[0].strip()
        return "numeric" if base == "decimal" else base   # sqlglot spells numeric DECIMAL
    if isinstance(node, ast.CaseE):
        return "case"
    return "?column?"


_CATALOG_CASTS = {"oid", "regclass", "regtype", "regnamespace"}


def _virtual_relation(name: str):
    """The virtual catalog relation (``minidb.catalog.pgcatalog``) a FROM name means, if any:
    pg_catalog's relations come first, as PostgreSQL's implicit pg_catalog in the search
    path."""
    from minidb.catalog.pgcatalog import VIRTUAL
    return VIRTUAL.get(name)


def _virtual_type(spelling: str):
    """A virtual relation's column type: a minidb type, or ``elem[]`` an array of one."""
    if spelling.endswith("[]"):
        return ArrayType(parse_type(spelling[:-2]))
    return parse_type(spelling)


def _virtual_entry(index: int, vrel, alias: str, col_aliases) -> RangeEntry:
    cols = _renamed([(n, _virtual_type(t)) for n, t in vrel.columns], col_aliases, alias)
    return RangeEntry(index, alias, None, cols, [False] * len(cols), "virtual", vrel)
