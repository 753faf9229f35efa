"""A hash join and a window function through SQL: minidb against sqlite3 (in memory) and,
when a server is reachable, PostgreSQL, in the same run on the same data.

Tables (built once per engine, not timed)::

    fact (id integer, k integer, g integer, v integer)   --rows rows: k = id % --inner,
                                                         g = id % 1000, v = (id * 7919) % 1009
    dim  (k integer, w integer)                          --inner rows, k = 0 .. inner-1

Queries (each returns one row, so the client's fetching costs nothing)::

    join:    SELECT count(*), sum(d.w) FROM fact f JOIN dim d ON f.k = d.k
    window:  SELECT max(s) FROM (SELECT sum(v) OVER (PARTITION BY g ORDER BY id) AS s
                                 FROM fact) x                 (over --window-rows rows)

Every figure is the median and the spread (min-max) of ``--runs`` runs taken alternately
(minidb, sqlite3, PostgreSQL, minidb, ...), so that a change in the machine's load hits
all of them; each run is measured by the wall clock and by CPU time (minidb and sqlite3:
this process; PostgreSQL: the server's processes, as ``bench/compare_postgres.py`` reads
them, plus the client's round trip in the wall clock).  Ratios are minidb's time over the
other's (below 1: minidb is faster).

PostgreSQL: ``--dsn`` (libpq string) or ``--start-local`` (a throw-away cluster on a unix
socket, as ``compare_postgres.py`` starts it); otherwise its column is left out.

    python bench/sql_ops_bench.py                          # 1,000,000 x 100,000, windows
    python bench/sql_ops_bench.py --start-local
    python bench/sql_ops_bench.py --rows 100000 --inner 10000 --window-rows 100000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import minidb  # noqa: E402
from bench.compare_postgres import local_server, reachable  # noqa: E402

JOIN = "SELECT count(*), sum(d.w) FROM fact f JOIN dim d ON f.k = d.k"
WINDOW = ("SELECT max(s) FROM (SELECT sum(v) OVER (PARTITION BY g ORDER BY id) AS s "
          "FROM {t}) x")


def fact_sql(rows: int, inner: int) -> str:
    return (f"INSERT INTO fact SELECT i, i % {inner}, i % 1000, (i * 7919) % 1009 "
            f"FROM generate_series(1, {rows}) AS s(i)")


class Minidb:
    name = "minidb"

    def __init__(self, path, rows, inner, wrows):
        self.conn = minidb.connect(path, shared_buffers=32768)
        self.cur = self.conn.cursor()
        c = self.cur
        c.execute("CREATE TABLE fact (id integer, k integer, g integer, v integer)")
        c.execute("CREATE TABLE dim (k integer, w integer)")
        c.execute(fact_sql(rows, inner))
        c.execute(f"INSERT INTO dim SELECT i, i % 13 FROM generate_series(0, {inner - 1}) "
                  "AS s(i)")
        c.execute("CREATE TABLE wfact (id integer, k integer, g integer, v integer)")
        c.execute(f"INSERT INTO wfact SELECT * FROM fact WHERE id <= {wrows}")
        self.conn.commit()
        self.conn.autocommit = True
        c.execute("VACUUM ANALYZE")

    def run(self, sql):
        self.cur.execute(sql)
        return self.cur.fetchall()

    def cpu(self):
        return time.process_time()

    def close(self):
        self.conn.close()


class Sqlite:
    name = "sqlite3"

    def __init__(self, rows, inner, wrows):
        self.db = sqlite3.connect(":memory:")
        c = self.db
        c.execute("CREATE TABLE fact (id integer, k integer, g integer, v integer)")
        c.execute("CREATE TABLE dim (k integer, w integer)")
        c.executemany("INSERT INTO fact VALUES (?, ?, ?, ?)",
                      ((i, i % inner, i % 1000, (i * 7919) % 1009) for i in range(1, rows + 1)))
        c.executemany("INSERT INTO dim VALUES (?, ?)", ((i, i % 13) for i in range(inner)))
        c.execute("CREATE TABLE wfact AS SELECT * FROM fact WHERE id <= ?", (wrows,))
        c.commit()

    def run(self, sql):
        return self.db.execute(sql).fetchall()

    def cpu(self):
        return time.process_time()

    def close(self):
        self.db.close()


class Postgres:
    name = "PostgreSQL"

    def __init__(self, pg, rows, inner, wrows):
        self.pg = pg
        for s in ("DROP TABLE IF EXISTS fact, dim, wfact",
                  "CREATE TABLE fact (id integer, k integer, g integer, v integer)",
                  "CREATE TABLE dim (k integer, w integer)", fact_sql(rows, inner),
                  f"INSERT INTO dim SELECT i, i % 13 FROM generate_series(0, {inner - 1}) i",
                  f"CREATE TABLE wfact AS SELECT * FROM fact WHERE id <= {wrows}",
                  "VACUUM ANALYZE", "SET max_parallel_workers_per_gather = 0",
                  "SET work_mem = '256MB'"):
            pg.execute(s)

    def run(self, sql):
        return self.pg.execute(sql)

    def cpu(self):
        return self.pg.cpu()

    def close(self):
        self.pg.close()


def measure(engine, sql):
    c0, t0 = engine.cpu(), time.perf_counter()
    rows = engine.run(sql)
    wall = time.perf_counter() - t0
    c1 = engine.cpu()
    return wall, (c1 - c0) if c0 is not None and c1 is not None else None, rows


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs) * 1000:9.1f} ms ({min(xs) * 1000:.1f}-{max(xs) * 1000:.1f})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--inner", type=int, default=100_000)
    ap.add_argument("--window-rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--start-local", action="store_true")
    args = ap.parse_args(argv)
    wrows = min(args.window_rows, args.rows)
    queries = {"join": JOIN, "window": WINDOW.format(t="wfact")}
    with tempfile.TemporaryDirectory(prefix="minidb-ops-") as d:
        ctx = local_server() if args.start_local else None
        dsn = ctx.__enter__() if ctx is not None else args.dsn
        try:
            engines = [Minidb(os.path.join(d, "db"), args.rows, args.inner, wrows),
                       Sqlite(args.rows, args.inner, wrows)]
            pg, why = reachable(dsn) if (dsn or args.start_local or os.environ.get("PGHOST")) \
                else (None, "no --dsn / --start-local")
            if pg is not None:
                engines.append(Postgres(pg, args.rows, args.inner, wrows))
                print(f"PostgreSQL {pg.version()} via {pg.how}")
            else:
                print(f"PostgreSQL: not measured ({why})")
            print(f"fact {args.rows:,} rows, dim {args.inner:,} rows, window over "
                  f"{wrows:,} rows; {args.runs} alternated runs; load {os.getloadavg()[0]:.2f}")
            for qname, sql in queries.items():
                walls = {e.name: [] for e in engines}
                cpus = {e.name: [] for e in engines}
                answers = {}
                for e in engines:                       # warm-up, and the answers agree
                    answers[e.name] = [tuple(float(x) for x in r) for r in measure(e, sql)[2]]
                first = next(iter(answers.values()))
                if any(a != first for a in answers.values()):
                    raise SystemExit(f"{qname}: the engines disagree: {answers}")
                for _ in range(args.runs):
                    for e in engines:
                        w, c, _ = measure(e, sql)
                        walls[e.name].append(w)
                        cpus[e.name].append(c)
                print(f"\n{qname}: {sql}")
                for e in engines:
                    print(f"  {e.name:11s} wall {fmt(walls[e.name])}   cpu {fmt(cpus[e.name])}")
                mw = statistics.median(walls["minidb"])
                mc = statistics.median(cpus["minidb"])
                for e in engines[1:]:
                    ow = statistics.median(walls[e.name])
                    oc = [c for c in cpus[e.name] if c is not None]
                    ratio_c = f"{mc / statistics.median(oc):.2f}" if oc else "-"
                    print(f"  minidb / {e.name}: wall {mw / ow:.2f}, cpu {ratio_c}")
            for e in engines:
                e.close()
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)


if __name__ == "__main__":
    main()
