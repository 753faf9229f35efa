"""numeric's NaN (and Infinity) as PostgreSQL 15 has them: NaN equals NaN and sorts above
every other value, so ORDER BY, DISTINCT, GROUP BY, min / max, joins and B-tree indexes
agree with PostgreSQL; arithmetic on NaN gives NaN (before a division by zero); a cast of
NaN to an integer is 0A000.  Expected rows from PostgreSQL 15."""

from __future__ import annotations

import decimal
import pickle

import pytest

from minidb import errors
from minidb.types import NUMERIC_NAN

D = decimal.Decimal
NAN = D("NaN")


def _same(rows, want):
    """Row lists equal, NaN matching NaN."""
    assert len(rows) == len(want), rows
    for r, w in zip(rows, want):
        assert len(r) == len(w)
        for a, b in zip(r, w):
            if isinstance(b, D) and b.is_nan():
                assert isinstance(a, D) and a.is_nan(), (r, w)
            else:
                assert a == b and type(a) is type(b), (r, w)


@pytest.fixture
def n(db):
    db.x("CREATE TABLE n (x numeric)")
    db.x("INSERT INTO n VALUES (1), ('NaN'), (-5), (NULL), (2.5), ('Infinity'), ('-Infinity')")
    return db


def test_order_and_comparisons(n):
    _same(n.rows("SELECT x FROM n ORDER BY x"),
          [(D("-Infinity"),), (D(-5),), (D(1),), (D("2.5"),), (D("Infinity"),), (NAN,), (None,)])
    _same(n.rows("SELECT x, x <> 'NaN' FROM n ORDER BY x DESC NULLS LAST"),
          [(NAN, False), (D("Infinity"), True), (D("2.5"), True), (D(1), True), (D(-5), True),
           (D("-Infinity"), True), (None, None)])
    _same(n.rows("SELECT x FROM n WHERE x = 'NaN'"), [(NAN,)])
    assert n.rows("SELECT 'NaN'::numeric = 'NaN'::numeric, 'NaN'::numeric > 1e100, "
                  "'NaN'::numeric > 'Infinity'::numeric") == [(True, True, True)]


def test_aggregates_distinct_group_join(n):
    _same(n.rows("SELECT max(x), min(x), sum(x), avg(x), count(x) FROM n"),
          [(NAN, D("-Infinity"), NAN, NAN, 6)])
    _same(n.rows("SELECT sum(x), avg(x) FROM n WHERE x > -1000 AND x < 1000"),
          [(D("-1.5"), D("-0.50000000000000000000"))])
    _same(n.rows("SELECT DISTINCT x FROM n ORDER BY 1"),
          [(D("-Infinity"),), (D(-5),), (D(1),), (D("2.5"),), (D("Infinity"),), (NAN,), (None,)])
    assert n.rows("SELECT count(DISTINCT x) FROM n WHERE x = 'NaN' OR x = 1") == [(2,)]
    _same(n.rows("SELECT x, count(*) FROM (SELECT x FROM n UNION ALL SELECT 'NaN'::numeric) s "
                 "WHERE x IS NOT NULL AND x > 2 GROUP BY x ORDER BY x"),
          [(D("2.5"), 1), (D("Infinity"), 1), (NAN, 2)])
    _same(n.rows("SELECT a.x FROM n a JOIN n b ON a.x = b.x WHERE a.x > 2 ORDER BY 1"),
          [(D("2.5"),), (D("Infinity"),), (NAN,)])


def test_index_on_nan(n):
    n.x("CREATE INDEX n_x ON n (x)")
    n.x("SET enable_seqscan = off")
    _same(n.rows("SELECT x FROM n WHERE x >= 2.5 ORDER BY x"),
          [(D("2.5"),), (D("Infinity"),), (NAN,)])
    _same(n.rows("SELECT x FROM n WHERE x = 'NaN'"), [(NAN,)])


def test_arithmetic_and_functions(db):
    _same(db.rows("SELECT 'NaN'::numeric + 1, 'Infinity'::numeric * 0, 'NaN'::numeric % 0, "
                  "'NaN'::numeric / 0, mod(5, 'NaN'::numeric), 1 / 'Infinity'::numeric, "
                  "'nan'::numeric(3,1), 'Infinity'::numeric - 'Infinity'::numeric, "
                  "'Infinity'::numeric + 1"),
          [(NAN, NAN, NAN, NAN, NAN, D(0), NAN, NAN, D("Infinity"))])
    _same(db.rows("SELECT round('NaN'::numeric, 2), abs('NaN'::numeric), sign('NaN'::numeric), "
                  "floor('NaN'::numeric), ceil('Infinity'::numeric), "
                  "greatest(1, 'NaN'::numeric), least(1, 'NaN'::numeric), "
                  "'NaN'::numeric IN (1, 'NaN')"),
          [(NAN, NAN, NAN, NAN, D("Infinity"), NAN, D(1), True)])
    with pytest.raises(errors.DivisionByZero):
        db.x("SELECT 'Infinity'::numeric / 0")


@pytest.mark.parametrize("sql,msg", [
    ("SELECT 'NaN'::numeric::int", "cannot convert NaN to integer"),
    ("SELECT 'NaN'::numeric::bigint", "cannot convert NaN to bigint"),
    ("SELECT 'Infinity'::numeric::int", "cannot convert infinity to integer"),
])
def test_casts_to_integer(db, sql, msg):
    with pytest.raises(errors.NotSupportedError) as ei:
        db.x(sql)
    assert ei.value.sqlstate == "0A000" and msg in str(ei.value)


def test_the_nan_value():
    assert NUMERIC_NAN == NAN and NAN == NUMERIC_NAN and not NUMERIC_NAN < D(1)
    assert D(1) < NUMERIC_NAN and D("Infinity") < NUMERIC_NAN
    assert pickle.loads(pickle.dumps(NUMERIC_NAN)) is NUMERIC_NAN
    assert len({NUMERIC_NAN, pickle.loads(pickle.dumps(NUMERIC_NAN))}) == 1
    assert repr(NUMERIC_NAN) == "Decimal('NaN')"
