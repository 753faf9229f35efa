"""minidb against PostgreSQL 15's answers (``golden/pg15.json``, made once by
``pg_golden_queries.py`` with a throw-away server) for the queries where sqlite3 differs
from PostgreSQL or lacks the construct: INTERSECT / EXCEPT ALL, DISTINCT ON, FILTER,
generate_series, string_agg / array_agg with ORDER BY, bool_and, stddev, IS DISTINCT FROM,
regular expressions, LIKE ESCAPE, the math, string and timestamp functions, percent_rank,
ntile, FULL / NATURAL joins, NOT IN with NULLs, recursive CTEs.

Values are compared as PostgreSQL's text output; numbers with a tolerance (minidb computes
avg, stddev, round ... in double precision where PostgreSQL has numeric).  Queries
without ORDER BY compare as sorted lists of rows.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os

import pytest

from pg_golden_queries import QUERIES, SETUP  # noqa: E402 - beside this file

GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "golden", "pg15.json")))


def _text(v) -> str:
    if v is None:
        return "<NULL>"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, list):
        return "{" + ",".join("NULL" if x is None else _text(x) for x in v) + "}"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _same(ours: str, theirs: str) -> bool:
    if ours == theirs:
        return True
    try:
        a, b = float(ours), float(theirs)
    except ValueError:
        return False
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@pytest.fixture(scope="module")
def gdb(tmp_path_factory):
    from minidb.instance import Instance
    from minidb.session import Session
    from minidb.sql import Engine
    inst = Instance(tmp_path_factory.mktemp("golden") / "data", shared_buffers=256)
    s = Session(inst)
    e = Engine(s)
    for q in SETUP:
        e.execute(q)
    yield e
    s.close()
    inst.close()


def test_golden_file_answers_every_query():
    assert set(GOLDEN["answers"]) == set(QUERIES)
    assert GOLDEN["server_version"].startswith("15")


@pytest.mark.parametrize("sql", QUERIES, ids=[q[:60] for q in QUERIES])
def test_matches_postgresql_15(gdb, sql):
    want = GOLDEN["answers"][sql]
    got = [[_text(v) for v in row] for row in gdb.execute(sql).rows]
    if "ORDER BY" not in sql.upper().split(")")[-1] and " ORDER BY " not in sql.split("FROM")[-1]:
        want, got = sorted(want), sorted(got)
    assert len(got) == len(want), (sql, got, want)
    for g, w in zip(got, want):
        assert len(g) == len(w) and all(_same(a, b) for a, b in zip(g, w)), (sql, got, want)
