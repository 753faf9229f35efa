"""The expression compiler: SQL's three-valued logic (truth tables, vectorized and folded),
NULL propagation, integer arithmetic as PostgreSQL does it (truncating division, overflow,
division by zero only for rows that are evaluated), IN / LIKE / CASE / COALESCE."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from minidb import errors
from minidb.exec.chunk import Chunk, chunk_to_rows, column_from_values
from minidb.exec.datatypes import BIGINT, BOOLEAN, DOUBLE, INTEGER, TEXT
from minidb.exec.compile import K, compile_expr, evaluate, truth
from minidb.exec.expr import (Arith, BoolOp, Case, ColRef, Compare, Const, Func, InList, IsNull,
                              Like, Not)

T, F, N = True, False, None
VALUES = [T, F, N]


def col(i, t):
    return ColRef(("c", i), t, f"c{i}")


def run(e, *columns, types):
    """Values of ``e`` over rows built from ``columns`` (Python lists, None = NULL)."""
    n = len(columns[0]) if columns else 1
    chunk = Chunk([column_from_values(list(c), t) for c, t in zip(columns, types)], n)
    layout = {("c", i): i for i in range(len(columns))}
    c = compile_expr(e, layout)
    vals, mask = evaluate(c, chunk)
    return chunk_to_rows(Chunk([(vals, mask)], n), [e.type]), c


def ref_and(a, b):
    if a is F or b is F:
        return F
    if a is T and b is T:
        return T
    return N


def ref_or(a, b):
    if a is T or b is T:
        return T
    if a is F and b is F:
        return F
    return N


def ref_not(a):
    return N if a is N else (not a)


PAIRS = list(itertools.product(VALUES, VALUES))


@pytest.mark.parametrize("op,ref", [("and", ref_and), ("or", ref_or)])
def test_truth_tables_vectorized(op, ref):
    a = [p[0] for p in PAIRS]
    b = [p[1] for p in PAIRS]
    rows, _ = run(BoolOp(op, (col(0, BOOLEAN), col(1, BOOLEAN))), a, b,
                  types=[BOOLEAN, BOOLEAN])
    assert [r[0] for r in rows] == [ref(x, y) for x, y in PAIRS]


@pytest.mark.parametrize("op,ref", [("and", ref_and), ("or", ref_or)])
def test_truth_tables_with_constants(op, ref):
    # one side a constant (folded), the other a column: every combination
    for c in VALUES:
        rows, _ = run(BoolOp(op, (col(0, BOOLEAN), Const(c, BOOLEAN))), VALUES, types=[BOOLEAN])
        assert [r[0] for r in rows] == [ref(x, c) for x in VALUES], c
        rows, _ = run(BoolOp(op, (Const(c, BOOLEAN), col(0, BOOLEAN))), VALUES, types=[BOOLEAN])
        assert [r[0] for r in rows] == [ref(c, x) for x in VALUES], c
    for x, y in PAIRS:      # both constants: folded at compile time
        _, c = run(BoolOp(op, (Const(x, BOOLEAN), Const(y, BOOLEAN))), types=[])
        assert isinstance(c, K) and c.value == ref(x, y)


def test_not_and_three_way_chains():
    rows, _ = run(Not(col(0, BOOLEAN)), VALUES, types=[BOOLEAN])
    assert [r[0] for r in rows] == [ref_not(x) for x in VALUES]
    triples = list(itertools.product(VALUES, repeat=3))
    cols = [[t[i] for t in triples] for i in range(3)]
    e = BoolOp("or", (BoolOp("and", (col(0, BOOLEAN), Not(col(1, BOOLEAN)))), col(2, BOOLEAN)))
    rows, _ = run(e, *cols, types=[BOOLEAN] * 3)
    assert [r[0] for r in rows] == [ref_or(ref_and(a, ref_not(b)), c) for a, b, c in triples]


def test_where_keeps_only_true():
    chunk = Chunk([column_from_values(VALUES, BOOLEAN)], 3)
    c = compile_expr(col(0, BOOLEAN), {("c", 0): 0})
    assert truth(c, chunk).tolist() == [True, False, False]
    c = compile_expr(Not(col(0, BOOLEAN)), {("c", 0): 0})
    assert truth(c, chunk).tolist() == [False, True, False]


def test_comparisons_with_null_are_null():
    for op in ("=", "<>", "<", "<=", ">", ">="):
        rows, _ = run(Compare(op, col(0, INTEGER), col(1, INTEGER)), [1, None, 2, None],
                      [1, 1, None, None], types=[INTEGER, INTEGER])
        assert rows[1][0] is None and rows[2][0] is None and rows[3][0] is None
        assert rows[0][0] == (op in ("=", "<=", ">="))
        _, c = run(Compare(op, col(0, INTEGER), Const(None, INTEGER)), [1], types=[INTEGER])
        assert isinstance(c, K) and c.value is None
    rows, _ = run(IsNull(col(0, INTEGER)), [1, None], types=[INTEGER])
    assert rows == [(False,), (True,)]
    rows, _ = run(IsNull(col(0, INTEGER), negated=True), [1, None], types=[INTEGER])
    assert rows == [(True,), (False,)]


def test_integer_arithmetic_like_postgresql():
    a = [7, -7, 7, -7, 0, None]
    b = [2, 2, -2, -2, 5, 1]
    rows, _ = run(Arith("/", col(0, INTEGER), col(1, INTEGER), INTEGER), a, b,
                  types=[INTEGER, INTEGER])
    assert [r[0] for r in rows] == [3, -3, -3, 3, 0, None]
    rows, _ = run(Arith("%", col(0, INTEGER), col(1, INTEGER), INTEGER), a, b,
                  types=[INTEGER, INTEGER])
    assert [r[0] for r in rows] == [1, -1, 1, -1, 0, None]
    rows, _ = run(Arith("+", col(0, INTEGER), Const(None, INTEGER), INTEGER), [1], types=[INTEGER])
    assert rows == [(None,)]


def test_overflow_and_division_by_zero():
    with pytest.raises(errors.NumericValueOutOfRange):
        run(Arith("*", col(0, INTEGER), Const(2, INTEGER), INTEGER), [2 ** 30], types=[INTEGER])
    with pytest.raises(errors.NumericValueOutOfRange):
        run(Arith("+", col(0, BIGINT), Const(1, BIGINT), BIGINT), [2 ** 63 - 1], types=[BIGINT])
    with pytest.raises(errors.NumericValueOutOfRange):
        run(Arith("*", col(0, BIGINT), col(0, BIGINT), BIGINT), [2 ** 32], types=[BIGINT])
    with pytest.raises(errors.NumericValueOutOfRange):
        run(Arith("/", col(0, INTEGER), Const(-1, INTEGER), INTEGER), [-2 ** 31],
            types=[INTEGER])
    rows, _ = run(Arith("*", col(0, BIGINT), col(0, BIGINT), BIGINT), [3037000499],
                  types=[BIGINT])
    assert rows == [(3037000499 ** 2,)]
    with pytest.raises(errors.DivisionByZero):
        run(Arith("/", col(0, INTEGER), col(1, INTEGER), INTEGER), [1, 2], [1, 0],
            types=[INTEGER, INTEGER])
    with pytest.raises(errors.DivisionByZero):
        run(Arith("/", col(0, DOUBLE), Const(0.0, DOUBLE), DOUBLE), [1.5], types=[DOUBLE])
    # NULL divisor: NULL, not an error
    rows, _ = run(Arith("/", col(0, INTEGER), col(1, INTEGER), INTEGER), [1], [None],
                  types=[INTEGER, INTEGER])
    assert rows == [(None,)]


def test_errors_only_for_rows_evaluated():
    # b <> 0 AND a / b > 1: no error although the batch has b = 0
    a, b = [10, 10, 10], [0, 2, 20]
    e = BoolOp("and", (Compare("<>", col(1, INTEGER), Const(0, INTEGER)),
                       Compare(">", Arith("/", col(0, INTEGER), col(1, INTEGER), INTEGER),
                               Const(1, INTEGER))))
    rows, _ = run(e, a, b, types=[INTEGER, INTEGER])
    assert [r[0] for r in rows] == [False, True, False]
    e = BoolOp("or", (Compare("=", col(1, INTEGER), Const(0, INTEGER)),
                      Compare(">", Arith("/", col(0, INTEGER), col(1, INTEGER), INTEGER),
                              Const(1, INTEGER))))
    rows, _ = run(e, a, b, types=[INTEGER, INTEGER])
    assert [r[0] for r in rows] == [True, True, False]
    e = Case(((Compare("=", col(1, INTEGER), Const(0, INTEGER)), Const(-1, INTEGER)),),
             Arith("/", col(0, INTEGER), col(1, INTEGER), INTEGER), INTEGER)
    rows, _ = run(e, a, b, types=[INTEGER, INTEGER])
    assert [r[0] for r in rows] == [-1, 5, 0]


def test_in_list_with_null():
    rows, _ = run(InList(col(0, INTEGER), (Const(1, INTEGER), Const(None, INTEGER))),
                  [1, 2, None], types=[INTEGER])
    assert [r[0] for r in rows] == [True, None, None]
    rows, _ = run(InList(col(0, INTEGER), (Const(1, INTEGER), Const(None, INTEGER)),
                         negated=True), [1, 2, None], types=[INTEGER])
    assert [r[0] for r in rows] == [False, None, None]
    rows, _ = run(InList(col(0, INTEGER), (Const(1, INTEGER), Const(3, INTEGER)),
                         negated=True), [1, 2, None], types=[INTEGER])
    assert [r[0] for r in rows] == [False, True, None]


def test_like_patterns():
    s = ["abc", "ABC", "a_c", "a%c", "", None, "xabcx", "a\nc"]
    cases = {"abc": [T, F, F, F, F, N, F, F], "a%": [T, F, T, T, F, N, F, T],
             "%b%": [T, F, F, F, F, N, T, F], "a_c": [T, F, T, T, F, N, F, T],
             "a\\_c": [F, F, T, F, F, N, F, F], "a\\%c": [F, F, F, T, F, N, F, F],
             "%": [T, T, T, T, T, N, T, T]}
    for pat, want in cases.items():
        rows, _ = run(Like(col(0, TEXT), Const(pat, TEXT)), s, types=[TEXT])
        assert [r[0] for r in rows] == want, pat
    rows, _ = run(Like(col(0, TEXT), Const("abc", TEXT), case_insensitive=True), s,
                  types=[TEXT])
    assert [r[0] for r in rows][:2] == [True, True]


def test_coalesce_and_text_nulls():
    rows, _ = run(Func("coalesce", (col(0, INTEGER), col(1, INTEGER), Const(9, INTEGER)),
                       INTEGER), [1, None, None], [5, 6, None], types=[INTEGER, INTEGER])
    assert [r[0] for r in rows] == [1, 6, 9]
    rows, _ = run(Compare("<", col(0, TEXT), Const("b", TEXT)), ["a", None, "c"], types=[TEXT])
    assert [r[0] for r in rows] == [True, None, False]


def test_numpy_dtypes_stay_narrow():
    chunk = Chunk([(np.arange(5, dtype=np.int32), None)], 5)
    c = compile_expr(Compare("<", col(0, INTEGER), Const(3, INTEGER)), {("c", 0): 0})
    v, m = evaluate(c, chunk)
    assert v.dtype == np.bool_ and m is None and v.tolist() == [T, T, T, F, F]


def test_no_error_when_every_row_is_null():
    # PostgreSQL's division is strict: a NULL operand gives NULL before the zero check
    rows, _ = run(Arith("/", col(0, DOUBLE), Const(0.0, DOUBLE), DOUBLE), [None, None],
                  types=[DOUBLE])
    assert rows == [(None,), (None,)]
    rows, _ = run(Arith("%", col(0, INTEGER), Const(0, INTEGER), INTEGER), [None],
                  types=[INTEGER])
    assert rows == [(None,)]
