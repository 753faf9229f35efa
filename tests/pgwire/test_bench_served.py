"""``minidb bench`` on a data directory a server holds: the clients connect through the
socket (the served DATADIR found by itself, or ``-h DIRECTORY``), in the three query modes,
and the balances add up afterwards; ``-i`` through a server is refused with a message."""

from __future__ import annotations

import os
import subprocess
import sys

from minidb.pgbench.conn import Served
from minidb.pgbench.driver import run_bench
from minidb.pgbench.init import init_pgbench

APS = 1000     # accounts per scale: a tiny pgbench


def test_bench_through_the_socket(make_server, tmp_path):
    datadir = str(tmp_path / "bench")
    init_pgbench(datadir, 1, accounts_per_scale=APS, settings={"max_worker_processes": 0})
    srv = make_server(datadir=datadir)
    for mode in ("simple", "extended", "prepared"):
        r = run_bench(datadir, clients=2, transactions=8, mode=mode, check=True,
                      accounts_per_scale=APS)
        assert not r.aborted
        assert sum(s.committed for s in r.scripts) == 16
        assert r.check is not None and r.check.ok, r.check
    r = run_bench(Served(host=srv.datadir), clients=1, transactions=5, script="select-only",
                  accounts_per_scale=APS)
    assert sum(s.committed for s in r.scripts) == 5
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-m", "minidb.cli", "bench", "-h", srv.datadir,
                        "-p", "5432", "-c", "1", "-t", "3", "-S", "-n",
                        "--accounts-per-scale", str(APS)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert "number of transactions actually processed: 3/3" in p.stdout
    p = subprocess.run([sys.executable, "-m", "minidb.cli", "bench", "-i", datadir],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1 and "through a server is not supported" in p.stderr
