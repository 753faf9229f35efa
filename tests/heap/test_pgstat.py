"""minidb.heap.pgstat alone, on a private table: the running totals frozen at each
transaction's end and published later give exactly what publishing each transaction's
effect at its end gives (the table of the module docstring), whatever the publish
schedule, with aborts; a reader's flush never includes a transaction still running."""

import threading

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb.heap import pgstat
from minidb.shmem import MAX_TABLE_STATS, TABLE_COUNTERS, TC

EVENTS = ("ins", "upd", "del", "hot_upd", "seq_scan", "seq_tup_read", "idx_scan",
          "idx_tup_fetch")


class Seg:
    """The two regions pgstat uses."""

    def __init__(self):
        self.table_stats = np.zeros((MAX_TABLE_STATS, len(TABLE_COUNTERS)), dtype=np.int64)
        self.table_stats_oid = np.zeros(MAX_TABLE_STATS, dtype=np.int64)


class Interval:
    def __init__(self, ms):
        self.stats_flush_interval = ms


def model_apply(model: dict, xact: list, committed: bool) -> None:
    """What the end of one transaction adds (PostgreSQL's rule, applied at once)."""
    for oid, what, n in xact:
        row = model.setdefault(oid, dict.fromkeys(TABLE_COUNTERS, 0))
        col = what if what in ("seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch") \
            else "n_tup_" + what
        row[col] += n
        if what == "ins":
            row["n_live_tup" if committed else "n_dead_tup"] += n
        elif what == "del" and committed:
            row["n_live_tup"] -= n
            row["n_dead_tup"] += n
        elif what == "upd":
            row["n_dead_tup"] += n


def shared(seg: Seg, oid: int) -> dict:
    row = pgstat._row(seg, oid, create=False)
    if row < 0:
        return dict.fromkeys(TABLE_COUNTERS, 0)
    return {name: int(seg.table_stats[row][i]) for i, name in enumerate(TABLE_COUNTERS)}


xacts = st.lists(st.tuples(
    st.lists(st.tuples(st.integers(1, 3), st.sampled_from(EVENTS), st.integers(1, 4)),
             max_size=6),
    st.booleans(),    # commits
    st.booleans(),    # a reader of this process flushes in the middle of it
), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xacts)
def test_deferred_publish_equals_publishing_every_end(seq):
    seg_now, seg_late = Seg(), Seg()
    at_end = pgstat.TableStats(seg_now, threading.Lock(), None)            # every end
    late = pgstat.TableStats(seg_late, threading.Lock(), Interval(60_000))  # on reads
    late._published_at = 1e18   # never by the interval: only readers and close publish
    model: dict = {}
    for events, committed, read_inside in seq:
        for i, (oid, what, n) in enumerate(events):
            at_end.count(oid, what, n)
            late.count(oid, what, n)
            if read_inside and i == len(events) // 2:
                pgstat.flush_local(seg_late)     # the running transaction stays out
                for o in (1, 2, 3):
                    want = model.get(o, dict.fromkeys(TABLE_COUNTERS, 0))
                    assert shared(seg_late, o) == want
        pending = late.pending
        assert {(o, w): n for o, d in pending.items() for w, n in d.items()} == \
            _summed(events)
        at_end.flush(committed)
        late.flush(committed)
        model_apply(model, events, committed)
        assert not at_end.unflushed
        for o in (1, 2, 3):
            want = model.get(o, dict.fromkeys(TABLE_COUNTERS, 0))
            assert shared(seg_now, o) == want
    late.close()
    at_end.close()
    for o in (1, 2, 3):
        want = model.get(o, dict.fromkeys(TABLE_COUNTERS, 0))
        assert shared(seg_late, o) == want
        assert pgstat.read(seg_late, threading.Lock(), o)["n_tup_ins"] == want["n_tup_ins"]


def _summed(events):
    out: dict = {}
    for oid, what, n in events:
        out[(oid, what)] = out.get((oid, what), 0) + n
    return out


def test_an_abort_published_late_is_still_right():
    """Inserts and deletes of an aborted transaction, published together with committed
    ones: the aborted inserts are dead, the aborted deletes change nothing."""
    seg = Seg()
    ts = pgstat.TableStats(seg, threading.Lock(), Interval(60_000))
    ts._published_at = 1e18
    ts.count(7, "ins", 10)
    ts.flush(True)
    ts.count(7, "ins", 4)
    ts.count(7, "del", 3)
    ts.count(7, "upd", 2)
    ts.flush(False)
    ts.count(7, "del", 1)
    ts.flush(True)
    assert ts.publishes == 0 and ts.unflushed
    ts.publish()
    got = shared(seg, 7)
    assert (got["n_tup_ins"], got["n_tup_del"], got["n_tup_upd"]) == (14, 4, 2)
    assert (got["n_live_tup"], got["n_dead_tup"]) == (9, 4 + 2 + 1)
    assert ts.publishes == 1 and not ts.unflushed
    assert got[TABLE_COUNTERS[TC["n_live_tup"]]] == 9


def test_count_update_counts_upd_and_hot_upd_in_one_call():
    """``count_update(oid, hot)`` adds what ``count(oid, 'upd')`` and, for a HOT update,
    ``count(oid, 'hot_upd')`` add; oid 0 (no statistics) counts nothing."""
    one = pgstat.TableStats(Seg(), threading.Lock(), Interval(0))
    two = pgstat.TableStats(Seg(), threading.Lock(), Interval(0))
    for oid, hot in ((7, True), (7, False), (7, True), (8, False), (0, True)):
        one.count_update(oid, hot)
        two.count(oid, "upd")
        if hot:
            two.count(oid, "hot_upd")
    assert one.counts == two.counts == {(7, "upd"): 3, (7, "hot_upd"): 2, (8, "upd"): 1}
