"""SQL benchmark: a scan query and prepared point selects through minidb's SQL engine,
each as a ratio against baselines measured in the same run.

Setup: the ``--rows`` pgbench_accounts table of ``scan_bench`` (its loader, by import:
aid, bid, abalance integers, filler char(84)), warm in a pool that holds it, and a unique
index on aid (``CREATE UNIQUE INDEX`` through SQL, as pgbench's primary key); the same rows in
an in-memory sqlite3 database with aid as its INTEGER PRIMARY KEY.

Run:
  1. ``SELECT count(*) FROM pgbench_accounts WHERE abalance < 0`` (no row matches, so every
     row is decoded and tested) through ``Engine.execute`` - plan cache, executor, MVCC -
     against (a) the storage issue's internal scan (``scan_bench.scan_count``: HeapScan
     through the buffer pool, no visibility check; target ratio >= 0.9), (b) the MVCC scan
     ``heap.mvcc.seq_scan`` counting in Python, (c) sqlite3 running the same SQL.
     Best of ``--repeat`` each, interleaved.
  2. Prepared point selects ``SELECT abalance FROM pgbench_accounts WHERE aid = ?`` with
     random aids (``Engine.prepare``, then ``Engine.execute`` of the same text, which goes
     through the plan cache), statements per second, against sqlite3's ``execute`` of the
     same statement (sqlite3 caches prepared statements too).  For scale: PostgreSQL 15
     answers about 14,600 select-only pgbench transactions per second over one connection
     on this machine (README of the issue).
Check: every count is exactly 0 of exactly ``--rows`` rows, and every point select returns
exactly one row with abalance 0, so a fast wrong result cannot pass.

    python bench/sql_bench.py [--rows 2000000] [--repeat 5] [--lookups 20000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.scan_bench import make_accounts, scan_count  # noqa: E402
from minidb.heap.mvcc import seq_scan  # noqa: E402
from minidb.instance import Instance  # noqa: E402
from minidb.session import Session  # noqa: E402
from minidb.sql import Engine  # noqa: E402

COUNT_SQL = "SELECT count(*) FROM pgbench_accounts WHERE abalance < 0"
POINT_SQL = "SELECT abalance FROM pgbench_accounts WHERE aid = ?"


def _best(fn, repeat):
    best, res = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        best = min(best, time.perf_counter() - t0)
    return best, res


def run(nrows: int, repeat: int, lookups: int) -> dict:
    datadir = tempfile.mkdtemp(prefix="minidb-sqlbench-")
    out = {"rows": nrows}
    try:
        with Instance(datadir, shared_buffers=nrows // 40 + 4096) as inst:
            t0 = time.perf_counter()
            rel = make_accounts(inst, nrows)
            out["load_s"] = time.perf_counter() - t0
            session = Session(inst)
            engine = Engine(session)
            t0 = time.perf_counter()
            engine.execute("CREATE UNIQUE INDEX pgbench_accounts_pkey ON pgbench_accounts (aid)")
            out["index_s"] = time.perf_counter() - t0
            engine.execute("VACUUM ANALYZE pgbench_accounts")
            be = session.backend
            out["pages"] = inst.smgr.nblocks(rel.relfilenode)
            out["plan"] = [r[0] for r in engine.execute("EXPLAIN " + COUNT_SQL).rows]

            def internal():
                return scan_count(be, rel, use_ring=False)

            def mvcc():
                snap = be.xact.start_statement()
                rows = matches = 0
                for b in seq_scan(be, rel, [2], snap):
                    rows += len(b)
                    matches += int(np.count_nonzero(b.columns[0][0] < 0))
                be.xact.command_done(False)
                be.xact.commit()
                return rows, matches

            def sql():
                return engine.execute(COUNT_SQL).rows[0][0]

            # warm everything (hint bits, the pool, the plan cache)
            assert internal() == (nrows, 0)
            assert mvcc() == (nrows, 0)
            assert sql() == 0
            t_int = t_mvcc = t_sql = float("inf")
            for _ in range(repeat):
                t, r = _best(internal, 1)
                assert r == (nrows, 0)
                t_int = min(t_int, t)
                t, r = _best(mvcc, 1)
                assert r == (nrows, 0)
                t_mvcc = min(t_mvcc, t)
                t, r = _best(sql, 1)
                assert r == 0
                t_sql = min(t_sql, t)
            out.update(internal_s=t_int, mvcc_s=t_mvcc, sql_s=t_sql)
            assert engine.execute("SELECT count(*) FROM pgbench_accounts").rows == [(nrows,)]

            # prepared point selects
            rnd = random.Random(1)
            aids = [rnd.randint(1, nrows) for _ in range(lookups)]
            prep = engine.prepare(POINT_SQL)
            assert "Index Scan using pgbench_accounts_pkey" in \
                engine.execute("EXPLAIN " + POINT_SQL, [1]).rows[0][0]

            def prepared():
                for a in aids:
                    r = prep.execute((a,)).rows
                    assert r == [(0,)], r
                return len(aids)

            def by_text():
                ex = engine.execute
                for a in aids:
                    r = ex(POINT_SQL, (a,)).rows
                    assert r == [(0,)], r
                return len(aids)

            prepared()
            t_prep, _ = _best(prepared, 2)
            t_text, _ = _best(by_text, 2)
            out.update(point_prepared_s=t_prep, point_text_s=t_text, lookups=lookups,
                       plan_cache=engine.plan_cache_stats())
            session.close()
    finally:
        shutil.rmtree(datadir, ignore_errors=True)

    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE pgbench_accounts (aid INTEGER PRIMARY KEY, bid integer, "
                "abalance integer, filler character(84))")
    filler = " " * 84
    con.executemany("INSERT INTO pgbench_accounts VALUES (?, ?, ?, ?)",
                    ((i, (i - 1) // 100000 + 1, 0, filler) for i in range(1, nrows + 1)))
    con.commit()
    assert con.execute(COUNT_SQL).fetchone()[0] == 0
    t_lite, res = _best(lambda: con.execute(COUNT_SQL).fetchone()[0], repeat)
    assert res == 0

    def lite_points():
        ex = con.execute
        for a in aids:
            r = ex(POINT_SQL, (a,)).fetchall()
            assert r == [(0,)]
        return len(aids)
    lite_points()
    t_lite_pt, _ = _best(lite_points, 2)
    con.close()
    out.update(sqlite_s=t_lite, sqlite_point_s=t_lite_pt)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lookups", type=int, default=20_000)
    args = ap.parse_args()
    r = run(args.rows, args.repeat, args.lookups)
    n = r["rows"]
    m = lambda s: n / s / 1e6  # noqa: E731
    print(f"table: {n:,} rows in {r['pages']:,} pages (load {r['load_s']:.1f} s, "
          f"CREATE UNIQUE INDEX {r['index_s']:.1f} s)")
    print("plan: " + " / ".join(x.strip() for x in r["plan"]))
    print()
    print(f"| {COUNT_SQL} (warm) | M rows/s | SQL's speed / this one |")
    print("| --- | ---: | ---: |")
    print(f"| minidb SQL (Engine.execute) | {m(r['sql_s']):.1f} | 1.00 |")
    print(f"| internal scan (HeapScan, no visibility) | {m(r['internal_s']):.1f} | "
          f"{r['internal_s'] / r['sql_s']:.2f} |")
    print(f"| MVCC scan (heap.mvcc.seq_scan) | {m(r['mvcc_s']):.1f} | "
          f"{r['mvcc_s'] / r['sql_s']:.2f} |")
    print(f"| sqlite3 (in memory) | {m(r['sqlite_s']):.1f} | {r['sqlite_s'] / r['sql_s']:.2f} |")
    print(f"ratio SQL / internal scan = {r['internal_s'] / r['sql_s']:.2f} (target >= 0.9)")
    print()
    k = r["lookups"]
    print(f"| point select by primary key ({k:,} random aids) | statements/s | "
          "minidb prepared / this one |")
    print("| --- | ---: | ---: |")
    sp = k / r["point_prepared_s"]
    print(f"| minidb, prepared (Engine.prepare) | {sp:,.0f} | 1.00 |")
    st_ = k / r["point_text_s"]
    print(f"| minidb, same text (plan cache) | {st_:,.0f} | {sp / st_:.2f} |")
    sl = k / r["sqlite_point_s"]
    print(f"| sqlite3 (in memory) | {sl:,.0f} | {sp / sl:.2f} |")
    print(f"| PostgreSQL 15, pgbench -S, 1 connection (issue's figure) | 14,600 | "
          f"{sp / 14600:.2f} |")
    pc = r["plan_cache"]
    print(f"plan cache: {pc['parses']} parses, {pc['plans']} plans, "
          f"{pc['plan_cache_hits']:,} hits")


if __name__ == "__main__":
    main()
