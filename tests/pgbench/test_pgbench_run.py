"""Benchmark runs with forked clients, asserted on counts and table contents, never on time.

Scale 1 puts every TPC-B-like transaction on the same branch row, so four clients conflict
on it all the time: lost updates or half-applied transactions would show in ``--check``.
Failures are forced with scripts that hold a snapshot or a row lock across a ``\\sleep``
while the other clients (released together by the start barrier) do the same.

Not proven here: tps or latency figures (they depend on the machine).  What is: every
committed transaction's latency is kept (as many as were committed, their mean the
summary's), every line of the summary parses with pgbench's formats, and under ``-R`` /
``-L`` / ``-C`` / ``-l`` the counts add up (transactions run + skipped = ``-t`` per client,
one connection per transaction, one log line per transaction, lags never negative)."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

from minidb.pgbench import BenchError, check_balances, init_pgbench, parse_script, run_bench
from minidb.pgbench.check import BalanceState, compare_states
from minidb.session import Session
from minidb.sql import Engine
from pgbench_formats import LOG_AGG, LOG_XACT, PROGRESS, parse


def sql(inst, *stmts):
    s = Session(inst)
    try:
        e = Engine(s)
        out = None
        for st in stmts:
            out = e.execute(st).rows
        return out
    finally:
        s.close()


def test_four_clients_with_conflicts_pass_check(pgbench_inst, accounts, assert_no_pins):
    r = run_bench(pgbench_inst, clients=4, transactions=25, mode="prepared", check=True,
                  accounts_per_scale=accounts, random_seed=1)
    assert (r.processed, r.failed, r.aborted) == (100, 0, [])
    assert r.check.ok, r.check.problems
    assert "100 history rows = committed writing transactions" in r.check.summary
    assert check_balances(pgbench_inst, accounts_per_scale=accounts).ok
    assert sql(pgbench_inst, "SELECT count(*) FROM pgbench_history") == [(100,)]
    assert sql(pgbench_inst, "SELECT count(*) FROM pgbench_history WHERE mtime IS NULL") \
        == [(0,)]                      # CURRENT_TIMESTAMP, by the engine or the client
    # every transaction updated the one branch row
    assert r.tables["pgbench_branches"]["n_tup_upd"] - \
        r.tables_before["pgbench_branches"]["n_tup_upd"] == 100
    got = parse(r.lines())
    assert got["processed"] == ("100", "100") and got["failed"] == ("0", "0.000")
    assert "tps" in got and "conn" in got and "lat_sd" not in got   # the estimate, no -P
    assert len(r.latencies_ms) == 100 and min(r.latencies_ms) > 0
    assert r.latency_avg_ms == pytest.approx(float(np.mean(r.latencies_ms)))
    assert r.transaction_type == "<builtin: TPC-B (sort of)>" and r.scale == 1
    assert r.counters["buffers_hit"] > 0
    assert_no_pins(pgbench_inst)


@pytest.mark.parametrize("mode", ["simple", "extended"])
def test_other_query_modes(pgbench_inst, accounts, mode):
    r = run_bench(pgbench_inst, clients=2, transactions=10, mode=mode, check=True,
                  accounts_per_scale=accounts)
    assert (r.processed, r.failed, r.query_mode) == (20, 0, mode)
    assert r.check.ok, r.check.problems


def test_select_only_changes_nothing(pgbench_inst, accounts):
    r = run_bench(pgbench_inst, clients=2, transactions=20, script="select-only", check=True,
                  mode="prepared", accounts_per_scale=accounts)
    assert r.processed == 40 and r.transaction_type == "<builtin: select only>"
    assert r.check.ok and r.check.summary == "nothing changed"
    acc = r.tables["pgbench_accounts"]
    assert acc["idx_scan"] - r.tables_before["pgbench_accounts"]["idx_scan"] == 40


def test_simple_update_leaves_tellers_and_branches(pgbench_inst, accounts):
    r = run_bench(pgbench_inst, clients=2, transactions=15, script="simple-update", check=True,
                  accounts_per_scale=accounts)
    assert r.processed == 30 and r.check.ok, r.check.problems
    assert sql(pgbench_inst, "SELECT sum(tbalance) FROM pgbench_tellers",
               "SELECT sum(bbalance) FROM pgbench_branches") == [(0,)]
    assert sql(pgbench_inst, "SELECT count(*) FROM pgbench_history") == [(30,)]


def test_weighted_builtins(pgbench_inst, accounts):
    r = run_bench(pgbench_inst, clients=2, transactions=30,
                  script=["select-only@2", "tpcb-like@1", "simple-update@1"], check=True,
                  accounts_per_scale=accounts, random_seed=3)
    assert r.transaction_type == "multiple scripts"
    assert [s.weight for s in r.scripts] == [2, 1, 1]
    assert sum(s.committed for s in r.scripts) == r.processed == 60
    assert all(s.committed > 0 for s in r.scripts)
    assert r.check.ok, r.check.problems     # "mixed": accounts = history, tellers = branches
    assert sql(pgbench_inst, "SELECT count(*) FROM pgbench_history") == \
        [(r.scripts[1].committed + r.scripts[2].committed,)]
    lines = r.lines()
    assert "SQL script 2: <builtin: TPC-B (sort of)>" in lines


def test_custom_script_with_set_and_random_functions(pgbench_inst):
    sql(pgbench_inst, "CREATE TABLE draws (cid int, r int, e int, g int, z int, k int)")
    script = parse_script("""
\\set r random(1, 10)
\\set e random_exponential(1, 100, 2.0)
\\set g random_gaussian(1, 100, 2.5)
\\set z random_zipfian(1, 100, 1.5)
\\set k :client_id * 1000 + greatest(:r, 5) - least(abs(-:r), 5) + :scale
INSERT INTO draws VALUES (:client_id, :r, :e, :g, :z, :k);
""", "draws.sql")
    r = run_bench(pgbench_inst, clients=3, transactions=20, script=script, scale=7,
                  no_vacuum=True, mode="prepared")
    assert (r.processed, r.scale, r.transaction_type) == (60, 7, "draws.sql")
    rows = sql(pgbench_inst, "SELECT cid, r, e, g, z, k FROM draws")
    assert len(rows) == 60 and {row[0] for row in rows} == {0, 1, 2}
    for cid, rr, e, g, z, k in rows:
        assert 1 <= rr <= 10 and 1 <= e <= 100 and 1 <= g <= 100 and 1 <= z <= 100
        assert k == cid * 1000 + max(rr, 5) - min(rr, 5) + 7


def test_define_variables_and_script_files(pgbench_inst, tmp_path):
    sql(pgbench_inst, "CREATE TABLE defs (n int, word text)")
    f = tmp_path / "d.sql"
    f.write_text("INSERT INTO defs VALUES (:n + 1, :word);\n")
    for mode in ("simple", "prepared"):
        r = run_bench(pgbench_inst, clients=1, transactions=2, files=[str(f)], mode=mode,
                      variables={"n": "41", "word": "it's"}, no_vacuum=True)
        assert r.processed == 2
    assert sql(pgbench_inst, "SELECT DISTINCT n, word FROM defs") == [(42, "it's")]


@pytest.mark.parametrize("mode", ["simple", "prepared"])
def test_set_applies_settings_to_every_client(pgbench_inst, mode):
    sql(pgbench_inst, "CREATE TABLE seen (cid int, seq text, iso text)")
    script = parse_script("SHOW enable_seqscan \\gset\n"
                          "SHOW default_transaction_isolation \\gset s_\n"
                          "INSERT INTO seen VALUES (:client_id, :enable_seqscan, "
                          ":s_default_transaction_isolation);\n", "show.sql")
    r = run_bench(pgbench_inst, clients=3, transactions=2, script=script, mode=mode,
                  no_vacuum=True, settings={"enable_seqscan": "off",
                                            "default_transaction_isolation": "repeatable read"})
    assert r.processed == 6 and r.settings["enable_seqscan"] is False
    assert sorted(set(sql(pgbench_inst, "SELECT cid, seq, iso FROM seen"))) == [
        (0, "off", "repeatable read"), (1, "off", "repeatable read"),
        (2, "off", "repeatable read")]


def test_instance_settings_open_the_directory_with_them(pgbench_dir):
    """Given a directory, instance settings (here shared_buffers) are the instance's."""
    from minidb.instance import Instance
    d = str(pgbench_dir)
    with Instance(d) as inst:
        sql(inst, "CREATE TABLE sb (v text)")
    script = parse_script("SHOW shared_buffers \\gset\n"
                          "INSERT INTO sb VALUES (:shared_buffers);", "sb.sql")
    r = run_bench(d, script=script, transactions=1, no_vacuum=True,
                  settings={"shared_buffers": 128})
    assert r.processed == 1 and r.settings == {}
    with Instance(d) as inst:
        assert sql(inst, "SELECT v FROM sb") == [("128",)]


def test_bad_settings_are_refused(pgbench_inst):
    with pytest.raises(BenchError, match='unrecognized configuration parameter "nosuch"'):
        run_bench(pgbench_inst, settings={"nosuch": 1})
    with pytest.raises(BenchError, match='"shared_buffers" cannot be changed'):
        run_bench(pgbench_inst, settings={"shared_buffers": 999})
    with pytest.raises(BenchError, match="invalid value"):
        run_bench(pgbench_inst, settings={"enable_seqscan": "maybe"})


CONFLICT = """
BEGIN;
SELECT bbalance FROM pgbench_branches WHERE bid = 1;
\\sleep 20 ms
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;
END;
"""


def test_repeatable_read_failures_are_counted(pgbench_inst):
    """Each client takes its snapshot, sleeps, then updates the one branch row: all but
    one of the overlapping transactions fail with a serialization failure."""
    rr = {"default_transaction_isolation": "repeatable read"}
    script = parse_script(CONFLICT, "conflict.sql")
    r = run_bench(pgbench_inst, clients=4, transactions=5, script=script, settings=rr,
                  max_tries=1, failures_detailed=True)
    assert r.failed >= 1 and r.processed + r.failed == 20
    assert r.serialization_failures == r.failed and r.deadlock_failures == 0
    assert (r.retried, r.retries) == (0, 0)
    assert sql(pgbench_inst, "SELECT bbalance FROM pgbench_branches") == [(r.processed,)]
    lines = r.lines()
    assert f"number of failed transactions: {r.failed} ({100 * r.failed / 20:.3f}%)" in lines
    assert any(ln.endswith(" ms (including failures)") for ln in lines)
    # with retries, the same work completes; failed transactions left no trace either way
    r2 = run_bench(pgbench_inst, clients=4, transactions=5, script=script, settings=rr,
                   max_tries=1000, no_vacuum=True)
    assert (r2.processed, r2.failed) == (20, 0)
    assert r2.retried >= 1 and r2.retries >= r2.retried
    assert sql(pgbench_inst, "SELECT bbalance FROM pgbench_branches") == \
        [(r.processed + 20,)]
    assert "maximum number of tries: 1000" in r2.lines()
    assert f"total number of retries: {r2.retries}" in r2.lines()


def test_tpcb_under_repeatable_read_keeps_balances(pgbench_inst, accounts):
    r = run_bench(pgbench_inst, clients=4, transactions=15, check=True, mode="prepared",
                  settings={"default_transaction_isolation": "repeatable read"},
                  accounts_per_scale=accounts)
    assert r.processed + r.failed == 60
    assert r.check.ok, r.check.problems


def test_deadlocks_are_counted(pgbench_inst):
    sql(pgbench_inst, "CREATE TABLE dl (k int, v int)", "INSERT INTO dl VALUES (1, 0), (2, 0)")
    script = parse_script("""
BEGIN;
UPDATE dl SET v = v + 1 WHERE k = 1 + :client_id % 2;
\\sleep 30 ms
UPDATE dl SET v = v + 1 WHERE k = 2 - :client_id % 2;
END;
""", "deadlock.sql")
    r = run_bench(pgbench_inst, clients=2, transactions=4, script=script, no_vacuum=True,
                  settings={"deadlock_timeout": 10}, failures_detailed=True)
    assert r.deadlock_failures >= 1 and r.failed == r.deadlock_failures
    assert r.processed + r.failed == 8
    assert sql(pgbench_inst, "SELECT sum(v) FROM dl") == [(2 * r.processed,)]
    assert f"number of deadlock failures: {r.deadlock_failures} " \
           f"({100 * r.deadlock_failures / 8:.3f}%)" in r.lines()


def test_other_errors_abort_the_client(pgbench_inst):
    script = parse_script("SELECT 1;\nSELECT * FROM nosuch;\n", "bad.sql")
    log = io.StringIO()
    r = run_bench(pgbench_inst, clients=2, transactions=5, script=script, no_vacuum=True,
                  log=log)
    assert r.processed == 0 and len(r.aborted) == 2
    assert sorted(r.aborted)[0].startswith(
        'client 0 script 0 aborted in command 1 query 0: ERROR:  relation "nosuch"')
    assert r.lines()[-1] == "number of failed transactions: 0 (NaN%)"
    # an open transaction block at the end of the script aborts too
    r = run_bench(pgbench_inst, clients=1, transactions=2, no_vacuum=True,
                  script=parse_script("BEGIN;\nSELECT 1;\n", "open.sql"))
    assert "end of script reached without completing the last transaction" in r.aborted[0]


def test_duration_and_progress(pgbench_inst, accounts):
    log = io.StringIO()
    r = run_bench(pgbench_inst, clients=2, duration=1.0, progress=0.25, script="select-only",
                  mode="prepared", accounts_per_scale=accounts, log=log)
    assert r.processed > 0 and r.transactions_per_client is None
    lines = [ln for ln in log.getvalue().splitlines() if ln.startswith("progress:")]
    assert lines and all(PROGRESS.match(ln) for ln in lines)
    assert len(r.progress) == len(lines)
    assert "duration: 1 s" in r.lines() and any(ln.startswith("latency stddev = ")
                                                 for ln in r.lines())


def test_per_command_statistics(pgbench_inst, accounts):
    r = run_bench(pgbench_inst, clients=2, transactions=10, per_command=True, mode="prepared",
                  accounts_per_scale=accounts)
    cmds = r.commands[0]
    assert len(cmds) == 11 and all(c.count == 20 and c.failures == 0 for c in cmds)
    assert cmds[5].text.startswith("UPDATE pgbench_accounts")
    assert "statement latencies in milliseconds and failures:" in r.lines()


def test_pre_run_vacuum_truncates_history(pgbench_inst, accounts):
    log = io.StringIO()
    run_bench(pgbench_inst, clients=1, transactions=5, accounts_per_scale=accounts, log=log)
    assert log.getvalue().startswith("starting vacuum...end.\n")
    r = run_bench(pgbench_inst, clients=1, transactions=7, accounts_per_scale=accounts,
                  check=True)
    assert sql(pgbench_inst, "SELECT count(*) FROM pgbench_history") == [(7,)]
    assert r.check.ok, r.check.problems   # checked on the changes, despite the truncation
    r = run_bench(pgbench_inst, clients=1, transactions=3, no_vacuum=True, check=True,
                  accounts_per_scale=accounts)
    assert sql(pgbench_inst, "SELECT count(*) FROM pgbench_history") == [(10,)]
    assert r.check.ok


def test_check_finds_disagreements(pgbench_inst, accounts):
    run_bench(pgbench_inst, clients=2, transactions=5, accounts_per_scale=accounts)
    assert check_balances(pgbench_inst, accounts_per_scale=accounts).ok
    sql(pgbench_inst, "UPDATE pgbench_branches SET bbalance = bbalance + 1",
        "UPDATE pgbench_accounts SET abalance = abalance - 3 WHERE aid = 17")
    c = check_balances(pgbench_inst, accounts_per_scale=accounts)
    assert not c.ok
    text = "\n".join(c.problems)
    assert "sum of branch balances" in text and "branch 1: bbalance" in text
    assert "account 17: abalance" in text
    # the change-based comparison too
    b = BalanceState(branch={1: 5}, history_total=5, accounts_total=5, tellers_total=5,
                     branches_total=5, hist_bid={1: 5}, history_rows=1)
    a = BalanceState(branch={1: 9}, history_total=9, accounts_total=9, tellers_total=9,
                     branches_total=9, hist_bid={1: 8}, history_rows=2)
    res = compare_states(b, a, committed_writes=1)
    assert not res.ok and any("branch 1: bbalance 4 != history deltas 3" in p
                              for p in res.problems)


def test_scale_threads_and_argument_errors(pgbench_inst, accounts):
    log = io.StringIO()
    r = run_bench(pgbench_inst, clients=2, threads=8, transactions=1, scale=5,
                  accounts_per_scale=accounts, log=log)
    assert (r.threads, r.scale) == (2, 1)
    assert "scale option ignored, using count from pgbench_branches table (1)" in log.getvalue()
    for kw, msg in [({"transactions": 1, "duration": 1}, "not both"),
                    ({"clients": 0}, "invalid number of clients"),
                    ({"max_tries": 0}, "unlimited number of transaction tries"),
                    ({"mode": "fast"}, "invalid query mode"),
                    ({"script": "nosuch"}, "no builtin script found"),
                    ({"random_seed": "soon"}, "unrecognized random seed")]:
        with pytest.raises(BenchError, match=msg):
            run_bench(pgbench_inst, **kw)


def test_missing_tables(tmp_path):
    with pytest.raises(BenchError, match="does not exist"):
        run_bench(str(tmp_path / "nothing"))
    assert not (tmp_path / "nothing").exists()
    init_pgbench(str(tmp_path / "empty"), 1, steps="d")
    with pytest.raises(BenchError, match="could not count number of branches") as e:
        run_bench(str(tmp_path / "empty"))
    assert "minidb bench -i" in str(e.value)


def test_rate_limit_schedule(pgbench_inst, accounts, tmp_path, monkeypatch):
    """-R with -t: every client runs its -t transactions on the schedule; the lag of each
    (in the -l file, microseconds) is never negative and the summary's maximum is the
    largest of them."""
    monkeypatch.chdir(tmp_path)
    r = run_bench(pgbench_inst, clients=2, transactions=8, rate=400.0, script="select-only",
                  mode="prepared", accounts_per_scale=accounts, log_prefix="pgbench_log",
                  no_vacuum=True)
    assert (r.processed, r.failed, r.skipped) == (16, 0, 0)
    got = parse(r.lines())
    assert "lag" in got and "lat_sd" in got and "skipped" not in got and "late" not in got
    (name,) = r.log_files
    assert name == f"pgbench_log.{os.getpid()}" and os.path.exists(name)
    rows = [LOG_XACT.match(ln).groups() for ln in open(name).read().splitlines()]
    assert len(rows) == 16
    assert sorted((int(g[0]), int(g[1])) for g in rows) == \
        [(c, n) for c in (0, 1) for n in range(1, 9)]
    lags = [int(g[6]) for g in rows]
    assert min(lags) >= 0 and all(g[7] is None for g in rows)   # no retries column
    assert r.lag_max_ms == pytest.approx(max(lags) / 1000, abs=0.002)
    assert 0 <= r.lag_avg_ms <= r.lag_max_ms


def test_latency_limit_skips_and_counts_late(pgbench_inst, accounts):
    """-R far beyond what the machine does with a tiny -L: most transactions are skipped;
    skipped + run = -t per client, whatever the load, and every run one is late."""
    r = run_bench(pgbench_inst, clients=2, transactions=20, rate=1e6, latency_limit=0.001,
                  script="select-only", mode="prepared", accounts_per_scale=accounts,
                  no_vacuum=True)
    assert r.processed + r.skipped + r.failed == 40
    assert r.skipped > 0 and r.late == r.processed
    got = parse(r.lines())
    assert got["skipped"][0] == str(r.skipped)
    assert got["late"][1:3] == (str(r.processed), str(r.processed))
    # -L without -R: nothing skipped, late counted among committed
    r = run_bench(pgbench_inst, clients=1, transactions=5, latency_limit=1e-6,
                  script="select-only", accounts_per_scale=accounts, no_vacuum=True)
    assert (r.processed, r.skipped, r.late) == (5, 0, 5)
    assert "skipped" not in parse(r.lines())


def test_connect_per_transaction(pgbench_inst, accounts):
    r = run_bench(pgbench_inst, clients=2, transactions=4, connect_each=True, check=True,
                  mode="prepared", accounts_per_scale=accounts)
    assert (r.processed, r.connections) == (8, 8)
    assert r.check.ok, r.check.problems
    got = parse(r.lines())
    assert "conn_avg" in got and "conn" not in got
    assert got["tps"][1] == "including reconnection times"


def test_log_threads_and_aggregation(pgbench_inst, accounts, tmp_path, monkeypatch):
    """-l with -j: one file per thread (PID, PID.1), clients in pgbench's blocks;
    --aggregate-interval: consecutive one-second intervals of 15 columns, their counts
    never more than the transactions run."""
    monkeypatch.chdir(tmp_path)
    r = run_bench(pgbench_inst, clients=3, threads=2, transactions=3, max_tries=2,
                  script="select-only", accounts_per_scale=accounts, no_vacuum=True,
                  log_prefix="lg")
    pid = os.getpid()
    assert r.log_files == [f"lg.{pid}", f"lg.{pid}.1"]
    first = [LOG_XACT.match(ln).groups() for ln in open(r.log_files[0])]
    second = [LOG_XACT.match(ln).groups() for ln in open(r.log_files[1])]
    assert sorted({g[0] for g in first}) == ["0", "1"] and {g[0] for g in second} == {"2"}
    assert len(first) == 6 and len(second) == 3
    assert all(g[6] == "0" and g[7] is None for g in first)   # retries, no lag column
    r = run_bench(pgbench_inst, clients=1, duration=2, rate=50, script="select-only",
                  accounts_per_scale=accounts, no_vacuum=True, log_prefix="agg",
                  aggregate_interval=1)
    lines = open(r.log_files[0]).read().splitlines()
    assert len(lines) >= 1 and all(LOG_AGG.match(ln) for ln in lines)
    cols = [[int(x) for x in ln.split()] for ln in lines]
    assert [c[0] - cols[0][0] for c in cols] == list(range(len(cols)))
    assert sum(c[1] for c in cols) <= r.processed
    for c in cols:
        assert (c[4] <= c[5]) and (c[8] <= c[9]) and c[10:] == [0] * 5


def test_pgbench_option_errors(pgbench_inst):
    for kw, msg in (({"rate": 0}, 'invalid rate limit: "0"'),
                    ({"latency_limit": -1}, 'invalid latency limit: "-1"'),
                    ({"aggregate_interval": 1},
                     "log aggregation is allowed only when actually logging transactions"),
                    ({"progress_timestamp": True},
                     "--progress-timestamp is allowed only under --progress")):
        with pytest.raises(BenchError, match=msg):
            run_bench(pgbench_inst, **kw)
