"""What a run measured: ``BenchResult`` (the summary's figures and more), per script
``ScriptStats``, per command ``CommandStats`` (``-r``).  ``BenchResult.lines()`` is pgbench's
summary (``report.summary_lines``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from minidb.pgbench import report
from minidb.pgbench.check import CheckResult

__all__ = ["BenchResult", "ScriptStats", "CommandStats"]


@dataclass
class ScriptStats:
    """One script's figures over all clients (latencies in ms, committed only)."""
    desc: str
    weight: int = 1
    builtin: str | None = None
    committed: int = 0
    failed: int = 0
    skipped: int = 0                    # -R with -L: not run, their start was too late
    serialization_failures: int = 0
    deadlock_failures: int = 0
    retried: int = 0
    retries: int = 0
    latency_sum_ms: float = 0.0
    latency_sum2_ms: float = 0.0
    lag_sum_ms: float = 0.0             # -R: schedule lag of the committed transactions

    @property
    def latency_avg_ms(self) -> float:
        return self.latency_sum_ms / self.committed if self.committed else 0.0

    @property
    def latency_stddev_ms(self) -> float:
        return report.stddev(self.committed, self.latency_sum_ms, self.latency_sum2_ms)

    def add(self, o: "ScriptStats") -> None:
        for k in ("committed", "failed", "skipped", "serialization_failures",
                  "deadlock_failures", "retried", "retries", "latency_sum_ms",
                  "latency_sum2_ms", "lag_sum_ms"):
            setattr(self, k, getattr(self, k) + getattr(o, k))


@dataclass
class CommandStats:
    """One command's figures (``-r``): successful executions, their total latency,
    failures and retries it caused."""
    text: str
    count: int = 0
    latency_sum_ms: float = 0.0
    failures: int = 0
    retries: int = 0


@dataclass
class BenchResult:
    """Everything a run measured.  ``lines()`` is pgbench's summary."""
    transaction_type: str
    scale: int
    query_mode: str
    clients: int
    threads: int
    max_tries: int
    transactions_per_client: int | None
    duration: float | None
    processed: int = 0                  # committed transactions (tps counts these)
    failed: int = 0
    skipped: int = 0                    # -R with -L: transactions skipped, never run
    late: int = 0                       # -L: committed transactions over the limit
    serialization_failures: int = 0
    deadlock_failures: int = 0
    retried: int = 0
    retries: int = 0
    failures_detailed: bool = False
    rate: float | None = None           # -R (transactions per second, all clients)
    latency_limit_ms: float | None = None  # -L
    connect_each: bool = False          # -C
    lag_avg_ms: float = 0.0             # -R: schedule lag over committed transactions
    lag_max_ms: float = 0.0
    connections: int = 0                # -C: connections opened by transactions
    connection_time_ms: float = 0.0     # -C: time spent opening and closing them, summed
    log_files: list = field(default_factory=list)    # -l: the files written
    latency_measured: bool = False      # pgbench prints measured figures (-P) or the estimate
    latency_avg_ms: float = 0.0         # measured over committed transactions
    latency_stddev_ms: float = 0.0
    latency_estimated_ms: float = 0.0   # duration x clients / (committed + failed)
    initial_connection_ms: float = 0.0
    bench_duration: float = 0.0         # seconds from the start to the last client's end
    tps: float = 0.0
    tps_including_connections: float = 0.0  # PostgreSQL 13's first line: committed over the
                                            # time from the first fork to the end
    scripts: list = field(default_factory=list)      # ScriptStats per script
    commands: list = field(default_factory=list)     # per script: [CommandStats] (-r)
    progress: list = field(default_factory=list)     # (elapsed s, tps, lat ms, stddev, failed)
    latencies_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    aborted: list = field(default_factory=list)      # messages of aborted clients
    settings: dict = field(default_factory=dict)     # the session settings every client SET
    tables_before: dict = field(default_factory=dict)  # check.table_sizes before the run
    tables: dict = field(default_factory=dict)         # ... and after it
    counters: dict = field(default_factory=dict)     # instance counters' change over the run
    wal: dict = field(default_factory=dict)          # pg_stat_wal's change over the run
    check: CheckResult | None = None

    def wal_line(self) -> str:
        """``--wal-stats``: the WAL the run wrote (pg_stat_wal's change), in all and per
        committed transaction; printed after pgbench's summary, which stays as it is."""
        w = self.wal
        n = max(self.processed, 1)
        return (f"WAL: records={w.get('wal_records', 0)} fpi={w.get('wal_fpi', 0)} "
                f"bytes={w.get('wal_bytes', 0)} flushes={w.get('wal_flush_requests', 0)} "
                f"syncs={w.get('wal_sync', 0)}; per transaction: "
                f"records={w.get('wal_records', 0) / n:.2f} fpi={w.get('wal_fpi', 0) / n:.3f} "
                f"bytes={w.get('wal_bytes', 0) / n:.0f}")

    def lines(self) -> list[str]:
        return report.summary_lines(self)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def percentile_ms(self, q: float) -> float:
        """A latency percentile (``q`` in 0..100) of the committed transactions."""
        if not len(self.latencies_ms):
            return 0.0
        return float(np.percentile(self.latencies_ms, q))
