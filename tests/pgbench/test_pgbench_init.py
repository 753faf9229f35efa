"""``minidb bench -i``: pgbench's four tables with pgbench's columns, row counts per scale,
primary keys and statistics; the steps and their messages."""

from __future__ import annotations

import io

import pytest

from minidb.pgbench import BenchError, init_pgbench
from minidb.index import check_btree
from minidb.instance import Instance
from minidb.session import Session
from minidb.sql import Engine
from minidb.sql.inspect import describe_table

COLUMNS = {
    "pgbench_branches": [("bid", "integer", True), ("bbalance", "integer", False),
                         ("filler", "character(88)", False)],
    "pgbench_tellers": [("tid", "integer", True), ("bid", "integer", False),
                        ("tbalance", "integer", False), ("filler", "character(84)", False)],
    "pgbench_accounts": [("aid", "integer", True), ("bid", "integer", False),
                         ("abalance", "integer", False), ("filler", "character(84)", False)],
    "pgbench_history": [("tid", "integer", False), ("bid", "integer", False),
                        ("aid", "integer", False), ("delta", "integer", False),
                        ("mtime", "timestamp without time zone", False),
                        ("filler", "character(22)", False)],
}


def q(engine, sql):
    return engine.execute(sql).rows


def test_scale_1_has_pgbench_row_counts(tmp_path):
    """The real thing: 1 branch, 10 tellers, 100,000 accounts, empty history."""
    log = io.StringIO()
    r = init_pgbench(str(tmp_path / "d"), 1, log=log)
    assert r.rows == {"pgbench_accounts": 100_000, "pgbench_branches": 1,
                      "pgbench_history": 0, "pgbench_tellers": 10}
    text = log.getvalue().splitlines()
    assert text[0] == "dropping old tables..."
    assert 'NOTICE:  table "pgbench_accounts" does not exist, skipping' in text
    assert "creating tables..." in text and "generating data (client-side)..." in text
    assert any(ln.startswith("100000 of 100000 tuples (100%) done (elapsed ")
               for ln in text)
    assert text[-3:-1] == ["vacuuming...", "creating primary keys..."]
    assert text[-1].startswith("done in ") and ", vacuum " in text[-1]
    assert list(r.step_seconds) == ["drop tables", "create tables", "client-side generate",
                                    "vacuum", "primary keys"]


def test_tables_columns_keys_and_contents(pgbench_inst, accounts):
    s = Session(pgbench_inst)
    e = Engine(s)
    try:
        for table, cols in COLUMNS.items():
            d = describe_table(s, table)
            assert [(c[0], c[1], c[2]) for c in d["columns"]] == cols, table
            keys = [(i[1], i[2], i[3]) for i in d["indexes"]]
            if table == "pgbench_history":
                assert keys == []
            else:
                assert keys == [([cols[0][0]], True, True)], table
        assert q(e, "SELECT count(*), min(aid), max(aid), sum(abalance) FROM pgbench_accounts") \
            == [(accounts, 1, accounts, 0)]
        assert q(e, "SELECT count(*), min(tid), max(tid), sum(tbalance) FROM pgbench_tellers") \
            == [(10, 1, 10, 0)]
        assert q(e, "SELECT bid, bbalance, filler FROM pgbench_branches") == [(1, 0, None)]
        assert q(e, "SELECT count(*) FROM pgbench_history") == [(0,)]
        # only accounts get a filler: 84 blanks
        assert q(e, "SELECT filler FROM pgbench_accounts WHERE aid = 7") == [(" " * 84,)]
        assert q(e, "SELECT count(*) FROM pgbench_tellers WHERE filler IS NULL") == [(10,)]
        # VACUUM ANALYZE ran: the planner knows the sizes
        cat = pgbench_inst.catalog
        assert cat.table("pgbench_accounts").reltuples == accounts
        assert cat.table("pgbench_tellers").reltuples == 10
        for idx in ("pgbench_accounts_pkey", "pgbench_tellers_pkey", "pgbench_branches_pkey"):
            check_btree(s.backend, idx)
        # rows are visible to everyone: loaded with the frozen xid
        assert q(e, "SELECT abalance FROM pgbench_accounts WHERE aid = 500") == [(0,)]
    finally:
        s.close()


def test_larger_scale_maps_tellers_and_accounts_to_branches(tmp_path):
    d = str(tmp_path / "d")
    r = init_pgbench(d, 3, accounts_per_scale=100)
    assert r.rows == {"pgbench_accounts": 300, "pgbench_branches": 3, "pgbench_history": 0,
                      "pgbench_tellers": 30}
    with Instance(d) as inst:
        s = Session(inst)
        e = Engine(s)
        assert q(e, "SELECT bid, count(*), min(tid), max(tid) FROM pgbench_tellers "
                    "GROUP BY bid ORDER BY bid") == [(1, 10, 1, 10), (2, 10, 11, 20),
                                                     (3, 10, 21, 30)]
        assert q(e, "SELECT bid, count(*), min(aid), max(aid) FROM pgbench_accounts "
                    "GROUP BY bid ORDER BY bid") == [(1, 100, 1, 100), (2, 100, 101, 200),
                                                     (3, 100, 201, 300)]
        s.close()


def test_no_vacuum_step_and_custom_steps(tmp_path):
    d = str(tmp_path / "d")
    log = io.StringIO()
    r = init_pgbench(d, 1, vacuum=False, accounts_per_scale=100, log=log)
    assert r.steps == "dtgp" and "vacuuming..." not in log.getvalue()
    assert "vacuum" not in r.done_line()
    # "g" alone reloads the data and rebuilds the existing primary keys
    r = init_pgbench(d, 2, steps="g", accounts_per_scale=100)
    assert r.rows["pgbench_accounts"] == 200 and r.rows["pgbench_branches"] == 2
    with Instance(d) as inst:
        s = Session(inst)
        e = Engine(s)
        assert q(e, "SELECT aid FROM pgbench_accounts WHERE aid = 150") == [(150,)]
        check_btree(s.backend, "pgbench_accounts_pkey")
        s.close()


def test_fillfactor_leaves_room_on_each_page(tmp_path):
    full = init_pgbench(str(tmp_path / "a"), 1, accounts_per_scale=2000)
    half = init_pgbench(str(tmp_path / "b"), 1, fillfactor=50, accounts_per_scale=2000)
    assert half.pages["pgbench_accounts"] >= 2 * full.pages["pgbench_accounts"] - 1


@pytest.mark.parametrize("kw, message", [
    ({"scale": 0}, "invalid scaling factor"),
    ({"fillfactor": 5}, "invalid fillfactor"),
    ({"steps": "dtGvp"}, "server-side data generation (G) is not supported"),
    ({"steps": "dtf"}, "foreign keys (f) is not supported"),
    ({"steps": "dtx"}, 'unrecognized initialization step "x"'),
    ({"steps": "g"}, "does not exist"),     # no tables yet
])
def test_init_errors(tmp_path, kw, message):
    kw.setdefault("scale", 1)
    with pytest.raises(BenchError) as e:
        init_pgbench(str(tmp_path / "d"), accounts_per_scale=10, **kw)
    assert message in str(e.value)
