"""minidb against PostgreSQL on the same machine: the same pgbench workload and the same scan,
with the same shared_buffers on both, minidb's figures printed as ratios of PostgreSQL's.

Both engines get the same pool: ``--shared-buffers`` MB (default 128, PostgreSQL's
default) - minidb's ``shared_buffers`` and the ``shared_buffers`` of the server this starts
(``--start-local``); against a running server (``--dsn``) the pool is the server's
(``SHOW shared_buffers``) and minidb is given the same.

Workloads (each on both systems, in the same invocation):

1. **pgbench TPC-B-like**: ``pgbench -i -s S`` then ``pgbench -c C -t T -M MODE`` (with
   pgbench's pre-run vacuum); minidb: ``init_pgbench`` and ``run_bench`` with the same
   arguments on an instance kept open (its pool stays warm between runs, as the server's).
2. **pgbench select-only**: ``pgbench -S -c 1 -T SECONDS -M MODE``; minidb the same.

Both run once per ``--mode`` (default: ``simple``, pgbench's own default, and ``prepared``),
with ``synchronous_commit`` set as ``--synchronous-commit`` says on both engines (default
off: a commit does not wait for its WAL flush; PostgreSQL gets it through ``PGOPTIONS`` in
pgbench's sessions, minidb as a session setting of every client).
3. **scan**, in two configurations of the same pool: *the table in the pool* (a table of a
   fifth of shared_buffers: below a quarter, so neither engine scans it through its
   bulk-read ring, and after one warm-up scan every page is a buffer hit) and *the table
   larger than the pool* (twice shared_buffers: both engines read it through their 256 kB
   rings, from the kernel's page cache, on every scan).  A table
   ``t (a integer, b integer, filler character(84))`` (a = 1..N), vacuumed, then
   ``SELECT count(*) FROM t WHERE a < 0`` (no row matches: every row is read and tested),
   serial (``max_parallel_workers_per_gather = 0``) and with 2 workers (parallel costs
   set to 0 on both, so both plan a Gather), through SQL on both systems.

Every figure is the median and the spread (min-max) of ``--runs`` (at least 3) runs taken
alternately (minidb, PostgreSQL, minidb, ...), so that a change in the machine's load hits
both; the load average (1 minute) before each run is printed with them.  Each run is
measured twice: by the wall clock (tps, rows/s) and by CPU time (of every process doing
the work: for minidb this process, its forked pgbench clients and its parallel workers; for
PostgreSQL the server's processes - postmaster, backends, parallel workers, background
processes - and the client program, pgbench or psql), printed per transaction or per row.
PostgreSQL's figures include a client/server round trip per statement (a unix socket,
the protocol, the client library); minidb runs in the calling process and pays none: the
ratio compares the two as applications use them, not their executors alone.  CPU time of
a server on another machine cannot be read: then only the wall clock is printed.

PostgreSQL is reached through ``--dsn`` (a libpq connection string; default: the
``PG*`` environment variables) with psycopg 3 if it is installed (``pip install
"psycopg[binary]"``), else through one ``psql`` session kept open (``\\timing`` gives
the time of each statement).  pgbench itself always runs as the ``pgbench`` program.
Nothing is started unless ``--start-local`` is given: then a throw-away cluster is created
with ``initdb`` in a temporary directory, started with ``pg_ctl`` listening only on a unix
socket in that directory (as the ``postgres`` user when this runs as root: PostgreSQL
refuses to run as root), and stopped and removed at the end.  Without a reachable server,
minidb's figures are printed alone.

Ratios are minidb / PostgreSQL (rates: above 1, minidb is faster; CPU per unit: above 1,
minidb spends more), both measured in this run on this machine.  minidb's data
directories are temporary.  Tests never need PostgreSQL (``tests/experiments`` checks the
parsing and the minidb side).

    python bench/compare_postgres.py --start-local
    python bench/compare_postgres.py --dsn "host=/var/run/postgresql dbname=postgres"
    python bench/compare_postgres.py --start-local --scale 10 --transactions 1000 --runs 5
    python bench/compare_postgres.py --start-local --shared-buffers 4 --scale 1 \\
        --transactions 50 --select-seconds 1            # a quick check that it works
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pwd
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TPS_RE = re.compile(r"^tps = ([0-9.]+) \((?:without initial connection time|excluding "
                    r"connections establishing)\)", re.M)
PROCESSED_RE = re.compile(r"^number of transactions actually processed: (\d+)", re.M)
TIME_RE = re.compile(r"^Time: ([0-9.]+) ms", re.M)
PARALLEL_SETTINGS = ("parallel_setup_cost = 0", "parallel_tuple_cost = 0",
                     "min_parallel_table_scan_size = 0")
CLK_TCK = os.sysconf("SC_CLK_TCK")
ROUND_TRIP_NOTE = ("PostgreSQL's figures include a client/server round trip per statement "
                   "(unix socket, protocol, client library); minidb runs in the calling "
                   "process and pays none.")


def scan_sql(table: str) -> str:
    return f"SELECT count(*) FROM {table} WHERE a < 0"


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


def parse_size_mb(text: str) -> float:
    """A PostgreSQL memory setting as SHOW prints it ("128MB", "1GB", "8192kB") in MB."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(kB|MB|GB|TB)?\s*", text)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return float(m.group(1)) * {"kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1 << 20,
                                None: 8 / 1024}[m.group(2)]


# ---------------------------------------------------------------------------------------------
# CPU time of process trees (Linux /proc)
def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds: own user + system, and its reaped children's)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                text = f.read()
        except OSError:
            continue
        rest = text[text.rindex(")") + 2:].split()
        # fields 4 (ppid), 14-17 (utime, stime, cutime, cstime) of proc(5)
        out[int(d)] = (int(rest[1]), sum(int(x) for x in rest[11:15]) / CLK_TCK)
    return out


def tree_cpu(root: int, exclude: set[int] = frozenset()) -> float | None:
    """CPU seconds of ``root`` and every live descendant (each with the children it has
    reaped), leaving out the subtrees of ``exclude``; None if ``root`` is not visible."""
    procs = _proc_table()
    if root not in procs:
        return None
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        total += procs[pid][1]
        todo.extend(kids.get(pid, ()))
    return total


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (the pgbench program, psql runs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass
class Run:
    """One measured run: ``units`` (transactions or rows) in ``wall`` seconds using ``cpu``
    CPU seconds (None: not measurable), the 1-minute load average when it started."""
    units: float
    wall: float
    cpu: float | None
    load: float

    @property
    def rate(self) -> float:
        return self.units / self.wall

    @property
    def cpu_per_unit(self) -> float | None:
        return None if self.cpu is None or not self.units else self.cpu / self.units


@dataclass
class Series:
    """The runs of one workload in one configuration on both engines, in the order taken."""
    name: str
    unit: str               # "tps" or "rows/s"
    cpu_unit: str           # "ms/transaction" or "ns/row"
    cpu_scale: float        # CPU seconds per unit -> cpu_unit
    rate_scale: float = 1.0  # units per second -> unit
    minidb: list = field(default_factory=list)
    pg: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# PostgreSQL's side
def pg_bindir() -> str | None:
    """Directory of PostgreSQL's server programs (initdb, pg_ctl, postgres)."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    found = shutil.which("pg_ctl")
    return os.path.dirname(found) if found else None


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


class _PsqlSession:
    """One ``psql`` process kept open: statements written to its input, each followed by
    an ``\\echo`` of a marker that ends its output."""

    MARK = "__minidb_compare_done__"

    def __init__(self, env: dict):
        if not shutil.which("psql"):
            raise RuntimeError("neither psycopg nor psql is available")
        self.proc = subprocess.Popen(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)

    def run(self, sql: str, timing: bool = False) -> tuple[list[tuple], float | None]:
        p = self.proc
        text = sql.strip().rstrip(";") + ";\n"
        if timing:
            text = "\\timing on\n" + text + "\\timing off\n"
        try:
            p.stdin.write(text + f"\\echo {self.MARK}\n")
            p.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError("psql exited") from None
        lines = []
        while True:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("psql: " + "\n".join(lines[-20:]))
            line = line.rstrip("\n")
            if line == self.MARK:
                break
            lines.append(line)
        secs = None
        rows = []
        for line in lines:
            m = TIME_RE.match(line)
            if m:
                secs = float(m.group(1)) / 1000.0
            elif line.startswith(("ERROR:", "FATAL:", "psql:")):
                raise RuntimeError(line)
            elif line and not line.startswith(("Timing is", "NOTICE:", "WARNING:")):
                rows.append(tuple(line.split("|")))
        return rows, secs

    def close(self):
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
        with contextlib.suppress(Exception):
            self.proc.wait(10)


class PG:
    """One session on PostgreSQL: psycopg if importable, else one psql process."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.env = libpq_env(dsn)
        try:
            import psycopg
            self.conn = psycopg.connect(dsn, autocommit=True)
            self.psql = None
            self.how = f"psycopg {psycopg.__version__}"
        except ImportError:
            self.conn = None
            self.psql = _PsqlSession(self.env)
            self.how = "psql (one session)"
        self.backend_pid = int(self.execute("SELECT pg_backend_pid()")[0][0])
        # the server's processes are readable only when it runs on this machine
        procs = _proc_table()
        self.postmaster = procs[self.backend_pid][0] if self.backend_pid in procs else None
        if self.postmaster is not None and not self._is_postgres(self.backend_pid):
            self.postmaster = None        # the pid is someone else's: another machine

    @staticmethod
    def _is_postgres(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/comm") as f:
                return f.read().strip().startswith("postgres")
        except OSError:
            return False

    def execute(self, sql: str):
        if self.conn is not None:
            with self.conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall() if cur.description else None
        return self.psql.run(sql)[0]

    def timed(self, sql: str) -> float:
        """Seconds ``sql`` took, as the client saw it (round trip included)."""
        if self.conn is not None:
            t0 = time.perf_counter()
            self.execute(sql)
            return time.perf_counter() - t0
        _, secs = self.psql.run(sql, timing=True)
        return secs

    def cpu(self) -> float | None:
        """CPU seconds so far of the server's processes and of this session's client
        (psql; the pgbench program is counted by the caller)."""
        if self.postmaster is None:
            return None
        server = tree_cpu(self.postmaster)
        if server is None:
            return None
        if self.psql is not None:
            server += tree_cpu(self.psql.proc.pid) or 0.0
        return server

    def version(self) -> str:
        return str(self.execute("SHOW server_version")[0][0])

    def shared_buffers_mb(self) -> float:
        return parse_size_mb(str(self.execute("SHOW shared_buffers")[0][0]))

    def close(self):
        if self.conn is not None:
            self.conn.close()
        if self.psql is not None:
            self.psql.close()


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


def pg_pgbench_run(pg: PG, args: list[str], env: dict | None = None) -> Run:
    """One pgbench run against ``pg``: tps over its own clock, CPU of pgbench and the
    server (backends that exited are counted in the postmaster's reaped children).
    ``env``: pgbench's environment (default ``pg.env``; e.g. with PGOPTIONS)."""
    load = os.getloadavg()[0]
    c0, k0 = pg.cpu(), children_cpu()
    out = pgbench(env or pg.env, args)
    c1 = _settled(pg.cpu)
    k1 = children_cpu()
    tps = parse_pgbench_tps(out)
    m = PROCESSED_RE.search(out)
    n = int(m.group(1)) if m else 0
    cpu = None if c0 is None or c1 is None else (c1 - c0) + (k1 - k0)
    return Run(n, n / tps if tps else float("inf"), cpu, load)


def _settled(read, tries: int = 20):
    """``read()`` once two readings 50 ms apart agree (the postmaster reaps the backends
    of a finished pgbench a moment after it exits)."""
    last = read()
    for _ in range(tries):
        time.sleep(0.05)
        now = read()
        if now == last:
            return now
        last = now
    return last


# ---------------------------------------------------------------------------------------------
# minidb's side
def minidb_cpu(exclude: set[int]) -> float:
    """CPU seconds so far of this process and its descendants (forked pgbench clients once
    reaped, the worker pool), the PostgreSQL client processes left out."""
    return tree_cpu(os.getpid(), exclude) or 0.0


def _pool_pages(shared_buffers_mb: float) -> int:
    return max(16, int(shared_buffers_mb * 1024 * 1024) // 8192)


class MinidbBench:
    """pgbench over one minidb instance kept open for all the runs."""

    def __init__(self, datadir: str, scale: int, shared_buffers_mb: float,
                 accounts_per_scale: int = 100_000):
        from minidb.instance import Instance
        from minidb.pgbench import init_pgbench
        self.inst = Instance(datadir, shared_buffers=_pool_pages(shared_buffers_mb),
                             max_connections=24)
        self.aps = accounts_per_scale
        init_pgbench(self.inst, scale, accounts_per_scale=accounts_per_scale)

    def run(self, exclude: set[int] = frozenset(), **kw) -> Run:
        from minidb.pgbench import run_bench
        load = os.getloadavg()[0]
        c0 = minidb_cpu(exclude)
        res = run_bench(self.inst, accounts_per_scale=self.aps, **kw)
        c1 = minidb_cpu(exclude)
        return Run(res.processed, res.processed / res.tps if res.tps else float("inf"),
                   c1 - c0, load)

    def close(self):
        self.inst.close()


def minidb_pgbench(datadir: str, scale: int, clients: int, transactions: int,
                   select_seconds: float, mode: str, accounts_per_scale: int = 100_000,
                   shared_buffers_mb: float = 128) -> dict:
    """One run of each pgbench workload on minidb: {"tpcb": tps, "select": tps}."""
    b = MinidbBench(datadir, scale, shared_buffers_mb, accounts_per_scale)
    try:
        tpcb = b.run(clients=clients, threads=clients, transactions=transactions, mode=mode)
        sel = b.run(script="select-only", clients=1, duration=select_seconds, mode=mode)
    finally:
        b.close()
    return {"tpcb": tpcb.rate, "select": sel.rate}


class MinidbScan:
    """The scan tables in one minidb instance with a pool of ``shared_buffers_mb``."""

    def __init__(self, datadir: str, shared_buffers_mb: float, tables: dict[str, int]):
        from minidb.experiments.common import load_scan_table
        from minidb.instance import Instance
        from minidb.session import Session
        from minidb.sql.engine import Engine
        self.inst = Instance(datadir, shared_buffers=_pool_pages(shared_buffers_mb),
                             max_connections=12)
        self.rels = {}
        for name, nblocks in tables.items():
            rel, nrows, nblocks = load_scan_table(self.inst, name, nblocks,
                                                  log_progress=False)
            self.rels[name] = (rel, nrows, nblocks)
        self.sess = Session(self.inst)
        self.engine = Engine(self.sess)
        self.engine.execute("VACUUM")

    def mb(self, name: str) -> float:
        return self.rels[name][2] * 8192 / 1e6

    def rows(self, name: str) -> int:
        return self.rels[name][1]

    def prepare(self, name: str, workers: int):
        """SET the plan's settings; returns the function that runs the scan once."""
        from minidb.experiments.common import parallel_count
        e = self.engine
        e.execute("RESET ALL")
        e.execute(f"SET max_parallel_workers_per_gather = {workers}")
        if workers:
            for s in PARALLEL_SETTINGS:
                e.execute("SET " + s)
        rel, nrows, _ = self.rels[name]
        sql = scan_sql(name)
        if workers and not any("Gather" in r[0] for r in e.execute("EXPLAIN " + sql).rows):
            def run():       # a planner without parallel plans: the Gather machinery itself
                count, seen, _ = parallel_count(self.sess.backend, rel, workers)
                assert (count, seen) == (0, nrows)
        else:
            def run():
                assert e.execute(sql).rows[0][0] == 0
        return run

    def run(self, fn, name: str, exclude: set[int] = frozenset()) -> Run:
        load = os.getloadavg()[0]
        c0 = minidb_cpu(exclude)
        t0 = time.perf_counter()
        fn()
        wall = time.perf_counter() - t0
        return Run(self.rows(name), wall, minidb_cpu(exclude) - c0, load)

    def close(self):
        self.sess.close()
        self.inst.close()


def minidb_scan(datadir: str, rows: int, repeat: int = 3,
                shared_buffers_mb: float | None = None) -> dict:
    """minidb alone: the median rows/s of ``repeat`` warm scans of a table of about ``rows``
    rows, serial and with 2 workers; the pool four times the table unless given."""
    from minidb.experiments.common import rows_per_page, scan_columns
    from minidb.heap.layout import Column, RowLayout
    per_page = rows_per_page(RowLayout([Column(n, t) for n, t in scan_columns()]))
    nblocks = -(-rows // per_page)
    if shared_buffers_mb is None:
        shared_buffers_mb = (4 * nblocks + 1024) * 8192 / 1024 / 1024
    m = MinidbScan(datadir, shared_buffers_mb, {"t": nblocks})
    out = {}
    try:
        for label, workers in (("serial", 0), ("2 workers", 2)):
            fn = m.prepare("t", workers)
            fn()                                            # warm
            out[label] = statistics.median(m.run(fn, "t").rate for _ in range(repeat))
    finally:
        m.close()
    return out


# ---------------------------------------------------------------------------------------------
# PostgreSQL's scan tables
def pg_load_scan(pg: PG, name: str, rows: int) -> float:
    """Create and fill ``name`` with ``rows`` rows, vacuumed; returns its size in MB."""
    pg.execute(f"DROP TABLE IF EXISTS {name}")
    pg.execute(f"CREATE TABLE {name} (a integer NOT NULL, b integer, filler character(84))")
    pg.execute(f"INSERT INTO {name} SELECT g, g % 1000, '' FROM generate_series(1, {rows}) g")
    pg.execute(f"VACUUM ANALYZE {name}")
    return int(pg.execute(f"SELECT pg_relation_size('{name}')")[0][0]) / 1e6


def pg_prepare(pg: PG, workers: int) -> None:
    pg.execute("RESET ALL")
    pg.execute(f"SET max_parallel_workers_per_gather = {workers}")
    if workers:
        for s in PARALLEL_SETTINGS:
            pg.execute("SET " + s)


def pg_scan_run(pg: PG, name: str, rows: int) -> Run:
    load = os.getloadavg()[0]
    c0 = pg.cpu()
    wall = pg.timed(scan_sql(name))
    c1 = _settled(pg.cpu, 4)  # parallel workers exit and are reaped just after the query
    return Run(rows, wall, None if c0 is None or c1 is None else c1 - c0, load)


# ---------------------------------------------------------------------------------------------
# the comparison
def compare(dsn: str | None, args) -> tuple[list[Series], list[str]]:
    """Run everything; returns the series and the configuration lines to print."""
    pg, why = reachable(dsn or "") if dsn is not None else (None, "no --dsn and no --start-local")
    notes = []
    pool_mb = args.shared_buffers
    if pg is None:
        print(f"PostgreSQL not reachable ({why}): minidb's figures only", file=sys.stderr)
    else:
        server_mb = pg.shared_buffers_mb()
        if abs(server_mb - pool_mb) > 0.01:
            print(f"the server's shared_buffers is {server_mb:g} MB: minidb gets the same",
                  file=sys.stderr)
            pool_mb = server_mb
        notes.append(f"PostgreSQL {pg.version()} via {pg.how}"
                     + ("" if pg.postmaster else "; its CPU time is not readable from here"))
    notes.append(f"shared_buffers {pool_mb:g} MB on both")
    exclude = set() if pg is None or pg.psql is None else {pg.psql.proc.pid}
    series: list[Series] = []
    work = tempfile.mkdtemp(prefix="minidb-compare-")
    runs = args.runs
    try:
        if not args.skip_pgbench:
            modes = args.mode or ["simple", "prepared"]
            sync = args.synchronous_commit
            print(f"pgbench: scale {args.scale}, -c {args.clients} -t {args.transactions}, "
                  f"-S -T {args.select_seconds}, -M {' and '.join(modes)}, "
                  f"synchronous_commit {sync}, {runs} runs each ...", file=sys.stderr)
            notes.append(f"synchronous_commit {sync} on both")
            mb = MinidbBench(os.path.join(work, "bench"), args.scale, pool_mb,
                             args.accounts_per_scale)
            mset = {"synchronous_commit": sync == "on"}
            pg_env = None
            if pg is not None:
                pg_env = dict(pg.env)
                pg_env["PGOPTIONS"] = (pg_env.get("PGOPTIONS", "")
                                       + f" -c synchronous_commit={sync}").strip()
            try:
                if pg is not None:
                    pgbench(pg.env, ["-i", "-s", str(args.scale), "-q"])
                for mode in modes:
                    tpcb = Series(f"pgbench tpcb-like -c {args.clients} -t "
                                  f"{args.transactions} (scale {args.scale}, -M {mode})", "tps",
                                  "ms/transaction", 1e3)
                    sel = Series(f"pgbench -S -c 1 -T {args.select_seconds} (scale "
                                 f"{args.scale}, -M {mode})", "tps", "ms/transaction", 1e3)
                    for _ in range(runs):
                        tpcb.minidb.append(mb.run(exclude, clients=args.clients,
                                                  threads=args.clients,
                                                  transactions=args.transactions, mode=mode,
                                                  settings=mset))
                        if pg is not None:
                            tpcb.pg.append(pg_pgbench_run(pg, [
                                "-c", str(args.clients), "-j", str(args.clients), "-t",
                                str(args.transactions), "-M", mode], pg_env))
                    for _ in range(runs):
                        sel.minidb.append(mb.run(exclude, script="select-only", clients=1,
                                                 duration=args.select_seconds, mode=mode,
                                                 settings=mset))
                        if pg is not None:
                            sel.pg.append(pg_pgbench_run(pg, [
                                "-S", "-c", "1", "-T", str(args.select_seconds), "-M",
                                mode], pg_env))
                    series += [tpcb, sel]
            finally:
                mb.close()
        if not args.skip_scan:
            pool_pages = _pool_pages(pool_mb)
            configs = {"t_in": ("table in the pool", max(1, pool_pages // 5)),
                       "t_out": ("table larger than the pool", 2 * pool_pages)}
            print(f"scan: tables of {', '.join(f'{b:,}' for _, b in configs.values())} "
                  f"blocks, {runs} runs each ...", file=sys.stderr)
            ms = MinidbScan(os.path.join(work, "scan"), pool_mb,
                            {name: blocks for name, (_, blocks) in configs.items()})
            try:
                for name, (label, _) in configs.items():
                    rows = ms.rows(name)
                    size = f"minidb {ms.mb(name):.1f} MB"
                    if pg is not None:
                        size += f", PostgreSQL {pg_load_scan(pg, name, rows):.1f} MB"
                    notes.append(f"{label}: {rows:,} rows ({size}), shared_buffers "
                                 f"{pool_mb:g} MB on both")
                    for workers in (0, 2):
                        s = Series(f"count(*) WHERE a < 0, {label}, "
                                   + ("serial" if not workers else f"{workers} workers"),
                                   "M rows/s", "ns/row", 1e9, 1e-6)
                        fn = ms.prepare(name, workers)
                        fn()                                    # warm-up, not measured
                        if pg is not None:
                            pg_prepare(pg, workers)
                            pg.timed(scan_sql(name))            # warm-up, not measured
                        for _ in range(runs):
                            s.minidb.append(ms.run(fn, name, exclude))
                            if pg is not None:
                                s.pg.append(pg_scan_run(pg, name, rows))
                        series.append(s)
            finally:
                ms.close()
    finally:
        if pg is not None:
            pg.close()
        shutil.rmtree(work, ignore_errors=True)
    return series, notes


def _spread(values, fmt: str) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return (f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})")


def _ratios(mine: list, theirs: list, attr: str):
    pairs = [(getattr(a, attr), getattr(b, attr)) for a, b in zip(mine, theirs)]
    return [a / b for a, b in pairs if a is not None and b]  # (CPU time ticks: 10 ms)


def table(series: list[Series]) -> str:
    """Markdown: per workload the median (min-max) of each engine's runs, wall clock and
    CPU, their ratios (the ratio of the medians, and the min-max of the run-by-run
    ratios) and the load average over the runs."""
    out = ["| workload | minidb | PostgreSQL | minidb / PostgreSQL (wall) | minidb CPU "
           "| PostgreSQL CPU | minidb / PostgreSQL (CPU) | load average | runs |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in series:
        m_rate = [r.rate * s.rate_scale for r in s.minidb]
        p_rate = [r.rate * s.rate_scale for r in s.pg]
        m_cpu = [r.cpu_per_unit * s.cpu_scale if r.cpu_per_unit is not None else None
                 for r in s.minidb]
        p_cpu = [r.cpu_per_unit * s.cpu_scale if r.cpu_per_unit is not None else None
                 for r in s.pg]
        fmt = ",.0f" if s.unit == "tps" else ".3g"
        cfmt = ",.3g"
        ratio_w = ratio_c = "-"
        if p_rate:
            rw = _ratios(s.minidb, s.pg, "rate")
            ratio_w = (f"{statistics.median(m_rate) / statistics.median(p_rate):.3f} "
                       f"({min(rw):.3f}-{max(rw):.3f})")
            rc = _ratios(s.minidb, s.pg, "cpu_per_unit")
            pc = [c for c in p_cpu if c is not None]
            if rc and pc and statistics.median(pc):
                ratio_c = (f"{statistics.median(m_cpu) / statistics.median(pc):.3f} "
                           f"({min(rc):.3f}-{max(rc):.3f})")
        loads = [r.load for r in s.minidb + s.pg]
        out.append(f"| {s.name} | {_spread(m_rate, fmt)} {s.unit} | "
                   + (f"{_spread(p_rate, fmt)} {s.unit}" if p_rate else "-")
                   + f" | {ratio_w} | {_spread(m_cpu, cfmt)} {s.cpu_unit} | "
                   + (f"{_spread(p_cpu, cfmt)} {s.cpu_unit}" if p_rate else "-")
                   + f" | {ratio_c} | {min(loads):.1f}-{max(loads):.1f} | "
                   f"{len(s.minidb)} + {len(s.pg)} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default=None,
                    help="libpq connection string of a running server (default: PG* variables)")
    ap.add_argument("--start-local", action="store_true",
                    help="initdb and start a throw-away server on a unix socket")
    ap.add_argument("--port", type=int, default=54329, help="port of --start-local's socket")
    ap.add_argument("--pg-option", action="append", default=[],
                    help="another server setting for --start-local, e.g. work_mem=64MB")
    ap.add_argument("--shared-buffers", type=float, default=128,
                    help="MB of shared buffers for both engines (default 128)")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs of each workload on each engine, alternating (at least 3)")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--transactions", type=int, default=1000)
    ap.add_argument("--select-seconds", type=int, default=10)
    ap.add_argument("--mode", action="append", choices=("simple", "extended", "prepared"),
                    help="pgbench's -M, repeatable (default: simple and prepared)")
    ap.add_argument("--synchronous-commit", choices=("on", "off"), default="off",
                    help="synchronous_commit on both engines (default off)")
    ap.add_argument("--accounts-per-scale", type=int, default=100_000, help=argparse.SUPPRESS)
    ap.add_argument("--skip-pgbench", action="store_true")
    ap.add_argument("--skip-scan", action="store_true")
    args = ap.parse_args(argv)
    if args.runs < 3:
        ap.error("--runs: at least 3 (a median and a spread need them)")
    if args.start_local:
        if any(o.split("=")[0].strip() == "shared_buffers" for o in args.pg_option):
            ap.error("use --shared-buffers (it sets both engines' pool)")
        with local_server(args.port, [f"shared_buffers={args.shared_buffers:g}MB"]
                          + args.pg_option) as dsn:
            series, notes = compare(dsn, args)
    else:
        dsn = args.dsn
        if dsn is None and any(k in os.environ for k in ("PGHOST", "PGPORT", "PGDATABASE")):
            dsn = ""
        series, notes = compare(dsn, args)
    print(f"minidb against PostgreSQL on {socket.gethostname()} ({os.cpu_count()} CPUs, load "
          f"average now {os.getloadavg()[0]:.1f}); {args.runs} runs of each, alternating "
          "minidb and PostgreSQL; median (min-max)")
    for line in notes:
        print("  " + line)
    print(table(series))
    print("wall: rates by the wall clock, ratio above 1 = minidb faster; CPU: CPU time of "
          "all the processes doing the work per unit, ratio above 1 = minidb spends more.")
    print("CPU time is read in ticks of 10 ms: in runs of a few hundred ms or less it is "
          "coarse (0 = under a tick).")
    print(ROUND_TRIP_NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
