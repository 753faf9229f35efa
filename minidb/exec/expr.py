"""Bound expressions: the typed expression trees the binder produces and the planner and
executor read (their compilation to numpy is ``compile.py``).

The binder (``minidb.sql.binder``) turns parsed expressions into the frozen dataclasses
below: every node knows its result type, every column is a ``ColRef`` whose ``key`` names
the column in the input of the operator that evaluates it.  Nodes are hashable and compare
structurally, so the planner can find "the same expression" (GROUP BY items, aggregates).
``deparse`` prints an expression as PostgreSQL's EXPLAIN does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minidb.exec import datatypes as dt
from minidb.exec.datatypes import BOOLEAN, TEXT, family

__all__ = ["Expr", "ColRef", "Const", "Param", "Arith", "Neg", "Concat", "Compare",
           "BoolOp", "Not", "IsNull", "InList", "Like", "Cast", "Func", "Case", "AggCall",
           "DistinctFrom", "Regex", "OuterRef", "SubPlan", "SubLink", "WinCall", "WinFrame", "GroupingFunc",
           "DEFAULT_FRAME", "SRFCall",
           "walk", "children", "column_keys", "deparse", "conjuncts", "and_all", "has_sublink"]


# ---------------------------------------------------------------------------------------------
# nodes
class Expr:
    __slots__ = ()
    type: Any


@dataclass(frozen=True)
class ColRef(Expr):
    key: Any            # (range index, attno) for a base column; ("agg", k) after grouping
    type: Any
    name: str           # column name for EXPLAIN
    rel: str = ""       # table alias, for qualified names in EXPLAIN


@dataclass(frozen=True)
class Const(Expr):
    value: Any          # Python value (datetime for timestamps), None = NULL
    type: Any


@dataclass(frozen=True)
class Param(Expr):
    index: int          # 0-based position of the '?'
    type: Any


@dataclass(frozen=True)
class Arith(Expr):
    op: str             # + - * / %
    left: Expr
    right: Expr
    type: Any


@dataclass(frozen=True)
class Neg(Expr):
    arg: Expr
    type: Any


@dataclass(frozen=True)
class Concat(Expr):
    left: Expr
    right: Expr
    type: Any = TEXT


@dataclass(frozen=True)
class Compare(Expr):
    op: str             # = <> < <= > >=
    left: Expr
    right: Expr
    type: Any = BOOLEAN


@dataclass(frozen=True)
class BoolOp(Expr):
    op: str             # and / or
    args: tuple
    type: Any = BOOLEAN


@dataclass(frozen=True)
class Not(Expr):
    arg: Expr
    type: Any = BOOLEAN


@dataclass(frozen=True)
class IsNull(Expr):
    arg: Expr
    negated: bool = False
    type: Any = BOOLEAN


@dataclass(frozen=True)
class InList(Expr):
    arg: Expr
    items: tuple
    negated: bool = False
    type: Any = BOOLEAN


@dataclass(frozen=True)
class Like(Expr):
    arg: Expr
    pattern: Expr
    negated: bool = False
    case_insensitive: bool = False
    type: Any = BOOLEAN
    escape: Any = "\\"       # the escape character ("" for none)


@dataclass(frozen=True)
class Regex(Expr):
    """``arg ~ pattern`` (POSIX regular expression, Python's ``re`` here)."""
    arg: Expr
    pattern: Expr
    negated: bool = False
    case_insensitive: bool = False
    type: Any = BOOLEAN


@dataclass(frozen=True)
class DistinctFrom(Expr):
    """``left IS [NOT] DISTINCT FROM right``: equality where NULL equals NULL; never NULL."""
    left: Expr
    right: Expr
    negated: bool = False     # True: IS NOT DISTINCT FROM
    type: Any = BOOLEAN


@dataclass(frozen=True)
class Cast(Expr):
    arg: Expr
    type: Any


@dataclass(frozen=True)
class Func(Expr):
    name: str           # abs lower upper length coalesce nullif btrim rtrim_char
    args: tuple
    type: Any


@dataclass(frozen=True)
class Case(Expr):
    whens: tuple        # ((condition, result), ...)
    default: Expr | None
    type: Any


@dataclass(frozen=True)
class AggCall(Expr):
    name: str           # count sum avg min max string_agg array_agg bool_and bool_or
    arg: Expr | None    # None: count(*)    stddev stddev_pop variance var_pop
    distinct: bool
    type: Any
    extra: tuple = ()          # further arguments (string_agg's delimiter)
    filter: Any = None         # FILTER (WHERE ...)
    order: tuple = ()          # ORDER BY inside the call: expressions
    order_desc: tuple = ()
    order_nf: tuple = ()


@dataclass(frozen=True)
class OuterRef(Expr):
    """A column of an enclosing query read by a correlated subquery: a parameter of the
    subquery's plan, set by the SubLink that runs it (``ExecContext.outer``)."""
    ref: ColRef
    type: Any

    @property
    def key(self):
        return self.ref.key


class SubPlan:
    """A subquery's plan holder (mutable, compared by identity): the binder fills
    ``bound``, the planner ``root``/``names``/``types``; ``number`` is EXPLAIN's."""

    def __init__(self, bound):
        self.bound = bound
        self.root = None
        self.names = []
        self.types = []
        self.number = 0

    def __repr__(self):
        return f"SubPlan({self.number})"


@dataclass(frozen=True)
class SubLink(Expr):
    """A subquery used as an expression: ``scalar`` (its one value, NULL if no row),
    ``exists``, ``in`` (``arg IN (subquery)`` with SQL's NULL rules; ``negated`` NOT IN),
    ``array`` (``ARRAY(subquery)``: its values as a list, ``[]`` if no row).
    ``outer``: the enclosing query's columns the subquery reads (empty: uncorrelated,
    run once per execution as an InitPlan)."""
    kind: str
    sub: SubPlan
    arg: Expr | None
    negated: bool
    outer: tuple
    type: Any = BOOLEAN
    test: Any = None           # IN: Compare("=", arg, subquery's column) as bound


@dataclass(frozen=True)
class GroupingFunc(Expr):
    """``grouping(args)`` as bound, before the binder rewrites it above the aggregation (to a
    constant, or a CASE over the grouping set number column ``("gset", 0)``)."""
    args: tuple
    type: Any


@dataclass(frozen=True)
class WinFrame(Expr):
    """A window frame: ``kind`` rows | range | groups; ``start`` / ``end``
    unbounded_preceding | preceding | current | following | unbounded_following, with the
    offset expressions ``start_off`` / ``end_off`` (bigint for ROWS and GROUPS, the ORDER BY
    column's type - an interval for dates and timestamps - for RANGE); ``exclude`` no_others |
    current | group | ties."""
    kind: str
    start: str
    start_off: Any
    end: str
    end_off: Any
    exclude: str


DEFAULT_FRAME = WinFrame("range", "unbounded_preceding", None, "current", None, "no_others")


@dataclass(frozen=True)
class WinCall(Expr):
    """A window function call ``name(args) OVER (PARTITION BY .. ORDER BY .. frame)``
    (``frame`` None: the default frame, RANGE UNBOUNDED PRECEDING .. CURRENT ROW - with no
    ORDER BY every row is a peer, so the whole partition)."""
    name: str
    args: tuple
    partition: tuple
    order: tuple
    order_desc: tuple
    order_nf: tuple
    type: Any
    frame: Any = None


@dataclass(frozen=True)
class SRFCall(Expr):
    """A set-returning function in the select list (generate_series): ProjectSet."""
    name: str
    args: tuple
    type: Any


def has_sublink(e) -> bool:
    return e is not None and any(isinstance(n, (SubLink, OuterRef)) for n in walk(e))


def walk(e: Expr):
    """Every node of the tree, parents first."""
    yield e
    for c in children(e):
        yield from walk(c)


def children(e: Expr) -> tuple:
    if isinstance(e, (Arith, Concat, Compare, DistinctFrom)):
        return (e.left, e.right)
    if isinstance(e, Regex):
        return (e.arg, e.pattern)
    if isinstance(e, SubLink):
        return ((e.arg,) if e.arg is not None else ()) + tuple(e.outer)
    if isinstance(e, WinCall):
        return tuple(e.args) + tuple(e.partition) + tuple(e.order) + \
            ((e.frame,) if e.frame is not None else ())
    if isinstance(e, WinFrame):
        return tuple(x for x in (e.start_off, e.end_off) if x is not None)
    if isinstance(e, (SRFCall, GroupingFunc)):
        return tuple(e.args)
    if isinstance(e, (Neg, Not, IsNull, Cast)):
        return (e.arg,)
    if isinstance(e, (BoolOp, Func)):
        return tuple(e.args)
    if isinstance(e, InList):
        return (e.arg,) + tuple(e.items)
    if isinstance(e, Like):
        return (e.arg, e.pattern)
    if isinstance(e, Case):
        out = []
        for c, r in e.whens:
            out += [c, r]
        if e.default is not None:
            out.append(e.default)
        return tuple(out)
    if isinstance(e, AggCall):
        out = (() if e.arg is None else (e.arg,)) + tuple(e.extra) + tuple(e.order)
        return out + ((e.filter,) if e.filter is not None else ())
    return ()


def column_keys(e: Expr) -> set:
    return {n.key for n in walk(e) if isinstance(n, ColRef)}


def conjuncts(e: Expr | None) -> list:
    """The AND-ed parts of a condition (flattened)."""
    if e is None:
        return []
    if isinstance(e, BoolOp) and e.op == "and":
        out = []
        for a in e.args:
            out += conjuncts(a)
        return out
    return [e]


def and_all(parts) -> Expr | None:
    parts = list(parts)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else BoolOp("and", tuple(parts))


# ---------------------------------------------------------------------------------------------
# EXPLAIN text (PostgreSQL's ruleutils style: every operator in parentheses)
def deparse(e: Expr, qualify: bool = False, top: bool = True) -> str:
    d = lambda x: deparse(x, qualify, False)  # noqa: E731
    if isinstance(e, ColRef):
        return f"{e.rel}.{e.name}" if qualify and e.rel else e.name
    if isinstance(e, Const):
        return _const_text(e)
    if isinstance(e, Param):
        return f"${e.index + 1}"
    if isinstance(e, (Arith, Compare)):
        return f"({d(e.left)} {e.op} {d(e.right)})"
    if isinstance(e, Concat):
        return f"({d(e.left)} || {d(e.right)})"
    if isinstance(e, Neg):
        return f"(- {d(e.arg)})"
    if isinstance(e, BoolOp):
        s = f" {e.op.upper()} ".join(d(a) for a in e.args)
        return f"({s})"
    if isinstance(e, Not):
        return f"(NOT {d(e.arg)})"
    if isinstance(e, IsNull):
        return f"({d(e.arg)} IS {'NOT ' if e.negated else ''}NULL)"
    if isinstance(e, InList):
        items = ", ".join(d(i) for i in e.items)
        return f"({d(e.arg)} {'NOT ' if e.negated else ''}IN ({items}))"
    if isinstance(e, Like):
        op = ("!" if e.negated else "") + ("~~*" if e.case_insensitive else "~~")
        return f"({d(e.arg)} {op} {d(e.pattern)})"
    if isinstance(e, Cast):
        return f"({d(e.arg)})::{e.type}"
    if isinstance(e, Func):
        if e.name == "rtrim_char":
            return d(e.args[0])
        return f"{e.name}({', '.join(d(a) for a in e.args)})"
    if isinstance(e, Case):
        parts = " ".join(f"WHEN {d(c)} THEN {d(r)}" for c, r in e.whens)
        els = f" ELSE {d(e.default)}" if e.default is not None else ""
        return f"CASE {parts}{els} END"
    if isinstance(e, AggCall):
        if e.arg is None:
            s = f"{e.name}(*)"
        else:
            args = ", ".join(d(a) for a in (e.arg,) + tuple(e.extra))
            order = ""
            if e.order:
                order = " ORDER BY " + ", ".join(
                    d(o) + (" DESC" if ds else "") for o, ds in zip(e.order, e.order_desc))
            s = f"{e.name}({'DISTINCT ' if e.distinct else ''}{args}{order})"
        if e.filter is not None:
            s += f" FILTER (WHERE {d(e.filter)})"
        return s
    if isinstance(e, DistinctFrom):
        return f"({d(e.left)} IS {'NOT ' if e.negated else ''}DISTINCT FROM {d(e.right)})"
    if isinstance(e, Regex):
        op = ("!" if e.negated else "") + ("~*" if e.case_insensitive else "~")
        return f"({d(e.arg)} {op} {d(e.pattern)})"
    if isinstance(e, OuterRef):
        return deparse(e.ref, True, False)
    if isinstance(e, SubLink):
        n = e.sub.number
        if not e.outer and e.kind in ("scalar", "exists", "array"):
            return f"${n - 1}"
        if e.kind == "in" and not e.outer:
            s = f"(hashed SubPlan {n})"
            return f"(NOT {s})" if e.negated else s
        s = f"(SubPlan {n})"
        return f"(NOT {s})" if e.negated else s
    if isinstance(e, WinCall):
        return f"{e.name}({', '.join(d(a) for a in e.args)}) OVER (?)"
    if isinstance(e, SRFCall):
        return f"{e.name}({', '.join(d(a) for a in e.args)})"
    return repr(e)


def _const_text(e: Const) -> str:
    v = e.value
    if v is None:
        return "NULL"
    f = family(e.type)
    if f == "text" or f == "unknown":
        return "'" + str(v).replace("'", "''") + "'" + ("::text" if f == "text" else "")
    if f == "ts":
        return f"'{dt.format_value(v, e.type)}'::timestamp without time zone"
    if f == "bool":
        return "true" if v else "false"
    if f == "float":
        return dt.format_value(v, e.type)
    return str(v)

