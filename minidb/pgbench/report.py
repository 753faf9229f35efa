"""pgbench's output lines, reproduced exactly (PostgreSQL 15's formats).

Summary (stdout), as ``printResults`` prints it::

    transaction type: <builtin: TPC-B (sort of)>       "multiple scripts" for several
    scaling factor: 10
    query mode: prepared
    number of clients: 5
    number of threads: 1
    maximum number of tries: 1
    number of transactions per client: 1000            (-t)  or  duration: 60 s  (-T)
    number of transactions actually processed: 5000/5000     (-T: the count alone)
    number of failed transactions: 0 (0.000%)
    number of serialization failures: 0 (0.000%)       --failures-detailed only
    number of deadlock failures: 0 (0.000%)            --failures-detailed only
    number of transactions retried: 12 (0.240%)        max tries != 1 only
    total number of retries: 15                        max tries != 1 only
    number of transactions skipped: 3 (0.060%)         -R with -L only
    number of transactions above the 5.0 ms latency limit: 7/4997 (0.140%)     -L only
    latency average = 1.234 ms                         measured (with -P, -R or -L) ...
    latency stddev = 0.567 ms                          ... and then its stddev, else
                                                       estimated: duration x clients /
                                                       transactions, " (including failures)"
                                                       appended when some failed
    rate limit schedule lag: avg 0.134 (max 0.702) ms  -R only
    initial connection time = 1.234 ms
    tps = 1234.567890 (without initial connection time)

or, with ``-C``, in place of the last two lines::

    average connection time = 6.876 ms                 over committed + failed transactions
    tps = 99.462900 (including reconnection times)

then, with several scripts, a block per script ("SQL script 1: ...", " - weight: ...", ...),
and with ``-r`` the per-statement latencies.  When no transaction completed or failed, the
summary stops after the failed-transactions line, whose percentage is then "NaN", as
pgbench's.

Progress (stderr, ``-P``)::

    progress: 5.0 s, 1234.5 tps, lat 4.012 ms stddev 1.234, 0 failed[, lag 0.201 ms[, 26
    skipped]][, 3 retried, 4 retries]

(one line; ", lag" with -R, ", skipped" with -R and -L; with ``--progress-timestamp`` the
time is the Unix epoch to a millisecond, "progress: 1796135385.049 s, ...").

Percentages are of all transactions that ended or were skipped (committed + failed +
skipped); tps counts committed transactions only.
"""

from __future__ import annotations

import math

__all__ = ["summary_lines", "progress_line", "per_command_lines", "check_lines"]


def _pct(n: int, total: int) -> str:
    return "NaN" if total == 0 else f"{100.0 * n / total:.3f}"


def summary_lines(r) -> list[str]:
    """The summary of a ``BenchResult`` ``r``, line by line."""
    out = [f"transaction type: {r.transaction_type}",
           f"scaling factor: {r.scale}",
           f"query mode: {r.query_mode}",
           f"number of clients: {r.clients}",
           f"number of threads: {r.threads}",
           f"maximum number of tries: {r.max_tries}"]
    if r.duration is None:
        out.append(f"number of transactions per client: {r.transactions_per_client}")
        out.append(f"number of transactions actually processed: {r.processed}/"
                   f"{r.transactions_per_client * r.clients}")
    else:
        out.append(f"duration: {_duration(r.duration)} s")
        out.append(f"number of transactions actually processed: {r.processed}")
    total = r.processed + r.failed + r.skipped
    out.append(f"number of failed transactions: {r.failed} ({_pct(r.failed, total)}%)")
    if total <= 0:
        return out
    if r.failures_detailed:
        out.append(f"number of serialization failures: {r.serialization_failures} "
                   f"({_pct(r.serialization_failures, total)}%)")
        out.append(f"number of deadlock failures: {r.deadlock_failures} "
                   f"({_pct(r.deadlock_failures, total)}%)")
    if r.max_tries != 1:
        out.append(f"number of transactions retried: {r.retried} ({_pct(r.retried, total)}%)")
        out.append(f"total number of retries: {r.retries}")
    if r.rate and r.latency_limit_ms:
        out.append(f"number of transactions skipped: {r.skipped} ({_pct(r.skipped, total)}%)")
    if r.latency_limit_ms:
        late_pct = 100.0 * r.late / r.processed if r.processed else 0.0
        out.append(f"number of transactions above the {r.latency_limit_ms:.1f} ms latency "
                   f"limit: {r.late}/{r.processed} ({late_pct:.3f}%)")
    if r.latency_measured or r.rate or r.latency_limit_ms:
        if r.processed > 0:
            out.append(f"latency average = {r.latency_avg_ms:.3f} ms")
            out.append(f"latency stddev = {r.latency_stddev_ms:.3f} ms")
    else:
        suffix = " (including failures)" if r.failed > 0 else ""
        out.append(f"latency average = {r.latency_estimated_ms:.3f} ms{suffix}")
    if r.rate:
        lag_avg = r.lag_avg_ms if r.processed else float("nan")
        out.append(f"rate limit schedule lag: avg {lag_avg:.3f} (max {r.lag_max_ms:.3f}) ms")
    if r.connect_each:
        ended = r.processed + r.failed
        avg = r.connection_time_ms / ended if ended else float("nan")
        out.append(f"average connection time = {avg:.3f} ms")
        out.append(f"tps = {r.tps:f} (including reconnection times)")
    else:
        out.append(f"initial connection time = {r.initial_connection_ms:.3f} ms")
        out.append(f"tps = {r.tps:f} (without initial connection time)")
    if len(r.scripts) > 1:
        out.extend(_per_script_lines(r, total))
    if r.commands:
        out.extend(per_command_lines(r))
    return out


def _duration(d: float) -> str:
    return str(int(d)) if float(d).is_integer() else f"{d:g}"


def _per_script_lines(r, total: int) -> list[str]:
    out = []
    wsum = sum(s.weight for s in r.scripts) or 1
    for i, s in enumerate(r.scripts, 1):
        stotal = s.committed + s.failed + s.skipped
        out.append(f"SQL script {i}: {s.desc}")
        out.append(f" - weight: {s.weight} (targets {100.0 * s.weight / wsum:.1f}% of total)")
        tps = s.committed / r.bench_duration if r.bench_duration > 0 else 0.0
        out.append(f" - {s.committed} transactions ({_pct1(s.committed, total)}% of total, "
                   f"tps = {tps:f})")
        out.append(f" - number of failed transactions: {s.failed} ({_pct(s.failed, stotal)}%)")
        if r.rate and r.latency_limit_ms and s.committed > 0:
            out.append(f" - number of transactions skipped: {s.skipped} "
                       f"({_pct(s.skipped, stotal)}%)")
        if r.failures_detailed:
            out.append(f" - number of serialization failures: {s.serialization_failures} "
                       f"({_pct(s.serialization_failures, stotal)}%)")
            out.append(f" - number of deadlock failures: {s.deadlock_failures} "
                       f"({_pct(s.deadlock_failures, stotal)}%)")
        if r.max_tries != 1:
            out.append(f" - number of transactions retried: {s.retried} "
                       f"({_pct(s.retried, stotal)}%)")
            out.append(f" - total number of retries: {s.retries}")
        if s.committed > 0:
            out.append(f" - latency average = {s.latency_avg_ms:.3f} ms")
            out.append(f" - latency stddev = {s.latency_stddev_ms:.3f} ms")
    return out


def _pct1(n: int, total: int) -> str:
    return "NaN" if total == 0 else f"{100.0 * n / total:.1f}"


def per_command_lines(r) -> list[str]:
    """``-r``: each command's average latency (ms, over its successful executions), its
    failures and, when retries are on, its retries; one block per script."""
    out = []
    retries = r.max_tries != 1
    for i, s in enumerate(r.scripts):
        cmds = r.commands[i]
        if len(r.scripts) > 1:
            out.append(f"SQL script {i + 1}: {s.desc}")
        out.append("statement latencies in milliseconds, failures and retries:" if retries
                   else "statement latencies in milliseconds and failures:")
        for c in cmds:
            avg = c.latency_sum_ms / c.count if c.count else 0.0
            line = f"{avg:>14.3f}  {c.failures:>10d}"
            if retries:
                line += f"  {c.retries:>10d}"
            out.append(f"{line}  {c.text}")
    return out


def progress_line(elapsed_s: float, tps: float, lat_ms: float, stddev_ms: float, failed: int,
                  retried: int | None = None, retries: int | None = None, *,
                  lag_ms: float | None = None, skipped: int | None = None,
                  epoch_s: float | None = None) -> str:
    """One ``-P`` line: ``lag_ms`` under -R, ``skipped`` under -R with -L, ``epoch_s``
    (the Unix time) in place of the elapsed time with ``--progress-timestamp``."""
    when = f"{epoch_s:.3f}" if epoch_s is not None else f"{elapsed_s:.1f}"
    line = (f"progress: {when} s, {tps:.1f} tps, lat {lat_ms:.3f} ms "
            f"stddev {stddev_ms:.3f}, {failed} failed")
    if lag_ms is not None:
        line += f", lag {lag_ms:.3f} ms"
        if skipped is not None:
            line += f", {skipped} skipped"
    if retried is not None:
        line += f", {retried} retried, {retries} retries"
    return line


def check_lines(c) -> list[str]:
    """What ``--check`` found (a ``CheckResult``)."""
    if c.ok:
        return [f"check: {c.summary}"]
    return ["check FAILED: " + c.summary] + [f"  {p}" for p in c.problems]


def stddev(n: int, s: float, s2: float) -> float:
    """Standard deviation from a count, a sum and a sum of squares (0 when n is 0)."""
    if n <= 0:
        return 0.0
    mean = s / n
    return math.sqrt(max(s2 / n - mean * mean, 0.0))
