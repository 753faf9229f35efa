"""Per-table statistics, as ``pg_stat_user_tables`` shows them.

Counters (``minidb.shmem.TABLE_COUNTERS``): seq_scan, seq_tup_read, idx_scan,
idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_live_tup, n_dead_tup,
vacuum_count, analyze_count.

As in PostgreSQL, a backend counts in private memory and publishes at the end of each
transaction (``flush``), so the hot path never takes a shared lock; the shared table
(``table_stats``, 512 rows keyed by table oid) is updated under the ``stats`` lock.  What a
transaction did to the live/dead estimates depends on how it ended, again as in PostgreSQL:

==================  ===========================  ===========================
counted             if the transaction commits   if it aborts
==================  ===========================  ===========================
inserted rows       n_live_tup += n              n_dead_tup += n
deleted rows        n_live_tup -= n, dead += n   nothing
updated rows        n_dead_tup += n              n_dead_tup += n (the new
                                                 versions are dead)
==================  ===========================  ===========================

n_tup_ins / upd / del / hot_upd count attempts either way, as PostgreSQL's do.  VACUUM
sets n_live_tup and n_dead_tup to what it found (``set_live_dead``).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from minidb.shmem import MAX_TABLE_STATS, TABLE_COUNTERS, TC

_EVENTS = ("ins", "upd", "del", "hot_upd")
# what ``count`` counts -> its column of the shared table
_COLUMN = {k: TC[k] for k in ("seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch")}
_COLUMN.update({k: TC["n_tup_" + k] for k in _EVENTS})


class TableStats:
    """One backend's pending counts, published by ``flush`` at transaction end."""

    def __init__(self, seg, lock):
        self.seg = seg
        self.lock = lock
        self.pending: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def count(self, oid: int, what: str, n: int = 1) -> None:
        """Count an event: 'seq_scan', 'seq_tup_read', 'idx_scan', 'idx_tup_fetch',
        'ins', 'upd', 'del', 'hot_upd'."""
        if oid:
            self.pending[oid][what] += n

    def flush(self, committed: bool) -> None:
        if not self.pending:
            return
        with self.lock:
            for oid, c in self.pending.items():
                row = _row(self.seg, oid, create=True)
                if row < 0:
                    continue  # table full: statistics of this table are not kept
                r = self.seg.table_stats[row]
                # only the counts this transaction made (a point select makes two: each
                # numpy element update costs about as much as the lock)
                for k, n in c.items():
                    col = _COLUMN.get(k)
                    if col is not None:
                        r[col] += n
                ins, upd, dele = c.get("ins", 0), c.get("upd", 0), c.get("del", 0)
                if not (ins or upd or dele):
                    continue
                if committed:
                    r[TC["n_live_tup"]] += ins - dele
                    r[TC["n_dead_tup"]] += upd + dele
                else:
                    r[TC["n_dead_tup"]] += ins + upd
                r[TC["n_live_tup"]] = max(0, r[TC["n_live_tup"]])
        self.pending.clear()


def _row(seg, oid: int, create: bool) -> int:
    """Row of ``oid`` in the shared table (open addressing by oid); -1 if absent/full."""
    oids = seg.table_stats_oid
    n = len(oids)
    i = oid % n
    for _ in range(n):
        if oids[i] == oid:
            return i
        if oids[i] == 0:
            if not create:
                return -1
            oids[i] = oid
            seg.table_stats[i] = 0
            return i
        i = (i + 1) % n
    return -1


def set_live_dead(seg, lock, oid: int, live: int, dead: int, *, vacuum: bool) -> None:
    """What VACUUM (or ANALYZE) measured replaces the running estimates."""
    with lock:
        row = _row(seg, oid, create=True)
        if row >= 0:
            r = seg.table_stats[row]
            r[TC["n_live_tup"]] = live
            r[TC["n_dead_tup"]] = dead
            r[TC["vacuum_count" if vacuum else "analyze_count"]] += 1


def read(seg, lock, oid: int) -> dict[str, int]:
    """The shared counters of one table (zeros if it has none yet)."""
    with lock:
        row = _row(seg, oid, create=False)
        vals = seg.table_stats[row].copy() if row >= 0 else np.zeros(len(TABLE_COUNTERS))
    return {name: int(vals[i]) for i, name in enumerate(TABLE_COUNTERS)}


def forget(seg, lock, oid: int) -> None:
    """Drop a table's row (DROP TABLE).  Rows after it stay reachable: the slot is
    marked with oid -1 (a tombstone) rather than 0."""
    with lock:
        row = _row(seg, oid, create=False)
        if row >= 0:
            seg.table_stats_oid[row] = -1
            seg.table_stats[row] = 0


assert MAX_TABLE_STATS > 0
