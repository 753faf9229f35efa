"""SELECT end to end through Engine: expressions, WHERE, aggregates, GROUP BY / HAVING,
ORDER BY with NULL placement, LIMIT / OFFSET, DISTINCT, joins, SELECT without FROM."""

from __future__ import annotations

import datetime as dt

import pytest

from minidb import errors


@pytest.fixture
def people(db):
    db.x("CREATE TABLE p (id integer PRIMARY KEY, name text, age integer, city varchar(20), "
         "score double precision)")
    db.x("INSERT INTO p VALUES (1, 'ann', 30, 'oslo', 1.5), (2, 'bob', NULL, 'rome', 2.5), "
         "(3, 'cy', 25, NULL, NULL), (4, 'dee', 30, 'oslo', 0.5), (5, NULL, 40, 'rome', 4.0)")
    return db


def test_select_star_and_columns(people):
    assert sorted(people.rows("SELECT * FROM p"))[0] == (1, "ann", 30, "oslo", 1.5)
    r = people.x("SELECT name, age + 1 AS older FROM p WHERE id = 1")
    assert r.rows == [("ann", 31)]
    assert [d[0] for d in r.description] == ["name", "older"]
    assert [d[1] for d in r.description] == ["text", "integer"]
    assert r.status == "SELECT 1" and r.rowcount == 1


def test_where_three_valued(people):
    # age is NULL for bob: neither age > 26 nor NOT (age > 26) keeps him
    assert sorted(people.rows("SELECT id FROM p WHERE age > 26")) == [(1,), (4,), (5,)]
    assert sorted(people.rows("SELECT id FROM p WHERE NOT (age > 26)")) == [(3,)]
    assert sorted(people.rows("SELECT id FROM p WHERE age > 26 OR city = 'rome'")) == \
        [(1,), (2,), (4,), (5,)]
    assert people.rows("SELECT id FROM p WHERE age IS NULL") == [(2,)]
    assert sorted(people.rows("SELECT id FROM p WHERE city IS NOT NULL AND age IS NOT NULL")) \
        == [(1,), (4,), (5,)]


def test_between_in_like(people):
    assert sorted(people.rows("SELECT id FROM p WHERE age BETWEEN 25 AND 30")) == \
        [(1,), (3,), (4,)]
    assert sorted(people.rows("SELECT id FROM p WHERE age NOT BETWEEN 25 AND 30")) == [(5,)]
    assert sorted(people.rows("SELECT id FROM p WHERE id IN (1, 3, 9)")) == [(1,), (3,)]
    assert sorted(people.rows("SELECT id FROM p WHERE id NOT IN (1, 3)")) == [(2,), (4,), (5,)]
    # NOT IN with a NULL in the list is never TRUE
    assert people.rows("SELECT id FROM p WHERE id NOT IN (1, NULL)") == []
    assert sorted(people.rows("SELECT id FROM p WHERE name LIKE '%e%'")) == [(4,)]
    assert sorted(people.rows("SELECT id FROM p WHERE name LIKE '_o_'")) == [(2,)]
    assert sorted(people.rows("SELECT id FROM p WHERE name ILIKE 'A%'")) == [(1,)]
    assert sorted(people.rows("SELECT id FROM p WHERE name NOT LIKE 'a%'")) == \
        [(2,), (3,), (4,)]


def test_aggregates(people):
    assert people.one("SELECT count(*) FROM p") == 5
    assert people.rows("SELECT count(age), sum(age), min(age), max(age) FROM p") == \
        [(4, 125, 25, 40)]
    assert people.one("SELECT avg(age) FROM p") == pytest.approx(31.25)
    assert people.one("SELECT count(DISTINCT city) FROM p") == 2
    assert people.one("SELECT sum(score) FROM p") == pytest.approx(8.5)
    assert people.rows("SELECT min(name), max(name) FROM p") == [("ann", "dee")]
    # aggregates of no rows: NULL, count 0
    assert people.rows("SELECT count(*), sum(age), max(name) FROM p WHERE id > 100") == \
        [(0, None, None)]


def test_group_by_having(people):
    rows = people.rows("SELECT city, count(*), sum(age) FROM p GROUP BY city ORDER BY city")
    assert rows == [("oslo", 2, 60), ("rome", 2, 40), (None, 1, 25)]
    rows = people.rows("SELECT city, count(*) AS n FROM p GROUP BY city HAVING count(*) > 1 "
                       "ORDER BY n DESC, city")
    assert rows == [("oslo", 2), ("rome", 2)]
    rows = people.rows("SELECT age / 10 AS decade, count(*) FROM p WHERE age IS NOT NULL "
                       "GROUP BY age / 10 ORDER BY 1")
    assert rows == [(2, 1), (3, 2), (4, 1)]
    assert people.rows("SELECT city, max(score) FROM p GROUP BY 1 ORDER BY 1 NULLS FIRST") == \
        [(None, None), ("oslo", 1.5), ("rome", 4.0)]
    with pytest.raises(errors.GroupingError):
        people.x("SELECT city, age FROM p GROUP BY city")


def test_order_by_nulls(people):
    assert [r[0] for r in people.rows("SELECT age FROM p ORDER BY age")] == \
        [25, 30, 30, 40, None]                       # ASC: NULLS LAST
    assert [r[0] for r in people.rows("SELECT age FROM p ORDER BY age DESC")] == \
        [None, 40, 30, 30, 25]                       # DESC: NULLS FIRST
    assert [r[0] for r in people.rows("SELECT age FROM p ORDER BY age NULLS FIRST")] == \
        [None, 25, 30, 30, 40]
    assert [r[0] for r in people.rows("SELECT age FROM p ORDER BY age DESC NULLS LAST")] == \
        [40, 30, 30, 25, None]
    assert people.rows("SELECT id FROM p ORDER BY age, id DESC") == \
        [(3,), (4,), (1,), (5,), (2,)]
    assert people.rows("SELECT id, name FROM p ORDER BY name DESC LIMIT 2") == \
        [(5, None), (4, "dee")]


def test_limit_offset(people):
    assert people.rows("SELECT id FROM p ORDER BY id LIMIT 2") == [(1,), (2,)]
    assert people.rows("SELECT id FROM p ORDER BY id LIMIT 2 OFFSET 3") == [(4,), (5,)]
    assert people.rows("SELECT id FROM p ORDER BY id OFFSET 4") == [(5,)]
    assert people.rows("SELECT id FROM p ORDER BY id LIMIT 0") == []
    assert people.rows("SELECT id FROM p ORDER BY id LIMIT ?", 1) == [(1,)]
    with pytest.raises(errors.DataError):
        people.x("SELECT id FROM p LIMIT -1")


def test_distinct(people):
    assert sorted(people.rows("SELECT DISTINCT city FROM p"), key=repr) == \
        sorted([("oslo",), ("rome",), (None,)], key=repr)
    assert people.rows("SELECT DISTINCT age FROM p ORDER BY age DESC") == \
        [(None,), (40,), (30,), (25,)]
    with pytest.raises(errors.InvalidColumnReference):
        people.x("SELECT DISTINCT city FROM p ORDER BY age")


def test_select_without_from(db):
    assert db.rows("SELECT 1, 'x', 2.5, true, NULL") == [(1, "x", 2.5, True, None)]
    assert db.rows("SELECT 7 / 2, -7 / 2, 7 % 3, -7 % 3, 7.0 / 2") == [(3, -3, 1, -1, 3.5)]
    assert db.rows("SELECT 'a' || 'b' || 1") == [("ab1",)]
    assert db.rows("SELECT 1 WHERE false") == []
    assert db.rows("SELECT CASE WHEN 1 > 2 THEN 'a' ELSE 'b' END") == [("b",)]
    assert db.rows("SELECT coalesce(NULL, 3), nullif(2, 2), abs(-4), upper('x')") == \
        [(3, None, 4, "X")]
    ts = db.one("SELECT '2020-01-02 03:04:05'::timestamp")
    assert ts == dt.datetime(2020, 1, 2, 3, 4, 5)


def test_joins(db):
    db.x("CREATE TABLE a (id int PRIMARY KEY, x int)")
    db.x("CREATE TABLE b (id int, a_id int, y text)")
    db.x("INSERT INTO a VALUES (1, 10), (2, 20), (3, NULL)")
    db.x("INSERT INTO b VALUES (1, 1, 'p'), (2, 1, 'q'), (3, 2, 'r'), (4, NULL, 's'), "
         "(5, 9, 't')")
    want = [(1, "p"), (1, "q"), (2, "r")]
    assert sorted(db.rows("SELECT a.id, b.y FROM a JOIN b ON a.id = b.a_id")) == want
    assert sorted(db.rows("SELECT a.id, b.y FROM a, b WHERE a.id = b.a_id")) == want
    assert sorted(db.rows("SELECT a.id, b.y FROM a INNER JOIN b ON b.a_id = a.id "
                          "WHERE b.y <> 'q'")) == [(1, "p"), (2, "r")]
    # cross join
    assert db.one("SELECT count(*) FROM a, b") == 15
    # three tables, non-equi condition
    db.x("CREATE TABLE c (lo int, hi int)")
    db.x("INSERT INTO c VALUES (0, 15), (15, 100)")
    rows = db.rows("SELECT a.id, c.lo FROM a JOIN c ON a.x >= c.lo AND a.x < c.hi "
                   "JOIN b ON b.a_id = a.id ORDER BY 1, 2")
    assert rows == [(1, 0), (1, 0), (2, 15)]
    with pytest.raises(errors.AmbiguousColumn):
        db.x("SELECT id FROM a, b")
    # the same join under each method gives the same rows
    for setting in ("enable_hashjoin", "enable_nestloop"):
        db.x(f"SET {setting} = off")
        assert sorted(db.rows("SELECT a.id, b.y FROM a JOIN b ON a.id = b.a_id")) == want
        db.x(f"RESET {setting}")


def test_self_join_with_aliases(db):
    db.x("CREATE TABLE e (id int, boss int)")
    db.x("INSERT INTO e VALUES (1, NULL), (2, 1), (3, 1), (4, 2)")
    rows = db.rows("SELECT w.id, m.id FROM e w JOIN e m ON w.boss = m.id ORDER BY w.id")
    assert rows == [(2, 1), (3, 1), (4, 2)]


def test_params(people):
    assert people.rows("SELECT name FROM p WHERE id = ?", 3) == [("cy",)]
    assert people.rows("SELECT name FROM p WHERE age > ? AND city = ?", 26, "rome") == \
        [(None,)]
    assert people.rows("SELECT ? + 1", 41) == [(42,)]
    assert people.rows("SELECT name FROM p WHERE id = $1 OR id = $1 + 1", 1) == \
        [("ann",), ("bob",)]
    with pytest.raises(errors.ProgrammingError):
        people.x("SELECT name FROM p WHERE id = ?")
    with pytest.raises(errors.ProgrammingError):
        people.x("SELECT name FROM p WHERE id = ?", 1, 2)


def test_char_semantics(db):
    db.x("CREATE TABLE c (v char(5), w varchar(5))")
    db.x("INSERT INTO c VALUES ('ab', 'ab')")
    assert db.rows("SELECT v, w FROM c") == [("ab   ", "ab")]
    assert db.one("SELECT count(*) FROM c WHERE v = 'ab'") == 1
    assert db.one("SELECT count(*) FROM c WHERE v = w") == 1
    assert db.one("SELECT length(v) FROM c") == 2


def test_now_and_current_timestamp_are_the_transaction_start(db):
    db.x("CREATE TABLE h (a integer, m timestamp)")
    db.x("BEGIN")
    db.x("INSERT INTO h VALUES (1, CURRENT_TIMESTAMP)")
    db.x("INSERT INTO h VALUES (2, now())")
    (t1,), (t2,) = db.rows("SELECT m FROM h ORDER BY a")
    # one value for the whole transaction (now() is timestamptz: as timestamp, in the
    # session's TimeZone, UTC)
    assert t1 == t2 == db.one("SELECT now()::timestamp") == db.one("SELECT localtimestamp")
    assert db.one("SELECT now()") == t1.replace(tzinfo=dt.timezone.utc)
    db.x("COMMIT")
    assert db.one("SELECT now()::timestamp") >= t1      # a new transaction, a new start
    assert isinstance(t1, dt.datetime)
    with pytest.raises((errors.UndefinedFunction, errors.NotSupportedError)):
        db.x("SELECT now(1)")   # sqlglot reads it as CURRENT_TIMESTAMP(1): a precision


def test_parenthesized_cross_join_is_one_from_item(db):
    # sqllogictest's random/ files write FROM ( t AS a CROSS JOIN t AS b )
    db.x("CREATE TABLE t (x integer)")
    db.x("INSERT INTO t VALUES (1), (2)")
    assert db.rows("SELECT count(*) FROM ( t AS a CROSS JOIN t b )") == [(4,)]
    assert db.rows("SELECT a.x, b.x FROM (t a CROSS JOIN t b) WHERE a.x < b.x") == [(1, 2)]
    assert db.rows("SELECT count(*) FROM (t a CROSS JOIN t b) JOIN t c ON c.x = a.x") \
        == [(4,)]


def test_in_subquery_numeric_constant_against_integer_column(db):
    # the integer-against-numeric-constant rewrite must not swap an IN test's sides
    db.x("CREATE TABLE t (x integer)")
    db.x("INSERT INTO t VALUES (1), (2)")
    assert db.rows("SELECT 1.23 IN (SELECT * FROM t)") == [(False,)]
    assert db.rows("SELECT 1.0 IN (SELECT x FROM t)") == [(True,)]
    assert db.rows("SELECT 1.23 NOT IN (SELECT x FROM t)") == [(True,)]
    assert db.rows("SELECT x FROM t WHERE x IN (SELECT 1.0)") == [(1,)]
