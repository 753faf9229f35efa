"""``-l``: pgbench's transaction log files, written by the parent after the run.

pgbench writes one file per thread, ``PREFIX.PID`` for the first and ``PREFIX.PID.N`` for
thread N (PID: pgbench's own process; PREFIX: ``--log-prefix``, default ``pgbench_log``),
in the current directory.  minidb's clients are processes, so each client records its
transactions (``client.LOG_*`` tuples) and sends them with its figures; the parent assigns
clients to ``min(-j, -c)`` threads in pgbench's contiguous blocks and writes each thread's
file, lines in the order the transactions ended.  PID is the parent's.

One line per transaction (pgbench 15's columns)::

    client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

``time`` is the latency in microseconds, or ``skipped`` (``-R`` with ``-L``), or ``failed``
(``serialization`` / ``deadlock`` with ``--failures-detailed``); ``time_epoch time_us`` the
end, in seconds since the epoch and microseconds; ``schedule_lag`` (µs) with ``-R`` only,
0 for skipped and failed transactions; ``retries`` when ``--max-tries`` is not 1.
``transaction_no`` counts the client's transactions from 1, skipped ones included.

With ``--aggregate-interval N``, one line per N seconds from the thread's start::

    interval_start num_transactions sum_latency sum_latency_2 min_latency max_latency
    sum_lag sum_lag_2 min_lag max_lag skipped retried retries serialization_failures
    deadlock_failures

(microseconds; the lag columns are 0 without ``-R``, skipped without ``-L``, retried and
retries when ``--max-tries`` is 1, the failure counts without ``--failures-detailed``).  A
transaction falls in the interval in which it ended; as pgbench, only intervals that ended
before the thread's last client did are written (a run shorter than the interval writes an
empty file), and an interval with no transaction is a line of its own.
"""

from __future__ import annotations

import os

from minidb.pgbench.client import LOG_DEADLOCK, LOG_OK, LOG_SERIALIZATION, LOG_SKIPPED

__all__ = ["write_logs", "log_file_name", "thread_of"]


def thread_of(nclients: int, nthreads: int) -> list[int]:
    """Each client's thread: contiguous blocks, the first threads taking the remainder
    (pgbench's ``nstate = (nclients - dealt + nthreads - i - 1) / (nthreads - i)``)."""
    out, dealt = [], 0
    for i in range(nthreads):
        n = (nclients - dealt + nthreads - i - 1) // (nthreads - i)
        out.extend([i] * n)
        dealt += n
    return out


def log_file_name(prefix: str, pid: int, thread: int) -> str:
    return f"{prefix}.{pid}" if thread == 0 else f"{prefix}.{pid}.{thread}"


def write_logs(prefix: str, results: list, t0: float, plan, nthreads: int,
               aggregate_interval: int | None = None) -> list[str]:
    """Write the log files of a run; return their names.  ``results``: the clients'
    reports (their ``log`` and ``end``), ``t0``: the start (``perf_counter``)."""
    pid = os.getpid()
    nclients = len(results)
    threads = thread_of(nclients, nthreads)
    names = []
    for t in range(nthreads):
        recs, end = [], None
        for cid, r in enumerate(results):
            if threads[cid] != t or not r or "log" not in r:
                continue
            recs.extend((rec[5], cid, rec) for rec in r["log"])
            end = r["end"] if end is None else max(end, r["end"])
        recs.sort(key=lambda x: (x[0], x[1]))
        name = log_file_name(prefix, pid, t)
        with open(name, "w") as f:
            if aggregate_interval:
                if end is not None:
                    start_us = round((t0 + plan.epoch_shift) * 1e6)
                    end_us = round((end + plan.epoch_shift) * 1e6)
                    f.writelines(_aggregate_lines(recs, start_us, end_us,
                                                  aggregate_interval * 1_000_000, plan))
            else:
                f.writelines(_xact_line(cid, rec, plan) for _, cid, rec in recs)
        names.append(name)
    return names


_WORDS = {LOG_SKIPPED: "skipped", LOG_SERIALIZATION: "serialization",
          LOG_DEADLOCK: "deadlock"}


def _xact_line(cid: int, rec, plan) -> str:
    number, status, lat_us, lag_us, si, epoch_us, retries = rec
    if status == LOG_OK:
        what = str(lat_us)
    elif status == LOG_SKIPPED or plan.failures_detailed:
        what = _WORDS[status]
    else:
        what = "failed"
    line = f"{cid} {number} {what} {si} {epoch_us // 1_000_000} {epoch_us % 1_000_000}"
    if plan.rate:
        line += f" {lag_us}"
    if plan.max_tries != 1:
        line += f" {retries}"
    return line + "\n"


def _aggregate_lines(recs, start_us: int, end_us: int, step_us: int, plan) -> list[str]:
    n = max((end_us - start_us) // step_us, 0)
    buckets = [_Agg() for _ in range(n)]
    for epoch_us, _, rec in recs:
        k = (epoch_us - start_us) // step_us
        if 0 <= k < n:
            buckets[k].add(rec)
    return [b.line((start_us + k * step_us) // 1_000_000, plan)
            for k, b in enumerate(buckets)]


class _Agg:
    """One interval's figures (pgbench's ``StatsData`` as ``accumStats`` fills it)."""

    def __init__(self):
        self.cnt = self.skipped = self.retried = self.retries = 0
        self.ser = self.dl = 0
        self.lat = [0, 0, None, None]     # sum, sum of squares, min, max
        self.lag = [0, 0, None, None]

    def add(self, rec) -> None:
        _, status, lat_us, lag_us, _, _, retries = rec
        if status == LOG_SKIPPED:
            self.skipped += 1
            return
        if retries:
            self.retried += 1
            self.retries += retries
        if status == LOG_SERIALIZATION:
            self.ser += 1
        elif status == LOG_DEADLOCK:
            self.dl += 1
        else:
            self.cnt += 1
            _acc(self.lat, lat_us)
            _acc(self.lag, lag_us)

    def line(self, start_s: int, plan) -> str:
        lat = self.lat
        lag = self.lag if plan.rate else [0, 0, 0, 0]
        retried, retries = (self.retried, self.retries) if plan.max_tries != 1 else (0, 0)
        ser, dl = (self.ser, self.dl) if plan.failures_detailed else (0, 0)
        skipped = self.skipped if plan.latency_limit_ms else 0
        cols = [start_s, self.cnt, lat[0], lat[1], lat[2] or 0, lat[3] or 0,
                lag[0], lag[1], lag[2] or 0, lag[3] or 0, skipped, retried, retries, ser, dl]
        return " ".join(str(c) for c in cols) + "\n"


def _acc(s: list, v: int) -> None:
    s[0] += v
    s[1] += v * v
    s[2] = v if s[2] is None else min(s[2], v)
    s[3] = v if s[3] is None else max(s[3], v)
