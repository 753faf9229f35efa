"""``minidb bench`` end to end, in a subprocess: stdout is pgbench's summary (every line
parses with pgbench's formats), stderr its messages, and the exit status tells success (0),
bad arguments (1), an aborted run (2) and a failed ``--check`` (3)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pgbench_formats import HEADER, PROGRESS, parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = "--accounts-per-scale=500"


def bench(*args, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "minidb.cli", "bench", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def datadir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("cli") / "data")
    p = bench("-i", "-s", "2", SMALL, d)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""                      # -i writes to stderr only, as pgbench
    err = p.stderr.splitlines()
    assert err[0] == "dropping old tables..." and err[-1].startswith("done in ")
    assert "creating primary keys..." in err
    return d


def test_run_prints_pgbench_summary(datadir):
    p = bench("-c", "4", "-t", "10", "-M", "prepared", "-j", "2", "-P", "0.2", "--check",
              "--max-tries", "3", SMALL, datadir)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert HEADER.match(out[0]) and "pgbench 15 compatible" in out[0]
    assert out[-1].startswith("check: changes of accounts = tellers = branches = history "
                              "deltas = ")
    got = parse(out[1:-1])
    assert got["type"] == ("<builtin: TPC-B (sort of)>",)
    assert got["scale"] == ("2",) and got["mode"] == ("prepared",)
    assert got["clients"] == ("4",) and got["threads"] == ("2",) and got["tries"] == ("3",)
    assert got["per_client"] == ("10",) and got["processed"] == ("40", "40")
    assert got["failed"] == ("0", "0.000") and got["retried"][0] == "0"
    assert "lat_sd" in got and "tps" in got and "conn" in got
    err = p.stderr.splitlines()
    assert err[0] == "starting vacuum...end."
    assert all(PROGRESS.match(ln) for ln in err[1:]), err


def test_select_only_and_simple_update_flags(datadir):
    p = bench("-S", "-n", "-t", "5", SMALL, datadir)
    assert p.returncode == 0, p.stderr
    assert parse(p.stdout.splitlines()[1:])["type"] == ("<builtin: select only>",)
    assert p.stderr == ""                       # -n: no vacuum messages
    p = bench("-N", "-t", "5", "-T", "3", datadir)
    assert p.returncode == 1 and "not both" in p.stderr
    p = bench("-N", "-T", "1", "--check", SMALL, datadir)
    assert p.returncode == 0, p.stderr
    got = parse(p.stdout.splitlines()[1:-1])
    assert got["type"] == ("<builtin: simple update>",) and got["duration"] == ("1",)


def test_custom_script_set_and_define(datadir, tmp_path):
    f = tmp_path / "s.sql"
    f.write_text("\\set x random(1, 10) * :mult\nSHOW enable_seqscan \\gset\n"
                 "SELECT :x, :enable_seqscan;\n")
    p = bench("-n", "-t", "3", "-f", str(f), "-D", "mult=3", "--set", "enable_seqscan=off",
              "-r", datadir)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert f"transaction type: {f}" in out and "scaling factor: 1" in out
    i = out.index("statement latencies in milliseconds and failures:")
    assert out[i + 1].endswith("  \\set x random(1, 10) * :mult")
    assert out[i + 3].endswith("  SELECT :x, :enable_seqscan;")


def test_list_and_errors(datadir, tmp_path):
    p = bench("-b", "list")
    assert p.returncode == 0 and "      tpcb-like: <builtin: TPC-B (sort of)>" in p.stderr
    for opt in (["-c", "3"], ["-T", "5"], ["--check"]):
        p = bench("-i", *opt, datadir)
        assert p.returncode == 1
        assert "cannot be used in initialization (-i) mode" in p.stderr
    p = bench("-F", "50", datadir)
    assert p.returncode == 1 and "cannot be used in benchmarking mode" in p.stderr
    p = bench(str(tmp_path / "nothing"))
    assert p.returncode == 1 and 'data directory "' in p.stderr and "does not exist" in p.stderr
    p = bench("--set", "nosuch=1", datadir)
    assert p.returncode == 1 and 'unrecognized configuration parameter "nosuch"' in p.stderr


def test_aborted_run_exits_2_and_failed_check_exits_3(datadir, tmp_path):
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT * FROM nosuch;\n")
    p = bench("-n", "-t", "2", "-f", str(bad), datadir)
    assert p.returncode == 2
    assert "aborted in command 0 query 0: ERROR:  relation \"nosuch\"" in p.stderr
    assert p.stderr.rstrip().endswith("Run was aborted; the above results are incomplete.")
    assert p.stdout.splitlines()[-1] == "number of failed transactions: 0 (NaN%)"
    skew = tmp_path / "skew.sql"      # moves money into a branch without a history row
    skew.write_text("UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;\n")
    p = bench("-n", "-t", "2", "-f", str(skew), "--check", SMALL, datadir)
    assert p.returncode == 3
    assert "check FAILED" in p.stdout and "sum of branch balances 2 != sum of history " \
                                          "deltas 0" in p.stdout


def test_pgbench_15_options_and_messages(datadir, tmp_path):
    """-V, -s 0 refused in both modes with pgbench's message, -R/-L/-l/-C end to end: the
    summary's extra lines parse, the log file is named pgbench_log.PID in the current
    directory with one line per transaction."""
    p = bench("-V")
    assert p.returncode == 0 and p.stdout.startswith("pgbench (minidb) ")
    for args in (["-i", "-s", "0"], ["-s", "0", "-t", "1"]):
        p = bench(*args, datadir)
        assert p.returncode == 1
        assert p.stderr.strip().endswith("error: -s/--scale must be in range 1..2147483647")
    p = bench("-R", "0", datadir)
    assert p.returncode == 1 and p.stderr.strip().endswith('invalid rate limit: "0"')
    p = bench("-n", "-S", "-c", "2", "-t", "4", "-R", "500", "-L", "1000", "-l", "-C",
              "-P", "1", "--progress-timestamp", SMALL, datadir, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    got = parse(p.stdout.splitlines()[1:])
    assert got["processed"][0] == str(8 - int(got["skipped"][0]))
    assert "lag" in got and "conn_avg" in got and "late" in got
    logs = list(tmp_path.glob("pgbench_log.*"))
    assert len(logs) == 1 and len(logs[0].read_text().splitlines()) == 8
