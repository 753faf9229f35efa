"""The plan cache and prepared statements (counters: parses, plans, hits, re-plans);
SET / SHOW / RESET for every setting; ANALYZE's statistics; VACUUM; CHECKPOINT."""

from __future__ import annotations

import pytest

from minidb import errors
from minidb.config import SETTINGS


def test_repeated_statement_skips_parse_and_plan(db):
    db.x("CREATE TABLE t (id int PRIMARY KEY, v text)")
    e = db.engine
    c0 = dict(e.counters)
    for i in range(5):
        db.x("INSERT INTO t VALUES (?, ?)", i, "x")
    c1 = dict(e.counters)
    assert c1["parses"] - c0["parses"] == 1
    assert c1["plans"] - c0["plans"] == 1
    assert c1["plan_cache_hits"] - c0["plan_cache_hits"] == 4
    for i in range(5):
        assert db.one("SELECT v FROM t WHERE id = ?", i) == "x"
    c2 = dict(e.counters)
    assert c2["parses"] - c1["parses"] == 1 and c2["plans"] - c1["plans"] == 1
    assert c2["plan_cache_hits"] - c1["plan_cache_hits"] == 4


def test_prepared_statement(db):
    db.x("CREATE TABLE t (id int PRIMARY KEY, v int)")
    ins = db.engine.prepare("INSERT INTO t VALUES (?, ?)")
    assert ins.nparams == 2
    for i in range(10):
        assert ins.execute((i, i * i)).status == "INSERT 0 1"
    sel = db.engine.prepare("SELECT v FROM t WHERE id = ?")
    parses = db.engine.counters["parses"]
    plans = db.engine.counters["plans"]
    assert [sel.execute([i]).rows for i in (3, 4)] == [[(9,)], [(16,)]]
    assert db.engine.counters["parses"] == parses
    assert db.engine.counters["plans"] == plans + 1
    with pytest.raises(errors.ProgrammingError):
        sel.execute([])


def _plans_made(db, q) -> int:
    """How many plans running ``q`` once made (0: the cached plan was used)."""
    p0 = db.engine.counters["plans"]
    db.rows(q)
    return db.engine.counters["plans"] - p0


def test_cache_invalidated_by_ddl_settings_and_analyze(db):
    db.x("CREATE TABLE t (a int, b int)")
    for i in range(50):
        db.x("INSERT INTO t VALUES (?, ?)", i, i)
    q = "SELECT * FROM t WHERE a = 7"
    assert "Seq Scan" in db.plan(q)
    assert _plans_made(db, q) == 1
    assert _plans_made(db, q) == 0                       # cached
    db.x("CREATE INDEX t_a ON t (a)")                     # the catalog generation changes
    assert _plans_made(db, q) == 1
    assert "Index Scan using t_a" in db.plan(q)
    assert _plans_made(db, q) == 0
    db.x("SET enable_indexscan = off")                    # a planner setting changes
    assert _plans_made(db, q) == 1
    db.x("SET enable_indexscan = on")
    assert _plans_made(db, q) == 1
    db.x("SET trace_xact = off")                          # a setting the planner ignores
    assert _plans_made(db, q) == 0
    db.x("ANALYZE t")
    assert _plans_made(db, q) == 1
    assert db.engine.counters["replans"] >= 4


def test_cache_replans_when_a_table_grows(db):
    db.x("CREATE TABLE t (a int, b text)")
    db.x("CREATE INDEX t_a ON t (a)")
    db.x("INSERT INTO t VALUES (1, 'x')")
    q = "SELECT b FROM t WHERE a > 100000"
    assert _plans_made(db, q) == 1
    db.x("INSERT INTO t SELECT a + 1, b FROM t")
    assert _plans_made(db, q) == 0                       # still one page
    for _ in range(11):                                  # 4096 rows: many pages
        db.x("INSERT INTO t SELECT a + 2, b FROM t")
    from minidb.sql.engine import SIZE_CHECK_EVERY    # sizes are looked at every N uses
    assert sum(_plans_made(db, q) for _ in range(SIZE_CHECK_EVERY)) == 1
    assert sum(_plans_made(db, q) for _ in range(SIZE_CHECK_EVERY)) == 0


def test_set_show_reset_every_setting(db):
    r = db.x("SHOW ALL")
    names = [row[0] for row in r.rows]
    assert names == sorted(SETTINGS)
    assert [d[0] for d in r.description] == ["name", "setting", "description"]
    for name, s in SETTINGS.items():
        shown = db.one(f"SHOW {name}")
        assert isinstance(shown, str)
        if s.context != "session":
            with pytest.raises(errors.CantChangeParameter):
                db.x(f"SET {name} = {shown!r}".replace('"', "'"))
            continue
        db.x(f"SET {name} TO '{shown}'")          # setting its own value back always works
        assert db.one(f"SHOW {name}") == shown
        db.x(f"RESET {name}")
    db.x("SET random_page_cost = 1.5")
    assert db.one("SHOW random_page_cost") == "1.5"
    db.x("SET enable_seqscan TO off")
    assert db.one("SHOW enable_seqscan") == "off"
    assert db.session.settings.enable_seqscan is False
    db.x("SET enable_seqscan = DEFAULT")
    assert db.one("SHOW enable_seqscan") == "on"
    db.x("SET default_transaction_isolation = 'repeatable read'")
    db.x("SET deadlock_timeout = 50")
    db.x("RESET ALL")
    assert db.one("SHOW default_transaction_isolation") == "read committed"
    assert db.one("SHOW deadlock_timeout") == "1000"
    assert db.one("SHOW server_version").startswith("15")


def test_analyze_stores_statistics(db):
    db.x("CREATE TABLE s (a int, b text, c double precision)")
    db.x("INSERT INTO s VALUES (1, 'x', NULL)")
    for _ in range(10):
        db.x("INSERT INTO s SELECT a + 1, b, c FROM s")          # 1024 rows
    db.x("UPDATE s SET c = a * 0.5 WHERE a % 2 = 0")
    db.x("INSERT INTO s VALUES (NULL, 'y', 1)")
    r = db.x("ANALYZE VERBOSE s")
    assert r.status == "ANALYZE" and "1025 live rows" in r.messages[0]
    t = db.inst.catalog.table("s")
    assert t.reltuples == 1025 and t.relpages >= 1
    st = t.column_stats
    assert set(st) == {"a", "b", "c"}
    assert st["a"]["null_frac"] == pytest.approx(1 / 1025)
    assert st["b"]["n_distinct"] == 2 and st["b"]["mcv"][0] == "x"
    assert st["c"]["null_frac"] > 0.3
    # 11 distinct values, none rare: all are most common values, no histogram
    assert sorted(st["a"]["mcv"]) == list(range(1, 12)) and st["a"]["histogram"] == []
    assert sum(st["a"]["mcv_freq"]) == pytest.approx(1024 / 1025)
    db.x("CREATE TABLE h (id int)")
    db.x("INSERT INTO h VALUES (1)")
    while (n := db.one("SELECT count(*) FROM h")) < 2000:
        db.x(f"INSERT INTO h SELECT id + {n} FROM h")
    db.x("ANALYZE h")
    sh = db.inst.catalog.table("h").column_stats["id"]
    assert sh["n_distinct"] == -1.0 and sh["mcv"] == []
    assert sh["histogram"][0] == 1 and sh["histogram"][-1] == 2048
    assert sh["correlation"] == pytest.approx(1.0)
    p = db.plan("SELECT * FROM h WHERE id < 205")
    assert "rows=204 " in p, p              # the histogram's estimate
    from minidb.sql.inspect import stats
    row = stats(db.session, "s")["tables"][0]
    assert row["analyze_count"] == 1 and row["n_live_tup"] == 1025
    assert db.x("ANALYZE").status == "ANALYZE"               # every table


def test_vacuum_statement(db):
    db.x("CREATE TABLE v (id int PRIMARY KEY, x int)")
    db.x("INSERT INTO v SELECT 1, 1")
    for i in range(2, 200):
        db.x("INSERT INTO v VALUES (?, ?)", i, i)
    db.x("DELETE FROM v WHERE id % 2 = 0")
    r = db.x("VACUUM VERBOSE v")
    assert r.status == "VACUUM" and "removed" in r.messages[0]
    t = db.inst.catalog.table("v")
    assert t.reltuples == 100
    db.x("VACUUM ANALYZE v")
    assert db.inst.catalog.table("v").column_stats
    assert db.one("SELECT count(*) FROM v WHERE id > 100") == 50
    assert db.x("VACUUM").status == "VACUUM"
    assert db.x("CHECKPOINT").status == "CHECKPOINT"


def test_settings_signature_follows_every_set(db):
    """The engine caches the planner settings' signature per ``Settings.changes``: a SET
    made directly on the session's settings (not through SQL) still re-plans."""
    db.x("CREATE TABLE t (a int PRIMARY KEY, b int)")
    q = "SELECT b FROM t WHERE a = 1"
    assert _plans_made(db, q) == 1
    settings = db.session.settings
    n = settings.changes
    settings.set("enable_indexscan", False)
    assert settings.changes == n + 1
    assert _plans_made(db, q) == 1
    assert _plans_made(db, q) == 0
    settings.set("enable_indexscan", True)
    assert _plans_made(db, q) == 1
