"""The summary and progress lines have pgbench 15's exact formats.

``pgbench_formats.PGBENCH_LINES`` are regular expressions a program parsing pgbench's output
would use; they are first checked against real pgbench 15.18 output (captured on this
machine), then against minidb's."""

from __future__ import annotations

import numpy as np
import pytest

from minidb.pgbench.results import BenchResult, CommandStats, ScriptStats
from minidb.pgbench.report import progress_line, summary_lines
from pgbench_formats import HEADER, LOG_AGG, LOG_XACT, PROGRESS, parse

# real pgbench 15.18 output on this machine (stdout, without the version line)
REAL_PGBENCH = [
    """transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 4
number of threads: 1
maximum number of tries: 1
number of transactions per client: 200
number of transactions actually processed: 800/800
number of failed transactions: 0 (0.000%)
latency average = 2.232 ms
initial connection time = 13.264 ms
tps = 1792.030393 (without initial connection time)""",
    """transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 4
number of threads: 1
maximum number of tries: 5
number of transactions per client: 200
number of transactions actually processed: 646/800
number of failed transactions: 154 (19.250%)
number of serialization failures: 154 (19.250%)
number of deadlock failures: 0 (0.000%)
number of transactions retried: 345 (43.125%)
total number of retries: 991
latency average = 3.714 ms
latency stddev = 3.979 ms
initial connection time = 16.072 ms
tps = 463.958804 (without initial connection time)""",
    """transaction type: <builtin: select only>
scaling factor: 1
query mode: simple
number of clients: 4
number of threads: 1
maximum number of tries: 1
duration: 3 s
number of transactions actually processed: 118806
number of failed transactions: 0 (0.000%)
latency average = 0.092 ms
latency stddev = 0.222 ms
initial connection time = 21.407 ms
tps = 39831.789594 (without initial connection time)""",
    """transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 4
number of threads: 1
maximum number of tries: 1
number of transactions per client: 200
number of transactions actually processed: 251/800
number of failed transactions: 549 (68.625%)
latency average = 2.199 ms (including failures)
initial connection time = 25.975 ms
tps = 570.693199 (without initial connection time)""",
    # -c 2 -T 2 -R 2000 -L 1
    """transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 1
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 1620
number of failed transactions: 0 (0.000%)
number of transactions skipped: 2495 (60.632%)
number of transactions above the 1.0 ms latency limit: 1495/1620 (92.284%)
latency average = 2.762 ms
latency stddev = 2.393 ms
rate limit schedule lag: avg 0.497 (max 4.996) ms
initial connection time = 9.467 ms
tps = 812.140396 (without initial connection time)""",
    # -C -c 2 -t 5
    """transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 1
maximum number of tries: 1
number of transactions per client: 5
number of transactions actually processed: 10/10
number of failed transactions: 0 (0.000%)
latency average = 20.108 ms
average connection time = 6.876 ms
tps = 99.462900 (including reconnection times)""",
]
REAL_PROGRESS = ["progress: 1.0 s, 38320.2 tps, lat 0.094 ms stddev 0.221, 0 failed",
                 "progress: 1.0 s, 480.9 tps, lat 3.823 ms stddev 4.141, 130 failed, "
                 "297 retried, 844 retries",
                 "progress: 1.0 s, 82.0 tps, lat 3.468 ms stddev 1.663, 0 failed, lag 0.201 ms, "
                 "26 skipped",
                 "progress: 1796135385.049 s, 93.0 tps, lat 4.598 ms stddev 2.367, 0 failed, "
                 "lag 1.045 ms"]
# pgbench -l lines (-c 2 -j 2 -t 3; -R 100 -L 5) and --aggregate-interval lines (-R 300 -L 2)
REAL_LOG = ["0 1 6004 0 1796135386 79961", "0 2 skipped 0 1796135386 222563 0",
            "1 1 13202 0 1796135386 225284 1231"]
REAL_AGG = ["1796135386 407 1365597 10695303725 399 36432 0 0 0 0 0 0 0 0 0",
            "1796135389 156 533673 3353557975 697 21941 54309 233380563 3 13702 25 0 0 0 0"]


def test_header_pattern_matches_real_pgbench_and_ours():
    from minidb.pgbench.command import version_line
    assert HEADER.match("pgbench (15.18 (Debian 15.18-0+deb12u1))")
    assert HEADER.match(version_line()) and version_line().endswith(", pgbench 15 compatible)")


@pytest.mark.parametrize("line", REAL_LOG)
def test_log_pattern_matches_real_pgbench(line):
    assert LOG_XACT.match(line)


@pytest.mark.parametrize("line", REAL_AGG)
def test_aggregate_pattern_matches_real_pgbench(line):
    assert LOG_AGG.match(line)


@pytest.mark.parametrize("text", REAL_PGBENCH)
def test_patterns_match_real_pgbench(text):
    parse(text.splitlines())


@pytest.mark.parametrize("line", REAL_PROGRESS)
def test_progress_pattern_matches_real_pgbench(line):
    assert PROGRESS.match(line)


def result(**kw) -> BenchResult:
    base = dict(transaction_type="<builtin: TPC-B (sort of)>", scale=10, query_mode="prepared",
                clients=5, threads=1, max_tries=1, transactions_per_client=1000, duration=None,
                processed=5000, bench_duration=4.05, tps=1234.567890123,
                latency_estimated_ms=4.05, latency_avg_ms=3.9, latency_stddev_ms=1.25,
                initial_connection_ms=12.3456,
                scripts=[ScriptStats("<builtin: TPC-B (sort of)>", committed=5000)])
    base.update(kw)
    return BenchResult(**base)


def test_summary_exact_lines():
    assert summary_lines(result()) == [
        "transaction type: <builtin: TPC-B (sort of)>",
        "scaling factor: 10",
        "query mode: prepared",
        "number of clients: 5",
        "number of threads: 1",
        "maximum number of tries: 1",
        "number of transactions per client: 1000",
        "number of transactions actually processed: 5000/5000",
        "number of failed transactions: 0 (0.000%)",
        "latency average = 4.050 ms",
        "initial connection time = 12.346 ms",
        "tps = 1234.567890 (without initial connection time)",
    ]


def test_summary_with_progress_failures_and_retries():
    r = result(max_tries=5, processed=4000, failed=1000, serialization_failures=900,
               deadlock_failures=100, retried=1500, retries=2500, failures_detailed=True,
               latency_measured=True)
    lines = summary_lines(r)
    got = parse(lines)
    assert got["processed"] == ("4000", "5000")
    assert got["failed"] == ("1000", "20.000")
    assert got["serialization"] == ("900", "18.000")
    assert got["deadlock"] == ("100", "2.000")
    assert got["retried"] == ("1500", "30.000")
    assert got["retries"] == ("2500",)
    assert got["lat_avg"] == ("3.900", None) and got["lat_sd"] == ("1.250",)
    assert lines.index("latency average = 3.900 ms") < lines.index("latency stddev = 1.250 ms")


def test_estimated_latency_notes_failures():
    lines = summary_lines(result(processed=4000, failed=1000))
    assert "latency average = 4.050 ms (including failures)" in lines
    assert parse(lines)["failed"] == ("1000", "20.000")


def test_duration_mode_and_nothing_processed():
    lines = summary_lines(result(transactions_per_client=None, duration=60.0, processed=7))
    got = parse(lines)
    assert got["duration"] == ("60",) and got["processed"] == ("7", None)
    lines = summary_lines(result(processed=0, scripts=[ScriptStats("x")]))
    assert lines[-1] == "number of failed transactions: 0 (NaN%)"   # and nothing after it
    assert parse(lines)["failed"] == ("0", "NaN")


def test_per_script_and_per_command_blocks():
    a = ScriptStats("<builtin: select only>", weight=3, committed=750, latency_sum_ms=750.0,
                    latency_sum2_ms=1000.0)
    b = ScriptStats("<builtin: simple update>", weight=1, committed=250, latency_sum_ms=500.0,
                    latency_sum2_ms=1100.0)
    r = result(transaction_type="multiple scripts", processed=1000, scripts=[a, b],
               bench_duration=2.0,
               commands=[[CommandStats("\\set aid random(1, 100000 * :scale)", 750, 7.5, 0, 0)],
                         [CommandStats("END;", 250, 25.0, 2, 0)]])
    lines = summary_lines(r)
    i = lines.index("SQL script 1: <builtin: select only>")
    assert lines[i + 1:i + 6] == [
        " - weight: 3 (targets 75.0% of total)",
        " - 750 transactions (75.0% of total, tps = 375.000000)",
        " - number of failed transactions: 0 (0.000%)",
        " - latency average = 1.000 ms",
        " - latency stddev = 0.577 ms",
    ]
    assert "         0.010           0  \\set aid random(1, 100000 * :scale)" in lines
    assert "         0.100           2  END;" in lines
    assert "statement latencies in milliseconds and failures:" in lines


def test_progress_line_format():
    line = progress_line(5.0, 1234.5, 4.0123, 1.2344, 0)
    assert line == "progress: 5.0 s, 1234.5 tps, lat 4.012 ms stddev 1.234, 0 failed"
    assert PROGRESS.match(line)
    line = progress_line(1.0, 480.9, 3.823, 4.141, 130, 297, 844)
    assert line == REAL_PROGRESS[1]


def test_percentile_of_latencies():
    r = result(latencies_ms=np.arange(1.0, 101.0))
    assert r.percentile_ms(50) == pytest.approx(50.5)


def test_rate_latency_limit_and_connect_lines():
    """-R with -L: skipped (of committed + failed + skipped), late (of committed), the
    measured latency, the schedule lag; -C: average connection time and the other tps."""
    r = result(rate=1000.0, latency_limit_ms=5.0, processed=4000, skipped=1000, late=40,
               lag_avg_ms=0.1234, lag_max_ms=4.5, connect_each=True, failed=0,
               connection_time_ms=8000.0)
    lines = summary_lines(r)
    assert lines[9:] == [
        "number of transactions skipped: 1000 (20.000%)",
        "number of transactions above the 5.0 ms latency limit: 40/4000 (1.000%)",
        "latency average = 3.900 ms",
        "latency stddev = 1.250 ms",
        "rate limit schedule lag: avg 0.123 (max 4.500) ms",
        "average connection time = 2.000 ms",
        "tps = 1234.567890 (including reconnection times)"]
    parse(lines)
    # -L alone: no skipped line, late counted; latency measured
    lines = summary_lines(result(latency_limit_ms=0.5, late=3))
    assert "number of transactions above the 0.5 ms latency limit: 3/5000 (0.060%)" in lines
    assert not any(ln.startswith("number of transactions skipped") for ln in lines)
    assert "latency stddev = 1.250 ms" in lines


def test_progress_line_with_lag_skipped_and_timestamp():
    line = progress_line(2.0, 80.0, 3.5, 1.25, 0, lag_ms=0.25, skipped=7,
                         epoch_s=1796135385.0494)
    assert line == ("progress: 1796135385.049 s, 80.0 tps, lat 3.500 ms stddev 1.250, "
                    "0 failed, lag 0.250 ms, 7 skipped")
    assert PROGRESS.match(line).group(7) == "7"
