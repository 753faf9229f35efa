"""Plan assertions: the planner picks an Index Scan where PostgreSQL would (equality on the
primary key of a big table; a selective range on an indexed column; leading columns of a
composite index) and a Seq Scan where it should not; enable_seqscan / enable_indexscan
flip the choice; EXPLAIN ANALYZE (BUFFERS) reports actual rows, loops, buffers and
minidb's counters.  Results are checked under both plans (same rows either way)."""

from __future__ import annotations

import re

import pytest

N = 20_000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    from tests.sql.conftest import DB
    from minidb.instance import Instance
    inst = Instance(tmp_path_factory.mktemp("explain") / "data", shared_buffers=2048)
    db = DB(inst)
    db.x("CREATE TABLE big (id int PRIMARY KEY, grp int, val int, pad text)")
    db.x("CREATE TABLE stage (id int, pad text)")
    db.x("INSERT INTO stage VALUES (1, 'x')")
    while (n := db.one("SELECT count(*) FROM stage")) < N:
        db.x(f"INSERT INTO stage SELECT id + {n}, pad FROM stage")
    db.x(f"INSERT INTO big SELECT id, (id * 7) % 100, id % 1000, pad FROM stage "
         f"WHERE id <= {N}")
    db.x("CREATE INDEX big_grp_val ON big (grp, val)")
    db.x("CREATE INDEX big_val ON big (val)")
    db.x("ANALYZE big")
    yield db
    db.close()
    inst.close()


def first_node(plan: str) -> str:
    return plan.splitlines()[0]


def scan_line(plan: str) -> str:
    return next(ln for ln in plan.splitlines() if "Scan" in ln)


def test_primary_key_equality_uses_index(big):
    p = big.plan("SELECT * FROM big WHERE id = 4242")
    assert re.match(r"Index Scan using big_pkey on big  \(cost=\d+\.\d\d\.\.\d+\.\d\d rows=1 "
                    r"width=\d+\)", first_node(p)), p
    assert "Index Cond: (id = 4242)" in p
    assert big.rows("SELECT id, val FROM big WHERE id = 4242") == [(4242, 242)]


def test_parameter_equality_uses_index(big):
    p = big.plan("SELECT * FROM big WHERE id = ?", 17)
    assert "Index Scan using big_pkey" in p and "Index Cond: (id = $1)" in p


def test_selective_range_uses_index_unselective_does_not(big):
    p = big.plan("SELECT * FROM big WHERE id < 50")
    assert "Index Scan using big_pkey" in scan_line(p), p
    p = big.plan("SELECT * FROM big WHERE id > 100")
    assert "Seq Scan on big" in scan_line(p), p
    assert "Filter: (id > 100)" in p
    assert big.one("SELECT count(*) FROM big WHERE id < 50") == 49


def test_no_usable_index_is_a_seq_scan(big):
    p = big.plan("SELECT * FROM big WHERE pad = 'x'")
    assert first_node(p).startswith("Seq Scan on big")
    p = big.plan("SELECT count(*) FROM big")
    assert "Seq Scan on big" in p and p.startswith("Aggregate")


def test_composite_index_leading_columns(big):
    p = big.plan("SELECT * FROM big WHERE grp = 3 AND val = 3")
    assert "Index Scan using big_grp_val" in p, p
    assert "(grp = 3) AND (val = 3)" in p
    p = big.plan("SELECT * FROM big WHERE grp = 3 AND val < 5")
    assert "Index Scan using big_grp_val" in p and "(val < 5)" in p, p
    # the second column alone cannot use the composite index (big_val serves it)
    p = big.plan("SELECT * FROM big WHERE val = 5")
    assert "big_grp_val" not in p
    want = sorted(big.rows("SELECT id FROM big WHERE grp = 3 AND val < 500"))
    big.x("SET enable_indexscan = off")
    try:
        assert sorted(big.rows("SELECT id FROM big WHERE grp = 3 AND val < 500")) == want
    finally:
        big.x("RESET enable_indexscan")


def test_enable_settings_flip_the_plan(big):
    q = "SELECT * FROM big WHERE id = 77"
    assert "Index Scan" in big.plan(q)
    big.x("SET enable_indexscan = off")
    try:
        p = big.plan(q)
        assert first_node(p).startswith("Seq Scan on big"), p
        assert big.rows("SELECT val FROM big WHERE id = 77") == [(77,)]
    finally:
        big.x("RESET enable_indexscan")
    q2 = "SELECT * FROM big WHERE id > 10"
    assert "Seq Scan" in big.plan(q2)
    big.x("SET enable_seqscan = off")
    try:
        p = big.plan(q2)
        assert "Index Scan using big_pkey" in p, p
        assert big.one("SELECT count(*) FROM big WHERE id > 10") == N - 10
    finally:
        big.x("RESET enable_seqscan")
    # with both off the cheaper disabled path still wins (disable_cost on each)
    big.x("SET enable_seqscan = off")
    big.x("SET enable_indexscan = off")
    try:
        p = big.plan("SELECT * FROM big WHERE pad = 'y'")
        assert "Seq Scan" in p and "10000000" in p
    finally:
        big.x("RESET ALL")


def test_cost_units_follow_settings(big):
    def total(p):
        return float(re.search(r"\.\.(\d+\.\d\d)", first_node(p)).group(1))
    q = "SELECT * FROM big WHERE pad = 'z'"
    base = total(big.plan(q))
    big.x("SET seq_page_cost = 2")
    try:
        pages = big.inst.smgr.nblocks(big.inst.catalog.table("big").relfilenode)
        assert total(big.plan(q)) == pytest.approx(base + pages, abs=0.02)
    finally:
        big.x("RESET seq_page_cost")


def test_join_plans(big):
    big.x("CREATE TABLE groups (g int PRIMARY KEY, label text)")
    for g in range(100):
        big.x("INSERT INTO groups VALUES (?, ?)", g, f"g{g}")
    big.x("ANALYZE groups")
    p = big.plan("SELECT count(*) FROM big JOIN groups ON big.grp = groups.g")
    assert "Hash Join" in p and "Hash Cond: (big.grp = groups.g)" in p, p
    p = big.plan("SELECT big.val, groups.label FROM big JOIN groups ON big.grp = groups.g "
                 "WHERE big.id = 5")
    assert "Index Scan using big_pkey" in p, p
    # a few outer rows, a big inner table: a nested loop over the inner's primary key
    p = big.plan("SELECT big.val FROM groups JOIN big ON big.id = groups.g WHERE groups.g < 3")
    assert p.startswith("Nested Loop") and "Index Scan using big_pkey on big" in p, p
    assert "Index Cond: (big.id = groups.g)" in p, p
    assert sorted(big.rows("SELECT big.val FROM groups JOIN big ON big.id = groups.g "
                           "WHERE groups.g < 3")) == [(1,), (2,)]
    assert big.rows("SELECT big.val, groups.label FROM big JOIN groups ON big.grp = groups.g "
                    "WHERE big.id = 5") == [(5, "g35")]
    n = big.one("SELECT count(*) FROM big JOIN groups ON big.grp = groups.g")
    assert n == N
    big.x("SET enable_hashjoin = off")
    try:
        p = big.plan("SELECT count(*) FROM big JOIN groups ON big.grp = groups.g")
        assert "Hash Join" not in p and "Nested Loop" in p, p
        assert big.one("SELECT count(*) FROM big JOIN groups ON big.grp = groups.g") == N
    finally:
        big.x("RESET enable_hashjoin")


def test_explain_shapes(big):
    p = big.plan("SELECT grp, count(*) FROM big WHERE val < 10 GROUP BY grp ORDER BY 2 DESC "
                 "LIMIT 3")
    lines = p.splitlines()
    assert lines[0].startswith("Limit")
    assert lines[1].startswith("  ->  Sort")
    assert any(ln.strip().startswith("Sort Key: count(*) DESC") for ln in lines)
    assert any("HashAggregate" in ln for ln in lines)
    assert any(ln.strip() == "Group Key: grp" for ln in lines)
    p = big.plan("SELECT DISTINCT grp FROM big")
    assert p.startswith("HashAggregate")
    p = big.plan("SELECT * FROM big WHERE id = 1 FOR UPDATE")
    assert p.startswith("LockRows")
    p = big.plan("UPDATE big SET val = val WHERE id = 3")
    assert p.startswith("Update on big") and "Index Scan using big_pkey" in p
    p = big.plan("DELETE FROM big WHERE pad = 'none'")
    assert p.startswith("Delete on big") and "Seq Scan" in p
    p = big.plan("INSERT INTO big VALUES (0, 0, 0, 'a')")
    assert p.startswith("Insert on big") and "Result" in p


def test_explain_analyze_buffers(big):
    rows = big.rows("EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM big WHERE id = 99")
    text = "\n".join(r[0] for r in rows)
    assert re.search(r"Index Scan using big_pkey on big  \(cost=.*\) \(actual time=\d+\.\d+\.\."
                     r"\d+\.\d+ rows=1 loops=1\)", text), text
    assert re.search(r"Buffers: shared hit=\d+", text), text
    assert "Heap Fetches: 1" in text
    assert re.search(r"Planning Time: \d+\.\d+ ms", text)
    assert re.search(r"Execution Time: \d+\.\d+ ms", text)
    big.x("SET enable_indexscan = off")
    try:
        for cond in ("val < 0", "val + grp < 0"):     # pushed into the scan, and not
            text = "\n".join(r[0] for r in big.rows(
                f"EXPLAIN ANALYZE SELECT count(*) FROM big WHERE {cond}"))
            assert "Rows Removed by Filter: 20000" in text, text
            assert "actual" in text and "rows=0 loops=1" in text
    finally:
        big.x("RESET enable_indexscan")


def test_explain_analyze_nested_loop_loops(big):
    big.x("CREATE TABLE few (g int)")
    big.x("INSERT INTO few VALUES (1), (2), (3)")
    big.x("ANALYZE few")
    text = "\n".join(r[0] for r in big.rows(
        "EXPLAIN ANALYZE SELECT * FROM few JOIN big ON big.id = few.g"))
    assert "Nested Loop" in text, text
    assert re.search(r"Index Scan using big_pkey on big .*loops=3\)", text), text


def test_explain_analyze_really_executes_writes(big):
    big.x("CREATE TABLE w (a int)")
    big.x("EXPLAIN ANALYZE INSERT INTO w VALUES (1), (2)")
    assert big.one("SELECT count(*) FROM w") == 2
    big.x("EXPLAIN INSERT INTO w VALUES (3)")        # plain EXPLAIN does not
    assert big.one("SELECT count(*) FROM w") == 2


def test_row_estimates_scale_with_current_size(big):
    big.x("CREATE TABLE grow (a int, pad text)")
    big.x("INSERT INTO grow SELECT id, pad FROM big WHERE id <= 1000")
    big.x("ANALYZE grow")
    est1 = int(re.search(r"rows=(\d+)", big.plan("SELECT * FROM grow")).group(1))
    assert est1 == 1000
    big.x("INSERT INTO grow SELECT id, pad FROM big WHERE id <= 3000")   # no ANALYZE
    est2 = int(re.search(r"rows=(\d+)", big.plan("SELECT * FROM grow")).group(1))
    assert 3000 <= est2 <= 5000            # reltuples/relpages x current pages


def test_order_by_limit_served_by_index(big):
    p = big.plan("SELECT id, val FROM big ORDER BY id LIMIT 5")
    assert p.startswith("Limit") and "Index Scan using big_pkey" in p and "Sort" not in p, p
    assert big.rows("SELECT id FROM big ORDER BY id LIMIT 3") == [(1,), (2,), (3,)]
    p = big.plan("SELECT id FROM big ORDER BY id DESC LIMIT 2")
    assert "Index Scan Backward using big_pkey" in p, p
    assert big.rows("SELECT id FROM big ORDER BY id DESC LIMIT 2") == [(N,), (N - 1,)]
    # NULLS FIRST ascending is not the index's order: a Sort
    p = big.plan("SELECT id FROM big ORDER BY id NULLS FIRST LIMIT 2")
    assert "Sort" in p, p
    p = big.plan("SELECT id FROM big ORDER BY pad LIMIT 2")
    assert "Sort" in p and "Seq Scan" in p, p
    big.x("SET enable_indexscan = off")
    try:
        assert "Sort" in big.plan("SELECT id FROM big ORDER BY id LIMIT 5")
        assert big.rows("SELECT id FROM big ORDER BY id DESC LIMIT 2") == [(N,), (N - 1,)]
    finally:
        big.x("RESET enable_indexscan")


def test_explain_names_the_new_nodes_as_postgresql(db):
    db.x("CREATE TABLE ea (id integer PRIMARY KEY, x integer, s text)")
    db.x("CREATE TABLE eb (id integer, y integer)")
    db.x("INSERT INTO ea VALUES (1, 1, 'a'), (2, NULL, 'b')")
    db.x("INSERT INTO eb VALUES (1, 5), (3, 7)")
    want = {
        "SELECT * FROM ea LEFT JOIN eb ON ea.id = eb.id": [("Hash Left Join",
                                                            "Hash Right Join"), "Hash Cond"],
        "SELECT * FROM ea FULL JOIN eb ON ea.id = eb.id": ["Full Join"],
        "SELECT * FROM ea WHERE NOT EXISTS (SELECT 1 FROM eb WHERE eb.id = ea.id)":
            ["Anti Join"],
        "SELECT * FROM ea WHERE id IN (SELECT id FROM eb)": ["Semi Join"],
        "SELECT * FROM ea WHERE x NOT IN (SELECT y FROM eb)": ["hashed SubPlan 1", "SubPlan 1"],
        "SELECT * FROM ea WHERE x = (SELECT max(y) FROM eb)": ["InitPlan 1 (returns $0)"],
        "SELECT id, (SELECT y FROM eb WHERE eb.id = ea.id) FROM ea": ["SubPlan 1"],
        "SELECT id, row_number() OVER (PARTITION BY x ORDER BY id) FROM ea":
            ["WindowAgg", "Sort Key: x, id"],
        "SELECT id FROM ea UNION ALL SELECT id FROM eb": ["Append"],
        "SELECT id FROM ea INTERSECT SELECT id FROM eb":
            ["HashSetOp Intersect", 'Subquery Scan on "*SELECT* 1"'],
        "SELECT * FROM (SELECT id FROM ea) s": ["Subquery Scan on s"],
        "WITH q AS (SELECT id FROM ea) SELECT * FROM q": ["CTE q", "CTE Scan on q"],
        "SELECT * FROM generate_series(1, 3)": ["Function Scan on generate_series"],
        "SELECT generate_series(1, 3)": ["ProjectSet"],
        "SELECT DISTINCT ON (x) x, id FROM ea ORDER BY x, id": ["Unique"],
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
        "SELECT * FROM r": ["Recursive Union", "WorkTable Scan on r"],
    }
    for sql, parts in want.items():
        plan = db.plan(sql)
        for p in parts:
            assert any(x in plan for x in ((p,) if isinstance(p, str) else p)), (sql, plan)
