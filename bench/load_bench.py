"""Bulk loading: pgbench_accounts-shaped rows loaded by executemany, many-row VALUES and COPY
FROM, into a table without indexes (as ``pgbench -i`` loads before it builds its keys) and
into one with a primary key; rates beside sqlite3's executemany (one transaction) and, when
a server can be reached, PostgreSQL's COPY, all in the same run.

Rows: ``(aid integer, bid integer, abalance integer, filler character(84))`` with
aid = 1..N, bid = (aid - 1) // 100000 + 1, abalance 0, filler '' (pgbench's).

minidb, through the DB-API, each load in one transaction:

* ``executemany``: one ``cursor.executemany("INSERT INTO a VALUES (?, ?, ?, ?)", rows)``;
* ``values``: ``INSERT INTO a VALUES (...), (...), ...`` statements of ``--values-rows``
  rows each (the SQL text is built before the clock starts);
* ``copy``: ``cursor.copy("COPY a FROM STDIN")`` given the text-format data (built before
  the clock starts).

sqlite3 (the standard library's): ``executemany`` of the same rows in one transaction, into
the same two tables, with sqlite's defaults (a rollback journal, synchronous FULL).  In
sqlite ``aid integer PRIMARY KEY`` makes aid the rowid itself rather than a separate index,
so its primary-key figure is its cheap case.

PostgreSQL (``--start-local`` as ``bench/compare_postgres.py`` starts one, or ``--dsn``):
``\\copy a FROM 'file'`` through ``psql`` (the client reads the file and streams it, as
minidb's ``cursor.copy``), wall clock; its CPU (the server's processes and psql) when the
server runs here.

Each configuration runs ``--runs`` times (minidb and sqlite3 alternating, so a change in the
machine's load hits both); figures are the median and the spread (min-max) of rows/s by CPU
time (this process: minidb is embedded; sqlite3 too) and by the wall clock, with the 1-minute
load average before the runs.  Ratios are minidb / sqlite3 and minidb / PostgreSQL: above 1,
minidb loads faster.

    python bench/load_bench.py                       # 20,000 rows, quick
    python bench/load_bench.py --rows 1000000 --runs 3 --start-local
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minidb  # noqa: E402

METHODS = ("executemany", "values", "copy")
TABLES = ("no index", "primary key")


def accounts(n: int) -> list[tuple]:
    return [(aid, (aid - 1) // 100000 + 1, 0, "") for aid in range(1, n + 1)]


def ddl(pk: bool) -> str:
    return ("CREATE TABLE a (aid integer" + (" PRIMARY KEY" if pk else "")
            + ", bid integer, abalance integer, filler character(84))")


@dataclass
class Sample:
    rows: int
    cpu: float | None
    wall: float
    load: float


@dataclass
class Series:
    samples: list = field(default_factory=list)

    def rates(self, what: str) -> list[float]:
        out = []
        for s in self.samples:
            t = s.cpu if what == "cpu" else s.wall
            if t:
                out.append(s.rows / t)
        return out

    def median(self, what: str) -> float | None:
        r = self.rates(what)
        return statistics.median(r) if r else None

    def text(self, what: str) -> str:
        r = self.rates(what)
        if not r:
            return "-"
        return f"{statistics.median(r):>10,.0f} ({min(r):,.0f}-{max(r):,.0f})"


def _clock():
    return time.process_time(), time.perf_counter()


class Minidb:
    """Loads into a fresh table of one data directory (dropped and created each run)."""

    def __init__(self, datadir: str, values_rows: int = 20_000, **settings):
        self.conn = minidb.connect(datadir, max_worker_processes=0, **settings)
        self.values_rows = values_rows

    def prepare(self, method: str, rows: list[tuple]):
        """What the client has ready before the clock starts."""
        if method == "values":
            stmts = []
            for a in range(0, len(rows), self.values_rows):
                stmts.append("INSERT INTO a VALUES " + ", ".join(
                    f"({r[0]}, {r[1]}, {r[2]}, '{r[3]}')" for r in rows[a:a + self.values_rows]))
            return stmts
        if method == "copy":
            return "".join(f"{r[0]}\t{r[1]}\t{r[2]}\t{r[3]}\n" for r in rows)
        return rows

    def run(self, method: str, pk: bool, rows: list[tuple], data=None) -> Sample:
        conn = self.conn
        cur = conn.cursor()
        cur.execute("DROP TABLE IF EXISTS a")
        cur.execute(ddl(pk))
        conn.commit()
        if data is None:
            data = self.prepare(method, rows)
        load = os.getloadavg()[0]
        c0, w0 = _clock()
        if method == "executemany":
            cur.executemany("INSERT INTO a VALUES (?, ?, ?, ?)", data)
        elif method == "values":
            for sql in data:
                cur.execute(sql)
        else:
            with cur.copy("COPY a FROM STDIN") as cp:
                cp.write(data)
        conn.commit()
        c1, w1 = _clock()
        cur.execute("SELECT count(*) FROM a")
        n = cur.fetchall()[0][0]
        if n != len(rows):
            raise SystemExit(f"minidb {method}: {n} rows loaded, {len(rows)} given")
        return Sample(n, c1 - c0, w1 - w0, load)

    def close(self):
        self.conn.close()


def sqlite_run(path: str, pk: bool, rows: list[tuple]) -> Sample:
    if os.path.exists(path):
        os.remove(path)
    conn = sqlite3.connect(path)
    conn.execute(ddl(pk))
    conn.commit()
    load = os.getloadavg()[0]
    c0, w0 = _clock()
    conn.executemany("INSERT INTO a VALUES (?, ?, ?, ?)", rows)
    conn.commit()
    c1, w1 = _clock()
    n = conn.execute("SELECT count(*) FROM a").fetchone()[0]
    conn.close()
    return Sample(n, c1 - c0, w1 - w0, load)


class Postgres:
    """PostgreSQL's COPY through psql's \\copy (see the module docstring)."""

    def __init__(self, dsn: str, datafile: str):
        from bench.compare_postgres import PG
        self.pg = PG(dsn)
        self.datafile = datafile

    def run(self, pk: bool, nrows: int) -> Sample:
        from bench.compare_postgres import _settled, children_cpu
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS a")
        pg.execute(ddl(pk))
        load = os.getloadavg()[0]
        c0, k0 = pg.cpu(), children_cpu()
        w0 = time.perf_counter()
        out = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                              f"\\copy a FROM '{self.datafile}'"], env=pg.env,
                             capture_output=True, text=True)
        w1 = time.perf_counter()
        if out.returncode:
            raise RuntimeError(f"psql \\copy failed: {out.stderr[-500:]}")
        c1 = _settled(pg.cpu)
        k1 = children_cpu()
        n = int(pg.execute("SELECT count(*) FROM a")[0][0])
        if n != nrows:
            raise SystemExit(f"PostgreSQL COPY: {n} rows loaded, {nrows} given")
        cpu = None if c0 is None or c1 is None else (c1 - c0) + (k1 - k0)
        return Sample(n, cpu, w1 - w0, load)

    def version(self) -> str:
        return self.pg.version()

    def close(self):
        self.pg.close()


def measure(nrows: int, runs: int, values_rows: int, pg_dsn: str | None, workdir: str,
            methods=METHODS, out=print) -> dict:
    """Every configuration ``runs`` times, alternating; returns {(system, method, table):
    Series}."""
    rows = accounts(nrows)
    md = Minidb(os.path.join(workdir, "minidb"), values_rows)
    prepared = {m: md.prepare(m, rows) for m in methods}
    pg = None
    if pg_dsn is not None:
        datafile = os.path.join(workdir, "accounts.tsv")
        with open(datafile, "w") as f:
            f.write(md.prepare("copy", rows))
        os.chmod(workdir, 0o755)
        os.chmod(datafile, 0o644)
        try:
            pg = Postgres(pg_dsn, datafile)
            out(f"PostgreSQL {pg.version()}")
        except Exception as e:  # no server, no driver
            out(f"PostgreSQL not reachable: {str(e).strip().splitlines()[0] if str(e) else e}")
            pg = None
    results: dict = {}
    try:
        for _ in range(runs):
            for t in TABLES:
                pk = t == "primary key"
                for m in methods:
                    s = md.run(m, pk, rows, prepared[m])
                    results.setdefault(("minidb", m, t), Series()).samples.append(s)
                s = sqlite_run(os.path.join(workdir, "sqlite.db"), pk, rows)
                results.setdefault(("sqlite3", "executemany", t), Series()).samples.append(s)
                if pg is not None:
                    s = pg.run(pk, nrows)
                    results.setdefault(("postgres", "copy", t), Series()).samples.append(s)
    finally:
        md.close()
        if pg is not None:
            pg.close()
    return results


def report(results: dict, nrows: int, out=print) -> None:
    loads = [s.load for ser in results.values() for s in ser.samples]
    out(f"{nrows:,} pgbench_accounts-shaped rows; load average (1 min) "
        f"{min(loads):.2f}-{max(loads):.2f}")
    out(f"{'system':9} {'method':12} {'table':12} {'rows/s CPU: median (min-max)':>34} "
        f"{'rows/s wall: median (min-max)':>35} {'/ sqlite3 (cpu, wall)':>22} "
        f"{'/ PG COPY (cpu, wall)':>22}")
    for t in TABLES:
        base = results.get(("sqlite3", "executemany", t))
        pgs = results.get(("postgres", "copy", t))
        for key, ser in sorted(results.items(), key=lambda kv: (kv[0][0] != "minidb", kv[0])):
            system, method, table = key
            if table != t:
                continue
            ratio_sq = ratio_pg = "-"
            if system == "minidb" and base is not None:
                rc = _ratio(ser.median("cpu"), base.median("cpu"))
                rw = _ratio(ser.median("wall"), base.median("wall"))
                ratio_sq = f"{rc}, {rw}"
            if system == "minidb" and pgs is not None:
                ratio_pg = (f"{_ratio(ser.median('cpu'), pgs.median('cpu'))}, "
                            f"{_ratio(ser.median('wall'), pgs.median('wall'))}")
            out(f"{system:9} {method:12} {table:12} {ser.text('cpu'):>34} "
                f"{ser.text('wall'):>35} {ratio_sq:>22} {ratio_pg:>22}")
    out("minidb and sqlite3 run in this process (CPU: this process); PostgreSQL's COPY "
        "pays its client (psql) and the socket, and its CPU is its server's and psql's.")


def _ratio(a, b) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--values-rows", type=int, default=20_000,
                    help="rows per INSERT ... VALUES statement")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--start-local", action="store_true",
                    help="start a throw-away PostgreSQL (as bench/compare_postgres.py does)")
    ap.add_argument("--dsn", default=None, help="a PostgreSQL to compare with (libpq string)")
    args = ap.parse_args(argv)
    methods = tuple(m for m in args.methods.split(",") if m)
    workdir = tempfile.mkdtemp(prefix="minidb-load-")
    try:
        if args.start_local:
            from bench.compare_postgres import local_server
            try:
                with local_server() as dsn:
                    results = measure(args.rows, args.runs, args.values_rows, dsn, workdir,
                                      methods)
            except SystemExit as e:   # no PostgreSQL here: minidb and sqlite3 alone
                print(f"PostgreSQL not started: {e}")
                results = measure(args.rows, args.runs, args.values_rows, None, workdir,
                                  methods)
        else:
            results = measure(args.rows, args.runs, args.values_rows, args.dsn, workdir,
                              methods)
        report(results, args.rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
