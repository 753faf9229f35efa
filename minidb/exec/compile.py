"""Compilation of bound expressions (``expr.py``) to numpy, with SQL's three-valued logic.

``compile_expr(expr, layout, params)`` turns a tree into a `Compiled` value, once per
execution (parameters are known by then and become constants):

* ``K(value, type)`` - a constant (folded at compile time), ``None`` for NULL;
* ``V(fn, type)`` - ``fn(chunk, live) -> (values, nullmask)`` over a whole batch.

``values`` is a numpy array of the batch's length (see ``datatypes`` for the
representation of each type) and ``nullmask`` a bool array (True = NULL) or None.
Invariants:

  1. A boolean result holds False in every NULL slot, so ``values`` alone is "TRUE"
     (what WHERE keeps) and ``~(values | mask)`` is "FALSE".
  2. A text result holds "" in every NULL slot (never None).
  3. Errors (division by zero, overflow) are raised only for rows in ``live`` (None =
     all rows): AND and OR narrow ``live`` for their right operand to the rows the left
     operand did not decide, and CASE / COALESCE to the rows each branch is used for, so
     ``b <> 0 AND a / b > 1`` never fails, as in PostgreSQL, even though both sides are
     computed for the whole batch.

Three-valued logic (T true, F false, N null)::

    AND | T  F  N      OR | T  F  N      NOT |
    ----+---------     ---+---------     ----+--
     T  | T  F  N       T | T  T  T       T  | F
     F  | F  F  F       F | T  F  N       F  | T
     N  | N  F  N       N | T  N  N       N  | N

Comparisons and arithmetic with a NULL operand are NULL; ``x IN (..., NULL)`` is NULL
when nothing matches; IS [NOT] NULL is never NULL.
"""

from __future__ import annotations

import decimal
import re

import numpy as np

import minidb.errors as errors
from minidb.exec import datatypes as dt
from minidb.exec.datatypes import BIGINT, BOOLEAN, TEXT, VECTOR_DTYPE, VECTOR_FILL, family
from minidb.exec.expr import (Arith, BoolOp, Case, Cast, ColRef, Compare, Concat,
                              Const, Expr, Func, InList, IsNull, Like, Neg, Not, Param)
from minidb.exec import typeops
from minidb.exec.catfuncs import CATALOG_FUNCS
from minidb.exec.functions import STRICT

__all__ = ["K", "V", "compile_expr", "evaluate", "truth", "bind_param", "broadcast"]


# ---------------------------------------------------------------------------------------------
# compiled forms
class K:
    """A constant known at compile time (vector representation; None = NULL)."""
    __slots__ = ("value", "type")

    def __init__(self, value, type_):
        self.value = value
        self.type = type_


class V:
    """A vector function ``fn(chunk, live) -> (values, mask)``."""
    __slots__ = ("fn", "type")

    def __init__(self, fn, type_):
        self.fn = fn
        self.type = type_


_DTYPE = VECTOR_DTYPE   # one definition: datatypes.VECTOR_DTYPE / VECTOR_FILL
_FILL = VECTOR_FILL


def broadcast(value, type_, n: int):
    """(values, mask) of length ``n`` all equal to the constant ``value``."""
    f = family(type_)
    if value is None:
        return np.full(n, _FILL[f], dtype=_DTYPE[f]), np.ones(n, dtype=bool)
    return np.full(n, value, dtype=_DTYPE[f]), None


def evaluate(c, chunk, live=None):
    """(values, mask) of a compiled expression over ``chunk``."""
    if isinstance(c, K):
        return broadcast(c.value, c.type, chunk.n)
    return c.fn(chunk, live)


def truth(c, chunk, live=None) -> np.ndarray | bool:
    """Rows where a boolean expression is TRUE (a bool array, or a bool for constants)."""
    if isinstance(c, K):
        return bool(c.value)
    return c.fn(chunk, live)[0]


def _operand(c, chunk, live):
    """Values (a scalar for constants) and mask of one operand."""
    if isinstance(c, K):
        return c.value, None
    return c.fn(chunk, live)


def _or_masks(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _and_live(live, m):
    """Rows in ``live`` that are not NULL under mask ``m``."""
    if m is None:
        return live
    return ~m if live is None else (live & ~m)


def _any_in(cond, live) -> bool:
    """Is ``cond`` true for some row in ``live`` (None: all rows)?"""
    if np.ndim(cond) == 0:
        return bool(cond) and (live is None or bool(np.any(live)))
    if live is None:
        return bool(cond.any())
    return bool((cond & live).any())


def compile_expr(e: Expr, layout: dict, params=(), now=None, ectx=None):
    """Compile ``e``; ``layout`` maps ColRef keys to column positions in the chunk; ``now``
    is the transaction's start time (what now() and CURRENT_TIMESTAMP return); ``ectx``
    the execution (needed by subqueries, outer references and random())."""
    return _Compiler(layout, params, now, ectx).c(e)


class _Compiler:
    def __init__(self, layout, params, now=None, ectx=None):
        self.layout = layout
        self.params = params
        self.now = now
        self.ectx = ectx

    def _OuterRef(self, e):
        try:
            v = self.ectx.outer[e.key]
        except (AttributeError, KeyError):
            raise errors.InternalError(f"outer reference {e.ref} has no value") from None
        return K(v, e.type)

    def _SubLink(self, e):
        from minidb.exec.subplan import compile_sublink
        return compile_sublink(self, e, K, V, evaluate, _DTYPE, _FILL)

    def _DistinctFrom(self, e):
        a, b = self.c(e.left), self.c(e.right)
        neg = e.negated
        if isinstance(a, K) and isinstance(b, K):
            same = (a.value is None and b.value is None) or (
                a.value is not None and b.value is not None and a.value == b.value)
            return K(same if neg else not same, BOOLEAN)

        def vf(chunk, live):
            av, am = evaluate(a, chunk, live)
            bv, bm = evaluate(b, chunk, live)
            eq = np.asarray(av == bv, dtype=bool)
            if am is None and bm is None:
                same = eq
            else:
                an = np.zeros(chunk.n, bool) if am is None else am
                bn = np.zeros(chunk.n, bool) if bm is None else bm
                same = (an & bn) | (~an & ~bn & eq)
            return (same if neg else ~same), None
        return V(vf, BOOLEAN)

    def _Regex(self, e):
        a, p = self.c(e.arg), self.c(e.pattern)
        if _is_null(a) or _is_null(p):
            return K(None, BOOLEAN)
        neg, flags = e.negated, re.IGNORECASE if e.case_insensitive else 0

        def rx(pat):
            try:
                return re.compile(pat, flags)
            except re.error as err:
                raise errors.DataError(f"invalid regular expression: {err}",
                                       sqlstate="2201B") from None
        if isinstance(p, K):
            r = rx(p.value)
            if isinstance(a, K):
                return K((r.search(a.value) is not None) != neg, BOOLEAN)

            def vf(chunk, live):
                v, m = a.fn(chunk, live)
                out = np.fromiter((r.search(s) is not None for s in v), dtype=bool,
                                  count=chunk.n)
                if neg:
                    out = ~out
                if m is not None:
                    out &= ~m
                return out, m
            return V(vf, BOOLEAN)

        def vf2(chunk, live):
            av, am = evaluate(a, chunk, live)
            pv, pm = evaluate(p, chunk, live)
            mk = _or_masks(am, pm)
            out = np.zeros(chunk.n, bool)
            for i, (s, pat) in enumerate(zip(av, pv)):
                if mk is None or not mk[i]:
                    out[i] = rx(pat).search(s) is not None
            if neg:
                out = ~out
            if mk is not None:
                out &= ~mk
            return out, mk
        return V(vf2, BOOLEAN)

    def c(self, e):
        m = getattr(self, "_" + type(e).__name__, None)
        if m is None:
            raise errors.NotSupportedError(f"expression {type(e).__name__} is not supported here")
        return m(e)

    # -- leaves --------------------------------------------------------------------------------
    def _ColRef(self, e: ColRef):
        try:
            i = self.layout[e.key]
        except KeyError:
            raise errors.InternalError(f"column {e.name} ({e.key}) is not in the input") from None

        def fn(chunk, live):
            return chunk.cols[i]
        return V(fn, e.type)

    def _Const(self, e: Const):
        return K(dt.to_repr(e.value, e.type), e.type)

    def _Param(self, e: Param):
        try:
            v = self.params[e.index]
        except IndexError:
            raise errors.InvalidParameterCount(f"there is no parameter ${e.index + 1}") from None
        return K(dt.to_repr(bind_param(v, e.type), e.type), e.type)

    # -- arithmetic ------------------------------------------------------------------------------
    def _Arith(self, e: Arith):
        a, b = self.c(e.left), self.c(e.right)
        op, rt = e.op, e.type
        fn = _arith_fn(op, rt, e.left.type, e.right.type)
        if _is_null(a) or _is_null(b):
            return K(None, rt)
        if isinstance(a, K) and isinstance(b, K):
            r = fn(_one(a.value), _one(b.value), None)
            return K(_scalar(r[0]), rt)

        def vf(chunk, live):
            av, am = _operand(a, chunk, live)
            bv, bm = _operand(b, chunk, live)
            m = _or_masks(am, bm)
            return fn(av, bv, _and_live(live, m)), m
        return V(vf, rt)

    def _Neg(self, e: Neg):
        a = self.c(e.arg)
        rt = e.type
        if _is_null(a):
            return K(None, rt)

        if typeops.handles(rt, rt) and family(rt) not in ("int", "float"):
            neg = typeops.neg_fn(rt)
            if isinstance(a, K):
                return K(_scalar(neg(_one(a.value), None)[0]), rt)

            def vneg(chunk, live):
                v, m = a.fn(chunk, live)
                return neg(v, _and_live(live, m)), m
            return V(vneg, rt)

        def neg(v, live):
            if family(rt) == "float":
                return -np.asarray(v, dtype=np.float64)
            r = -np.asarray(v, dtype=np.int64)
            _check_int_range(r, rt, live)
            if rt.name == "bigint":
                bad = np.asarray(v) == dt.INT8_MIN
                if _any_in(bad, live):
                    raise errors.NumericValueOutOfRange("bigint out of range")
            return r
        if isinstance(a, K):
            return K(neg(np.array([a.value]), None)[0].item(), rt)

        def vf(chunk, live):
            v, m = a.fn(chunk, live)
            return neg(v, _and_live(live, m)), m
        return V(vf, rt)

    def _Concat(self, e: Concat):
        a, b = self.c(e.left), self.c(e.right)
        if _is_null(a) or _is_null(b):
            return K(None, TEXT)
        if isinstance(a, K) and isinstance(b, K):
            return K(str(a.value) + str(b.value), TEXT)

        def vf(chunk, live):
            av, am = _operand(a, chunk, live)
            bv, bm = _operand(b, chunk, live)
            m = _or_masks(am, bm)
            r = np.asarray(av, dtype=object) + np.asarray(bv, dtype=object)
            if m is not None:
                r[m] = ""
            return r, m
        return V(vf, TEXT)

    # -- comparisons and logic ---------------------------------------------------------------------
    def _Compare(self, e: Compare):
        a, b = self.c(e.left), self.c(e.right)
        f = _CMP[e.op]
        if _is_null(a) or _is_null(b):
            return K(None, BOOLEAN)
        if isinstance(a, K) and isinstance(b, K):
            try:
                return K(bool(f(a.value, b.value)), BOOLEAN)
            except decimal.InvalidOperation:          # a numeric NaN: PostgreSQL's order
                return K(bool(f(*typeops.nan_last(a.value, b.value))), BOOLEAN)

        def vf(chunk, live):
            av, am = _operand(a, chunk, live)
            bv, bm = _operand(b, chunk, live)
            try:
                r = f(av, bv)
            except decimal.InvalidOperation:          # a numeric NaN: PostgreSQL's order
                r = f(*typeops.nan_last(av, bv))
            r = np.asarray(r)
            if r.dtype != np.bool_:
                r = r.astype(bool)
            m = _or_masks(am, bm)
            if m is not None:
                r &= ~m
            return r, m
        return V(vf, BOOLEAN)

    def _BoolOp(self, e: BoolOp):
        parts = [self.c(x) for x in e.args]
        is_and = e.op == "and"
        # fold constants: a FALSE (AND) / TRUE (OR) decides everything
        vecs, nullconst = [], False
        for p in parts:
            if isinstance(p, K):
                if p.value is None:
                    nullconst = True
                elif bool(p.value) != is_and:
                    return K(not is_and, BOOLEAN)
            else:
                vecs.append(p)
        if not vecs:
            return K(None if nullconst else is_and, BOOLEAN)

        def vf(chunk, live):
            vals, mask = vecs[0].fn(chunk, live)
            cur_live = live
            for p in vecs[1:]:
                # rows still undecided: for AND those not FALSE, for OR those not TRUE
                undecided = (vals | mask) if (is_and and mask is not None) else \
                    (vals if is_and else ~vals)
                cur_live = undecided if cur_live is None else (cur_live & undecided)
                bv, bm = p.fn(chunk, cur_live)
                vals, mask = _and3(vals, mask, bv, bm) if is_and else _or3(vals, mask, bv, bm)
            if nullconst:
                nm = np.ones(chunk.n, dtype=bool)
                vals, mask = _and3(vals, mask, np.zeros(chunk.n, bool), nm) if is_and else \
                    _or3(vals, mask, np.zeros(chunk.n, bool), nm)
            return vals, mask
        return V(vf, BOOLEAN)

    def _Not(self, e: Not):
        a = self.c(e.arg)
        if isinstance(a, K):
            return K(None if a.value is None else not a.value, BOOLEAN)

        def vf(chunk, live):
            v, m = a.fn(chunk, live)
            if m is None:
                return ~v, None
            return ~(v | m), m
        return V(vf, BOOLEAN)

    def _IsNull(self, e: IsNull):
        a = self.c(e.arg)
        neg = e.negated
        if isinstance(a, K):
            return K((a.value is None) != neg, BOOLEAN)

        def vf(chunk, live):
            _, m = a.fn(chunk, live)
            if m is None:
                return np.full(chunk.n, neg), None
            return (~m if neg else m.copy()), None
        return V(vf, BOOLEAN)

    def _InList(self, e: InList):
        a = self.c(e.arg)
        items = [self.c(i) for i in e.items]
        neg = e.negated
        if all(isinstance(i, K) for i in items):
            consts = [i.value for i in items if i.value is not None]
            has_null = len(consts) < len(items)
            if isinstance(a, K):
                if a.value is None:
                    return K(None, BOOLEAN)
                hit = a.value in consts
                if hit:
                    return K(not neg, BOOLEAN)
                return K(None if has_null else neg, BOOLEAN)
            f = family(e.arg.type)
            carr = np.array(consts, dtype=_DTYPE[f if f != "unknown" else "text"])

            def vf(chunk, live):
                v, m = a.fn(chunk, live)
                hit = np.isin(v, carr) if carr.size else np.zeros(chunk.n, bool)
                if has_null:
                    nm = ~hit if m is None else (~hit | m)
                else:
                    nm = m
                r = ~hit if neg else hit
                if nm is not None:
                    r &= ~nm
                return r, nm
            return V(vf, BOOLEAN)
        # some items are not constant: a chain of ORs of equalities
        ors = BoolOp("or", tuple(Compare("=", e.arg, i) for i in e.items))
        out = self.c(Not(ors) if neg else ors)
        return out

    def _Like(self, e: Like):
        a, p = self.c(e.arg), self.c(e.pattern)
        if _is_null(a) or _is_null(p):
            return K(None, BOOLEAN)
        neg, ci = e.negated, e.case_insensitive
        esc = e.escape
        if isinstance(p, K):
            match = _like_matcher(p.value, ci, esc)
            if isinstance(a, K):
                return K(match(a.value) != neg, BOOLEAN)

            def vf(chunk, live):
                v, m = a.fn(chunk, live)
                r = np.fromiter(map(match, v), dtype=bool, count=chunk.n)
                if neg:
                    r = ~r
                if m is not None:
                    r &= ~m
                return r, m
            return V(vf, BOOLEAN)

        def vf2(chunk, live):
            av, am = evaluate(a, chunk, live)
            pv, pm = evaluate(p, chunk, live)
            r = np.fromiter((_like_matcher(pp, ci, esc)(s) for s, pp in zip(av, pv)), dtype=bool,
                            count=chunk.n)
            if neg:
                r = ~r
            m = _or_masks(am, pm)
            if m is not None:
                r &= ~m
            return r, m
        return V(vf2, BOOLEAN)

    # -- casts, functions, CASE --------------------------------------------------------------------
    def _Cast(self, e: Cast):
        a = self.c(e.arg)
        src, dst = e.arg.type, e.type
        if isinstance(a, K):
            v = dt.from_repr(a.value, src)
            return K(dt.to_repr(dt.cast_value(v, src, dst), dst), dst)
        fs, fd = family(src), family(dst)
        if fs == fd and fd != "text" and _widening(src, dst):
            return V(a.fn, dst)
        vec = typeops.cast_fn(src, dst)
        if vec is not None:
            def vc(chunk, live):
                v, m = a.fn(chunk, live)
                return vec(v, m, _and_live(live, m)), m
            return V(vc, dst)

        def vf(chunk, live):
            v, m = a.fn(chunk, live)
            return _cast_vector(v, m, src, dst, _and_live(live, m)), m
        return V(vf, dst)

    def _Func(self, e: Func):
        name = e.name
        if name in CATALOG_FUNCS:
            return self._catalog_func(e)
        if name in ("now", "clock_timestamp", "current_date", "current_time"):
            return K(_now_value(self.now if name != "clock_timestamp" else None, name,
                                e.type), e.type)
        args = [self.c(x) for x in e.args]
        rt = e.type
        if name == "coalesce":
            return self._coalesce(args, rt)
        if name == "nullif":
            return self._nullif(args[0], args[1], rt)
        if name in ("concat", "concat_ws"):
            return self._concat(e, args)
        if name in ("greatest", "least"):
            return self._extreme(name, args, rt)
        if name == "random":
            return self._random()
        if name == "gen_random_uuid":
            from minidb.exec.functions import gen_random_uuid
            return V(lambda chunk, live: (gen_random_uuid(chunk.n), None), e.type)
        if name == "setseed":
            return self._setseed(args[0])
        if name in STRICT:
            return self._strict(e, args)
        a = args[0]
        if _is_null(a):
            return K(None, rt)
        f = _SCALAR[name]
        if isinstance(a, K):
            r = f(np.array([a.value], dtype=_DTYPE[family(e.args[0].type)]))[0]
            return K(r.item() if isinstance(r, np.generic) else r, rt)

        def vf(chunk, live):
            v, m = a.fn(chunk, live)
            r = f(v)
            if name == "abs" and rt.name in ("integer", "bigint"):
                _check_int_range(r, rt, _and_live(live, m))
                if rt.name == "bigint" and _any_in(np.asarray(v) == dt.INT8_MIN, _and_live(live, m)):
                    raise errors.NumericValueOutOfRange("bigint out of range")
            return r, m
        return V(vf, rt)

    def _catalog_func(self, e: Func):
        """A catalog function (``minidb.exec.catfuncs``): per row, in Python."""
        from minidb.exec.catfuncs import call
        from minidb.exec.chunk import column_from_values, column_to_list
        args = [self.c(x) for x in e.args]
        ectx, rt = self.ectx, e.type

        def vf(chunk, live):
            cols = []
            for a, x in zip(args, e.args):
                if isinstance(a, K):
                    v = a.value if family(x.type) != "ts" else None
                    cols.append([v] * chunk.n)
                else:
                    v, m = a.fn(chunk, live)
                    cols.append(column_to_list(v, m, x.type))
            rows = list(zip(*cols)) if cols else [()] * chunk.n
            return column_from_values(call(ectx, e.name, rows), rt)
        return V(vf, rt)

    def _rng(self):
        sess = getattr(self.ectx, "session", None)
        g = getattr(sess, "sql_random", None) if sess is not None else None
        if g is None:
            g = np.random.default_rng()
            if sess is not None:
                sess.sql_random = g
        return g

    def _random(self):
        def vf(chunk, live):
            return self._rng().random(chunk.n), None
        return V(vf, e_type_double())

    def _setseed(self, a):
        if not isinstance(a, K):
            raise errors.NotSupportedError("setseed() of a column is not supported")
        v = a.value
        if v is None:
            return K(None, TEXT)
        if not -1.0 <= v <= 1.0:
            raise errors.InvalidParameterValue(f"setseed parameter {v} is out of allowed range "
                                               "[-1,1]")
        sess = getattr(self.ectx, "session", None)
        g = np.random.default_rng(int((v + 1.0) * (2 ** 31)))
        if sess is not None:
            sess.sql_random = g
        return K(None, TEXT)

    def _strict(self, e, args):
        """A strict function (``functions.STRICT``): NULL if any argument is."""
        name, rt = e.name, e.type
        fn = STRICT[name]
        if any(_is_null(a) for a in args):
            return K(None, rt)
        argt = [x.type for x in e.args]
        if all(isinstance(a, K) for a in args):
            vals = [np.array([a.value], dtype=_DTYPE[family(t)]) for a, t in zip(args, argt)]
            r = fn(vals, argt, None)[0]
            return K(r.item() if isinstance(r, np.generic) else r, rt)

        def vf(chunk, live):
            vals, mask = [], None
            for a, t in zip(args, argt):
                v, m = evaluate(a, chunk, live)
                vals.append(v)
                mask = _or_masks(mask, m)
            r = fn(vals, argt, _and_live(live, mask))
            f = family(rt)
            r = np.asarray(r)
            if r.dtype != _DTYPE[f]:
                r = r.astype(_DTYPE[f])
            if mask is not None:
                r = r.copy()
                r[mask] = _FILL[f]
            return r, mask
        return V(vf, rt)

    def _concat(self, e, args):
        """concat(...) / concat_ws(sep, ...): NULL arguments are skipped."""
        types = [x.type for x in e.args]
        ws = e.name == "concat_ws"

        def text_of(v, t):
            f = family(t)
            if f == "bool":
                return "t" if v else "f"
            if f == "text":
                return v
            return dt.format_value(dt.from_repr(v, t), t)

        def vf(chunk, live):
            cols = [evaluate(a, chunk, live) for a in args]
            n = chunk.n
            out = np.empty(n, dtype=object)
            lists = [(v.tolist() if isinstance(v, np.ndarray) else list(v), m)
                     for v, m in cols]
            mask = None
            for i in range(n):
                parts = []
                for (vals, m), t in zip(lists, types):
                    if m is not None and m[i]:
                        parts.append(None)
                    else:
                        parts.append(text_of(vals[i], t))
                if ws:
                    if parts[0] is None:
                        if mask is None:
                            mask = np.zeros(n, bool)
                        mask[i] = True
                        out[i] = ""
                        continue
                    out[i] = parts[0].join(p for p in parts[1:] if p is not None)
                else:
                    out[i] = "".join(p for p in parts if p is not None)
            return out, mask
        return V(vf, TEXT)

    def _extreme(self, name, args, rt):
        """greatest / least: NULLs ignored, NULL only when all are."""
        f = family(rt)
        better = np.greater if name == "greatest" else np.less

        def vf(chunk, live):
            vals = mask = None
            for a in args:
                v, m = evaluate(a, chunk, live)
                v = np.asarray(v, dtype=_DTYPE[f])
                if vals is None:
                    vals, mask = v.copy(), (None if m is None else m.copy())
                    continue
                ok = np.ones(chunk.n, bool) if m is None else ~m
                cur_null = np.zeros(chunk.n, bool) if mask is None else mask
                take = ok & (cur_null | better(v, vals).astype(bool))
                vals[take] = v[take]
                if mask is not None:
                    mask &= ~ok
            if mask is not None and not mask.any():
                mask = None
            return vals, mask
        return V(vf, rt)

    def _coalesce(self, args, rt):
        out = []
        for a in args:
            if isinstance(a, K) and a.value is None:
                continue
            out.append(a)
            if isinstance(a, K):
                break
        if not out:
            return K(None, rt)
        if isinstance(out[0], K):
            return out[0]

        def vf(chunk, live):
            vals, mask = out[0].fn(chunk, live)
            vals = np.array(vals, dtype=_DTYPE[family(rt)], copy=True)
            for a in out[1:]:
                if mask is None:
                    break
                sub_live = mask if live is None else (mask & live)
                av, am = evaluate(a, chunk, sub_live)
                vals[mask] = np.asarray(av, dtype=vals.dtype)[mask] if np.ndim(av) else av
                mask = None if am is None else (mask & am)
                if mask is not None and not mask.any():
                    mask = None
            return vals, mask
        return V(vf, rt)

    def _nullif(self, a, b, rt):
        def vf(chunk, live):
            av, am = evaluate(a, chunk, live)
            bv, bm = evaluate(b, chunk, live)
            same = np.asarray(av == bv, dtype=bool)
            if bm is not None:
                same &= ~bm
            mask = same if am is None else (am | same)
            vals = np.array(av, copy=True)
            vals[mask] = _FILL[family(rt)]
            return vals, (mask if mask.any() else None)
        return V(vf, rt)

    def _Case(self, e: Case):
        whens = [(self.c(c), self.c(r)) for c, r in e.whens]
        default = self.c(e.default) if e.default is not None else K(None, e.type)
        rt = e.type
        f = family(rt)

        def vf(chunk, live):
            n = chunk.n
            vals = np.full(n, _FILL[f], dtype=_DTYPE[f])
            mask = np.ones(n, dtype=bool)
            todo = np.ones(n, dtype=bool) if live is None else live.copy()
            for cond, res in whens:
                if not todo.any():
                    break
                cv = truth(cond, chunk, todo)
                hit = (todo & cv) if np.ndim(cv) else (todo if cv else np.zeros(n, bool))
                if hit.any():
                    rv, rm = evaluate(res, chunk, hit)
                    vals[hit] = np.asarray(rv, dtype=vals.dtype)[hit]
                    mask[hit] = False if rm is None else rm[hit]
                todo &= ~hit
            if todo.any():
                rv, rm = evaluate(default, chunk, todo)
                vals[todo] = np.asarray(rv, dtype=vals.dtype)[todo]
                mask[todo] = False if rm is None else rm[todo]
            return vals, (mask if mask.any() else None)
        return V(vf, rt)


def _now_value(start, name, t):
    """now() / CURRENT_TIMESTAMP (the transaction's start; clock_timestamp: the clock) as
    a vector scalar of ``t``: timestamptz, or in the session's TimeZone the timestamp
    (LOCALTIMESTAMP), date (CURRENT_DATE) or time (CURRENT_TIME, LOCALTIME)."""
    import datetime as _dt
    from minidb.types import session_timezone
    n = start or _dt.datetime.now()
    if n.tzinfo is None:
        n = n.astimezone()              # the clock's naive local time -> an instant
    local = n.astimezone(session_timezone()).replace(tzinfo=None)
    name = t.name
    if name == "timestamptz":
        return dt.to_repr(n, t)
    if name == "date":
        return dt.to_repr(local.date(), t)
    if name == "time":
        return dt.to_repr(local.time(), t)
    return dt.to_repr(local, t)


def e_type_double():
    return dt.DOUBLE


def _is_null(c) -> bool:
    return isinstance(c, K) and c.value is None


def _and3(a, am, b, bm):
    vals = a & b
    if am is None and bm is None:
        return vals, None
    a_false = ~(a | am) if am is not None else ~a
    b_false = ~(b | bm) if bm is not None else ~b
    mask = _or_masks(am, bm) & ~a_false & ~b_false
    return vals, mask


def _or3(a, am, b, bm):
    vals = a | b
    if am is None and bm is None:
        return vals, None
    mask = _or_masks(am, bm) & ~vals
    return vals, mask


_CMP = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal}


def _check_int_range(r, rt, live) -> None:
    if rt.name == "integer":
        bad = (r < dt.INT4_MIN) | (r > dt.INT4_MAX)
        if _any_in(bad, live):
            raise errors.NumericValueOutOfRange("integer out of range")
    elif rt.name == "smallint":
        bad = (r < dt.INT2_MIN) | (r > dt.INT2_MAX)
        if _any_in(bad, live):
            raise errors.NumericValueOutOfRange("smallint out of range")


def _one(v):
    """A constant as a one-element vector of its family's dtype."""
    arr = np.empty(1, dtype=object if not isinstance(v, (int, float, bool, np.generic))
                   else None)
    if arr.dtype == object:
        arr[0] = v
        return arr
    return np.array([v])


def _scalar(x):
    return x.item() if isinstance(x, np.generic) else x


def _widening(src, dst) -> bool:
    """Is a cast between two types of one family a no-op on the vector?"""
    if src == dst:
        return True
    f = family(dst)
    if f == "int":
        return dt.implicitly_castable(src, dst)
    if f == "float":
        return dst.name == "double precision"
    if f == "num":
        return dst.length is None
    return f not in ("text",)


def _arith_fn(op: str, rt, ta=None, tb=None):
    """fn(a, b, live) -> result array for one arithmetic operator, result and operand
    types (numpy here for integers and doubles; ``typeops`` for the others)."""
    if ta is not None:
        fr = family(rt)
        if fr == "float" and rt.name == "real":
            base = _arith_fn(op, dt.DOUBLE)
            return lambda a, b, live: typeops.real_round(base(a, b, live), live)
        if fr not in ("int", "float") or family(ta) == "date" or family(tb) == "date":
            return typeops.arith_fn(op, rt, ta, tb)
    if family(rt) == "float":
        def ffn(a, b, live):
            a = np.asarray(a, dtype=np.float64)
            b = np.asarray(b, dtype=np.float64)
            if op == "/":
                if _any_in(b == 0, live):
                    raise errors.DivisionByZero("division by zero")
            with np.errstate(all="ignore"):
                r = {"+": np.add, "-": np.subtract, "*": np.multiply,
                     "/": np.divide}[op](a, b)
            if np.ndim(r) == 0:
                r = np.atleast_1d(r)
            over = np.isinf(r) & np.isfinite(a) & np.isfinite(b)
            if _any_in(over, live):
                raise errors.NumericValueOutOfRange("value out of range: overflow")
            return r
        return ffn

    big = rt.name == "bigint"

    def ifn(a, b, live):
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        if op in ("/", "%"):
            zero = b == 0
            if _any_in(zero, live):
                raise errors.DivisionByZero("division by zero")
            sb = np.where(zero, 1, b)
            if op == "/":
                if big and _any_in((a == dt.INT8_MIN) & (b == -1), live):
                    raise errors.NumericValueOutOfRange("bigint out of range")
                with np.errstate(all="ignore"):
                    q = np.floor_divide(a, sb)
                    rem = a - q * sb
                r = q + ((rem != 0) & ((a < 0) != (sb < 0)))
            else:
                with np.errstate(all="ignore"):
                    r = np.fmod(a, sb)
        elif op == "+":
            r = a + b
            if big and _any_in(((a ^ r) & (b ^ r)) < 0, live):
                raise errors.NumericValueOutOfRange("bigint out of range")
        elif op == "-":
            r = a - b
            if big and _any_in(((a ^ b) & (a ^ r)) < 0, live):
                raise errors.NumericValueOutOfRange("bigint out of range")
        else:
            r = a * b
            if big:
                est = a.astype(np.float64) * b
                sus = np.abs(est) >= 2.0 ** 62
                if _any_in(sus, live):
                    aa, bb, ll = np.broadcast_arrays(a, b, np.ones(1, bool) if live is None
                                                     else live)
                    for i in np.flatnonzero(np.broadcast_to(sus, aa.shape) & ll).tolist():
                        if not dt.INT8_MIN <= int(aa[i]) * int(bb[i]) <= dt.INT8_MAX:
                            raise errors.NumericValueOutOfRange("bigint out of range")
        if np.ndim(r) == 0:
            r = np.atleast_1d(r)
        _check_int_range(r, rt, live)
        return r
    return ifn


def _cast_vector(v, m, src, dst, live):
    fs, fd = family(src), family(dst)
    if fd == "float" and fs == "int":
        return np.asarray(v, dtype=np.float64)
    if fd == "int" and fs == "int":
        r = np.asarray(v, dtype=np.int64)
        _check_int_range(r, dst, live)
        return r
    if fd == "int" and fs == "float":
        v = np.asarray(v, dtype=np.float64)
        lo, hi = (dt.INT4_MIN, dt.INT4_MAX) if dst.name == "integer" else (dt.INT8_MIN, dt.INT8_MAX)
        r = np.rint(v)
        bad = ~np.isfinite(r) | (r < lo) | (r > hi)
        if _any_in(bad, live):
            raise errors.NumericValueOutOfRange(f"{dst.name} out of range")
        return np.where(bad, 0, r).astype(np.int64)
    if fd == "int" and fs == "bool":
        return np.asarray(v, dtype=np.int64)
    if fd == "bool" and fs == "int":
        return np.asarray(v) != 0
    # everything else value by value (text in or out)
    out = np.empty(len(v), dtype=_DTYPE[fd])
    null = np.zeros(len(v), bool) if m is None else m
    for i, x in enumerate(v.tolist() if isinstance(v, np.ndarray) else list(v)):
        if null[i]:
            out[i] = _FILL[fd]
        else:
            out[i] = dt.to_repr(dt.cast_value(dt.from_repr(x, src), src, dst), dst)
    return out


def _case1(s, f):
    """Case mapping character by character, as PostgreSQL's (towupper): a character whose
    mapping is several characters (German sharp s) stays as it is."""
    r = f(s)
    if len(r) == len(s):
        return r
    return "".join(c if len(f(c)) != 1 else f(c) for c in s)


def _len(v):
    return np.fromiter(map(len, v), dtype=np.int64, count=len(v))


_SCALAR = {
    "abs": lambda v: np.abs(v),
    "lower": lambda v: np.array([_case1(s, str.lower) for s in v], dtype=object),
    "upper": lambda v: np.array([_case1(s, str.upper) for s in v], dtype=object),
    "length": _len,
    "btrim": lambda v: np.array([s.strip(" ") for s in v], dtype=object),
    "rtrim_char": lambda v: np.array([s.rstrip(" ") for s in v], dtype=object),
}


def _like_matcher(pattern: str, ci: bool, esc: str = "\\"):
    """A function str -> bool for a LIKE pattern (``esc`` escapes, backslash by default,
    as PostgreSQL; "" for none)."""
    key = (pattern, ci, esc)
    m = _LIKE_CACHE.get(key)
    if m is not None:
        return m
    specials = "%_" + esc
    plain = not any(ch in pattern for ch in specials)
    if plain and not ci:
        m = pattern.__eq__
    elif (not ci and pattern.endswith("%") and not any(ch in pattern[:-1] for ch in specials)):
        prefix = pattern[:-1]
        m = lambda s: s.startswith(prefix)  # noqa: E731
    else:
        out, i = [], 0
        while i < len(pattern):
            ch = pattern[i]
            if esc and ch == esc and i + 1 < len(pattern):
                out.append(re.escape(pattern[i + 1]))
                i += 2
                continue
            out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
            i += 1
        rx = re.compile("".join(out), re.DOTALL | (re.IGNORECASE if ci else 0))
        m = lambda s: rx.fullmatch(s) is not None  # noqa: E731
    if len(_LIKE_CACHE) > 1000:
        _LIKE_CACHE.clear()
    _LIKE_CACHE[key] = m
    return m


_LIKE_CACHE: dict = {}


def bind_param(v, t):
    """A parameter's Python value checked / converted for its inferred type."""
    if v is None:
        return None
    f = family(t)
    if isinstance(v, str) and f not in ("text", "unknown"):
        return dt.parse_literal(v, t)
    if f == "int":
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise errors.DatatypeMismatch(
                    f"parameter of type {type(v).__name__} where {t} is expected: {v!r:.40}")
        return dt.cast_value(int(v), BIGINT, t)
    if f == "float":
        import decimal
        if isinstance(v, decimal.Decimal):
            v = float(v)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise errors.DatatypeMismatch(
                f"parameter of type {type(v).__name__} where {t} is expected: {v!r:.40}")
        return float(v) if t.name != "real" else dt.cast_value(float(v), dt.DOUBLE, t)
    if f == "bool":
        if not isinstance(v, (bool, np.bool_)):
            raise errors.DatatypeMismatch(
                f"parameter of type {type(v).__name__} where boolean is expected: {v!r:.40}")
        return bool(v)
    if f == "ts":
        import datetime as _d
        if isinstance(v, _d.datetime):
            return v.replace(tzinfo=None) if v.tzinfo is None else \
                v.astimezone(_d.timezone.utc).replace(tzinfo=None)
        if isinstance(v, _d.date):
            return _d.datetime(v.year, v.month, v.day)
        raise errors.DatatypeMismatch(
            f"parameter of type {type(v).__name__} where timestamp is expected: {v!r:.40}")
    if f == "text":
        if not isinstance(v, str):
            raise errors.DatatypeMismatch(
                f"parameter of type {type(v).__name__} where text is expected: {v!r:.40}")
        return v
    if f in ("num", "date", "time", "tstz", "interval", "bytea", "uuid"):
        from minidb.types import coerce
        try:
            return coerce(t, v)
        except errors.DatatypeMismatch:
            raise errors.DatatypeMismatch(
                f"parameter of type {type(v).__name__} where {t} is expected: {v!r:.40}"
            ) from None
    return v

