"""``minidb bench`` on a data directory a server holds: the clients connect through the
socket (the served DATADIR found by itself, or ``-h DIRECTORY``), in the three query modes,
and the balances add up afterwards; ``-i`` through the socket too (``-h``, or the served
DATADIR), with pgbench's SQL: the tables, their rows and primary keys as an embedded ``-i``
makes them."""

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
    # -i through the socket: -h, then the served DATADIR by itself (the Python API)
    p = subprocess.run([sys.executable, "-m", "minidb.cli", "bench", "-i", "-s", "2",
                        "-h", srv.datadir, "--accounts-per-scale", str(APS)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert "dropping old tables..." in p.stderr and "creating primary keys..." in p.stderr
    assert "client-side generate" in p.stderr
    with srv.connect() as c:
        assert c.execute("SELECT (SELECT count(*) FROM pgbench_branches), "
                         "(SELECT count(*) FROM pgbench_tellers), "
                         "(SELECT count(*) FROM pgbench_accounts), "
                         "(SELECT count(*) FROM pgbench_history), "
                         "(SELECT max(bid) FROM pgbench_accounts), "
                         "(SELECT sum(abalance) FROM pgbench_accounts)").fetchone() == \
            (2, 20, 2 * APS, 0, 2, 0)
        assert [r[0] for r in c.execute("SELECT indexname FROM pg_indexes ORDER BY 1")] == \
            ["pgbench_accounts_pkey", "pgbench_branches_pkey", "pgbench_tellers_pkey"]
    res = init_pgbench(datadir, 1, accounts_per_scale=APS)
    assert res.rows == {"pgbench_accounts": APS, "pgbench_branches": 1,
                        "pgbench_history": 0, "pgbench_tellers": 10}
    assert res.pages["pgbench_accounts"] > 0
    r = run_bench(datadir, clients=2, transactions=8, check=True, accounts_per_scale=APS)
    assert sum(s.committed for s in r.scripts) == 16 and r.check.ok, r.check
