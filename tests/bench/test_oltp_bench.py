"""bench/oltp_bench.py runs and checks its answers (a smoke test at a tiny size: the
figures themselves are not asserted, only that both engines did the same work)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench import oltp_bench  # noqa: E402


def test_oltp_bench_runs_and_checks_both_engines():
    r = oltp_bench.run(scale=1, ops=40, repeat=1)
    assert set(r["best"]) == {(side, w) for side in ("minidb", "sqlite")
                              for w in oltp_bench.WORKLOADS}
    assert all(t > 0 for t in r["best"].values())
    c = r["counters"]
    # every statement after its first run came from the plan cache
    assert c["plans"] <= c["parses"] and c["plan_cache_hits"] >= 40 * 9
