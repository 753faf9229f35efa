"""What the write-ahead log costs: pgbench TPC-B-like with fsync on, synchronous_commit
off and fsync off, at 1 and 8 clients, and how much WAL a transaction writes - beside
PostgreSQL 15's figures for the same pgbench runs when a server is reachable.

Three settings (each a durability promise, minidb/wal/README.md):

* ``fsync on``: the defaults - a commit returns after its commit record is flushed
  (fdatasync), one flush covering every backend whose record it includes (group commit);
* ``sync_commit off``: ``synchronous_commit = off`` - a commit returns after inserting its
  record; the WAL writer flushes within ``3 x wal_writer_delay``;
* ``fsync off``: ``fsync = off`` - nothing is ever fsynced.

For each client count the three run alternately (``fsync on``, ``sync_commit off``,
``fsync off``, ``fsync on`` ...), ``--runs`` times each, so that a change in the machine's
load hits all of them; each is printed as the median and spread (min-max) of its tps and of
its CPU time per transaction (this process and its forked pgbench clients), and as the ratio
of the medians to ``fsync on``'s.  Each minidb run opens the instance with the run's
settings (``fsync`` is an instance setting), runs ``run_bench`` (pgbench's pre-run vacuum,
then ``-t`` transactions per client) and closes it, so every run starts from a clean
shutdown - right after a (shutdown) checkpoint.  With PostgreSQL the same ``pgbench`` runs
against the server, ``fsync`` set with ``ALTER SYSTEM`` and a reload,
``synchronous_commit`` through ``PGOPTIONS``, each run after a ``CHECKPOINT`` too, so that
both engines' runs begin with the same full-page-image debt.

WAL per transaction: records, full-page images and bytes the run wrote - minidb's
``Instance.wal_stats()`` (pg_stat_wal's counters) and PostgreSQL's ``pg_stat_wal`` read
before and after the run (pgbench's pre-run vacuum is done first, outside the
measurement, on both).  Then **the full-page-image spike**: a ``CHECKPOINT``, one short
run, and a second run right after it: the first change of every page after the
checkpoint logs the whole page, so the first run writes many more images per transaction
than the second, on both engines.

PostgreSQL is reached through ``--dsn`` (libpq string; default: the ``PG*`` environment)
or ``--start-local`` (a throw-away server on a unix socket in a temporary directory, as
the ``postgres`` user when run as root), with ``bench/compare_postgres.py``'s helpers;
without one minidb's figures are printed alone.  Counters only in tests: this script
measures time and is never run by the test suite beyond a tiny smoke run.

**Before the log** (``--baseline 3a95c1c``, the last commit before the write-ahead log):
the default TPC-B-like runs also on that commit's code, from a temporary git worktree (the
one ``bench/compare_commits.py`` makes), each run a subprocess with the worktree first on
``PYTHONPATH``, alternating with this commit's runs in every round; the report gives its
tps and CPU per transaction and checks that ``synchronous_commit = off`` runs at no less
than 75% of its tps (medians of the same run).  Read it with the load average beside it:
on a loaded machine wall-clock tps moves more than CPU per transaction.

    python bench/wal_bench.py                              # minidb only
    python bench/wal_bench.py --start-local --runs 5 --transactions 200
    python bench/wal_bench.py --no-postgres --clients 1 --baseline 3a95c1c
    python bench/wal_bench.py --start-local --scale 1 --transactions 20 --runs 1 \\
        --accounts-per-scale 2000                           # a quick check that it works
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import compare_postgres as cp  # noqa: E402

CONFIGS = {
    "fsync on": ({}, {}),                                        # (instance, session)
    "sync_commit off": ({}, {"synchronous_commit": False}),
    "fsync off": ({"fsync": False}, {}),
}
PG_CONFIGS = {"fsync on": ("on", "on"), "sync_commit off": ("on", "off"),
              "fsync off": ("off", "on")}                        # (fsync, synchronous_commit)
WAL_KEYS = ("wal_records", "wal_fpi", "wal_bytes")


@dataclass
class Measured:
    """One run: transactions, wall seconds, CPU seconds (None: unknown), WAL written."""
    n: int
    wall: float
    cpu: float | None
    wal: dict = field(default_factory=dict)

    @property
    def tps(self) -> float:
        return self.n / self.wall if self.wall else 0.0

    def per_xact(self, key: str) -> float:
        return self.wal.get(key, 0) / self.n if self.n else 0.0


# ---------------------------------------------------------------------------------------------
# the last commit before the log, in a git worktree
_BASELINE_RUN = """
import json, resource, sys, time
from minidb.pgbench import init_pgbench, run_bench
from minidb.instance import Instance
d, scale, aps, pool, clients, transactions, init = sys.argv[1:8]
base = dict(shared_buffers=int(pool), max_connections=24, max_worker_processes=0)
if init == "1":
    init_pgbench(d, int(scale), accounts_per_scale=int(aps), settings=base)
inst = Instance(d, **base)
try:
    r0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run_bench(inst, clients=int(clients), threads=int(clients),
                    transactions=int(transactions), accounts_per_scale=int(aps))
    r1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
finally:
    inst.close()
cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in zip(r0, r1))
print(json.dumps({"n": res.processed, "tps": res.tps, "cpu": cpu}))
"""


class Baseline:
    """The same TPC-B-like runs on the code of an earlier commit (``--baseline``: the last
    commit before the write-ahead log, 3a95c1c), from a temporary git worktree, each run a
    subprocess with that worktree first on PYTHONPATH (as bench/compare_commits.py runs a
    side), alternating with this commit's runs."""

    def __init__(self, commit: str, top: str, scale: int, aps: int, shared_buffers_mb: float):
        from bench.compare_commits import worktree
        self.commit, self.top = commit, top
        self.tree = worktree(commit, top, "baseline")
        self.args = [os.path.join(top, "baseline-data"), str(scale), str(aps),
                     str(cp._pool_pages(shared_buffers_mb))]
        self.initialised = False

    def run(self, clients: int, transactions: int) -> Measured:
        import json
        import subprocess
        out = subprocess.run(
            [sys.executable, "-c", _BASELINE_RUN, *self.args, str(clients), str(transactions),
             "0" if self.initialised else "1"],
            cwd=self.tree, env=dict(os.environ, PYTHONPATH=self.tree), capture_output=True,
            text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"baseline run at {self.commit} failed:\n{out.stderr}")
        self.initialised = True
        got = json.loads(out.stdout.strip().splitlines()[-1])
        return Measured(got["n"], got["n"] / got["tps"] if got["tps"] else float("inf"),
                        got["cpu"])

    def close(self) -> None:
        import subprocess
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", self.tree],
                       capture_output=True)


# ---------------------------------------------------------------------------------------------
# minidb
class Minidb:
    def __init__(self, datadir: str, scale: int, aps: int, shared_buffers_mb: float):
        from minidb.pgbench import init_pgbench
        self.datadir, self.aps = datadir, aps
        self.base = dict(shared_buffers=cp._pool_pages(shared_buffers_mb), max_connections=24,
                         max_worker_processes=0)
        init_pgbench(datadir, scale, accounts_per_scale=aps, settings=self.base)

    def _open(self, inst_settings: dict):
        from minidb.instance import Instance
        return Instance(self.datadir, **self.base, **inst_settings)

    def run(self, config: str, clients: int, transactions: int, exclude=frozenset(),
            checkpoint_first: bool = False, no_vacuum: bool = False) -> Measured:
        from minidb.pgbench import run_bench
        inst_settings, sess = CONFIGS[config]
        inst = self._open(inst_settings)
        try:
            if checkpoint_first:
                inst.checkpoint()
            c0 = cp.minidb_cpu(exclude)
            res = run_bench(inst, clients=clients, threads=clients, transactions=transactions,
                            settings=dict(sess), accounts_per_scale=self.aps,
                            no_vacuum=no_vacuum)
            c1 = cp.minidb_cpu(exclude)
        finally:
            inst.close()
        return Measured(res.processed, res.processed / res.tps if res.tps else float("inf"),
                        c1 - c0, dict(res.wal))

    def spike(self, transactions: int) -> tuple[Measured, Measured]:
        """A CHECKPOINT, a run, and a second run straight after (one instance, fsync on)."""
        from minidb.pgbench import run_bench
        inst = self._open({})
        try:
            out = []
            for first in (True, False):
                if first:
                    run_bench(inst, clients=1, transactions=1, accounts_per_scale=self.aps)
                    inst.checkpoint()
                res = run_bench(inst, clients=1, transactions=transactions, no_vacuum=True,
                                accounts_per_scale=self.aps)
                out.append(Measured(res.processed, 0.0, None, dict(res.wal)))
        finally:
            inst.close()
        return out[0], out[1]


# ---------------------------------------------------------------------------------------------
# PostgreSQL
class Postgres:
    def __init__(self, pg: cp.PG, scale: int):
        self.pg = pg
        cp.pgbench(pg.env, ["-i", "-q", "-s", str(scale)])
        self.fsync = None

    def _set_fsync(self, value: str) -> None:
        if value != self.fsync:
            self.pg.execute(f"ALTER SYSTEM SET fsync = {value}")
            self.pg.execute("SELECT pg_reload_conf()")
            time.sleep(0.2)
            self.fsync = value

    def wal(self) -> dict:
        row = self.pg.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")[0]
        return dict(zip(WAL_KEYS, (int(float(v)) for v in row)))

    def _vacuum(self) -> None:
        # pgbench's pre-run vacuum, done here so that its WAL stays out of the figures
        self.pg.execute("VACUUM pgbench_branches")
        self.pg.execute("VACUUM pgbench_tellers")
        self.pg.execute("TRUNCATE pgbench_history")

    def run(self, config: str, clients: int, transactions: int,
            checkpoint_first: bool = False, vacuum: bool = True) -> Measured:
        fsync, sync_commit = PG_CONFIGS[config]
        self._set_fsync(fsync)
        if vacuum:
            self._vacuum()
        if checkpoint_first:
            self.pg.execute("CHECKPOINT")
        env = dict(self.pg.env, PGOPTIONS=f"-c synchronous_commit={sync_commit}")
        w0 = cp._settled(self.wal)
        c0, k0 = self.pg.cpu(), cp.children_cpu()
        out = cp.pgbench(env, ["-n", "-c", str(clients), "-j", str(clients),
                               "-t", str(transactions)])
        c1 = cp._settled(self.pg.cpu)
        k1 = cp.children_cpu()
        w1 = cp._settled(self.wal)
        tps = cp.parse_pgbench_tps(out)
        m = cp.PROCESSED_RE.search(out)
        n = int(m.group(1)) if m else 0
        cpu = None if c0 is None or c1 is None else (c1 - c0) + (k1 - k0)
        return Measured(n, n / tps if tps else float("inf"), cpu,
                        {k: w1[k] - w0[k] for k in WAL_KEYS})

    def spike(self, transactions: int) -> tuple[Measured, Measured]:
        first = self.run("fsync on", 1, transactions, checkpoint_first=True)
        second = self.run("fsync on", 1, transactions, vacuum=False)
        return first, second

    def close(self) -> None:
        self._set_fsync("on")


# ---------------------------------------------------------------------------------------------
# report
def _med_spread(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def report(title: str, runs: dict[str, list[Measured]]) -> list[str]:
    """One table: per setting tps and CPU ms/transaction (median, spread), the ratios of
    the medians to fsync on's, and WAL per transaction."""
    base = runs.get("fsync on")
    base_tps = statistics.median(r.tps for r in base) if base else None
    base_cpu = (statistics.median(r.cpu / r.n for r in base if r.cpu is not None and r.n)
                if base and all(r.cpu is not None for r in base) else None)
    out = [title, f"  {'setting':<16} {'tps (median, min-max)':>26} {'ratio':>6} "
                  f"{'CPU ms/xact':>22} {'ratio':>6} {'WAL rec/xact':>12} {'fpi/xact':>9} "
                  f"{'bytes/xact':>10}"]
    for name, rs in runs.items():
        tps = [r.tps for r in rs]
        cpu = [r.cpu / r.n * 1000 for r in rs if r.cpu is not None and r.n]
        tr = statistics.median(tps) / base_tps if base_tps else float("nan")
        cr = (statistics.median(cpu) / (base_cpu * 1000)) if cpu and base_cpu else None
        out.append(f"  {name:<16} {_med_spread(tps, '.1f'):>26} {tr:6.2f} "
                   f"{(_med_spread(cpu, '.2f') if cpu else '-'):>22} "
                   f"{(f'{cr:6.2f}' if cr is not None else '     -')} "
                   f"{statistics.median(r.per_xact('wal_records') for r in rs):12.2f} "
                   f"{statistics.median(r.per_xact('wal_fpi') for r in rs):9.3f} "
                   f"{statistics.median(r.per_xact('wal_bytes') for r in rs):10.0f}")
    return out


def baseline_lines(commit: str, clients: int, before: list[Measured],
                   off: list[Measured]) -> list[str]:
    """The check against the commit before the log: synchronous_commit off runs at no less
    than 75% of its tps (medians of the same run's alternating rounds)."""
    tb = statistics.median(r.tps for r in before)
    to = statistics.median(r.tps for r in off)
    ratio = to / tb if tb else 0.0
    cpu = [r.cpu / r.n * 1e3 for r in before if r.cpu and r.n]
    return [f"  before the WAL ({commit}): tps {_med_spread([r.tps for r in before], ',.0f')}"
            + (f", CPU/tx {_med_spread(cpu, '.2f')} ms" if cpu else ""),
            f"  sync_commit off / before the WAL, {clients} client(s): {ratio:.2f} "
            f"(check >= 0.75: {'ok' if ratio >= 0.75 else 'FAILED'})"]


def spike_lines(name: str, first: Measured, second: Measured) -> list[str]:
    return [f"  {name:<10} after CHECKPOINT: {first.per_xact('wal_fpi'):.3f} fpi/xact, "
            f"{first.per_xact('wal_bytes'):.0f} bytes/xact;  the next run: "
            f"{second.per_xact('wal_fpi'):.3f} fpi/xact, "
            f"{second.per_xact('wal_bytes'):.0f} bytes/xact"]


# ---------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--transactions", type=int, default=100, help="per client and run")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--runs", type=int, default=3, help="runs of each setting (alternating)")
    ap.add_argument("--spike-transactions", type=int, default=None,
                    help="transactions of each run of the checkpoint spike "
                         "[default: --transactions]")
    ap.add_argument("--shared-buffers", type=float, default=128, metavar="MB")
    ap.add_argument("--accounts-per-scale", type=int, default=100_000)
    ap.add_argument("--dsn", default=None, help="PostgreSQL (libpq connection string)")
    ap.add_argument("--start-local", action="store_true",
                    help="start a throw-away PostgreSQL server for the run")
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--baseline", default=None, metavar="COMMIT",
                    help="also run the default TPC-B-like at COMMIT (3a95c1c: the last "
                         "commit before the write-ahead log) from a git worktree, "
                         "alternating, and check synchronous_commit=off >= 75%% of its tps")
    a = ap.parse_args(argv)
    spike_t = a.spike_transactions or a.transactions

    tmp = tempfile.mkdtemp(prefix="minidb-walbench-")
    try:
        with _server(a) as dsn:
            pg, why = (cp.reachable(dsn) if dsn is not None else (None, "not asked for"))
            print(f"wal_bench: pgbench TPC-B-like, scale {a.scale}, {a.transactions} "
                  f"transactions per client and run, {a.runs} runs of each setting, "
                  f"alternating; load {os.getloadavg()[0]:.2f}")
            print("PostgreSQL: " + (f"{pg.version()} ({pg.how})" if pg else
                                    f"not reachable ({why}): minidb alone"))
            md = Minidb(os.path.join(tmp, "data"), a.scale, a.accounts_per_scale,
                        a.shared_buffers)
            pgs = Postgres(pg, a.scale) if pg else None
            bl = (Baseline(a.baseline, tmp, a.scale, a.accounts_per_scale, a.shared_buffers)
                  if a.baseline else None)
            exclude = {pg.psql.proc.pid} if pg and pg.psql else set()
            try:
                for clients in a.clients:
                    mine = {c: [] for c in CONFIGS}
                    theirs = {c: [] for c in CONFIGS}
                    before = []
                    for _ in range(a.runs):
                        if bl:
                            before.append(bl.run(clients, a.transactions))
                        for config in CONFIGS:
                            mine[config].append(md.run(config, clients, a.transactions,
                                                       exclude))
                            if pgs:
                                theirs[config].append(pgs.run(config, clients,
                                                              a.transactions,
                                                              checkpoint_first=True))
                    print()
                    for line in report(f"minidb, {clients} client(s):", mine):
                        print(line)
                    if bl:
                        for line in baseline_lines(a.baseline, clients, before,
                                                   mine["sync_commit off"]):
                            print(line)
                    if pgs:
                        for line in report(f"PostgreSQL, {clients} client(s):", theirs):
                            print(line)
                        tps_ratio = {c: statistics.median(r.tps for r in mine[c]) /
                                     statistics.median(r.tps for r in theirs[c])
                                     for c in CONFIGS}
                        print("  minidb / PostgreSQL tps: " +
                              ", ".join(f"{c} {v:.2f}" for c, v in tps_ratio.items()))
                print("\nfull-page images after a checkpoint (1 client, fsync on, "
                      f"{spike_t} transactions a run):")
                for line in spike_lines("minidb", *md.spike(spike_t)):
                    print(line)
                if pgs:
                    for line in spike_lines("PostgreSQL", *pgs.spike(spike_t)):
                        print(line)
            finally:
                if bl:
                    bl.close()
                if pgs:
                    pgs.close()
                if pg:
                    pg.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


class _server:
    """The DSN to use: --dsn, a --start-local server, the PG* environment, or None."""

    def __init__(self, a):
        self.a = a
        self.cm = None

    def __enter__(self):
        if self.a.no_postgres:
            return None
        if self.a.start_local:
            self.cm = cp.local_server(options=[f"shared_buffers={int(self.a.shared_buffers)}MB"])
            return self.cm.__enter__()
        return self.a.dsn if self.a.dsn is not None else ""

    def __exit__(self, *exc):
        if self.cm is not None:
            return self.cm.__exit__(*exc)
        return False


if __name__ == "__main__":
    sys.exit(main())
