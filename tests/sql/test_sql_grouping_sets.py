"""GROUPING SETS / ROLLUP / CUBE and grouping() against PostgreSQL 15's answers
(``golden/pg15_grouping.json``, made once by ``pg_grouping_queries.py`` with a throw-away
server: sqlite3 has no grouping sets), plus PostgreSQL's errors and the plan's shape; and
a hypothesis differential test against sqlite3 running each query's definition - the
UNION ALL of one GROUP BY per grouping set, NULL for the columns a set lacks and
grouping()'s bits as constants - over random rows with NULLs.

Values compare as PostgreSQL's text output; numbers with a tolerance (avg is double in
minidb, numeric in PostgreSQL).
"""

from __future__ import annotations

import json
import math
import os

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidb.errors as errors
from pg_grouping_queries import QUERIES, SETUP  # noqa: E402 - beside this file

GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "golden",
                                     "pg15_grouping.json")))


def _text(v) -> str:
    if v is None:
        return "<NULL>"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _same(ours: str, theirs: str) -> bool:
    if ours == theirs:
        return True
    try:
        return math.isclose(float(ours), float(theirs), rel_tol=1e-9, abs_tol=1e-9)
    except ValueError:
        return False


@pytest.fixture(scope="module")
def gdb(tmp_path_factory):
    from minidb.instance import Instance
    from minidb.session import Session
    from minidb.sql import Engine
    inst = Instance(tmp_path_factory.mktemp("grouping") / "data", shared_buffers=128)
    s = Session(inst)
    e = Engine(s)
    for q in SETUP:
        e.execute(q)
    yield e
    s.close()
    inst.close()


@pytest.mark.parametrize("sql", QUERIES, ids=[q[:60] for q in QUERIES])
def test_grouping_sets_match_postgresql(gdb, sql):
    want = GOLDEN["answers"][sql]
    got = [[_text(v) for v in r] for r in gdb.execute(sql).rows]
    assert len(got) == len(want), (sql, got, want)
    for a, b in zip(got, want):
        assert len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b)), (sql, got, want)


def test_golden_file_covers_every_query():
    assert set(GOLDEN["answers"]) == set(QUERIES)


@pytest.mark.parametrize("sql,words", [
    ("SELECT grouping(a) FROM g", "arguments to GROUPING must be grouping expressions"),
    ("SELECT grouping(b) FROM g GROUP BY a", "arguments to GROUPING must be grouping"),
    ("SELECT b FROM g GROUP BY ROLLUP (a)", 'must appear in the GROUP BY clause'),
    ("SELECT a FROM g WHERE grouping(a) = 0 GROUP BY a",
     "grouping operations are not allowed in WHERE"),
])
def test_grouping_errors(gdb, sql, words):
    with pytest.raises(errors.GroupingError) as ei:
        gdb.execute(sql)
    assert ei.value.sqlstate == "42803" and words in str(ei.value)


def test_plain_group_by_grouping_is_zero_and_plan_shape(gdb):
    assert gdb.execute("SELECT a, grouping(a) FROM g GROUP BY a ORDER BY 1").rows[0][1] == 0
    plan = [r[0] for r in gdb.execute("EXPLAIN SELECT a, b, count(*) FROM g "
                                      "GROUP BY ROLLUP (a, b)").rows]
    assert plan[0].startswith("MixedAggregate")
    assert [p.strip() for p in plan[1:4]] == ["Hash Key: a, b", "Hash Key: a", "Group Key: ()"]


def test_explain_json_lists_the_grouping_sets(gdb):
    plan = json.loads(gdb.execute("EXPLAIN (FORMAT JSON, COSTS OFF) SELECT a, count(*) FROM g "
                                  "GROUP BY ROLLUP (a, b)").rows[0][0])[0]["Plan"]
    assert (plan["Node Type"], plan["Strategy"]) == ("Aggregate", "Mixed")
    assert plan["Grouping Sets"] == [{"Hash Keys": [["a", "b"]]}, {"Hash Keys": [["a"]]},
                                     {"Group Keys": [[]]}]
    assert "Grouping Sets" not in plan["Plans"][0]


# -- differential: grouping sets as the UNION ALL they are defined to be ----------------------
COLS = ["a", "b", "s"]
g_rows = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 2)),
                            st.one_of(st.none(), st.integers(-2, 2)),
                            st.one_of(st.none(), st.sampled_from(["x", "y", "xy"]))),
                  min_size=0, max_size=20)


@st.composite
def grouping_query(draw):
    """(minidb's GROUP BY text, its expanded sets as lists of columns)."""
    sub = st.lists(st.sampled_from(COLS), min_size=0, max_size=3, unique=True)
    items = []
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["col", "rollup", "cube", "sets"]))
        if kind == "col":
            c = draw(st.sampled_from(COLS))
            items.append((c, [[c]]))
        elif kind in ("rollup", "cube"):
            cols = draw(st.lists(st.sampled_from(COLS), min_size=1, max_size=3, unique=True))
            if kind == "rollup":
                sets = [cols[:k] for k in range(len(cols), -1, -1)]
            else:
                n = len(cols)
                sets = [[cols[i] for i in range(n) if m >> (n - 1 - i) & 1]
                        for m in range((1 << n) - 1, -1, -1)]
            items.append((f"{kind.upper()} ({', '.join(cols)})", sets))
        else:
            sets = draw(st.lists(sub, min_size=1, max_size=4))
            text = ", ".join("(" + ", ".join(x) + ")" for x in sets)
            items.append((f"GROUPING SETS ({text})", sets))
    sets = [[]]
    for _, its in items:
        sets = [x + y for x in sets for y in its]
    return ", ".join(t for t, _ in items), sets


AGGS = "count(*), sum(b), min(s), max(a), count(s)"


@pytest.fixture(scope="module")
def gboth(tmp_path_factory):
    from minidb.instance import Instance
    from minidb.session import Session
    from minidb.sql import Engine
    inst = Instance(tmp_path_factory.mktemp("gdiff") / "data", shared_buffers=128)
    s = Session(inst)
    e = Engine(s)
    e.execute("CREATE TABLE r (id int, a int, b int, s text)")
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE r (id INTEGER, a INTEGER, b INTEGER, s TEXT)")
    yield e, con
    con.close()
    s.close()
    inst.close()


def _key(row):
    return tuple((v is None, str(v)) for v in row)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=g_rows, q=grouping_query())
def test_grouping_sets_agree_with_union_of_group_bys(gboth, data, q):
    e, con = gboth
    e.execute("DELETE FROM r")
    con.execute("DELETE FROM r")
    for i, r in enumerate(data):
        e.execute("INSERT INTO r VALUES (?, ?, ?, ?)", [i, *r])
        con.execute("INSERT INTO r VALUES (?, ?, ?, ?)", (i, *r))
    text, sets = q
    used = [c for c in COLS if any(c in st for st in sets)]
    gr = f", grouping({', '.join(used)})" if used else ""
    ours = e.execute(f"SELECT {', '.join(used + [AGGS])}{gr} FROM r GROUP BY {text}").rows
    parts = []
    for st in sets:
        bits = sum(1 << (len(used) - 1 - k) for k, c in enumerate(used) if c not in st)
        cols = [c if c in st else "NULL" for c in used]
        parts.append(f"SELECT {', '.join(cols + [AGGS])}{', ' + str(bits) if used else ''} "
                     f"FROM r" + (f" GROUP BY {', '.join(dict.fromkeys(st))}" if st else ""))
    theirs = con.execute(" UNION ALL ".join(parts)).fetchall()
    assert sorted(map(tuple, ours), key=_key) == sorted(theirs, key=_key), (text, sets)
