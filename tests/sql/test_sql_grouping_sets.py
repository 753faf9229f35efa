"""GROUPING SETS / ROLLUP / CUBE and grouping() against PostgreSQL 15's answers
(``golden/pg15_grouping.json``, made once by ``pg_grouping_queries.py`` with a throw-away
server: sqlite3 has no grouping sets), plus PostgreSQL's errors and the plan's shape.

Values compare as PostgreSQL's text output; numbers with a tolerance (avg is double in
minidb, numeric in PostgreSQL).
"""

from __future__ import annotations

import json
import math
import os

import pytest

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
    ("SELECT a FROM g WHERE grouping(a) = 0 GROUP BY a", "grouping operations are not allowed"),
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
