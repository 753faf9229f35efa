"""bench/oltp_bench.py runs and checks its answers (a smoke test at a tiny size: the
figures themselves are not asserted, only that both engines did the same work)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench import oltp_bench  # noqa: E402


def test_oltp_bench_runs_and_checks_both_engines():
    r = oltp_bench.run(scale=1, ops=40, repeat=1, sync_commit=False)
    assert set(r["times"]) == {(side, w) for side in ("minidb", "sqlite")
                               for w in oltp_bench.WORKLOADS}
    assert all(len(v) == 1 and v[0][0] >= 0 and v[0][1] > 0 for v in r["times"].values())
    c = r["counters"]
    # every statement after its first run came from the plan cache
    assert c["plans"] <= c["parses"] and c["plan_cache_hits"] >= 40 * 9
    # the simple protocol's texts were parameterized: 1 select + 5 of each TPC-B
    assert c["parameterized"] >= 40 * 6 - 10
    # point statements ran on the point path (the BEGIN / END do not)
    assert c["fast_path"] >= 40 * (1 + 1 + 5 + 1 + 5) - 20


def test_cpu_all_counts_this_process():
    a = oltp_bench.cpu_all()
    sum(i * i for i in range(200_000))
    assert oltp_bench.cpu_all() > a
