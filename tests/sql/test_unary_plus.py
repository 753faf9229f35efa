"""Unary plus: only the number types have it (PostgreSQL 15: ``+ 'abc'::text`` is 42883
``operator does not exist: + text``); sqlglot drops a unary plus, so minidb's dialect keeps
it (``minidb.sql.parser.dialect``).  Expected values from PostgreSQL 15."""

from __future__ import annotations

import decimal

import pytest

from minidb import errors


@pytest.fixture
def tp(db):
    db.x("CREATE TABLE tp (a int, b text, c date, d numeric)")
    db.x("INSERT INTO tp VALUES (1, 'x', '2020-01-01', 2.5)")
    return db


def test_numbers_keep_their_value_and_type(tp):
    assert tp.rows("SELECT + 5, +2.5, + '5', +(-3), + - 4") == \
        [(5, decimal.Decimal("2.5"), 5.0, -3, -4)]
    assert tp.rows("SELECT +a, + - a, +d, a + +a FROM tp") == [(1, -1, decimal.Decimal("2.5"), 2)]
    assert tp.rows("SELECT + NULL") == [(None,)]


@pytest.mark.parametrize("sql,typ", [
    ("SELECT + 'abc'::text", "text"),
    ("SELECT + b FROM tp", "text"),
    ("SELECT + c FROM tp", "date"),
    ("SELECT + current_date", "date"),
    ("SELECT +interval '1 day'", "interval"),
    ("SELECT a FROM tp WHERE + b = 'x'", "text"),
])
def test_other_types_have_none(tp, sql, typ):
    with pytest.raises(errors.UndefinedFunction) as ei:
        tp.x(sql)
    assert ei.value.sqlstate == "42883"
    assert str(ei.value).startswith(f"operator does not exist: + {typ}")


def test_unknown_literal_is_a_double(tp):
    with pytest.raises(errors.InvalidTextRepresentation) as ei:
        tp.x("SELECT + 'x'")
    assert 'invalid input syntax for type double precision: "x"' in str(ei.value)


def test_in_stored_expressions(tp):
    tp.x("CREATE TABLE tq (a int DEFAULT +1, b int CHECK (+b > 0))")
    tp.x("INSERT INTO tq (b) VALUES (2)")
    assert tp.rows("SELECT * FROM tq") == [(1, 2)]
    with pytest.raises(errors.CheckViolation):
        tp.x("INSERT INTO tq (b) VALUES (-2)")
