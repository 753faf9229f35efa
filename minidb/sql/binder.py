"""The binder: names to columns, types to every expression (PostgreSQL's parse analysis).

Input: a statement of ``minidb.sql.ast``; output: a *bound* statement whose expressions
are ``minidb.exec.expr`` nodes with result types, ready for the planner.  What it decides:

* **Names.**  The FROM list becomes a *range table* (``RangeEntry`` per table, numbered in
  order).  ``a`` is looked up in every entry (two hits: AmbiguousColumn), ``t.a`` in the
  entry named ``t`` (its alias, else its table name).  A base column becomes
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
  slot); a base column left over is a GroupingError (42803).
* **ORDER BY / GROUP BY** accept an output position (``ORDER BY 2``) and an output column
  name, as PostgreSQL does.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

import minidb.errors as errors
from minidb.exec import datatypes as dtm
from minidb.exec.datatypes import (BIGINT, BOOLEAN, DOUBLE, INTEGER, TEXT, TIMESTAMP, UNKNOWN,
                                   family)
from minidb.exec.expr import (AggCall, Arith, BoolOp, Case, Cast, ColRef, Compare, Concat,
                              Const, Func, InList, IsNull, Like, Neg, Not, Param, walk)
from minidb.exec.modify import DEFAULT
from minidb.sql import ast
from minidb.types import parse_type

__all__ = ["Binder", "RangeEntry", "BoundSelect", "BoundInsert", "BoundUpdate",
           "BoundDelete", "DEFAULT"]

_AGG_NAMES = {"count", "sum", "avg", "min", "max"}
_SCALAR_FUNCS = {"abs", "lower", "upper", "length", "coalesce", "nullif", "btrim", "now"}




@dataclass
class RangeEntry:
    index: int
    alias: str
    table: object            # catalog.TableDef
    columns: list            # [(name, SqlType)]
    not_null: list           # [bool]

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
    aggs: list = field(default_factory=list)         # AggCalls over the input
    having: object = None             # over the agg output
    grouped: bool = False
    order_by: list = field(default_factory=list)     # [(Expr, desc, nulls_first)]
    distinct: bool = False
    order_refs: list = field(default_factory=list)   # DISTINCT: output positions of keys
    limit: object = None
    offset: object = None
    for_update: bool = False
    param_types: dict = field(default_factory=dict)


@dataclass
class BoundInsert:
    entry: RangeEntry
    attnos: list                      # target columns, in the order values come
    rows: list | None                 # [[Expr | DEFAULT]]
    select: BoundSelect | None
    defaults: dict                    # attno -> Expr (columns with a DEFAULT)
    param_types: dict = field(default_factory=dict)


@dataclass
class BoundUpdate:
    entry: RangeEntry
    assignments: list                 # [(attno, Expr)]
    quals: list
    param_types: dict = field(default_factory=dict)


@dataclass
class BoundDelete:
    entry: RangeEntry
    quals: list
    param_types: dict = field(default_factory=dict)


def _dup_alias(name):
    return errors.ProgrammingError(f'table name "{name}" specified more than once',
                                   sqlstate="42712")


class Binder:
    """Binds one statement.  ``param_sig``: the Python types of the parameter values."""

    def __init__(self, catalog, param_sig=(), default_parser=None):
        self.catalog = catalog
        self.param_sig = tuple(param_sig)
        self.param_types: dict[int, object] = {}
        self.default_parser = default_parser

    # -- statements ------------------------------------------------------------------------------
    def bind(self, stmt):
        if isinstance(stmt, ast.SelectStmt):
            return self.select(stmt)
        if isinstance(stmt, ast.InsertStmt):
            return self.insert(stmt)
        if isinstance(stmt, ast.UpdateStmt):
            return self.update(stmt)
        if isinstance(stmt, ast.DeleteStmt):
            return self.delete(stmt)
        raise errors.InternalError(f"cannot bind {type(stmt).__name__}")

    def _entry(self, index: int, name: str, alias: str | None) -> RangeEntry:
        t = self.catalog.table(name)
        cols = [(c.name, parse_type(c.type)) for c in t.columns]
        return RangeEntry(index, alias or name, t, cols, [c.not_null for c in t.columns])

    def select(self, s: ast.SelectStmt) -> BoundSelect:
        # binding order matters: a parameter's type is fixed by its first context
        rtable, quals = self._from_list(s.from_)
        scope = rtable
        if s.where is not None:
            quals.extend(_conjuncts(self.boolean(s.where, scope, "WHERE")))
        targets = self._targets(s.targets, scope)
        b = BoundSelect(rtable=rtable, quals=quals, targets=targets, for_update=s.for_update)
        # GROUP BY (positions and output names allowed)
        group = [self._group_item(g, scope, targets) for g in s.group_by]
        # ORDER BY
        order = []
        for o in s.order_by:
            ex = self._order_item(o.expr, scope, targets)
            nf = o.nulls_first if o.nulls_first is not None else o.desc
            order.append((ex, o.desc, nf))
        having = self.boolean(s.having, scope, "HAVING", agg_ok=True) \
            if s.having is not None else None
        b.order_by = self._aggregation(b, group, order, having)
        if s.distinct:
            self._distinct(b)
        if s.for_update and len(rtable) != 1:
            raise errors.NotSupportedError("FOR UPDATE is supported on a single table only")
        if s.limit is not None:
            b.limit = self._limit(s.limit, "LIMIT")
        if s.offset is not None:
            b.offset = self._limit(s.offset, "OFFSET")
        b.param_types = dict(self.param_types)
        return b

    def _from_list(self, items) -> tuple[list, list]:
        """The range table of a FROM list (joins flattened, left to right) and the
        conjuncts of its JOIN ... ON conditions, each bound in the scope of the tables
        to its left."""
        rtable: list[RangeEntry] = []
        quals: list = []

        def add_item(item):
            if isinstance(item, ast.TableRef):
                alias = item.alias or item.name
                if any(e.alias == alias for e in rtable):
                    raise _dup_alias(alias)
                rtable.append(self._entry(len(rtable), item.name, item.alias))
                return
            add_item(item.left)
            add_item(item.right)
            if item.on is not None:
                quals.extend(_conjuncts(self.boolean(item.on, list(rtable), "JOIN/ON")))

        for item in items:
            add_item(item)
        return rtable, quals

    def _targets(self, items, scope) -> list:
        """The select list as [(output name, Expr)], ``*`` and ``t.*`` expanded."""
        targets = []
        for node, alias in items:
            if isinstance(node, ast.StarE):
                ents = scope if node.table is None else [self._find_entry(scope, node.table)]
                if not ents:
                    raise errors.ProgrammingError("SELECT * with no tables specified is not valid",
                                                  sqlstate="42601")
                for e in ents:
                    for i in range(len(e.columns)):
                        targets.append((e.columns[i][0], e.colref(i)))
                continue
            ex = self.expr(node, scope, agg_ok=True)
            targets.append((alias or _default_name(node), ex))
        return targets

    def _aggregation(self, b: BoundSelect, group, order, having) -> list:
        """Collects the aggregate calls of the select list, ORDER BY and HAVING; with
        GROUP BY, aggregates or HAVING, marks ``b`` grouped and rewrites what is above the
        aggregation to read its output.  Returns the (rewritten) ORDER BY."""
        aggs = []
        for ex in [t for _, t in b.targets] + [e for e, _, _ in order] + \
                ([having] if having is not None else []):
            for n in walk(ex):
                if isinstance(n, AggCall) and n not in aggs:
                    aggs.append(n)
        if group or aggs or having is not None:
            b.grouped = True
            b.group_by = group
            b.aggs = aggs
            rw = _GroupRewriter(group, aggs)
            b.targets = [(n, rw.rewrite(e)) for n, e in b.targets]
            order = [(rw.rewrite(e), d, nf) for e, d, nf in order]
            b.having = rw.rewrite(having) if having is not None else None
            if b.for_update:
                raise errors.NotSupportedError(
                    "FOR UPDATE is not allowed with GROUP BY clause or aggregate functions")
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
            raise errors.NotSupportedError("FOR UPDATE is not allowed with DISTINCT clause")

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
            sel = Binder(self.catalog, self.param_sig, self.default_parser)
            sel.param_types = self.param_types
            bs = sel.select(s.select)
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
        return BoundInsert(entry, attnos, rows, sel, defaults, dict(self.param_types))

    def update(self, s: ast.UpdateStmt) -> BoundUpdate:
        entry = self._entry(0, s.table, s.alias)
        scope = [entry]
        defaults = None
        assigns = []
        seen = set()
        for col, node in s.assignments:
            a = entry.attno(col)
            if a < 0:
                raise errors.UndefinedColumn(
                    f'column "{col}" of relation "{s.table}" does not exist')
            if a in seen:
                raise errors.ProgrammingError(f'multiple assignments to same column "{col}"',
                                              sqlstate="42601")
            seen.add(a)
            name, t = entry.columns[a]
            if isinstance(node, ast.DefaultE):
                if defaults is None:
                    defaults = self.defaults(entry)
                e = defaults.get(a, Const(None, t))
            else:
                e = self.expr(node, scope, ctx=t)
            assigns.append((a, self.assignable(e, t, name)))
        quals = _conjuncts(self.boolean(s.where, scope, "WHERE")) if s.where is not None else []
        return BoundUpdate(entry, assigns, quals, dict(self.param_types))

    def delete(self, s: ast.DeleteStmt) -> BoundDelete:
        entry = self._entry(0, s.table, s.alias)
        quals = _conjuncts(self.boolean(s.where, [entry], "WHERE")) if s.where is not None else []
        return BoundDelete(entry, quals, dict(self.param_types))

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
        e = self.expr(node, scope, ctx=BOOLEAN, agg_ok=agg_ok)
        if e.type is UNKNOWN:
            e = self._coerce_unknown(e, BOOLEAN)
        if e.type.name != "boolean":
            raise errors.DatatypeMismatch(f"argument of {what} must be type boolean, not type "
                                          f"{e.type}")
        if not agg_ok and any(isinstance(n, AggCall) for n in walk(e)):
            raise errors.GroupingError(f"aggregate functions are not allowed in {what}")
        return e

    def _find_entry(self, scope, name: str) -> RangeEntry:
        for e in scope:
            if e.alias == name:
                return e
        raise errors.UndefinedTable(f'missing FROM-clause entry for table "{name}"')

    def expr(self, n, scope, ctx=None, agg_ok=False):
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
            if a.type is UNKNOWN:
                a = self._coerce_unknown(a, DOUBLE if "." in str(getattr(a, "value", "")) else INTEGER)
            if family(a.type) not in ("int", "float"):
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
            return Like(a, p, n.negated, n.case_insensitive)
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

    def _column(self, n: ast.Name, scope) -> ColRef:
        if len(n.parts) == 2:
            e = self._find_entry(scope, n.parts[0])
            a = e.attno(n.parts[1])
            if a < 0:
                raise errors.UndefinedColumn(f"column {n.parts[0]}.{n.parts[1]} does not exist")
            return e.colref(a)
        if len(n.parts) != 1:
            raise errors.NotSupportedError(f"name {n} is not supported")
        name = n.parts[0]
        hits = [(e, e.attno(name)) for e in scope if e.attno(name) >= 0]
        if not hits:
            raise errors.UndefinedColumn(f'column "{name}" does not exist')
        if len(hits) > 1:
            raise errors.AmbiguousColumn(f'column reference "{name}" is ambiguous')
        e, a = hits[0]
        return e.colref(a)

    def _param_type(self, index: int, ctx):
        if index in self.param_types:
            return self.param_types[index]
        py = self.param_sig[index] if index < len(self.param_sig) else type(None)
        natural = {int: BIGINT, float: DOUBLE, str: TEXT, bool: BOOLEAN,
                   _dt.datetime: TIMESTAMP, _dt.date: TIMESTAMP}.get(py)
        if ctx is not None and ctx is not UNKNOWN:
            f = family(ctx)
            ok = (py in (type(None), str) or natural is None
                  or family(natural) == f or (family(natural) == "int" and f == "float"))
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
        rt = dtm.arith_result(op, a.type, b.type)
        return Arith(op, a, b, rt)

    def _compare(self, op, a, b):
        if a.type is UNKNOWN and b.type is UNKNOWN:
            a, b = self._coerce_unknown(a, TEXT), self._coerce_unknown(b, TEXT)
        elif a.type is UNKNOWN:
            a = self._coerce_unknown(a, b.type)
        elif b.type is UNKNOWN:
            b = self._coerce_unknown(b, a.type)
        fa, fb = family(a.type), family(b.type)
        numeric = ("int", "float")
        if not (fa == fb or (fa in numeric and fb in numeric)):
            raise errors.DatatypeMismatch(f"operator does not exist: {a.type} {op} {b.type}")
        if fa == "text":
            a, b = _strip_char(a), _strip_char(b)
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
        if fams <= {"int", "float"}:
            t = known[0]
            for u in known[1:]:
                t = dtm.common_numeric(t, u)
            return t
        if len(fams) > 1:
            a, b = known[0], next(t for t in known if family(t) != family(known[0]))
            raise errors.DatatypeMismatch(f"{what} types {a} and {b} cannot be matched")
        f = fams.pop()
        if f == "text":
            return TEXT
        return known[0]

    def _func(self, n: ast.FuncE, scope, ctx, agg_ok):
        name = n.name
        if name in _AGG_NAMES:
            if not agg_ok:
                raise errors.GroupingError(f"aggregate functions are not allowed here ({name})")
            if n.star:
                return AggCall("count", None, False, BIGINT)
            if len(n.args) != 1:
                raise errors.UndefinedFunction(f"function {name} takes one argument")
            a = self.expr(n.args[0], scope, None, agg_ok=False)
            if a.type is UNKNOWN:
                a = self._coerce_unknown(a, TEXT)
            f = family(a.type)
            if name == "count":
                rt = BIGINT
            elif name in ("sum", "avg"):
                if f not in ("int", "float"):
                    raise errors.UndefinedFunction(f"function {name}({a.type}) does not exist")
                rt = DOUBLE if (name == "avg" or f == "float") else BIGINT
            else:
                if f == "bool":
                    raise errors.UndefinedFunction(f"function {name}(boolean) does not exist")
                rt = TEXT if f == "text" else a.type
                a = _strip_char(a) if f == "text" else a
            return AggCall(name, a, n.distinct, rt)
        if n.distinct or n.star:
            raise errors.ProgrammingError(f"DISTINCT specified, but {name} is not an aggregate "
                                          "function", sqlstate="42809")
        if name not in _SCALAR_FUNCS:
            raise errors.UndefinedFunction(f"function {name}() does not exist")
        args = [self.expr(a, scope, None, agg_ok) for a in n.args]
        if name == "now":
            if args:
                raise errors.UndefinedFunction("function now() takes no arguments")
            return Func("now", (), TIMESTAMP)
        if name == "coalesce":
            if not args:
                raise errors.UndefinedFunction("coalesce needs arguments")
            t = self._common([a.type for a in args], "COALESCE")
            args = [self._coerce_unknown(a, t) if a.type is UNKNOWN else a for a in args]
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
            if f not in ("int", "float"):
                raise errors.UndefinedFunction(f"function abs({a.type}) does not exist")
            return Func("abs", (a,), a.type)
        if f != "text":
            raise errors.UndefinedFunction(f"function {name}({a.type}) does not exist")
        a = _strip_char(a) if name != "length" else a
        if name == "length":
            if a.type.name == "char":
                a = Func("rtrim_char", (a,), TEXT)
            return Func("length", (a,), INTEGER)
        return Func(name, (a,), TEXT)

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
        whens = [(c, self._coerce_unknown(r, rt) if r.type is UNKNOWN else r) for c, r in whens]
        if default is not None and default.type is UNKNOWN:
            default = self._coerce_unknown(default, rt)
        return Case(tuple(whens), default, rt)

    def assignable(self, e, t, column: str):
        """``e`` as a value for a column of type ``t`` (assignment cast rules)."""
        if e.type is UNKNOWN:
            if isinstance(e, Const):
                return Const(dtm.cast_value(e.value, UNKNOWN, t, explicit=False, column=column), t)
            return e
        fs, fd = family(e.type), family(t)
        if fs == fd:
            if fd == "int" and e.type.name == "bigint" and t.name == "integer":
                return Cast(e, t)
            return e
        if (fs, fd) in (("int", "float"), ("float", "int")) or fd == "text":
            if isinstance(e, Const):
                return Const(dtm.cast_value(e.value, e.type, t, explicit=False, column=column), t)
            return Cast(e, t if fd != "text" else TEXT)
        raise errors.DatatypeMismatch(
            f'column "{column}" is of type {t} but expression is of type {e.type}')


class _GroupRewriter:
    """Rewrites expressions above the aggregation to read its output (see the docstring)."""

    def __init__(self, group, aggs):
        self.group = group
        self.aggs = aggs

    def rewrite(self, e):
        from minidb.exec.expr import deparse
        for i, g in enumerate(self.group):
            if e == g:
                return ColRef(("g", i), g.type, deparse(g), "")
        if isinstance(e, AggCall):
            j = self.aggs.index(e)
            return ColRef(("a", j), e.type, deparse(e), "")
        if isinstance(e, ColRef):
            if isinstance(e.key[0], int):
                name = f"{e.rel}.{e.name}" if e.rel else e.name
                raise errors.GroupingError(f'column "{name}" must appear in the GROUP BY clause '
                                           "or be used in an aggregate function")
            return e
        return _map_children(e, self.rewrite)


def _map_children(e, f):
    import dataclasses
    from minidb.exec import expr as X
    if isinstance(e, (X.ColRef, X.Const, X.Param)):
        return e
    changes = {}
    for fld in dataclasses.fields(e):
        v = getattr(e, fld.name)
        if isinstance(v, X.Expr):
            changes[fld.name] = f(v)
        elif isinstance(v, tuple) and v and isinstance(v[0], X.Expr):
            changes[fld.name] = tuple(f(i) for i in v)
        elif isinstance(v, tuple) and v and isinstance(v[0], tuple):
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
        return Const(float(v), DOUBLE)        # PostgreSQL: numeric
    if n.kind == "float":
        return Const(float(n.value), DOUBLE)
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
    fs, fd = family(src), family(dst)
    if fs == fd or fd == "text" or fs == "text" or {fs, fd} == {"int", "float"} \
            or {fs, fd} == {"int", "bool"} or fs == "unknown":
        return
    raise errors.DatatypeMismatch(f"cannot cast type {src} to {dst}")


def _default_name(node) -> str:
    if isinstance(node, ast.Name):
        return node.parts[-1]
    if isinstance(node, ast.FuncE):
        return node.name
    if isinstance(node, ast.CastE):
        inner = _default_name(node.arg)
        return inner if inner != "?column?" else node.type_name.split("(")[0].strip()
    if isinstance(node, ast.CaseE):
        return "case"
    return "?column?"
