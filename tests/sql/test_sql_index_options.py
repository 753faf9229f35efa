"""Index columns with DESC / NULLS FIRST (pg_index.indoption): every combination of options
on a two-column index gives the same rows as a sequential scan for equalities and ranges
(NULLs present), ORDER BY [LIMIT] is served by a forward or backward index scan exactly when
the index order (or its reverse) matches, as PostgreSQL decides; pg_get_indexdef and
pg_index show the options; amcheck accepts the trees; a unique DESC index still enforces
uniqueness."""

from __future__ import annotations

import itertools

import pytest

import minidb.errors as errors

OPTS = ["", " DESC", " NULLS FIRST", " DESC NULLS LAST"]
PREDICATES = [
    "a = 3", "a > 3", "a >= 3", "a < 2", "a <= 2", "a > 1 AND a < 4", "a >= 1 AND a <= 1",
    "a IS NULL", "a = 2 AND b > 5", "a = 2 AND b < 5", "a = 2 AND b >= 3 AND b < 9",
    "a = 4 AND b = 7", "a = 1 AND b IS NULL", "a > 9",
]


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (id int, a int, b int)")
    rows = [(i, None if i % 11 == 0 else i % 5, None if i % 7 == 0 else i % 13)
            for i in range(120)]
    db.x("INSERT INTO t VALUES " + ", ".join(
        "(" + ", ".join("NULL" if v is None else str(v) for v in r) + ")" for r in rows))
    return db


def _rows(db, sql):
    return sorted(db.rows(sql), key=repr)


def test_every_option_pair_agrees_with_seqscan(t):
    from minidb import index as ix
    expected = {p: _rows(t, f"SELECT * FROM t WHERE {p}") for p in PREDICATES}
    for oa, ob in itertools.product(OPTS, OPTS):
        t.x(f"CREATE INDEX t_ab ON t (a{oa}, b{ob})")
        t.x("SET enable_seqscan = off")
        for p in PREDICATES:
            sql = f"SELECT * FROM t WHERE {p}"
            if "IS NULL" not in p:
                assert "Index Scan using t_ab" in t.plan(sql), (oa, ob, p)
            assert _rows(t, sql) == expected[p], (oa, ob, p)
        t.x("RESET enable_seqscan")
        r = ix.check_btree(t.session.backend, "t_ab")
        assert r["leaf_items"] == 120 and r["heap_tuples_checked"] == 120
        t.x("DROP INDEX t_ab")


ORDERS = ["a", "a DESC", "a NULLS FIRST", "a DESC NULLS LAST"]


def test_order_by_limit_uses_matching_index(t):
    t.x("ANALYZE t")
    for opt, order in itertools.product(OPTS, ORDERS):
        t.x(f"CREATE INDEX t_a ON t (a{opt})")
        sql = f"SELECT a FROM t ORDER BY {order} LIMIT 5"
        expected = t.rows(sql.replace("LIMIT 5", ""))[:5]
        plan = t.plan(sql)
        o_desc, o_nf = "DESC" in opt, ("NULLS FIRST" in opt) or (opt == " DESC")
        q_desc = "DESC" in order
        q_nf = "NULLS FIRST" in order or (q_desc and "NULLS LAST" not in order)
        if (o_desc, o_nf) == (q_desc, q_nf):
            assert "Index Scan using t_a" in plan and "Sort" not in plan, (opt, order, plan)
        elif (o_desc, o_nf) == (not q_desc, not q_nf):
            assert "Index Scan Backward using t_a" in plan and "Sort" not in plan, \
                (opt, order, plan)
        else:
            assert "Sort" in plan, (opt, order, plan)
        assert t.rows(sql) == expected, (opt, order)
        t.x("DROP INDEX t_a")


def test_order_by_after_equality_prefix(t):
    t.x("CREATE INDEX t_ab ON t (a, b DESC NULLS LAST)")
    t.x("ANALYZE t")
    for order, back in (("b DESC NULLS LAST", False), ("b NULLS FIRST", True),
                        ("a, b DESC NULLS LAST", False)):
        sql = f"SELECT b FROM t WHERE a = 2 ORDER BY {order} LIMIT 4"
        plan = t.plan(sql)
        word = "Index Scan Backward" if back else "Index Scan using"
        assert word in plan and "Sort" not in plan, (order, plan)
        full = t.rows(f"SELECT b FROM t WHERE a = 2 ORDER BY {order}")
        assert t.rows(sql) == full[:4]
    assert "Sort" in t.plan("SELECT b FROM t WHERE a = 2 ORDER BY b LIMIT 4")


def test_indexdef_and_pg_index_show_options(db):
    db.x("CREATE TABLE u (a int, b text, c int)")
    db.x("CREATE INDEX u_i ON u (a DESC, b NULLS FIRST, c DESC NULLS LAST)")
    assert db.one("SELECT indexdef FROM pg_indexes WHERE indexname = 'u_i'") == (
        "CREATE INDEX u_i ON public.u USING btree (a DESC, b NULLS FIRST, c DESC NULLS LAST)")
    assert db.rows("SELECT indoption FROM pg_index") == [("3 2 1",)]


def test_unique_desc_index(db):
    db.x("CREATE TABLE u (a int, b int)")
    db.x("CREATE UNIQUE INDEX u_ab ON u (a DESC, b NULLS FIRST)")
    db.x("INSERT INTO u VALUES (1, 1), (1, NULL), (1, NULL), (2, 1)")
    with pytest.raises(errors.UniqueViolation, match=r"\(a, b\)=\(1, 1\)"):
        db.x("INSERT INTO u VALUES (1, 1)")
    db.x("CREATE TABLE v (a int)")
    db.x("INSERT INTO v VALUES (1), (2), (2)")
    with pytest.raises(errors.UniqueViolation, match="is duplicated"):
        db.x("CREATE UNIQUE INDEX v_a ON v (a DESC)")
