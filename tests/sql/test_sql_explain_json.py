"""EXPLAIN (FORMAT JSON): PostgreSQL's keys for the node fields minidb has, the same tree
as FORMAT TEXT, ANALYZE's actual rows and loops, BUFFERS and the summary times."""

from __future__ import annotations

import json

import pytest

from minidb.errors import NotSupportedError


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (id int PRIMARY KEY, grp int, name text)")
    db.x("CREATE TABLE u (id int, t_id int)")
    db.x("INSERT INTO t SELECT g, g % 5, 'n' || g FROM generate_series(1, 200) g")
    db.x("INSERT INTO u SELECT g, g % 50 FROM generate_series(1, 100) g")
    db.x("ANALYZE t")
    db.x("ANALYZE u")
    return db


def doc(db, sql, opts="FORMAT JSON"):
    res = db.x(f"EXPLAIN ({opts}) {sql}")
    assert res.description[0][0] == "QUERY PLAN" and res.description[0][1] == "json"
    assert len(res.rows) == 1
    out = json.loads(res.rows[0][0])
    assert isinstance(out, list) and len(out) == 1
    return out[0]


def nodes(plan):
    yield plan
    for ch in plan.get("Plans", ()):
        yield from nodes(ch)


def test_seq_scan_fields(t):
    d = doc(t, "SELECT * FROM t WHERE grp = 3")
    p = d["Plan"]
    assert p["Node Type"] == "Seq Scan"
    assert p["Relation Name"] == "t" and p["Alias"] == "t"
    assert p["Filter"] == "(grp = 3)"
    assert p["Parallel Aware"] is False
    for k in ("Startup Cost", "Total Cost"):
        assert isinstance(p[k], (int, float))
    assert isinstance(p["Plan Rows"], int) and isinstance(p["Plan Width"], int)
    assert p["Total Cost"] >= p["Startup Cost"]
    assert "Planning Time" not in d and "Execution Time" not in d


def test_index_scan_fields_and_costs_off(t):
    d = doc(t, "SELECT * FROM t WHERE id = 7", "FORMAT JSON, COSTS OFF")
    p = d["Plan"]
    assert p["Node Type"] == "Index Scan"
    assert p["Index Name"] == "t_pkey" and p["Relation Name"] == "t"
    assert p["Scan Direction"] == "Forward"
    assert p["Index Cond"] == "(id = 7)"
    assert "Total Cost" not in p and "Plan Rows" not in p


def test_tree_matches_text_format(t):
    sql = ("SELECT t.grp, count(*) FROM t JOIN u ON u.t_id = t.id "
           "GROUP BY t.grp ORDER BY t.grp")
    text = [r[0] for r in t.rows("EXPLAIN (COSTS OFF) " + sql)]
    titles = [ln.strip().removeprefix("->").strip() for ln in text
              if ln.startswith(" ") is False or "->" in ln]
    d = doc(t, sql, "FORMAT JSON, COSTS OFF")
    types = [n["Node Type"] for n in nodes(d["Plan"])]
    assert len(types) == len(titles), (types, titles)
    assert types[0] == "Sort" and d["Plan"]["Sort Key"] == [text[1].split(": ")[1]]
    joins = [n for n in nodes(d["Plan"]) if n["Node Type"].endswith(("Join", "Loop"))]
    assert joins and joins[0]["Join Type"] == "Inner"
    kids = joins[0]["Plans"]
    assert [k["Parent Relationship"] for k in kids] == ["Outer", "Inner"]
    aggs = [n for n in nodes(d["Plan"]) if n["Node Type"] == "Aggregate"]
    assert aggs and aggs[0]["Strategy"] in ("Hashed", "Sorted", "Plain")
    assert len(aggs[0]["Group Key"]) == 1


def test_left_join_type(t):
    d = doc(t, "SELECT * FROM t LEFT JOIN u ON u.t_id = t.id", "FORMAT JSON, COSTS OFF")
    join = next(n for n in nodes(d["Plan"]) if "Join Type" in n)
    assert join["Join Type"] in ("Left", "Right")


def test_analyze_actuals_buffers_and_summary(t):
    d = doc(t, "SELECT * FROM t WHERE grp = 1", "ANALYZE, BUFFERS, FORMAT JSON")
    p = d["Plan"]
    assert p["Actual Rows"] == 40 and p["Actual Loops"] == 1
    assert p["Rows Removed by Filter"] == 160
    assert p["Shared Hit Blocks"] + p["Shared Read Blocks"] >= 1
    assert "Actual Total Time" in p
    assert d["Triggers"] == []
    assert isinstance(d["Planning Time"], float) and isinstance(d["Execution Time"], float)
    d = doc(t, "SELECT * FROM t WHERE grp = 1",
            "ANALYZE, TIMING OFF, SUMMARY OFF, FORMAT JSON")
    assert "Actual Total Time" not in d["Plan"] and d["Plan"]["Actual Rows"] == 40
    assert "Execution Time" not in d


def test_modify_table_and_initplan(t):
    d = doc(t, "UPDATE t SET name = 'x' WHERE id = 3", "FORMAT JSON, COSTS OFF")
    assert d["Plan"]["Node Type"] == "ModifyTable" and d["Plan"]["Operation"] == "Update"
    assert d["Plan"]["Relation Name"] == "t"
    d = doc(t, "SELECT * FROM t WHERE id = (SELECT max(id) FROM u)", "FORMAT JSON, COSTS OFF")
    subs = [n for n in nodes(d["Plan"]) if n.get("Parent Relationship") == "InitPlan"]
    assert subs and subs[0]["Subplan Name"].startswith("InitPlan 1")
    assert t.one("SELECT name FROM t WHERE id = 3") == "n3"   # plain EXPLAIN did not run it


def test_other_formats_refused(t):
    with pytest.raises(NotSupportedError, match="FORMAT YAML"):
        t.x("EXPLAIN (FORMAT YAML) SELECT 1")
