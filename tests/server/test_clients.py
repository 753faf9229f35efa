"""PostgreSQL 15's own programs against ``minidb serve``: psql runs a script, pgbench
initializes its tables and runs TPC-B-like transactions in both protocols, and the balances
add up afterwards.  Each test skips when the program is not installed."""

from __future__ import annotations

import shutil
import subprocess

import pytest

psycopg = pytest.importorskip("psycopg")


def _need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not installed")
    return path


def _run(args, timeout=300):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{args[0]} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p.stdout


def test_psql_runs_a_script(server, tmp_path):
    psql = _need("psql")
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE fruit (id integer PRIMARY KEY, name text);\n"
                      "INSERT INTO fruit VALUES (1, 'apple'), (2, 'pear');\n"
                      "BEGIN;\nUPDATE fruit SET name = 'quince' WHERE id = 2;\nCOMMIT;\n"
                      "SELECT id, name FROM fruit ORDER BY id;\n")
    out = _run([psql, "-X", "-h", server.datadir, "-U", "tester", "-d", "minidb",
                "-v", "ON_ERROR_STOP=1", "-A", "-t", "-f", str(script)])
    assert out.split() == ["CREATE", "TABLE", "INSERT", "0", "2", "BEGIN", "UPDATE", "1",
                           "COMMIT", "1|apple", "2|quince"]


@pytest.mark.slow
def test_pgbench_initializes_and_runs_both_protocols(server):
    pgbench = _need("pgbench")
    conn = ["-h", server.datadir, "-U", "tester", "minidb"]
    _run([pgbench, "-i", "-s", "1", "-q"] + conn)
    for mode in ("simple", "prepared"):
        out = _run([pgbench, "-n", "-c", "2", "-t", "25", "-M", mode] + conn)
        assert "number of transactions actually processed: 50/50" in out
        assert "number of failed transactions: 0" in out
    with server.connect() as c:
        hist, n = c.execute("SELECT sum(delta), count(*) FROM pgbench_history").fetchone()
        assert n == 100
        for table, col in (("pgbench_accounts", "abalance"), ("pgbench_tellers", "tbalance"),
                           ("pgbench_branches", "bbalance")):
            assert c.execute(f"SELECT sum({col}) FROM {table}").fetchone() == (hist,)
        assert c.execute("SELECT count(*) FROM pgbench_accounts").fetchone() == (100000,)
