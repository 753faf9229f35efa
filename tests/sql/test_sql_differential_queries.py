"""Differential test of the query forms beyond a single SELECT: hypothesis generates data
with NULLs and queries with joins of every kind (inner, LEFT, RIGHT, FULL, USING,
NATURAL), subqueries (IN, NOT IN with NULLs, EXISTS, NOT EXISTS, correlated and scalar
subqueries, derived tables), WITH, set operations, window functions and the string
functions on which sqlite3 and PostgreSQL agree; minidb and sqlite3 (3.39 or later: RIGHT
and FULL joins) run them over the same rows and must agree.  Each query runs again in
minidb with hash joins and sequential scans off (nested loops, index scans, the outer and
semi/anti forms of the nested loop).

Where sqlite3 and PostgreSQL differ (INTERSECT ALL / EXCEPT ALL, DISTINCT ON, FILTER,
generate_series, array_agg, ...), ``test_sql_pg_golden.py`` compares with answers
PostgreSQL 15 gave.

Avoided explicitly: ``||`` with NULL (both NULL, fine), ``max(a, b)`` (sqlite's scalar max
differs from greatest), group_concat's order; every ORDER BY ends with a unique key so the
order is total; windows whose function needs a total order (``row_number``, ``lag``) order
by the unique key, the others state NULLS FIRST / LAST (sqlite3 sorts NULLs first).
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb.instance import Instance
from minidb.session import Session
from minidb.sql import Engine

from test_sql_differential import _compare  # noqa: E402 - the same comparison

pytestmark = pytest.mark.skipif(sqlite3.sqlite_version_info < (3, 39),
                                reason="sqlite3 before 3.39 has no RIGHT / FULL JOIN")

small_int = st.one_of(st.none(), st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3))
small_text = st.one_of(st.none(), st.sampled_from(["a", "b", "ab", "", "abc"]))
t1_rows = st.lists(st.tuples(small_int, small_int, small_text), min_size=0, max_size=12)
t2_rows = st.lists(st.tuples(small_int, small_int, small_text), min_size=0, max_size=10)

JOINS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "LEFT OUTER JOIN", "FULL OUTER JOIN",
         "INNER JOIN"]
ONS = ["t1.a = t2.a", "t1.b = t2.d", "t1.a = t2.a AND t1.b < t2.d", "t1.a < t2.d",
       "t1.a = t2.a AND t2.d IS NOT NULL", "t1.s = t2.s", "t1.a = t2.a OR t1.b = t2.d"]
WHERES = ["", " WHERE t1.a IS NULL", " WHERE t2.d IS NULL", " WHERE t1.b > 0",
          " WHERE t2.a > t1.a", " WHERE coalesce(t1.a, t2.a, 0) >= 0"]
SUBQ = [
    "SELECT t1.id FROM t1 WHERE t1.a IN (SELECT a FROM t2)",
    "SELECT t1.id FROM t1 WHERE t1.a NOT IN (SELECT a FROM t2)",
    "SELECT t1.id FROM t1 WHERE t1.a NOT IN (SELECT a FROM t2 WHERE a IS NOT NULL)",
    "SELECT t1.id FROM t1 WHERE t1.b IN (SELECT d FROM t2 WHERE t2.a = t1.a)",
    "SELECT t1.id FROM t1 WHERE t1.b NOT IN (SELECT d FROM t2 WHERE t2.a = t1.a)",
    "SELECT t1.id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.a = t1.a)",
    "SELECT t1.id FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE t2.a = t1.a)",
    "SELECT t1.id FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE t2.a = t1.a AND t2.d > t1.b)",
    "SELECT t1.id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.d < t1.b)",
    "SELECT t1.id FROM t1 WHERE EXISTS (SELECT 1 FROM t2)",
    "SELECT t1.id, (SELECT max(t2.d) FROM t2 WHERE t2.a = t1.a) FROM t1",
    "SELECT t1.id, (SELECT count(*) FROM t2 WHERE t2.d > t1.b) FROM t1",
    "SELECT t1.id FROM t1 WHERE t1.b > (SELECT avg(d) FROM t2)",
    "SELECT t1.id FROM t1 WHERE t1.a = (SELECT min(a) FROM t2)",
    "SELECT x.id, x.k FROM (SELECT id, a + b AS k FROM t1 WHERE a IS NOT NULL) x WHERE x.k > 0",
    "SELECT k, count(*) FROM (SELECT a % 2 AS k FROM t1) s GROUP BY k",
    "SELECT t1.id, s.n FROM t1 JOIN (SELECT a, count(*) AS n FROM t2 GROUP BY a) s "
    "ON s.a = t1.a",
    "SELECT t1.id FROM t1 WHERE t1.a IN (SELECT a FROM t2 WHERE t2.d IN (SELECT b FROM t1 x))",
    "SELECT t1.id FROM t1 WHERE t1.s IN (SELECT s FROM t2) OR t1.a IS NULL",
]
CTES = [
    "WITH q AS (SELECT a, count(*) AS n FROM t2 GROUP BY a) "
    "SELECT t1.id, q.n FROM t1 JOIN q ON q.a = t1.a",
    "WITH q AS (SELECT a FROM t1 WHERE b > 0), r AS (SELECT a FROM q WHERE a < 2) "
    "SELECT count(*), sum(a) FROM r",
    "WITH q AS (SELECT id, a FROM t1) SELECT x.id, y.id FROM q x JOIN q y ON x.a = y.a",
    "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 7) "
    "SELECT n FROM c",
    "WITH RECURSIVE c(n) AS (SELECT 0 UNION SELECT (n + 2) % 5 FROM c) SELECT n FROM c",
]
SETOPS = ["UNION", "UNION ALL", "INTERSECT", "EXCEPT"]
SETSIDES = ["SELECT a FROM t1", "SELECT a FROM t2", "SELECT d FROM t2", "SELECT b FROM t1",
            "SELECT a FROM t1 WHERE b > 0", "SELECT s FROM t1", "SELECT s FROM t2"]
WINDOWS = [
    "row_number() OVER (ORDER BY id)",
    "row_number() OVER (PARTITION BY a ORDER BY id DESC)",
    "rank() OVER (ORDER BY a NULLS LAST)", "rank() OVER (PARTITION BY b ORDER BY a NULLS FIRST)",
    "dense_rank() OVER (ORDER BY b DESC NULLS FIRST)",
    "sum(a) OVER (PARTITION BY b)", "sum(a) OVER (ORDER BY id)",
    "sum(b) OVER (PARTITION BY a ORDER BY b NULLS LAST)", "count(*) OVER (PARTITION BY a)",
    "count(b) OVER (ORDER BY a DESC NULLS LAST)", "min(b) OVER (PARTITION BY a ORDER BY id)",
    "max(b) OVER (ORDER BY id)", "avg(b) OVER (PARTITION BY a)",
    "lag(b) OVER (ORDER BY id)", "lead(a, 2) OVER (ORDER BY id)",
    "lag(a, 1, -9) OVER (PARTITION BY b ORDER BY id)",
    "first_value(a) OVER (PARTITION BY b ORDER BY id)",
    "max(s) OVER (PARTITION BY a)",
]
FUNCS = ["abs(a)", "length(s)", "lower(s)", "upper(s)", "substr(s, 2)", "substr(s, 1, 2)",
         "replace(s, 'a', 'x')", "trim(s)", "coalesce(a, b, 0)", "nullif(a, b)", "a % 2",
         "s || 'z'", "ltrim(s, 'a')", "rtrim(s, 'b')"]


@st.composite
def query(draw):
    kind = draw(st.sampled_from(["join", "join", "using", "subq", "subq", "cte", "setop",
                                 "window", "window", "func", "aggjoin"]))
    if kind == "join":
        j, on, w = draw(st.sampled_from(JOINS)), draw(st.sampled_from(ONS)), \
            draw(st.sampled_from(WHERES))
        return f"SELECT t1.id, t2.id, t1.a, t2.d FROM t1 {j} t2 ON {on}{w}", False
    if kind == "aggjoin":
        j, on = draw(st.sampled_from(JOINS)), draw(st.sampled_from(ONS))
        return (f"SELECT t1.a, count(*), count(t2.id), sum(t2.d) FROM t1 {j} t2 ON {on} "
                "GROUP BY t1.a"), False
    if kind == "using":
        j = draw(st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]))
        cols = draw(st.sampled_from(["a", "s", "a, s"]))
        return (f"SELECT t1.id, t2.id, {cols.split(',')[0]} FROM t1 {j} t2 USING ({cols})",
                False)
    if kind == "subq":
        return draw(st.sampled_from(SUBQ)), False
    if kind == "cte":
        return draw(st.sampled_from(CTES)), False
    if kind == "setop":
        a, b = draw(st.sampled_from(SETSIDES)), draw(st.sampled_from(SETSIDES))
        if ("s FROM" in a) != ("s FROM" in b):
            b = a
        op = draw(st.sampled_from(SETOPS))
        return f"{a} {op} {b}", False
    if kind == "window":
        ws = draw(st.lists(st.sampled_from(WINDOWS), min_size=1, max_size=3))
        return f"SELECT id, {', '.join(ws)} FROM t1", False
    fs = draw(st.lists(st.sampled_from(FUNCS), min_size=1, max_size=3))
    return f"SELECT id, {', '.join(fs)} FROM t1", False


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("diffq") / "data", shared_buffers=256)
    s = Session(inst)
    e = Engine(s)
    e.execute("CREATE TABLE t1 (id int PRIMARY KEY, a int, b int, s text)")
    e.execute("CREATE TABLE t2 (id int PRIMARY KEY, a int, d int, s text)")
    e.execute("CREATE INDEX t2_a ON t2 (a)")
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t1 (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, s TEXT)")
    con.execute("CREATE TABLE t2 (id INTEGER PRIMARY KEY, a INTEGER, d INTEGER, s TEXT)")
    yield e, con
    con.close()
    s.close()
    inst.close()


def _load(e, con, r1, r2):
    for t in ("t1", "t2"):
        e.execute(f"DELETE FROM {t}")
        con.execute(f"DELETE FROM {t}")
    for t, rows in (("t1", r1), ("t2", r2)):
        ins = e.prepare(f"INSERT INTO {t} VALUES (?, ?, ?, ?)")
        for i, r in enumerate(rows):
            ins.execute((i + 1,) + r)
            con.execute(f"INSERT INTO {t} VALUES (?, ?, ?, ?)", (i + 1,) + r)


def _check(both, r1, r2, queries):
    e, con = both
    _load(e, con, r1, r2)
    for sql, ordered in queries:
        theirs = con.execute(sql).fetchall()
        ours = e.execute(sql).rows
        _compare(ours, theirs, ordered, sql)
        e.execute("SET enable_hashjoin = off")
        e.execute("SET enable_seqscan = off")
        try:
            forced = e.execute(sql).rows
        finally:
            e.execute("RESET enable_hashjoin")
            e.execute("RESET enable_seqscan")
        _compare(forced, theirs, ordered, sql + "  [hashjoin, seqscan off]")


_HC = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=100, deadline=None, suppress_health_check=_HC)
@given(r1=t1_rows, r2=t2_rows, queries=st.lists(query(), min_size=1, max_size=5))
def test_queries_agree_with_sqlite(both, r1, r2, queries):
    _check(both, r1, r2, queries)


@pytest.mark.long
@settings(max_examples=600, deadline=None, suppress_health_check=_HC)
@given(r1=t1_rows, r2=t2_rows, queries=st.lists(query(), min_size=1, max_size=8))
def test_queries_agree_with_sqlite_long(both, r1, r2, queries):
    _check(both, r1, r2, queries)


@pytest.mark.parametrize("sql", SUBQ + CTES)
def test_every_fixed_query_on_fixed_data(both, sql):
    """Each listed subquery and CTE form at least once, on data with NULLs everywhere."""
    r1 = [(1, 1, "a"), (None, 2, "b"), (2, None, None), (1, 3, "ab"), (3, 0, "")]
    r2 = [(1, 2, "a"), (None, 1, None), (2, 3, "b"), (4, None, "ab")]
    _check(both, r1, r2, [(sql, False)])
