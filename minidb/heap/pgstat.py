"""Per-table statistics, as ``pg_stat_user_tables`` shows them.

Counters (``minidb.shmem.TABLE_COUNTERS``): seq_scan, seq_tup_read, idx_scan,
idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_live_tup, n_dead_tup,
vacuum_count, analyze_count.

As in PostgreSQL, a backend counts in private memory, so the hot path never takes a
shared lock, and publishes to the shared table (``table_stats``, 512 rows keyed by table
oid, under the ``stats`` lock) at most every ``stats_flush_interval`` ms (PostgreSQL 15's
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

How the counts are kept, so that a transaction's end costs no per-table work: ``count``
adds to ``counts``, the backend's running totals by (table oid, event) since it began -
the transaction in progress included.  At a transaction's end (``flush``) the totals are
frozen into ``ended`` (one dict copy; only the owner writes ``counts``); an abort first
adds the aborted part of its inserts and deletes to two more events, ``a_ins`` and
``a_del`` (the table above needs nothing else: the events say what was attempted, the
``a_`` events which of the inserts and deletes did not commit).  Publishing takes the
difference between ``ended`` and what was published last (``published``) and turns it
into column deltas, n_live_tup and n_dead_tup derived as

    live += (ins - a_ins) - (del - a_del)         dead += upd + (del - a_del) + a_ins

so the work of a publish is proportional to the tables counted, however many transactions
ended since the last one, and an abort is right however late it is published.

Readers never see a backend of their own process lag: ``read``, ``set_live_dead`` (VACUUM,
ANALYZE) and ``forget`` first publish what every backend of this process attached to the
same instance has ended (``flush_local``; a transaction still running there is not
included), so a session that reads its own counters (pg_stat views,
``Session.table_stats``, the tests) sees every transaction it ended, and VACUUM's measured
values are not later overwritten by older deltas.  A backend also publishes when it
closes.  Backends of *other* processes publish on their own schedule: their counts may lag
by up to the interval, as in PostgreSQL.

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
# the events the live/dead estimates are derived from (the a_ ones: of aborted transactions)
_LIVE_DEAD_EVENTS = ("ins", "upd", "del", "a_ins", "a_del")


_LIVE, _DEAD = TC["n_live_tup"], TC["n_dead_tup"]
_LOCAL: "weakref.WeakSet[TableStats]" = weakref.WeakSet()  # this process's backends


class TableStats:
    """One backend's counts (see the module docstring): ``counts`` (running totals, the
    current transaction's included), ``ended`` (the totals at the last transaction's end)
    and ``published`` (those last added to the shared table)."""

    def __init__(self, seg, lock, settings=None):
        self.seg = seg
        self.lock = lock
        self.settings = settings  # stats_flush_interval (None: publish at every end)
        self.counts: dict[tuple[int, str], int] = {}  # (oid, event) -> running total
        self.ended: dict[tuple[int, str], int] = {}   # never changed once made
        self.published = self.ended                   # ``ended`` as last published
        self._mutex = threading.Lock()  # ``published``: a reader of this process publishes
        self._published_at = -1e9       # time.monotonic() of the last publish
        self.publishes = 0              # how often the shared table was written (tests)
        self.pid = os.getpid()          # a forked child's copy must not publish them again
        _LOCAL.add(self)

    def count(self, oid: int, what: str, n: int = 1) -> None:
        """Count an event: 'seq_scan', 'seq_tup_read', 'idx_scan', 'idx_tup_fetch',
        'ins', 'upd', 'del', 'hot_upd'."""
        if oid:
            counts = self.counts
            k = (oid, what)
            counts[k] = counts.get(k, 0) + n

    def count_update(self, oid: int, hot: bool) -> None:
        """Count one updated row: 'upd', and 'hot_upd' too when the update was HOT (one
        call for both)."""
        if oid:
            counts = self.counts
            k = (oid, "upd")
            counts[k] = counts.get(k, 0) + 1
            if hot:
                k = (oid, "hot_upd")
                counts[k] = counts.get(k, 0) + 1

    @property
    def pending(self) -> dict[int, dict[str, int]]:
        """The running transaction's counts so far: oid -> {event: n} (tests)."""
        ended = self.ended
        out: dict[int, dict[str, int]] = {}
        for (oid, what), n in self.counts.items():
            d = n - ended.get((oid, what), 0)
            if d:
                out.setdefault(oid, {})[what] = d
        return out

    @property
    def unflushed(self) -> dict[int, dict[int, int]]:
        """What ended transactions counted and nobody published yet: oid -> {shared
        column: delta} (empty when all is published)."""
        return _deltas(self.ended, self.published)

    def flush(self, committed: bool) -> None:
        """End of a transaction: freeze the totals (an abort marks its inserts and deletes
        as aborted first), and publish if ``stats_flush_interval`` has passed since the
        last time."""
        counts = self.counts
        ended = self.ended
        if counts != ended:
            if not committed:
                self._count_aborted(counts, ended)
            self.ended = counts.copy()
        if self.ended is not self.published:
            interval = self.settings.stats_flush_interval if self.settings is not None else 0
            now = time.monotonic()
            if interval <= 0 or (now - self._published_at) * 1000.0 >= interval:
                self.publish(now)

    @staticmethod
    def _count_aborted(counts: dict, ended: dict) -> None:
        """An aborting transaction's inserts and deletes: counted again as ``a_ins`` /
        ``a_del`` (the updates' effect does not depend on the outcome)."""
        aborted = []
        for k, n in counts.items():
            what = k[1]
            if what == "ins" or what == "del":
                d = n - ended.get(k, 0)
                if d:
                    aborted.append(((k[0], "a_" + what), d))
        for k, d in aborted:
            counts[k] = counts.get(k, 0) + d

    def take(self) -> dict:
        """The unpublished deltas (oid -> {column: n}), handed over: they count as
        published from now on."""
        with self._mutex:
            ended, before = self.ended, self.published
            if ended is before:
                return {}
            self.published = ended
        return _deltas(ended, before)

    def publish(self, now: float | None = None) -> None:
        """Add the unpublished deltas to the shared table now."""
        items = self.take()
        self._published_at = time.monotonic() if now is None else now
        if not items:
            return
        _apply(self.seg, self.lock, items)
        self.publishes += 1

    def close(self) -> None:
        """The backend ends: publish what is left."""
        if self.pid == os.getpid():
            self.publish()
        _LOCAL.discard(self)


def _deltas(ended: dict, before: dict) -> dict[int, dict[int, int]]:
    """Column deltas (oid -> {column: n}) from totals ``before`` to totals ``ended``, the
    live / dead estimates derived from the events (see the module docstring)."""
    if ended is before:
        return {}
    out: dict[int, dict[int, int]] = {}
    ev: dict[int, dict[str, int]] = {}
    get = before.get
    for k, n in ended.items():
        d = n - get(k, 0)
        if not d:
            continue
        oid, what = k
        col = _COLUMN.get(what)
        if col is not None:
            o = out.get(oid)
            if o is None:
                o = out[oid] = {}
            o[col] = d
        if what in _LIVE_DEAD_EVENTS:
            e = ev.get(oid)
            if e is None:
                e = ev[oid] = {}
            e[what] = d
    for oid, e in ev.items():
        ins, upd, dele = e.get("ins", 0), e.get("upd", 0), e.get("del", 0)
        a_ins, a_del = e.get("a_ins", 0), e.get("a_del", 0)
        o = out.setdefault(oid, {})
        live = (ins - a_ins) - (dele - a_del)
        dead = upd + (dele - a_del) + a_ins
        if live:
            o[_LIVE] = live
        if dead:
            o[_DEAD] = dead
    return out


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
    """Publish what the backends of this process on ``seg`` have ended - summed first
    and applied once, so the clamp of n_live_tup cannot depend on which backend's deltas
    happen to go first (the order of a set)."""
    pid = os.getpid()
    total: dict = {}
    for ts in list(_LOCAL):
        if ts.seg is seg and ts.pid == pid and ts.ended is not ts.published:
            items = ts.take()
            if not items:
                continue
            for oid, d in items.items():
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
