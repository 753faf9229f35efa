"""Simple parameterization (minidb.sql.normalize and the engine's shapes): which literals
become parameters, which stay in the key, and that a parameterized text returns what its
full parse returns."""

from __future__ import annotations

import pytest

from minidb import errors
from minidb.sql.normalize import MAX_PARAMS, normalize

from tests.sql.conftest import DB


def test_integer_string_and_negative_literals():
    key, text, vals = normalize("UPDATE a SET v = v + -4711 WHERE k = 99 AND s = 'it''s'")
    assert text == "UPDATE a SET v = v + ? WHERE k = ? AND s = ?"
    assert vals == [-4711, 99, "it's"]
    assert key == text + "\x00iis"
    # binary minus stays an operator
    assert normalize("UPDATE a SET v = v - 5 WHERE k = 1")[1] == \
        "UPDATE a SET v = v - ? WHERE k = ?"


def test_integer_classes_by_range():
    assert normalize("SELECT v FROM a WHERE k = 2147483647")[0].endswith("\x00i")
    assert normalize("SELECT v FROM a WHERE k = 2147483648")[0].endswith("\x00I")
    assert normalize("SELECT v FROM a WHERE k = -2147483648")[0].endswith("\x00i")
    assert normalize("SELECT v FROM a WHERE k = 99999999999999999999") is None  # > bigint


def test_plan_dependent_literals_stay_in_the_key():
    key, text, vals = normalize("SELECT * FROM a WHERE k = 5 ORDER BY 2 LIMIT 10 OFFSET 3")
    assert text == "SELECT * FROM a WHERE k = ? ORDER BY 2 LIMIT 10 OFFSET 3"
    assert vals == [5]
    assert normalize("SELECT * FROM a WHERE k = 5 LIMIT 11")[0] != key
    # GROUP BY ordinals, select-list literals, range bounds, decimals, typed literals
    assert normalize("SELECT k, 1 FROM a WHERE k = 3 GROUP BY 1")[1] == \
        "SELECT k, 1 FROM a WHERE k = ? GROUP BY 1"
    for sql in ("SELECT * FROM a WHERE k < 5", "SELECT * FROM a WHERE k BETWEEN 1 AND 2",
                "SELECT * FROM a WHERE x = 1.5", "SELECT * FROM a WHERE t = '2020-01-01'::timestamp",
                "SELECT * FROM a WHERE 1 = 1", "SELECT * FROM a WHERE k = abs(5)",
                "SELECT * FROM a WHERE s LIKE 'a%'", "SELECT 1"):
        assert normalize(sql) is None, sql


def test_lists_and_values():
    assert normalize("SELECT * FROM a WHERE k IN (1, 2, 3)")[1] == \
        "SELECT * FROM a WHERE k IN (?, ?, ?)"
    assert normalize("INSERT INTO a VALUES (1, 'x'), (2, 'y')")[2] == [1, "x", 2, "y"]
    big = "INSERT INTO a VALUES " + ", ".join(f"({i})" for i in range(MAX_PARAMS + 1))
    assert normalize(big) is None      # a bulk VALUES list: not a point statement


def test_texts_left_to_the_full_parse():
    for sql in ("SELECT * FROM a WHERE k = ?", "SELECT * FROM a WHERE k = $1",
                "SELECT * FROM a WHERE k = 1 -- c", "SELECT * FROM a WHERE k = 1 /* c */",
                "SELECT * FROM a WHERE s = E'x'", 'SELECT * FROM "a" WHERE k = 1',
                "SELECT * FROM a WHERE k = 1; SELECT 2", "BEGIN", "VACUUM a",
                "CREATE TABLE b (k int DEFAULT 5)"):
        assert normalize(sql) is None, sql
    assert normalize("SELECT * FROM a WHERE k = 1;")[1] == "SELECT * FROM a WHERE k = ?;"


@pytest.fixture
def adb(inst):
    d = DB(inst)
    d.x("CREATE TABLE a (k integer PRIMARY KEY, v integer, s text, c char(4), b bigint)")
    for k in range(1, 6):
        d.x("INSERT INTO a VALUES (?, ?, ?, ?, ?)", k, k * 10, f"s{k}", "ab", k * 2**33)
    yield d
    d.close()


def test_one_shape_one_parse(adb):
    db = adb
    e = db.engine
    parses = e.counters["parses"]
    for k in (1, 2, 3, 4, 5, 6):
        got = db.rows(f"SELECT v FROM a WHERE k = {k}")
        assert got == ([(k * 10,)] if k <= 5 else [])
    assert e.counters["parses"] == parses + 1
    assert e.counters["parameterized"] >= 6
    for k, d in ((1, -5), (2, 7), (3, -7)):
        assert db.x(f"UPDATE a SET v = v + {d} WHERE k = {k}").rowcount == 1
    assert db.rows("SELECT k, v FROM a WHERE k IN (1, 2, 3) ORDER BY k") == \
        [(1, 5), (2, 27), (3, 23)]
    assert db.rows("SELECT s FROM a WHERE s = 'it''s'") == []
    db.x("INSERT INTO a (k, s) VALUES (10, 'it''s')")
    assert db.rows("SELECT k FROM a WHERE s = 'it''s'") == [(10,)]


def test_shapes_whose_parameters_would_change_the_meaning(adb):
    """A value out of the column's range, a char(n) comparison: the text's own parse."""
    db = adb
    assert db.rows("SELECT k FROM a WHERE k = 99999999999") == []
    assert db.rows("SELECT k FROM a WHERE c = 'ab' ORDER BY k") == [(k,) for k in range(1, 6)]
    assert db.rows(f"SELECT k FROM a WHERE b = {2 * 2**33}") == [(2,)]
    assert db.rows("SELECT k FROM a WHERE b = 4") == []
    with pytest.raises(errors.Error) as ei:
        db.x("UPDATE a SET v = v + 2147483647 WHERE k = 1")
    assert ei.value.sqlstate == "22003"


def test_same_results_with_the_setting_off(inst):
    on, off = DB(inst), DB(inst, enable_fast_path=False)
    on.x("CREATE TABLE a (k integer PRIMARY KEY, v integer)")
    for k in range(20):
        on.x(f"INSERT INTO a VALUES ({k}, {k * 3})")
    for sql in ("SELECT v FROM a WHERE k = 7", "SELECT k FROM a WHERE v = 9",
                "SELECT k FROM a WHERE k IN (1, 2, 40) ORDER BY 1 LIMIT 2",
                "SELECT count(*) FROM a WHERE v = 3 OR k = -1"):
        assert on.rows(sql) == off.rows(sql), sql
    assert off.engine.counters["parameterized"] == 0
    assert on.engine.counters["parameterized"] >= 4
    on.close()
    off.close()
