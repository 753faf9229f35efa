"""Per-table statistics, as ``pg_stat_user_tables`` shows them.

Counters (``minidb.shmem.TABLE_COUNTERS``): seq_scan, seq_tup_read, idx_scan,
idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_live_tup, n_dead_tup,
vacuum_count, analyze_count.

As in PostgreSQL, a backend counts in private memory, so the hot path never takes a
shared lock.  At the end of each transaction (``flush``) the transaction's counts are
folded into the backend's *unflushed* deltas - with the live/dead effect of how the
transaction ended, so an abort is right however late the deltas are published - and the
deltas are published to the shared table (``table_stats``, 512 rows keyed by table oid,
under the ``stats`` lock) at most every ``stats_flush_interval`` ms (PostgreSQL 15's
PGSTAT_MIN_INTERVAL; 0 = at every transaction's end).  What a transaction did to the
live/dead estimates depends on how it ended, again as in PostgreSQL:

==================  ===========================  ===========================
counted             if the transaction commits   if it aborts
==================  ===========================  ===========================
inserted rows       n_live_tup += n              n_dead_tup += n
deleted rows        n_live_tup -= n, dead += n   nothing
updated rows        n_dead_tup += n              n_dead_tup += n (the new
                                                 versions are dead)
==================  ===========================  ===========================

Readers never see a backend of their own process lag: ``read``, ``set_live_dead`` (VACUUM,
ANALYZE) and ``forget`` first publish the unflushed deltas of every backend of this
process attached to the same instance (``flush_local``), so a session that reads its own
counters (pg_stat views, ``Session.table_stats``, the tests) sees every transaction it
ended, and VACUUM's measured values are not later overwritten by older deltas.  A backend
also publishes when it closes.  Backends of *other* processes publish on their own
schedule: their counts may lag by up to the interval, as in PostgreSQL.

n_tup_ins / upd / del / hot_upd count attempts either way, as PostgreSQL's do.  VACUUM
sets n_live_tup and n_dead_tup to what it found (``set_live_dead``).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import defaultdict

import numpy as np

from minidb.shmem import MAX_TABLE_STATS, TABLE_COUNTERS, TC

_EVENTS = ("ins", "upd", "del", "hot_upd")
# what ``count`` counts -> its column of the shared table
_COLUMN = {k: TC[k] for k in ("seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch")}
_COLUMN.update({k: TC["n_tup_" + k] for k in _EVENTS})


_LIVE, _DEAD = TC["n_live_tup"], TC["n_dead_tup"]
_LOCAL: "weakref.WeakSet[TableStats]" = weakref.WeakSet()  # this process's backends


class TableStats:
    """One backend's counts: this transaction's (``pending``), and the ended
    transactions' not yet published (``unflushed``)."""

    def __init__(self, seg, lock, settings=None):
        self.seg = seg
        self.lock = lock
        self.settings = settings  # stats_flush_interval (None: publish at every end)
        self.pending: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.unflushed: dict[int, dict[int, int]] = {}  # oid -> {shared column: delta}
        self._mutex = threading.Lock()  # unflushed: a reader of this process publishes too
        self._published_at = -1e9       # time.monotonic() of the last publish
        self.publishes = 0              # how often the shared table was written (tests)
        self.pid = os.getpid()          # a forked child's copy must not publish them again
        _LOCAL.add(self)

    def count(self, oid: int, what: str, n: int = 1) -> None:
        """Count an event: 'seq_scan', 'seq_tup_read', 'idx_scan', 'idx_tup_fetch',
        'ins', 'upd', 'del', 'hot_upd'."""
        if oid:
            self.pending[oid][what] += n

    def flush(self, committed: bool) -> None:
        """End of a transaction: fold its counts into the unflushed deltas (as it ended),
        and publish them if ``stats_flush_interval`` has passed since the last time."""
        if self.pending:
            with self._mutex:
                unflushed = self.unflushed
                for oid, c in self.pending.items():
                    d = unflushed.get(oid)
                    if d is None:
                        d = unflushed[oid] = defaultdict(int)
                    for k, n in c.items():
                        col = _COLUMN.get(k)
                        if col is not None:
                            d[col] += n
                    ins, upd, dele = c.get("ins", 0), c.get("upd", 0), c.get("del", 0)
                    if not (ins or upd or dele):
                        continue
                    if committed:
                        d[_LIVE] += ins - dele
                        d[_DEAD] += upd + dele
                    else:
                        d[_DEAD] += ins + upd
            self.pending.clear()
        if self.unflushed:
            interval = self.settings.stats_flush_interval if self.settings is not None else 0
            now = time.monotonic()
            if interval <= 0 or (now - self._published_at) * 1000.0 >= interval:
                self.publish(now)

    def take(self) -> dict:
        """The unflushed deltas, handed over (this backend's are empty after)."""
        with self._mutex:
            items, self.unflushed = self.unflushed, {}
        return items

    def publish(self, now: float | None = None) -> None:
        """Add the unflushed deltas to the shared table now."""
        items = self.take()
        if not items:
            return
        _apply(self.seg, self.lock, items)
        self.publishes += 1
        self._published_at = time.monotonic() if now is None else now

    def close(self) -> None:
        """The backend ends: publish what is left."""
        if self.pid == os.getpid():
            self.publish()
        _LOCAL.discard(self)


def _apply(seg, lock, items: dict) -> None:
    """Add deltas (oid -> {column: n}) to the shared table.  The sums are kept as they are,
    even below zero for a moment (a delete's delta published before the insert's), and
    ``read`` shows n_live_tup / n_dead_tup at 0 or more: PostgreSQL clamps at each
    publish, which makes the estimate depend on the order the backends publish in;
    clamping at read gives the same figure whatever the order."""
    with lock:
        for oid, d in items.items():
            row = _row(seg, oid, create=True)
            if row < 0:
                continue  # table full: statistics of this table are not kept
            r = seg.table_stats[row]
            # only the columns counted (a point select makes two: each numpy element
            # update costs about as much as the lock)
            for col, n in d.items():
                if n:
                    r[col] += n


def flush_local(seg) -> None:
    """Publish the unflushed deltas of every backend of this process on ``seg`` - summed
    first and applied once, so the clamp of n_live_tup cannot depend on which backend's
    deltas happen to go first (the order of a set)."""
    pid = os.getpid()
    total: dict = {}
    for ts in list(_LOCAL):
        if ts.seg is seg and ts.unflushed and ts.pid == pid:
            for oid, d in ts.take().items():
                t = total.setdefault(oid, defaultdict(int))
                for col, n in d.items():
                    t[col] += n
            ts.publishes += 1
            ts._published_at = time.monotonic()
    if total:
        lock = next((ts.lock for ts in list(_LOCAL) if ts.seg is seg), None)
        if lock is not None:
            _apply(seg, lock, total)


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
    flush_local(seg)
    with lock:
        row = _row(seg, oid, create=True)
        if row >= 0:
            r = seg.table_stats[row]
            r[TC["n_live_tup"]] = live
            r[TC["n_dead_tup"]] = dead
            r[TC["vacuum_count" if vacuum else "analyze_count"]] += 1


def read(seg, lock, oid: int) -> dict[str, int]:
    """The shared counters of one table (zeros if it has none yet)."""
    flush_local(seg)
    with lock:
        row = _row(seg, oid, create=False)
        vals = seg.table_stats[row].copy() if row >= 0 else np.zeros(len(TABLE_COUNTERS))
    out = {name: int(vals[i]) for i, name in enumerate(TABLE_COUNTERS)}
    out["n_live_tup"] = max(0, out["n_live_tup"])
    out["n_dead_tup"] = max(0, out["n_dead_tup"])
    return out


def forget(seg, lock, oid: int) -> None:
    """Drop a table's row (DROP TABLE).  Rows after it stay reachable: the slot is
    marked with oid -1 (a tombstone) rather than 0."""
    flush_local(seg)
    with lock:
        row = _row(seg, oid, create=False)
        if row >= 0:
            seg.table_stats_oid[row] = -1
            seg.table_stats[row] = 0


assert MAX_TABLE_STATS > 0
