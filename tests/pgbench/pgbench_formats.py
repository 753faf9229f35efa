"""Regular expressions for pgbench 15's output lines, as a program parsing it would use
(shared by the bench tests; checked against real pgbench output in test_pgbench_report)."""

from __future__ import annotations

import re

NUM = r"\d+(?:\.\d+)?"
PGBENCH_LINES = {
    "type": re.compile(r"^transaction type: (.+)$"),
    "scale": re.compile(r"^scaling factor: (\d+)$"),
    "mode": re.compile(r"^query mode: (simple|extended|prepared)$"),
    "clients": re.compile(r"^number of clients: (\d+)$"),
    "threads": re.compile(r"^number of threads: (\d+)$"),
    "tries": re.compile(r"^maximum number of tries: (\d+)$"),
    "per_client": re.compile(r"^number of transactions per client: (\d+)$"),
    "duration": re.compile(r"^duration: (\d+) s$"),
    "processed": re.compile(r"^number of transactions actually processed: (\d+)(?:/(\d+))?$"),
    "failed": re.compile(rf"^number of failed transactions: (\d+) \(({NUM}|NaN)%\)$"),
    "serialization": re.compile(rf"^number of serialization failures: (\d+) \(({NUM})%\)$"),
    "deadlock": re.compile(rf"^number of deadlock failures: (\d+) \(({NUM})%\)$"),
    "retried": re.compile(rf"^number of transactions retried: (\d+) \(({NUM})%\)$"),
    "retries": re.compile(r"^total number of retries: (\d+)$"),
    "skipped": re.compile(rf"^number of transactions skipped: (\d+) \(({NUM}|NaN)%\)$"),
    "late": re.compile(rf"^number of transactions above the ({NUM}) ms latency limit: "
                       rf"(\d+)/(\d+) \(({NUM})%\)$"),
    "lat_avg": re.compile(rf"^latency average = ({NUM}) ms( \(including failures\))?$"),
    "lat_sd": re.compile(rf"^latency stddev = ({NUM}) ms$"),
    # avg is C's "nan" when every transaction was skipped (a division by zero committed)
    "lag": re.compile(rf"^rate limit schedule lag: avg ({NUM}|-?nan) \(max ({NUM})\) ms$"),
    "conn": re.compile(rf"^initial connection time = ({NUM}) ms$"),
    "conn_avg": re.compile(rf"^average connection time = ({NUM}) ms$"),
    "tps": re.compile(r"^tps = (\d+\.\d{6}) \((without initial connection time|including "
                      r"reconnection times)\)$"),
}
HEADER = re.compile(r"^pgbench \((.+)\)$")       # "pgbench (15.18 (Debian ...))"
PROGRESS = re.compile(rf"^progress: ({NUM}) s, ({NUM}) tps, lat ({NUM}) ms stddev ({NUM}), "
                      rf"(\d+) failed(?:, lag ({NUM}) ms(?:, (\d+) skipped)?)?"
                      rf"(?:, (\d+) retried, (\d+) retries)?$")
# -l, one line per transaction: client_id transaction_no time|skipped|failed|serialization|
# deadlock script_no time_epoch time_us [schedule_lag] [retries]
LOG_XACT = re.compile(r"^(\d+) (\d+) (\d+|skipped|failed|serialization|deadlock) (\d+) "
                      r"(\d+) (\d+)(?: (\d+))?(?: (\d+))?$")
# -l --aggregate-interval: 15 integer columns
LOG_AGG = re.compile(r"^\d+(?: \d+){14}$")


def parse(lines) -> dict:
    """What a pgbench-output parser gets: every line must match one known pattern."""
    out = {}
    for line in lines:
        for key, rx in PGBENCH_LINES.items():
            m = rx.match(line)
            if m:
                out[key] = m.groups()
                break
        else:
            raise AssertionError(f"line not in pgbench's formats: {line!r}")
    return out
