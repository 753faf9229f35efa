"""The real pgbench against ``minidb serve`` and against PostgreSQL 15, same machine, same
scale, same clients, same protocol (``-M prepared``), as ratios in one run; and what the
protocol costs minidb per statement (the server against ``minidb bench`` embedded).

Setup: a throw-away PostgreSQL on a unix socket (``bench.compare_postgres.local_server``,
``shared_buffers`` = ``--shared-buffers`` MB) and ``minidb serve`` on a fresh data directory
with the same pool; ``pgbench -i -s SCALE`` on each (pgbench's own initialization, through the
protocol, on both).  A second minidb directory, opened in this process and initialized by
``init_pgbench``, serves the embedded runs (``run_bench``: pgbench's options, forked clients).

Workloads, each ``--runs`` times, alternating minidb server / PostgreSQL / minidb embedded so
that a change in the machine's load hits all three:

1. select-only: ``pgbench -n -S -c 1 -T SECONDS -M prepared``;
2. TPC-B-like: ``pgbench -n -c CLIENTS -t TRANSACTIONS -M prepared``.

Each run is measured by pgbench's tps (wall clock) and by CPU time per transaction: the
server's whole process tree (postmaster and backends, the WAL writer; for minidb the server
and its forked backends) plus the pgbench program.  Medians and spreads (min-max) are printed,
with minidb's ratios to PostgreSQL, and the per-statement cost of the protocol: (served -
embedded) CPU per select-only transaction.  Both engines run with their defaults (fsync on,
synchronous_commit on).

    python bench/server_bench.py [--scale 1] [--runs 3] [--seconds 10] [--clients 4]
                                 [--transactions 200] [--shared-buffers 128]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.compare_postgres import (PG, PROCESSED_RE, MinidbBench, Run,  # noqa: E402
                                    children_cpu, local_server, parse_pgbench_tps, tree_cpu)


def _pgbench(env: dict, args: list[str]) -> str:
    out = subprocess.run(["pgbench"] + args, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"pgbench {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def _run(env: dict, args: list[str], server_pid: int | None) -> Run:
    load = os.getloadavg()[0]
    s0 = tree_cpu(server_pid) if server_pid else 0.0
    k0 = children_cpu()
    out = _pgbench(env, args)
    time.sleep(0.2)     # the server reaps the finished backends
    s1 = tree_cpu(server_pid) if server_pid else 0.0
    k1 = children_cpu()
    tps = parse_pgbench_tps(out)
    m = PROCESSED_RE.search(out)
    n = int(m.group(1)) if m else 0
    cpu = (s1 - s0) + (k1 - k0) if s0 is not None and s1 is not None else None
    return Run(n, n / tps if tps else float("inf"), cpu, load)


class MinidbServer:
    def __init__(self, datadir: str, shared_buffers_mb: float):
        pages = max(16, int(shared_buffers_mb * 1024 * 1024) // 8192)
        self.datadir = datadir
        self.log = open(datadir + ".log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minidb.cli", "serve", datadir, "-c",
             f"shared_buffers={pages}", "-c", "max_worker_processes=0"],
            stdout=self.log, stderr=subprocess.STDOUT)
        sock = os.path.join(datadir, ".s.PGSQL.5432")
        end = time.monotonic() + 120
        while not os.path.exists(sock):
            if self.proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"minidb serve did not start (see {datadir}.log)")
            time.sleep(0.05)
        self.env = dict(os.environ, PGHOST=datadir, PGUSER="bench", PGDATABASE="minidb")

    def close(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(120)
        self.log.close()


def _med(runs, attr):
    vals = [getattr(r, attr) for r in runs if getattr(r, attr) is not None]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--transactions", type=int, default=200)
    ap.add_argument("--shared-buffers", type=float, default=128.0)
    a = ap.parse_args(argv)
    if not shutil.which("pgbench"):
        raise SystemExit("the pgbench program is not installed")
    tmp = tempfile.mkdtemp(prefix="minidb-server-bench-")
    served = os.path.join(tmp, "served")
    embedded = os.path.join(tmp, "embedded")
    sel = ["-n", "-S", "-c", "1", "-T", str(a.seconds), "-M", "prepared"]
    tpcb = ["-n", "-c", str(a.clients), "-j", str(a.clients), "-t", str(a.transactions),
            "-M", "prepared"]
    results = {(w, e): [] for w in ("select-only", "tpcb-like")
               for e in ("minidb served", "PostgreSQL", "minidb embedded")}
    with local_server(options=[f"shared_buffers={int(a.shared_buffers)}MB"]) as dsn:
        pg = PG(dsn)
        srv = MinidbServer(served, a.shared_buffers)
        try:
            init = ["-i", "-q", "-s", str(a.scale)]
            _pgbench(pg.env, init)
            _pgbench(srv.env, init)
            emb = MinidbBench(embedded, a.scale, a.shared_buffers)   # open in this process
            emb_kw = {"select-only": dict(script="select-only", clients=1, duration=a.seconds,
                                          mode="prepared", no_vacuum=True),
                      "tpcb-like": dict(clients=a.clients, threads=a.clients,
                                        transactions=a.transactions, mode="prepared",
                                        no_vacuum=True)}
            try:
                for _ in range(a.runs):
                    for wname, args in (("select-only", sel), ("tpcb-like", tpcb)):
                        results[(wname, "minidb served")].append(
                            _run(srv.env, args, srv.proc.pid))
                        results[(wname, "PostgreSQL")].append(_run(pg.env, args, pg.postmaster))
                        results[(wname, "minidb embedded")].append(
                            emb.run(exclude={srv.proc.pid}, **emb_kw[wname]))
            finally:
                emb.close()
        finally:
            srv.close()
            pg.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"pgbench -M prepared, scale {a.scale}, shared_buffers {a.shared_buffers:.0f} MB, "
          f"{a.runs} alternated runs; median (min-max)")
    print("| workload | engine | tps | CPU us/transaction | tps ratio to PostgreSQL | load |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for wname in ("select-only", "tpcb-like"):
        pg_tps = _med(results[(wname, "PostgreSQL")], "rate")[0]
        for eng in ("minidb served", "PostgreSQL", "minidb embedded"):
            runs = results[(wname, eng)]
            m, lo, hi = _med(runs, "rate")
            c, clo, chi = _med(runs, "cpu_per_unit")
            cpu = f"{c * 1e6:,.0f} ({clo * 1e6:,.0f}-{chi * 1e6:,.0f})" if c else "-"
            loads = [r.load for r in runs]
            print(f"| {wname} | {eng} | {m:,.0f} ({lo:,.0f}-{hi:,.0f}) | {cpu} | "
                  f"{m / pg_tps:.2f} | {min(loads):.1f}-{max(loads):.1f} |")
    s = _med(results[("select-only", "minidb served")], "cpu_per_unit")[0]
    e = _med(results[("select-only", "minidb embedded")], "cpu_per_unit")[0]
    if s and e:
        print(f"protocol cost per select-only transaction (served - embedded CPU): "
              f"{(s - e) * 1e6:,.0f} us ({s / e:.2f}x embedded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
