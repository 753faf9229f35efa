"""minidb against PostgreSQL on the same machine: the same pgbench workload and the same scan,
minidb's figures printed as ratios of PostgreSQL's.

Workloads (each run on both systems, in the same invocation):

1. **pgbench TPC-B-like**: ``pgbench -i -s S`` then ``pgbench -c C -t T -M MODE`` (with
   pgbench's pre-run vacuum); minidb: ``init_pgbench`` and ``run_bench`` with the same
   arguments.  Reported: tps.
2. **pgbench select-only**: ``pgbench -S -c 1 -T SECONDS -M MODE``; minidb the same.
3. **scan**: a table ``t (a integer, b integer, filler character(84))`` of N rows (a =
   1..N), vacuumed and read once (warm, hint bits set), then ``SELECT count(*) FROM t WHERE
   a < 0`` (no row matches: every row is read and tested), best of three, serial
   (``max_parallel_workers_per_gather = 0``) and with 2 workers, through SQL on both
   systems (minidb's Gather plan; ``ParallelSeqScan`` directly if its planner has none).
   Reported: rows/s.

PostgreSQL is reached through ``--dsn`` (a libpq connection string; default: the
``PG*`` environment variables) with psycopg 3 if it is installed (``pip install
"psycopg[binary]"``), else with the ``psql`` and ``pgbench`` programs.  pgbench itself
always runs as the ``pgbench`` program.  Nothing is started unless ``--start-local`` is
given: then a throw-away cluster is created with ``initdb`` in a temporary directory,
started with ``pg_ctl`` listening only on a unix socket in that directory (as the
``postgres`` user when this runs as root: PostgreSQL refuses to run as root), and stopped
and removed at the end.  Without a reachable server, minidb's figures are printed alone.

Ratios are minidb / PostgreSQL, both measured in this run on this machine (2 cores shared
with other jobs: the ratio is the figure to trust).  minidb's data directory is
temporary.  Tests never need PostgreSQL (``tests/experiments`` checks the parsing and
the minidb side).

    python bench/compare_postgres.py --start-local
    python bench/compare_postgres.py --dsn "host=/var/run/postgresql dbname=postgres"
    python bench/compare_postgres.py --start-local --scale 10 --transactions 1000 --scan-rows 2000000
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TPS_RE = re.compile(r"^tps = ([0-9.]+) \((?:without initial connection time|excluding "
                    r"connections establishing)\)", re.M)
TIME_RE = re.compile(r"^Time: ([0-9.]+) ms", re.M)
SCAN_SQL = "SELECT count(*) FROM t WHERE a < 0"


def parse_pgbench_tps(output: str) -> float:
    """The tps pgbench reports without connection time (15's or 13's wording)."""
    m = TPS_RE.search(output)
    if not m:
        raise ValueError("no tps line in pgbench's output:\n" + output[-2000:])
    return float(m.group(1))


def parse_dsn(dsn: str) -> dict:
    """``key=value`` pairs of a libpq connection string (no quoting beyond single quotes)."""
    out = {}
    for m in re.finditer(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", dsn or ""):
        v = m.group(2)
        if v.startswith("'"):
            v = v[1:-1].replace("\\'", "'")
        out[m.group(1)] = v
    return out


def libpq_env(dsn: str) -> dict:
    """The environment that points pgbench and psql at ``dsn``."""
    keys = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "dbname": "PGDATABASE",
            "password": "PGPASSWORD"}
    env = dict(os.environ)
    for k, v in parse_dsn(dsn).items():
        if k in keys:
            env[keys[k]] = v
    return env


def pg_bindir() -> str | None:
    """Directory of PostgreSQL's server programs (initdb, pg_ctl, postgres)."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    found = shutil.which("pg_ctl")
    return os.path.dirname(found) if found else None


# ---------------------------------------------------------------------------------------------
# a throw-away local server
@contextlib.contextmanager
def local_server(port: int = 54329, options: list[str] | None = None):
    """initdb + pg_ctl start in a temporary directory (unix socket only); yields a DSN."""
    bindir = pg_bindir()
    if bindir is None:
        raise SystemExit("--start-local: PostgreSQL's server programs (pg_ctl) not found")
    d = tempfile.mkdtemp(prefix="minidb-pg-")
    data = os.path.join(d, "data")
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise SystemExit("--start-local as root needs a 'postgres' user to run the server")
        os.chown(d, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    opts = " ".join(["-c listen_addresses=''", f"-c unix_socket_directories='{d}'",
                     f"-p {port}"] + [f"-c {o}" for o in (options or [])])
    try:
        subprocess.run(as_user + [os.path.join(bindir, "initdb"), "-D", data, "-A", "trust",
                                  "-U", "postgres", "--no-sync", "-E", "UTF8"],
                       check=True, capture_output=True, text=True)
        subprocess.run(as_user + [os.path.join(bindir, "pg_ctl"), "-D", data, "-l",
                                  os.path.join(d, "log"), "-o", opts, "-w", "start"],
                       check=True, capture_output=True, text=True)
        yield f"host={d} port={port} user=postgres dbname=postgres"
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"--start-local failed: {' '.join(e.cmd)}\n{e.stdout}{e.stderr}")
    finally:
        subprocess.run(as_user + [os.path.join(bindir, "pg_ctl"), "-D", data, "-m", "fast",
                                  "-w", "stop"], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# talking to PostgreSQL
class PG:
    """One connection to PostgreSQL: psycopg if importable, else psql per statement."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.env = libpq_env(dsn)
        try:
            import psycopg
            self.conn = psycopg.connect(dsn, autocommit=True)
            self.how = f"psycopg {psycopg.__version__}"
        except ImportError:
            self.conn = None
            if not shutil.which("psql"):
                raise RuntimeError("neither psycopg nor psql is available")
            self.how = "psql"
            self.execute("SELECT 1")

    def execute(self, sql: str):
        if self.conn is not None:
            with self.conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall() if cur.description else None
        out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c",
                              sql], env=self.env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(out.stderr.strip())
        return [tuple(line.split("|")) for line in out.stdout.splitlines() if line]

    def timed(self, sql: str, setup: str = "") -> float:
        """Seconds the server took for ``sql`` (after ``setup`` in the same session)."""
        if self.conn is not None:
            if setup:
                self.execute(setup)
            t0 = time.perf_counter()
            self.execute(sql)
            return time.perf_counter() - t0
        out = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"]
                             + (["-c", setup] if setup else [])
                             + ["-c", "\\timing on", "-c", sql],
                             env=self.env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(out.stderr.strip())
        return float(TIME_RE.findall(out.stdout)[-1]) / 1000.0

    def version(self) -> str:
        return str(self.execute("SHOW server_version")[0][0])

    def close(self):
        if self.conn is not None:
            self.conn.close()


def reachable(dsn: str) -> tuple[PG | None, str]:
    try:
        return PG(dsn), ""
    except Exception as e:  # no server, no driver, refused ...
        return None, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def pgbench(env: dict, args: list[str]) -> str:
    if not shutil.which("pgbench"):
        raise RuntimeError("the pgbench program is not installed")
    out = subprocess.run(["pgbench"] + args, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"pgbench {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return out.stdout


# ---------------------------------------------------------------------------------------------
# the workloads
def pg_pgbench(pg: PG, scale: int, clients: int, transactions: int, select_seconds: float,
               mode: str) -> dict:
    env = pg.env
    pgbench(env, ["-i", "-s", str(scale), "-q"])
    tpcb = parse_pgbench_tps(pgbench(env, ["-c", str(clients), "-j", str(clients), "-t",
                                           str(transactions), "-M", mode]))
    sel = parse_pgbench_tps(pgbench(env, ["-S", "-c", "1", "-T", str(select_seconds), "-M",
                                          mode]))
    return {"tpcb": tpcb, "select": sel}


def minidb_pgbench(datadir: str, scale: int, clients: int, transactions: int,
                   select_seconds: float, mode: str, accounts_per_scale: int = 100_000) -> dict:
    from minidb.pgbench import init_pgbench, run_bench
    init_pgbench(datadir, scale, accounts_per_scale=accounts_per_scale)
    tpcb = run_bench(datadir, clients=clients, threads=clients, transactions=transactions,
                     mode=mode, accounts_per_scale=accounts_per_scale)
    sel = run_bench(datadir, script="select-only", clients=1, duration=select_seconds,
                    mode=mode, accounts_per_scale=accounts_per_scale)
    return {"tpcb": tpcb.tps, "select": sel.tps}


def pg_scan(pg: PG, rows: int, repeat: int = 3) -> dict:
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute("CREATE TABLE t (a integer NOT NULL, b integer, filler character(84))")
    pg.execute(f"INSERT INTO t SELECT g, g % 1000, '' FROM generate_series(1, {rows}) g")
    pg.execute("VACUUM ANALYZE t")
    out = {}
    for label, workers in (("serial", 0), ("2 workers", 2)):
        setup = f"SET max_parallel_workers_per_gather = {workers}"
        pg.timed(SCAN_SQL, setup)  # warm
        out[label] = rows / min(pg.timed(SCAN_SQL, setup) for _ in range(repeat))
    pg.execute("DROP TABLE t")
    return out


def minidb_scan(datadir: str, rows: int, repeat: int = 3) -> dict:
    from minidb.experiments.common import (load_scan_table, parallel_count, rows_per_page,
                                          scan_columns)
    from minidb.heap.layout import Column, RowLayout
    from minidb.instance import Instance
    from minidb.session import Session
    from minidb.sql.engine import Engine
    per_page = rows_per_page(RowLayout([Column(n, t) for n, t in scan_columns()]))
    nblocks = -(-rows // per_page)
    # a pool over four times the table: a scan of a table larger than a quarter of the pool
    # goes through the 256 kB bulk-read ring and would read every page again (PostgreSQL's
    # rule too); warm means in shared buffers, as PostgreSQL's table is in its 128 MB
    with Instance(datadir, shared_buffers=max(1024, 4 * nblocks + 1024),
                  max_connections=12) as inst:
        rel, nrows, _ = load_scan_table(inst, "t", nblocks, log_progress=False)
        sess = Session(inst)
        out = {}
        try:
            engine = Engine(sess)
            engine.execute(SCAN_SQL)  # warm (and the workers started)
            for label, workers in (("serial", 0), ("2 workers", 2)):
                engine.execute(f"SET max_parallel_workers_per_gather = {workers}")
                if workers and not any("Gather" in r[0] for r in
                                       engine.execute("EXPLAIN " + SCAN_SQL).rows):
                    # a planner without parallel plans: the Gather machinery directly
                    def run():
                        count, seen, _ = parallel_count(sess.backend, rel, workers)
                        assert (count, seen) == (0, nrows)
                else:
                    def run():
                        assert engine.execute(SCAN_SQL).rows[0][0] == 0
                best = float("inf")
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    run()
                    best = min(best, time.perf_counter() - t0)
                out[label] = nrows / best
        finally:
            sess.close()
    return out


def compare(dsn: str | None, args) -> list[tuple]:
    """Run everything; returns rows (workload, minidb, postgres or None, unit)."""
    pg, why = reachable(dsn or "") if dsn is not None else (None, "no --dsn and no --start-local")
    if pg is None:
        print(f"PostgreSQL not reachable ({why}): minidb's figures only", file=sys.stderr)
    else:
        print(f"PostgreSQL {pg.version()} via {pg.how}", file=sys.stderr)
    rows = []
    work = tempfile.mkdtemp(prefix="minidb-compare-")
    try:
        if not args.skip_pgbench:
            print(f"pgbench: scale {args.scale}, -c {args.clients} -t {args.transactions}, "
                  f"-S -T {args.select_seconds}, -M {args.mode} ...", file=sys.stderr)
            mine = minidb_pgbench(os.path.join(work, "bench"), args.scale, args.clients,
                                  args.transactions, args.select_seconds, args.mode,
                                  args.accounts_per_scale)
            theirs = (pg_pgbench(pg, args.scale, args.clients, args.transactions,
                                 args.select_seconds, args.mode) if pg else {})
            rows.append((f"pgbench tpcb-like -c {args.clients} -t {args.transactions} "
                         f"(scale {args.scale}, -M {args.mode})", mine["tpcb"],
                         theirs.get("tpcb"), "tps"))
            rows.append((f"pgbench -S -c 1 -T {args.select_seconds} (-M {args.mode})",
                         mine["select"], theirs.get("select"), "tps"))
        if not args.skip_scan:
            print(f"scan: {args.scan_rows:,} rows ...", file=sys.stderr)
            mine = minidb_scan(os.path.join(work, "scan"), args.scan_rows)
            theirs = pg_scan(pg, args.scan_rows) if pg else {}
            for k in ("serial", "2 workers"):
                rows.append((f"count(*) WHERE a < 0 over {args.scan_rows:,} rows, warm, {k}",
                             mine[k], theirs.get(k), "rows/s"))
    finally:
        if pg is not None:
            pg.close()
        shutil.rmtree(work, ignore_errors=True)
    return rows


def table(rows: list[tuple]) -> str:
    out = ["| workload | minidb | PostgreSQL | minidb / PostgreSQL |",
           "| --- | ---: | ---: | ---: |"]
    for name, mine, theirs, unit in rows:
        out.append(f"| {name} | {mine:,.1f} {unit} | "
                   + (f"{theirs:,.1f} {unit} | {mine / theirs:.3f}" if theirs else "- | -")
                   + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default=None,
                    help="libpq connection string of a running server (default: PG* variables)")
    ap.add_argument("--start-local", action="store_true",
                    help="initdb and start a throw-away server on a unix socket")
    ap.add_argument("--port", type=int, default=54329, help="port of --start-local's socket")
    ap.add_argument("--pg-option", action="append", default=[],
                    help="a server setting for --start-local, e.g. shared_buffers=128MB")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--transactions", type=int, default=1000)
    ap.add_argument("--select-seconds", type=int, default=10)
    ap.add_argument("--mode", default="prepared", choices=("simple", "extended", "prepared"))
    ap.add_argument("--scan-rows", type=int, default=2_000_000)
    ap.add_argument("--accounts-per-scale", type=int, default=100_000, help=argparse.SUPPRESS)
    ap.add_argument("--skip-pgbench", action="store_true")
    ap.add_argument("--skip-scan", action="store_true")
    args = ap.parse_args(argv)
    if args.start_local:
        with local_server(args.port, args.pg_option) as dsn:
            rows = compare(dsn, args)
    else:
        dsn = args.dsn
        if dsn is None and any(k in os.environ for k in ("PGHOST", "PGPORT", "PGDATABASE")):
            dsn = ""
        rows = compare(dsn, args)
    print(f"minidb against PostgreSQL on {socket.gethostname()} ({os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f})")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
