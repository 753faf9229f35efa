"""Buffer replacement: the clock sweep and the ring strategies (``freelist.c``).

Clock sweep.  Every buffer has a usage count (0..``BM_MAX_USAGE_COUNT``, defined with the
flag bits in ``buf_internals.py``); a pin through the default strategy raises it by one.  To
find a victim the shared clock hand moves over the buffers: an unpinned buffer with usage 0
is a candidate; an unpinned buffer with a usage count above zero gets it decremented and is
passed over; a pinned buffer is passed over.  A try-counter starts at NBuffers, is reset by
every decrement and counts down for every pinned buffer passed; when it reaches zero every
buffer is pinned and the caller gets "no unpinned buffers available" instead of spinning
forever.

minidb moves the hand under the strategy lock over at most a *slice* of buffers (32) per
lock hold, buffer by buffer in plain Python over memoryviews of the shared arrays: in a
full pool the hand seldom passes more than a few buffers before a candidate, and a scalar
step costs a fraction of a microsecond where a vectorized slice paid ~12 numpy calls
whatever it found.  The decisions are PostgreSQL's; only the lock is held for up to a
slice instead of one atomic step per buffer.  Usage counts are advisory and updated
without a lock, so a concurrent pin and decrement may lose one of the two updates
(PostgreSQL uses an atomic; a lost update here only perturbs the replacement order).

Free list.  A buffer that was never handed out is taken before the clock sweep runs
(PostgreSQL's ``StrategyGetBuffer`` pops its free list first): ``buf_never_used[0]`` is the
first such buffer, and ``next_never_used`` hands them out in buffer order under the
strategy lock, so filling an empty pool costs one counter step per buffer instead of a
vectorized sweep step, and the hand does not move until the pool is full.  The order is
the one the sweep would have chosen on a fresh pool (0, 1, 2, ...), and the hand is then
where a sweep over the whole pool would have left it, so only the cost changes.
Departure: PostgreSQL also puts the buffers of a dropped relation back on its free list;
minidb leaves them to the sweep (they have usage 0 and are taken when the hand reaches
them), so the replacement order after a DROP is unchanged.

Ring strategies (``BufferAccessStrategy``).  A bulk read, bulk write or VACUUM cycles
through a small private ring of buffers instead of evicting the whole pool:

==========  ==========================  =================================================
kind        size (capped at NBuffers/8)  used by
==========  ==========================  =================================================
bulkread    ``bulkread_ring_kb`` 256 kB  sequential scans of tables > NBuffers / 4
                                         (``is_bulk_read``)
bulkwrite   ``bulkwrite_ring_kb`` 16 MB  bulk loads (``heap.bulk_insert``)
vacuum      ``vacuum_ring_kb`` 256 kB    VACUUM
==========  ==========================  =================================================

To allocate, the ring's cursor advances; the buffer in that slot is reused if nobody has
it pinned and its usage count is at most 1 (nobody else has been using it); otherwise a
victim comes from the clock sweep and takes the slot.  Pages a ring scan finds already in
the pool are used in place and their usage count is raised to 1 at most.  PostgreSQL's
bulk-read ring also refuses to reuse a dirty buffer whose write would need a WAL flush;
minidb has no WAL, so a dirty ring buffer is simply written and reused.
"""

from __future__ import annotations

import numpy as np

from minidb.config import BLCKSZ
from minidb.storage.buf_internals import BM_IO_IN_PROGRESS

SWEEP_STEP = 32

RING_KINDS = ("bulkread", "bulkwrite", "vacuum")


def is_bulk_read(nblocks: int, nbuffers: int) -> bool:
    """Whether a sequential read of ``nblocks`` blocks is a bulk read: more than a quarter of
    the pool (PostgreSQL's ``NBuffers / 4`` test in ``initscan``).  Such a read goes through
    a bulk-read ring, so that one table cannot flush the pool, and a sequential scan of such
    a table joins the synchronized scans (``synchronize_seqscans``)."""
    return nblocks > nbuffers // 4


class AccessStrategy:
    """A private ring of buffer ids, one per scan / load / VACUUM (backend-local)."""

    __slots__ = ("kind", "ring", "cursor", "nbuffers")

    def __init__(self, kind: str, ring_kb: int, shared_buffers: int):
        if kind not in RING_KINDS:
            raise ValueError(f"unknown strategy {kind}")
        self.kind = kind
        self.nbuffers = max(1, min(ring_kb * 1024 // BLCKSZ, shared_buffers // 8))
        self.ring = np.full(self.nbuffers, -1, dtype=np.int64)
        self.cursor = -1

    def next_slot(self) -> tuple[int, int]:
        """Advance the cursor: (slot index, buffer currently in it or -1)."""
        self.cursor = (self.cursor + 1) % self.nbuffers
        return self.cursor, int(self.ring[self.cursor])

    def __repr__(self) -> str:
        return f"AccessStrategy({self.kind}, {self.nbuffers} buffers)"


def next_never_used(seg, strategy_lock, nbuffers: int) -> int:
    """Take the next buffer of the free list (never handed out before), or -1 if none is
    left.  The caller pins it with the usual checks (``_claim``): a buffer handed out here
    is only a candidate, as one the sweep returns."""
    nu = seg.buf_never_used
    if nu[0] >= nbuffers:  # an unlocked look: the list only ever shrinks
        return -1
    with strategy_lock:
        b = int(nu[0])
        if b >= nbuffers:
            return -1
        nu[0] = b + 1
    return b


def sweep_views(seg) -> tuple:
    """The memoryviews ``sweep_slice`` reads: (refcount, usage, flags, control), made once
    per process (a memoryview index costs a fraction of a numpy scalar read)."""
    return (memoryview(seg.buf_refcount), memoryview(seg.buf_usage),
            memoryview(seg.buf_flags), memoryview(seg.control))


def sweep_slice(views, strategy_lock, nbuffers: int, step: int) -> tuple[int, int, bool]:
    """Advance the clock hand over at most ``step`` buffers, stopping past the first candidate.

    ``views``: ``sweep_views(seg)``.  Returns (candidate buffer id or -1, number of pinned
    buffers passed, whether any usage count was decremented).  A candidate is unpinned with
    usage 0 and no I/O in progress at the moment of looking; the caller must re-check it
    under its partition lock.  Only buffers the hand actually passes have their usage count
    decremented, as in PostgreSQL.
    """
    refcount, usage, flags, control = views
    step = min(step, nbuffers)
    pinned = 0
    decremented = False
    with strategy_lock:
        hand = control[0]
        b = hand % nbuffers
        for k in range(step):
            if refcount[b]:
                pinned += 1
            else:
                u = usage[b]
                if u:
                    usage[b] = u - 1
                    decremented = True
                elif not flags[b] & BM_IO_IN_PROGRESS:
                    control[0] = hand + k + 1   # the hand stops right after a candidate
                    return b, pinned, decremented
            b += 1
            if b == nbuffers:
                b = 0
        control[0] = hand + step
    return -1, pinned, decremented
