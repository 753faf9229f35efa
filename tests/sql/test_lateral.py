"""LATERAL subqueries in FROM (``minidb.exec.lateral``): after a comma, with JOIN ... ON and
LEFT JOIN ... ON, inside joins and subqueries, chained; functions in FROM, lateral with or
without the word.  The expected rows were taken from
PostgreSQL 15 on the same data."""

from __future__ import annotations

import pytest

from minidb import errors


@pytest.fixture
def ab(db):
    db.x("CREATE TABLE a (id int, x int)")
    db.x("INSERT INTO a VALUES (1, 2), (2, 0), (3, NULL)")
    db.x("CREATE TABLE b (id int, y int)")
    db.x("INSERT INTO b VALUES (1, 10), (1, 11), (2, 20)")
    return db


CASES = [
    ("SELECT a.id, s.* FROM a, LATERAL (SELECT b.y FROM b WHERE b.id = a.id "
     "ORDER BY b.y DESC LIMIT 1) s ORDER BY 1",
     [(1, 11), (2, 20)]),
    ("SELECT a.id, s.* FROM a LEFT JOIN LATERAL (SELECT b.y FROM b WHERE b.id = a.id) s "
     "ON s.y > 10 ORDER BY 1, 2",
     [(1, 11), (2, 20), (3, None)]),
    ("SELECT a.id, s.c FROM a CROSS JOIN LATERAL (SELECT count(*) c FROM b "
     "WHERE b.id = a.id) s ORDER BY 1",
     [(1, 2), (2, 1), (3, 0)]),
    ("SELECT a.id, g.* FROM a, LATERAL (SELECT generate_series(1, a.x) n) g ORDER BY 1, 2",
     [(1, 1), (1, 2)]),
    ("SELECT (SELECT max(s.z) FROM LATERAL (SELECT a.x + 1 z) s) FROM a ORDER BY 1",
     [(1,), (3,), (None,)]),
    ("SELECT * FROM a, LATERAL (SELECT * FROM b WHERE b.id = a.id) s JOIN b b2 "
     "ON b2.id = s.id ORDER BY 1, 2, 3, 4, 5, 6",
     [(1, 2, 1, 10, 1, 10), (1, 2, 1, 10, 1, 11), (1, 2, 1, 11, 1, 10),
      (1, 2, 1, 11, 1, 11), (2, 0, 2, 20, 2, 20)]),
    ("SELECT * FROM a, b JOIN LATERAL (SELECT a.x, b.y) s ON true ORDER BY 1, 3, 4",
     [(1, 2, 1, 10, 2, 10), (1, 2, 1, 11, 2, 11), (1, 2, 2, 20, 2, 20),
      (2, 0, 1, 10, 0, 10), (2, 0, 1, 11, 0, 11), (2, 0, 2, 20, 0, 20),
      (3, None, 1, 10, None, 10), (3, None, 1, 11, None, 11), (3, None, 2, 20, None, 20)]),
    ("SELECT a.id, s.*, b2.* FROM a, LATERAL (SELECT * FROM b WHERE b.id = a.id) s "
     "FULL JOIN b b2 ON b2.y = s.y + 1 ORDER BY 1, 2, 3, 4, 5",
     [(1, 1, 10, 1, 11), (1, 1, 11, None, None), (1, None, None, 1, 10),
      (1, None, None, 2, 20), (2, 2, 20, None, None), (2, None, None, 1, 10),
      (2, None, None, 1, 11), (2, None, None, 2, 20), (3, None, None, 1, 10),
      (3, None, None, 1, 11), (3, None, None, 2, 20)]),
    ("SELECT a.id, s.n FROM a, LATERAL (SELECT count(*) AS n FROM b WHERE b.id = a.id "
     "AND b.y > 5) s WHERE s.n > 0 ORDER BY 1",
     [(1, 2), (2, 1)]),
    ("SELECT s.k, sum(s.v) FROM a, LATERAL (SELECT a.id % 2 AS k, b.y AS v FROM b "
     "WHERE b.id <= a.id) s GROUP BY s.k ORDER BY 1",
     [(0, 41), (1, 62)]),
    ("SELECT a.id, t.m FROM a JOIN LATERAL (SELECT max(y) m FROM b WHERE b.id = a.id "
     "HAVING max(y) IS NOT NULL) t ON t.m > a.id ORDER BY 1",
     [(1, 11), (2, 20)]),
    ("SELECT * FROM a, LATERAL (SELECT 1) s(z) WHERE a.id = 2", [(2, 0, 1)]),
    ("SELECT x.*, z.* FROM (SELECT 1 AS i) x, LATERAL (SELECT x.i + 1 AS j) y, "
     "LATERAL (SELECT y.j * 10 AS k) z", [(1, 20)]),
    ("SELECT a.id, (SELECT count(*) FROM a a2, LATERAL (SELECT a2.x FROM b "
     "WHERE b.id = a.id LIMIT 1) q) FROM a ORDER BY 1",
     [(1, 3), (2, 3), (3, 0)]),
    # a function in FROM is lateral, with or without the word
    ("SELECT a.id, g.* FROM a, generate_series(1, a.x) g ORDER BY 1, 2", [(1, 1), (1, 2)]),
    ("SELECT a.id, g FROM a, LATERAL generate_series(1, a.x) g ORDER BY 1, 2",
     [(1, 1), (1, 2)]),
    ("SELECT a.id, g.n FROM a LEFT JOIN LATERAL generate_series(1, a.x) g(n) ON true "
     "ORDER BY 1, 2", [(1, 1), (1, 2), (2, None), (3, None)]),
    ("SELECT * FROM generate_series(1, 3) g, generate_series(g, 3) h ORDER BY 1, 2",
     [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 3)]),
]


@pytest.mark.parametrize("sql,rows", CASES)
def test_lateral_matches_postgres(ab, sql, rows):
    assert ab.rows(sql) == rows


def test_lateral_with_parameter_and_plan_reuse(ab):
    q = "SELECT a.id, s.y FROM a, LATERAL (SELECT y FROM b WHERE b.id = a.id AND y > %s) s " \
        "ORDER BY 1, 2"
    q = q.replace("%s", "$1")
    assert ab.rows(q, 10) == [(1, 11), (2, 20)]
    assert ab.rows(q, 15) == [(2, 20)]


def test_lateral_plan(ab):
    plan = ab.plan("SELECT a.id, s.* FROM a LEFT JOIN LATERAL (SELECT b.y FROM b "
                   "WHERE b.id = a.id) s ON s.y > 10 WHERE a.id < 3")
    lines = [ln.strip() for ln in plan.splitlines()]
    assert lines[0].startswith("Nested Loop Left Join")
    assert "Filter: (a.id < 3)" in lines             # pushed into the outer side
    assert "Filter: (s.y > 10)" in lines             # ON on the subquery alone: its scan
    assert "Filter: (b.id = a.id)" in lines          # the parameter, read per outer row


@pytest.mark.parametrize("sql", [
    "SELECT * FROM a RIGHT JOIN LATERAL (SELECT a.x) s ON true",
    "SELECT * FROM a FULL JOIN LATERAL (SELECT a.x) s ON true",
])
def test_lateral_needs_inner_or_left(ab, sql):
    with pytest.raises(errors.ProgrammingError) as ei:
        ab.x(sql)
    assert ei.value.sqlstate == "42P10"
    assert str(ei.value) == ('invalid reference to FROM-clause entry for table "a"\nDETAIL:  '
                             "The combining JOIN type must be INNER or LEFT for a LATERAL "
                             "reference.")


def test_without_lateral_a_subquery_cannot_see_its_neighbours(ab):
    with pytest.raises(errors.UndefinedTable) as ei:
        ab.x("SELECT * FROM a, (SELECT a.x) s")
    assert "a" in str(ei.value)
