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
    "lat_avg": re.compile(rf"^latency average = ({NUM}) ms( \(including failures\))?$"),
    "lat_sd": re.compile(rf"^latency stddev = ({NUM}) ms$"),
    "conn": re.compile(rf"^initial connection time = ({NUM}) ms$"),
    "tps": re.compile(r"^tps = (\d+\.\d{6}) \(without initial connection time\)$"),
}
PROGRESS = re.compile(rf"^progress: ({NUM}) s, ({NUM}) tps, lat ({NUM}) ms stddev ({NUM}), "
                      rf"(\d+) failed(?:, (\d+) retried, (\d+) retries)?$")


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
