"""The shared buffer manager (``bufmgr.c``): pins, content locks, reads, write-back.

Every page any process touches is in a buffer slot of the shared segment.  A backend
*pins* a buffer to keep it from being replaced, takes a *content lock* (share or
exclusive) while it reads or changes the page, and unpins it when done.  One
``BufferManager`` object exists per backend (a session, a benchmark client, a parallel
worker); all of them in all processes share the arrays of ``minidb.shmem``.

Buffer states (``buf_flags``) and their transitions::

    state                 flags                        next state, by
    -------------------   --------------------------   ----------------------------------
    free                  0                            reading: _install()
    reading / zeroing     TAG_VALID|IO_IN_PROGRESS     valid: _finish_io(ok)
                                                       free: _finish_io(failed)
    valid, clean          TAG_VALID|VALID              valid, dirty: mark_dirty()
                                                       reading (new tag): _install()
                                                       free: drop_relation_buffers()
    valid, dirty          TAG_VALID|VALID|DIRTY        writing: _flush()
    writing               ...|VALID|IO_IN_PROGRESS     valid, clean or dirty: _flush()

Rules (PostgreSQL's ``storage/buffer/README``):
  1. Look at a page only while holding a pin on its buffer.
  2. Read tuples under a share content lock; after deciding a tuple is visible, its data
     may be used with only the pin held (nothing moves tuples without a cleanup lock).
  3. Change a page (add a tuple, set xmax) only under an exclusive content lock, and mark
     the buffer dirty before releasing it.
  4. Hint bits may be set under a share lock (``mark_dirty_hint``).
  5. Move or remove tuples only under a *cleanup lock*: exclusive, and no other backend
     holds a pin (``try_cleanup_lock`` / ``lock_for_cleanup``).

Pins are counted twice, as in PostgreSQL: ``backend_pins[slot, buf]`` is this backend's
private count, and the shared ``buf_refcount`` counts backends holding at least one pin.
The private rows live in shared memory only so that the instance can release the pins of
a backend that died (``release_all(slot)``).

Waiting never polls: a backend that must wait for a content lock, for another backend's
read of the page (``IO_IN_PROGRESS``) or for a cleanup lock sets its bit in
``buf_waiters[buf]`` and sleeps on its own semaphore; the releaser wakes the whole mask,
and the sleepers re-check.  Every wait is bounded by ``lock_wait_timeout_ms`` and then
raises ``LockNotAvailable`` naming the buffer, so a bug is an error, never a hang.

Fused access (PostgreSQL 14+): ``pin_lock`` pins and content-locks a page found valid in the
pool in one critical section of its partition lock, ``unlock_unpin`` releases both in one, and
``read_recent`` (ReadRecentBuffer) pins and locks through a buffer number the caller
remembered, checked against the tag, without a mapping lookup.  Counts are those of the
pairs.  These and ``pin`` / ``unpin`` / ``lock`` / ``unlock`` are written out inline: the
tag hashed and looked up in place, the partition lock taken through ``LWLock.fast()`` (the
semaphore's try and post, the holder recorded and cleared between them as ``acquire`` /
``release`` do), so a hit spends no Python frame on the lock, the hash or the lookup.
Cold reads: a buffer never handed out comes from the free list before the clock sweep runs
(``freelist.next_never_used``); a miss seen by ``pin``'s inline lookup goes straight to a
victim (``_install`` looks the tag up again under the lock); the partition locks of
``_claim``, ``_install`` and ``_finish_io`` are taken inline too (``_install``'s mapping
lookup, delete and insert as well); a single page read is verified in scalar code
(``_verify_one``: the same checks and outcome as a batch of one, the checksum over a uint64
view kept per buffer, compared with pd_checksum first); and ``pin_lock``'s miss takes the
content lock in the critical section that marks the page valid (``_finish_io``; nobody can
hold the content lock of a page still being read in), one partition-lock round trip
instead of two.

Departures: the descriptor is guarded by the mapping partition lock of its tag instead of
a per-buffer header spinlock and atomics (Python has neither; one short critical section
per pin is what both cost); lookups, pins and share locks of a run of pages are done in
vectorized batches (``pin_run``, ``lock_share_batch``) so that a scan costs a few
microseconds per 256 pages - a batch tries its partition locks, does the pages of the free
ones, and only then waits for the busy ones (``_by_partition``: no convoy of two scans
behind each other's whole batch, where PostgreSQL's share-mode lookups and atomic pins never
wait at all); reads of consecutive missing pages are combined into one
``preadv`` of at most ``io_combine_limit`` blocks (1: one 8 kB read per block, as
PostgreSQL 16 and older), and the pages of a batch of reads are verified together
(``start_read_batch`` / ``finish_reads``: a parallel scan's single-block runs are read one
at a time but checksummed in one vectorized pass).  There is no background writer: dirty pages are written at eviction,
checkpoint and close.
"""

from __future__ import annotations

import struct
import sys
import time

import numpy as np

from minidb.config import Settings
from minidb.errors import DataCorrupted, InsufficientResources, LockNotAvailable
from minidb.shmem import CURRENT_PID, LWLOCK_POLL_S, C
from minidb.storage import page as pg
from minidb.storage.buf_internals import (BM_DIRTY, BM_IO_IN_PROGRESS, BM_MAX_USAGE_COUNT,
                                          BM_PIN_COUNT_WAITER, BM_TAG_VALID, BM_VALID)
from minidb.storage.buf_table import _GOLDEN, _M64, BufTable, make_tag, tag_parts
from minidb.storage.freelist import SWEEP_STEP, AccessStrategy, next_never_used, sweep_slice, \
    sweep_views
from minidb.storage.smgr import MAIN_FORKNUM, Smgr

# content lock modes (also the values stored in backend_locks)
UNLOCKED, SHARE, EXCLUSIVE = 0, 1, 2

_HIT = C["buffers_hit"]
_READ = C["buffers_read"]
_EVICTED = C["buffers_evicted"]
_PART_WAITS = C["partition_lock_busy"]
_PART_TRIES = 2  # rounds of try-locks a batch makes before it waits for a busy partition
_LSN = struct.Struct("<Q")  # pd_lsn, at offset 0 of every page
_CKS = struct.Struct("<H")  # pd_checksum, at offset 8


class BufferManager:
    """One backend's handle on the shared buffer pool."""

    def __init__(self, seg, locks, smgr: Smgr, settings: Settings, slot: int,
                 describe_rel=None, wal=None):
        self.seg = seg
        self.wal = wal  # minidb.wal.xlog.WalHandle, or None (no logging: tools and tests)
        self.locks = locks
        self.part_locks = locks.partition
        self.smgr = smgr
        smgr.share_sizes(seg, locks)  # relation sizes cached, kept right across processes
        self._settings = settings  # read here only: callers use backend.settings
        self.slot = slot
        self.bit = 1 << slot
        self.nbuffers = seg.buf_pages.shape[0]
        self.table = BufTable(seg, len(locks.partition))
        self.describe_rel = describe_rel or (lambda rfn: f"file base/{rfn}")
        self.stats = seg.stats[slot]
        # the same row as a memoryview: ``counts[C[name]] += 1`` is the cheap way to count
        self.counts = memoryview(self.stats)
        self.pins = seg.backend_pins[slot]
        self.held = seg.backend_locks[slot]
        # memoryviews for the scalar paths (about twice as fast as numpy element access)
        self._pins = memoryview(self.pins)
        self._held = memoryview(self.held)
        self._refcount = memoryview(seg.buf_refcount)
        self._flags = memoryview(seg.buf_flags)
        self._part = memoryview(seg.buf_part)
        self._tag = memoryview(seg.buf_tag)
        self._usage = memoryview(seg.buf_usage)
        self._sweep_views = sweep_views(seg)
        self._never_used = memoryview(seg.buf_never_used)
        self._shared = memoryview(seg.buf_lock_shared)
        self._excl = memoryview(seg.buf_lock_excl)
        self._waiters = memoryview(seg.buf_waiters)
        # the hot paths (pin_lock, read_recent, unlock_unpin, pin, unpin, lock, unlock)
        # take a partition lock inline (``LWLock.fast``: the semaphore's own methods and
        # the holder record, no Python frame of the lock) and hash and look the tag up
        # inline (``BufTable.hash`` / ``lookup``)
        self._psem = []
        for lk in locks.partition:
            try_, give, hw, idx = lk.fast()
            assert hw is locks.holder_words
            self._psem.append((try_, give, idx))
        self._hw = locks.holder_words
        self._pidc = CURRENT_PID
        self._heads = memoryview(seg.map_heads)
        self._next = memoryview(seg.buf_next)
        self._gmask = self.table.group_mask
        self._npart = self.table.npart
        self._pages = [None] * self.nbuffers
        self._words = [None] * self.nbuffers   # uint64 views of the pages (_page_words)
        # reads of a read batch not verified yet (start_read_batch), else None
        self._pending: list | None = None
        # LimitAdditionalPins: a batch may pin at most this backend's fair share of the pool
        self.max_batch_pins = max(1, self.nbuffers // seg.backend_pins.shape[0])

    # ------------------------------------------------------------------------------------
    # small helpers
    def page(self, buf: int) -> np.ndarray:
        """The 8 KiB page of a pinned buffer, as a writable uint8 view."""
        return self.seg.buf_pages[buf]

    def page_lsn(self, buf: int) -> int:
        """pd_lsn of a pinned buffer's page (BufferGetLSN; read under its content lock)."""
        return _LSN.unpack_from(self._page_mv(buf), 0)[0]

    def page_view(self, buf: int) -> memoryview:
        """The page of a pinned buffer as a writable memoryview (kept per buffer): struct
        reads on it cost about half of those on the numpy row ``page`` gives."""
        return self._page_mv(buf)

    def _page_mv(self, buf: int) -> memoryview:
        mv = self._pages[buf]
        if mv is None:
            mv = self._pages[buf] = memoryview(self.seg.buf_pages[buf])
        return mv

    def buffer_tag(self, buf: int) -> tuple[int, int, int]:
        """(relfilenode, fork, block) of a pinned buffer."""
        return tag_parts(self._tag[buf])

    def _page_words(self, buf: int) -> np.ndarray:
        """The page of ``buf`` as 1,024 little-endian uint64 words (a view kept per buffer,
        as ``_page_mv``'s memoryview): what the single-page checksum reads."""
        w = self._words[buf]
        if w is None:
            w = self._words[buf] = self.seg.buf_pages[buf].view("<u8")
        return w

    def _trace(self, msg: str) -> None:
        if self._settings.trace_buffers:
            print(f"[bufmgr slot {self.slot}] {msg}", file=sys.stderr)

    def _lock_buf_part(self, buf: int) -> int:
        """Lock the partition guarding ``buf``'s descriptor; return its number (release
        with ``part_locks[p].release()`` or ``_unlock_part(p)``)."""
        part, psem, hw = self._part, self._psem, self._hw
        while True:
            p = part[buf]
            try_, give, idx = psem[p]
            if not try_(False):
                self.part_locks[p].acquire()
            hw[idx] = self._pidc[0]
            if part[buf] == p:
                return p
            hw[idx] = 0
            give()

    def _unlock_part(self, p: int) -> None:
        """Release partition lock ``p`` (``part_locks[p].release()``, inline)."""
        _, give, idx = self._psem[p]
        self._hw[idx] = 0
        give()

    def _by_partition(self, parts: np.ndarray, work) -> None:
        """Run ``work(ix)`` over a batch whose buffers (or tags) fall in partitions
        ``parts``, each element under its partition's lock: ``ix`` is None for the whole
        batch, else the indexes of the elements one round covers.

        Free partitions first, busy ones after (no convoy): every lock is first *tried*;
        when all are free (the usual case) ``work(None)`` runs once under them all.  When
        some are held by another backend, ``work`` runs on the elements of the partitions
        we got, those are released, the busy ones are tried once more (``_PART_TRIES``
        rounds in all), and only then do we wait for those still busy (taken in
        ascending order while holding nothing, so no deadlock) and run ``work`` on the
        rest.  Two participants of a parallel scan thus never sleep on each other's whole
        batch: by the time the first has done its free partitions the other has usually
        let the busy ones go.  Elements of different partitions are independent (each
        descriptor and each mapping chain is guarded by one partition), so splitting a
        batch in two critical sections changes nothing a reader can see."""
        seen = np.zeros(self._npart, dtype=bool)
        seen[parts] = True
        pending = np.flatnonzero(seen).tolist()
        psem, hw, pid = self._psem, self._hw, self._pidc[0]
        for attempt in range(_PART_TRIES + 1):
            got: list[int] = []
            busy: list[int] = []
            if attempt < _PART_TRIES:
                for p in pending:
                    try_, give, idx = psem[p]
                    if try_(False):
                        hw[idx] = pid
                        got.append(p)
                    else:
                        busy.append(p)
            try:
                if attempt == _PART_TRIES:  # still busy after the tries: wait, in order
                    for p in pending:
                        try_, give, idx = psem[p]
                        if not try_(False):
                            self.part_locks[p].acquire()
                        hw[idx] = pid
                        got.append(p)
                if not busy and attempt == 0:
                    work(None)  # the usual case: every partition was free
                    return
                if got:
                    seen[:] = False
                    seen[got] = True
                    work(np.flatnonzero(seen[parts]))
            finally:
                for p in got:
                    _, give, idx = psem[p]
                    hw[idx] = 0
                    give()
            if not busy:
                return
            if attempt == 0:
                self.counts[_PART_WAITS] += len(busy)
            pending = busy

    def _wake(self, mask: int) -> None:
        sem = self.locks.sem
        slot = 0
        while mask:
            if mask & 1:
                sem[slot].release()
            mask >>= 1
            slot += 1

    def _sleep(self, buf: int, deadline: float, what: str) -> None:
        """Sleep on our semaphore (our bit is already in buf_waiters[buf]), looking at the
        crash flag (and, in a forked child, the owner) every ``LWLOCK_POLL_S``: a process
        that died holding an LWLock may have held the buffer's content lock too, and the
        reaper then frees nothing (CrashShutdown, 57P02, instead of a timeout)."""
        sem = self.locks.sem[self.slot]
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or sem.acquire(timeout=min(left, LWLOCK_POLL_S)):
                break
            self.locks.check_crash()
            if self.locks.check_owner is not None:
                self.locks.check_owner()
        if left <= 0:
            p = self._lock_buf_part(buf)
            self._waiters[buf] &= ~self.bit
            self.part_locks[p].release()
            rfn, fork, block = self.buffer_tag(buf)
            raise LockNotAvailable(
                f"timed out after {self._settings.lock_wait_timeout_ms} ms waiting for {what} "
                f"of block {block} of relation {self.describe_rel(rfn)}")

    def _deadline(self) -> float:
        return time.monotonic() + self._settings.lock_wait_timeout_ms / 1000.0

    # ------------------------------------------------------------------------------------
    # pinning
    def pin(self, rfn: int, block: int, fork: int = MAIN_FORKNUM,
            strategy: AccessStrategy | None = None) -> int:
        """Pin block ``block`` of a relation fork, reading it in if needed (ReadBuffer)."""
        tag = (rfn << 34) | (fork << 32) | block  # make_tag
        h = ((tag >> 4) * _GOLDEN) & _M64         # BufTable.hash, inline
        g = (h ^ (h >> 29)) & self._gmask
        bucket, p = (g << 4) | (tag & 15), g % self._npart
        missed = False
        if strategy is None:
            # the usual case, a valid page in the pool, inline: the loop below does the
            # same (``_pin_locked``) through the helpers
            try_, give, idx = self._psem[p]
            if not try_(False):
                self.part_locks[p].acquire()
            hw = self._hw
            hw[idx] = self._pidc[0]
            tags, nxt = self._tag, self._next
            b = self._heads[bucket]
            while b >= 0 and tags[b] != tag:
                b = nxt[b]
            if b >= 0 and self._flags[b] & BM_VALID:
                pins = self._pins
                mine = pins[b]
                if mine == 0:
                    self._refcount[b] += 1
                pins[b] = mine + 1
                u = self._usage[b]
                if u < BM_MAX_USAGE_COUNT:
                    self._usage[b] = u + 1
                hw[idx] = 0
                give()
                self.counts[_HIT] += 1
                return b
            hw[idx] = 0
            give()
            # not in the pool a moment ago: straight to a victim (``_install`` looks the
            # tag up again under the lock, and pins the buffer another backend put it in)
            missed = b < 0
        return self._pin_slow(rfn, block, fork, strategy, tag, bucket, p, missed)[0]

    def _pin_slow(self, rfn: int, block: int, fork: int, strategy, tag: int, bucket: int,
                  p: int, missed: bool, lock_mode: int = UNLOCKED) -> tuple[int, bool]:
        """``pin`` past its inline hit: (buffer, locked).  ``missed``: the tag was not in
        the mapping a moment ago (go straight to a victim).  With ``lock_mode``, a page
        this call reads in itself is content-locked in that mode in the step that makes it
        valid (``_finish_io``: no other backend can hold its content lock before then),
        when the lock is free: ``locked`` says so; otherwise the caller locks."""
        deadline = None
        while True:
            if missed:
                missed = False
                b = -1
            else:
                lk = self.part_locks[p]
                lk.acquire()
                b = self.table.lookup(tag, bucket)
                if b >= 0:
                    self._pin_locked(b, strategy)
                    flags = self._flags[b]
                lk.release()
            if b >= 0:
                if flags & BM_VALID:
                    self.counts[_HIT] += 1
                    return b, False
                # another backend is reading it in: wait, then look again
                self._flush_pending_or_unpin(b)
                deadline = deadline or self._deadline()
                if self._wait_io(b, deadline):
                    self.counts[_HIT] += 1
                    return b, False
                self.unpin(b)  # the read failed and the buffer was dropped; retry
                continue
            b, mine = self._alloc(tag, bucket, p, strategy)
            if mine:
                return b, self._read_run(rfn, fork, block, [b], lock_mode)
            if self._flags[b] & BM_VALID:  # someone else loaded it meanwhile
                self.counts[_HIT] += 1
                return b, False
            self._flush_pending_or_unpin(b)
            deadline = deadline or self._deadline()
            if self._wait_io(b, deadline):
                self.counts[_HIT] += 1
                return b, False
            self.unpin(b)

    def _flush_pending_or_unpin(self, b: int) -> None:
        """Before waiting for another backend's read of pinned ``b``: finish this
        backend's pending reads (a read batch); if that fails, unpin ``b`` too."""
        if self._pending:
            try:
                self._flush_pending()
            except BaseException:
                self.unpin(b)
                raise

    def _pin_locked(self, b: int, strategy, bump: bool = True) -> None:
        """Take one pin on ``b`` (its partition lock held)."""
        mine = self._pins[b]
        if mine == 0:
            self._refcount[b] += 1
        self._pins[b] = mine + 1
        u = self._usage[b]
        if not bump:
            pass
        elif strategy is None:
            if u < BM_MAX_USAGE_COUNT:
                self._usage[b] = u + 1
        elif u == 0:
            self._usage[b] = 1

    def unpin(self, b: int) -> None:
        mine = self._pins[b]
        assert mine > 0, f"unpin of buffer {b} not pinned by slot {self.slot}"
        if mine > 1:
            self._pins[b] = mine - 1
            return
        part, psem, hw = self._part, self._psem, self._hw
        while True:  # _lock_buf_part
            p = part[b]
            try_, give, idx = psem[p]
            if not try_(False):
                self.part_locks[p].acquire()
            hw[idx] = self._pidc[0]
            if part[b] == p:
                break
            hw[idx] = 0
            give()
        self._pins[b] = 0
        rc = self._refcount[b] - 1
        self._refcount[b] = rc
        wake = 0
        if rc <= 1 and self._flags[b] & BM_PIN_COUNT_WAITER:
            wake = self._waiters[b]
            self._waiters[b] = 0
            self._flags[b] &= ~BM_PIN_COUNT_WAITER
        hw[idx] = 0
        give()
        if wake:
            self._wake(wake)

    # ------------------------------------------------------------------------------------
    # fused pin + content lock (PostgreSQL 14+'s one-trip buffer access)
    def pin_lock(self, rfn: int, block: int, mode: int, fork: int = MAIN_FORKNUM) -> int:
        """Pin a block and take its content lock in ``mode`` (``pin`` then ``lock``).

        A page found valid in the pool whose content lock is free is pinned and locked in
        one critical section of its mapping partition (one partition-lock round trip
        instead of two); anything else (a miss, a read in progress, a lock to wait for)
        goes the long way, with the same counts.  The common path is written out inline
        (the partition lock as ``LWLock.fast`` describes, ``BufTable.hash`` / ``lookup``,
        ``_pin_then_lock``): no Python call besides the semaphore's two."""
        tag = (rfn << 34) | (fork << 32) | block  # make_tag
        h = ((tag >> 4) * _GOLDEN) & _M64         # BufTable.hash
        g = (h ^ (h >> 29)) & self._gmask
        try_, give, idx = self._psem[g % self._npart]
        if not try_(False):
            self.part_locks[g % self._npart].acquire()
        hw = self._hw
        hw[idx] = self._pidc[0]
        tags, nxt = self._tag, self._next           # BufTable.lookup
        b = self._heads[(g << 4) | (tag & 15)]
        while b >= 0 and tags[b] != tag:
            b = nxt[b]
        if b >= 0 and self._flags[b] & BM_VALID and self._held[b] == UNLOCKED:
            # _pin_then_lock: a pin (a hit), then the content lock if it is free
            pins = self._pins
            mine = pins[b]
            if mine == 0:
                self._refcount[b] += 1
            pins[b] = mine + 1
            u = self._usage[b]
            if u < BM_MAX_USAGE_COUNT:
                self._usage[b] = u + 1
            if self._excl[b] < 0 and (mode == SHARE or self._shared[b] == 0):
                if mode == SHARE:
                    self._shared[b] += 1
                else:
                    self._excl[b] = self.slot
                self._held[b] = mode
                hw[idx] = 0
                give()
                self.counts[_HIT] += 1
                return b
            hw[idx] = 0
            give()
            self.counts[_HIT] += 1
        else:
            hw[idx] = 0
            give()
            if b < 0:
                # a miss: read in, and locked in the step that makes the page valid
                b, locked = self._pin_slow(rfn, block, fork, None, tag,
                                           (g << 4) | (tag & 15), g % self._npart, True, mode)
                if locked:
                    return b
            else:
                b = self.pin(rfn, block, fork)
        try:
            self.lock(b, mode)
        except BaseException:
            self.unpin(b)
            raise
        return b

    def _pin_then_lock(self, b: int, mode: int, lk) -> bool:
        """With ``b``'s partition lock ``lk`` held and ``b`` valid: pin it (a hit) and take
        its content lock in the same critical section if the lock is free; releases ``lk``.
        False: pinned but not locked (the caller waits for the lock the long way).
        (``pin_lock`` and ``read_recent`` do this inline.)"""
        self._pin_locked(b, None)
        locked = self._excl[b] < 0 and (mode == SHARE or self._shared[b] == 0)
        if locked:
            if mode == SHARE:
                self._shared[b] += 1
            else:
                self._excl[b] = self.slot
            self._held[b] = mode
        lk.release()
        self.counts[_HIT] += 1
        return locked

    def read_recent(self, rfn: int, block: int, hint: int, mode: int,
                    fork: int = MAIN_FORKNUM) -> int | None:
        """``pin_lock`` through a remembered buffer number (ReadRecentBuffer): if buffer
        ``hint`` still holds the block, valid, it is pinned and locked without a mapping
        lookup; otherwise None (nothing pinned) and the caller uses ``pin_lock``.  (The
        common path inline, as in ``pin_lock``.)"""
        tag = (rfn << 34) | (fork << 32) | block  # make_tag
        if not 0 <= hint < self.nbuffers or self._tag[hint] != tag:
            return None  # (an unlocked look first; checked again under the lock)
        part, psem, hw = self._part, self._psem, self._hw
        while True:  # _lock_buf_part
            p = part[hint]
            try_, give, idx = psem[p]
            if not try_(False):
                self.part_locks[p].acquire()
            hw[idx] = self._pidc[0]
            if part[hint] == p:
                break
            hw[idx] = 0
            give()
        if not (self._tag[hint] == tag and self._flags[hint] & BM_VALID
                and self._held[hint] == UNLOCKED):
            hw[idx] = 0
            give()
            return None
        pins = self._pins                         # _pin_then_lock
        mine = pins[hint]
        if mine == 0:
            self._refcount[hint] += 1
        pins[hint] = mine + 1
        u = self._usage[hint]
        if u < BM_MAX_USAGE_COUNT:
            self._usage[hint] = u + 1
        if self._excl[hint] < 0 and (mode == SHARE or self._shared[hint] == 0):
            if mode == SHARE:
                self._shared[hint] += 1
            else:
                self._excl[hint] = self.slot
            self._held[hint] = mode
            hw[idx] = 0
            give()
            self.counts[_HIT] += 1
            return hint
        hw[idx] = 0
        give()
        self.counts[_HIT] += 1
        try:
            self.lock(hint, mode)
        except BaseException:
            self.unpin(hint)
            raise
        return hint

    def unlock_unpin(self, b: int) -> None:
        """Release the content lock and one pin of ``b`` (``unlock`` then ``unpin``) in one
        critical section of its partition (taken inline, as in ``pin_lock``)."""
        held = self._held
        mode = held[b]
        assert mode != UNLOCKED, "unlock of a buffer not locked"
        pins = self._pins
        mine = pins[b]
        assert mine > 0, f"unpin of buffer {b} not pinned by slot {self.slot}"
        part, psem, hw = self._part, self._psem, self._hw
        while True:  # _lock_buf_part
            p = part[b]
            try_, give, idx = psem[p]
            if not try_(False):
                self.part_locks[p].acquire()
            hw[idx] = self._pidc[0]
            if part[b] == p:
                break
            hw[idx] = 0
            give()
        shared = self._shared
        if mode == SHARE:
            shared[b] -= 1
        else:
            self._excl[b] = -1
        held[b] = UNLOCKED
        waiters = self._waiters
        wake = 0
        if waiters[b] and shared[b] == 0:
            wake = waiters[b]
            waiters[b] = 0
        if mine > 1:
            pins[b] = mine - 1
        else:
            pins[b] = 0
            rc = self._refcount[b] - 1
            self._refcount[b] = rc
            if rc <= 1 and self._flags[b] & BM_PIN_COUNT_WAITER:
                wake |= waiters[b]
                waiters[b] = 0
                self._flags[b] &= ~BM_PIN_COUNT_WAITER
        hw[idx] = 0
        give()
        if wake:
            self._wake(wake)

    def incr_pin(self, b: int) -> None:
        """Take another pin on a buffer this backend already pins (IncrBufferRefCount)."""
        assert self._pins[b] > 0
        self._pins[b] += 1

    # ------------------------------------------------------------------------------------
    # batches of pages (sequential scans)
    def pin_run(self, rfn: int, start: int, max_n: int, fork: int = MAIN_FORKNUM,
                strategy: AccessStrategy | None = None, share: bool = False) -> np.ndarray:
        """Pin consecutive blocks from ``start``: returns the buffers of a prefix of them.

        Pages already in the pool are looked up and pinned in one vectorized step.  The
        prefix stops before its number of missing pages exceeds half the ring (with a
        strategy), so a ring scan never needs more buffers at once than its ring has.
        Missing pages are read with one ``preadv`` per run of consecutive blocks.  At most
        ``max_batch_pins`` pages are pinned (PostgreSQL's LimitAdditionalPins: a backend
        may pin its fair share of the pool, NBuffers / backend slots, at once).

        ``share``: also share-lock every buffer returned (``lock_share_batch`` fused in):
        the pages found in the pool and not exclusively locked are locked in the same
        critical sections of their partitions as they are pinned (a warm batch costs one
        pass over its partition locks, not two); the pages read, and those another
        backend holds exclusively, are locked one by one afterwards.  Release them with
        ``unlock_unpin_batch``.
        """
        max_n = max(1, min(max_n, self.max_batch_pins))
        blocks = np.arange(start, start + max_n, dtype=np.int64)
        tags = blocks | make_tag(rfn, fork, 0)
        buckets, parts = self.table.hash_vec(tags)
        seg, pins = self.seg, self.pins
        half = max(1, strategy.nbuffers // 2) if strategy is not None else 0
        bufs = np.empty(max_n, dtype=np.int64)
        hit = np.empty(max_n, dtype=bool)
        n = max_n
        nlocked = 0

        def pin_hits(ix) -> None:
            # under the partition locks of the tags ``ix`` (None: all): look them up, pin
            # the valid pages found (and share-lock them, if asked)
            nonlocal n, nlocked
            if ix is None:
                found = self.table.probe_vec(tags, buckets)
            else:
                found = self.table.probe_vec(tags[ix], buckets[ix])
            h = found >= 0
            h[h] = (seg.buf_flags[found[h]] & BM_VALID) != 0
            if ix is None:
                bufs[:], hit[:] = found, h
                # the whole batch in one round: cut it before pinning (see below)
                if half and max_n - int(np.count_nonzero(h)) > half:
                    n = int(np.flatnonzero(~h)[half])
                hb = found[:n][h[:n]]
            else:
                bufs[ix], hit[ix] = found, h
                hb = found[h]
            if hb.size:
                mine = pins[hb]
                first = hb[mine == 0]
                seg.buf_refcount[first] += 1
                pins[hb] = mine + 1
                u = seg.buf_usage[hb]
                if strategy is None:
                    seg.buf_usage[hb] = np.minimum(u + 1, BM_MAX_USAGE_COUNT)
                else:
                    seg.buf_usage[hb] = np.maximum(u, 1)
                if share:  # lock_share_batch's pass, under the same partition locks
                    free = seg.buf_lock_excl[hb] < 0
                    fb = hb if free.all() else hb[free]
                    seg.buf_lock_shared[fb] += 1
                    self.held[fb] = SHARE
                    nlocked += fb.size
                pinned.append(hb)

        pinned: list[np.ndarray] = []
        try:
            self._by_partition(parts, pin_hits)
        except BaseException:  # a wait for a busy partition failed: undo the first round
            for hb in pinned:
                self.release_batch(hb)
            raise
        miss_idx = np.flatnonzero(~hit[:n])
        if n == max_n and half and miss_idx.size > half:
            # done in two rounds (a partition was busy): every hit got pinned; cut now
            # and let go of the hits past the cut
            n = int(miss_idx[half])
            miss_idx = miss_idx[:half]
            extra = bufs[n:][hit[n:]]
            if share:
                nlocked -= int(np.count_nonzero(self.held[extra] == SHARE))
            self.release_batch(extra)
        hb = bufs[:n][hit[:n]]
        self.stats[C["buffers_hit"]] += int(hb.size)
        bufs = bufs[:n]
        if miss_idx.size:
            try:
                self._read_missing(rfn, fork, blocks, bufs, miss_idx, strategy)
            except BaseException:
                self.release_batch(bufs[hit[:n]])
                raise
        if share and nlocked != n:
            try:
                self._share_lock_in_order(bufs)
            except BaseException:
                self.release_batch(bufs)
                raise
        return bufs

    def release_batch(self, bufs: np.ndarray) -> None:
        """Unlock the locked buffers of a pinned batch and unpin them all (a batch from
        ``pin_run``, with ``share`` or not, on an error path)."""
        locked = self.held[bufs] != UNLOCKED
        self.unlock_unpin_batch(bufs[locked])
        self.unpin_batch(bufs[~locked])

    def _read_missing(self, rfn, fork, blocks, bufs, miss_idx, strategy) -> None:
        """Pin the missing blocks of a run in place (``bufs[i]`` for each ``i`` in
        ``miss_idx``): allocate them all, read the runs whose I/O we own (in block order,
        each run cut into reads of at most ``io_combine_limit`` blocks), verify what was
        read all at once, then wait for the pages other backends are reading.  Reading
        (and finishing) ours before waiting for theirs means two scans can never wait for
        each other's reads."""
        owned: list[int] = []   # indexes whose read we own and have not issued
        others: list[int] = []  # indexes pinned that someone else had or is reading
        issued: list[int] = []  # indexes read by us (pending verification, or valid)
        local = self._pending is None
        if local:
            self._pending = []
        limit = max(1, int(self._settings.io_combine_limit))
        try:
            for i in miss_idx.tolist():
                tag = make_tag(rfn, fork, int(blocks[i]))
                bucket, p = self.table.hash(tag)
                b, mine = self._alloc(tag, bucket, p, strategy)
                bufs[i] = b
                (owned if mine else others).append(i)
            while owned:
                n = 1
                while n < len(owned) and n < limit and owned[n] == owned[0] + n:
                    n += 1
                run, owned = owned[:n], owned[n:]
                # _read_run reads and queues the run for verification; if the read
                # itself fails, it finishes (failed) and unpins the run's buffers
                self._read_run(rfn, fork, int(blocks[run[0]]), [int(bufs[i]) for i in run])
                issued.extend(run)
            if local:
                runs, self._pending = self._pending, None
                self._verify_runs(runs)
            elif others:
                self._flush_pending()
            while others:
                i = others[0]
                b = int(bufs[i])
                if self._flags[b] & BM_VALID or self._wait_io(b, self._deadline()):
                    self.stats[C["buffers_hit"]] += 1
                    others.pop(0)
                    continue
                self.unpin(b)  # their read failed: read it ourselves
                others.pop(0)
                bufs[i] = self.pin(rfn, int(blocks[i]), fork, strategy)
                issued.append(i)
        except BaseException:
            # fail every read not verified yet (a batch's earlier ones too: finishing
            # before unpinning, so that nobody can take a buffer with I/O in progress)
            self.abandon_reads()
            if not local:
                self._pending = []
            for i in owned:
                self._finish_io(int(bufs[i]), False)
                self.unpin(int(bufs[i]))
            for i in others:
                self.unpin(int(bufs[i]))
            for i in issued:  # read by us, valid or failed: still pinned by us
                b = int(bufs[i])
                if b >= 0 and self._pins[b]:
                    self.unpin(b)
            raise
        finally:
            if local:
                self._pending = None

    # deferred verification: a batch of reads issued one at a time, verified together
    def start_read_batch(self) -> None:
        """Until ``finish_reads``: pages this backend reads are read at once, in the
        order asked (the I/O model and the file see each request), but verified and made
        valid only by ``finish_reads``, all together (one vectorized checksum pass).  A
        caller must not look at a page pinned meanwhile before ``finish_reads``; before
        this backend waits for another's read, its own pending reads are finished first
        (so two backends never wait for each other)."""
        if self._pending is None:
            self._pending = []

    def pending_reads(self) -> int:
        """Pages read in the current read batch and not verified yet."""
        return sum(len(bufs) for _, _, bufs, _ in self._pending) if self._pending else 0

    def finish_reads(self) -> None:
        """Verify and make valid the pages read since ``start_read_batch``; ends the
        batch.  On a bad page the batch's reads all fail (their buffers stay pinned: the
        caller unpins them) and ``DataCorrupted`` is raised."""
        runs, self._pending = self._pending, None
        if runs:
            self._verify_runs(runs)

    def abandon_reads(self) -> None:
        """Fail the reads pending since ``start_read_batch`` (on an error; the caller
        still unpins); ends the batch."""
        runs, self._pending = self._pending, None
        for _, _, bufs, _ in runs or ():
            for b in bufs:
                if self._flags[b] & BM_IO_IN_PROGRESS:
                    self._finish_io(b, False)

    def _flush_pending(self) -> None:
        """Verify the reads pending so far (before waiting on another backend's read);
        the batch goes on."""
        if self._pending:
            runs, self._pending = self._pending, []
            self._verify_runs(runs)

    def unpin_batch(self, bufs: np.ndarray) -> None:
        if not len(bufs):
            return
        bufs = np.asarray(bufs, dtype=np.int64)
        mine = self.pins[bufs]
        last = mine == 1
        self.pins[bufs[~last]] = mine[~last] - 1
        lb = bufs[last]
        if not lb.size:
            return
        seg = self.seg
        parts = seg.buf_part[lb]
        masks = 0
        moved: list[np.ndarray] = []

        def unpin_last(ix) -> None:
            nonlocal masks
            b, pt = (lb, parts) if ix is None else (lb[ix], parts[ix])
            mv = seg.buf_part[b] != pt  # a failed read may have retagged
            if mv.any():
                moved.append(b[mv])
                b = b[~mv]
            self.pins[b] = 0
            seg.buf_refcount[b] -= 1
            for w in b[(seg.buf_flags[b] & BM_PIN_COUNT_WAITER) != 0].tolist():
                if self._refcount[w] <= 1:
                    masks |= self._waiters[w]
                    self._waiters[w] = 0
                    self._flags[w] &= ~BM_PIN_COUNT_WAITER

        self._by_partition(parts, unpin_last)
        for b in (np.concatenate(moved).tolist() if moved else ()):
            self.unpin(b)
        if masks:
            self._wake(masks)

    # ------------------------------------------------------------------------------------
    # content locks
    def lock(self, b: int, mode: int) -> None:
        """Take the content lock of a pinned buffer in SHARE or EXCLUSIVE mode."""
        assert self._pins[b] > 0, "content lock on an unpinned buffer"
        assert self._held[b] == UNLOCKED, "content lock taken twice"
        deadline = None
        part, psem, hw = self._part, self._psem, self._hw
        while True:
            while True:  # _lock_buf_part
                p = part[b]
                try_, give, idx = psem[p]
                if not try_(False):
                    self.part_locks[p].acquire()
                hw[idx] = self._pidc[0]
                if part[b] == p:
                    break
                hw[idx] = 0
                give()
            if self._excl[b] < 0 and (mode == SHARE or self._shared[b] == 0):
                if mode == SHARE:
                    self._shared[b] += 1
                else:
                    self._excl[b] = self.slot
                self._held[b] = mode
                hw[idx] = 0
                give()
                return
            self._waiters[b] |= self.bit
            hw[idx] = 0
            give()
            deadline = deadline or self._deadline()
            self._sleep(b, deadline, "an exclusive content lock" if mode == EXCLUSIVE
                        else "a share content lock")

    def conditional_lock(self, b: int, mode: int) -> bool:
        assert self._pins[b] > 0 and self._held[b] == UNLOCKED
        p = self._lock_buf_part(b)
        ok = self._excl[b] < 0 and (mode == SHARE or self._shared[b] == 0)
        if ok:
            if mode == SHARE:
                self._shared[b] += 1
            else:
                self._excl[b] = self.slot
            self._held[b] = mode
        self.part_locks[p].release()
        return ok

    def unlock(self, b: int) -> None:
        mode = self._held[b]
        assert mode != UNLOCKED, "unlock of a buffer not locked"
        part, psem, hw = self._part, self._psem, self._hw
        while True:  # _lock_buf_part
            p = part[b]
            try_, give, idx = psem[p]
            if not try_(False):
                self.part_locks[p].acquire()
            hw[idx] = self._pidc[0]
            if part[b] == p:
                break
            hw[idx] = 0
            give()
        if mode == SHARE:
            self._shared[b] -= 1
        else:
            self._excl[b] = -1
        self._held[b] = UNLOCKED
        wake = 0
        if self._waiters[b] and self._shared[b] == 0:
            wake = self._waiters[b]
            self._waiters[b] = 0
        hw[idx] = 0
        give()
        if wake:
            self._wake(wake)

    def try_cleanup_lock(self, b: int) -> bool:
        """Exclusive lock only if no other backend pins the buffer (ConditionalLockBufferForCleanup)."""
        if self._pins[b] != 1 or not self.conditional_lock(b, EXCLUSIVE):
            return False
        if self._refcount[b] == 1:
            return True
        self.unlock(b)
        return False

    def lock_for_cleanup(self, b: int) -> None:
        """Exclusive lock with no other pins, waiting for them to go (LockBufferForCleanup)."""
        deadline = self._deadline()
        while True:
            self.lock(b, EXCLUSIVE)
            p = self._lock_buf_part(b)
            if self._refcount[b] == 1:
                self.part_locks[p].release()
                return
            self._flags[b] |= BM_PIN_COUNT_WAITER
            self._waiters[b] |= self.bit
            self.part_locks[p].release()
            self.unlock(b)
            self._sleep(b, deadline, "a cleanup lock (other backends pin it)")

    def lock_share_batch(self, bufs: np.ndarray) -> None:
        """Share-lock many pinned buffers: one pass when none is exclusively locked."""
        bufs = np.asarray(bufs, dtype=np.int64)
        if not bufs.size:
            return
        seg = self.seg
        taken: list[np.ndarray] = []  # exclusively locked by another: one by one after

        def share_lock(ix) -> None:
            b = bufs if ix is None else bufs[ix]
            free = seg.buf_lock_excl[b] < 0
            if not free.all():
                taken.append(b[~free])
                b = b[free]
            seg.buf_lock_shared[b] += 1
            self.held[b] = SHARE

        self._by_partition(seg.buf_part[bufs], share_lock)
        if taken:
            self._share_lock_in_order(bufs)

    def _share_lock_in_order(self, bufs: np.ndarray) -> None:
        """Share-lock the buffers of a pinned batch (``bufs`` in ascending block order, as
        ``pin_run`` returns them) that this backend has not locked yet.  It never waits for
        a buffer while holding the lock of a later one: at the first buffer another backend
        holds exclusively, the batch's locks past it are let go, and from there every
        buffer is locked in block order, waiting as needed.  A writer holds two heap pages
        at once, lower block first (an UPDATE whose new version goes to another page, as
        PostgreSQL's RelationGetBufferForTuple); a scan waiting for a lower page while
        holding a higher one would deadlock with it."""
        held = self.held
        bl = bufs.tolist()
        blocked = -1
        for i in np.flatnonzero(held[bufs] == UNLOCKED).tolist():
            if not self.conditional_lock(bl[i], SHARE):
                blocked = i
                break
        if blocked < 0:
            return
        for b in bl[blocked + 1:]:
            if held[b] != UNLOCKED:
                self.unlock(b)
        for b in bl[blocked:]:
            self.lock(b, SHARE)

    def unlock_batch(self, bufs: np.ndarray) -> None:
        bufs = np.asarray(bufs, dtype=np.int64)
        if not bufs.size:
            return
        seg = self.seg
        masks = 0

        def unlock(ix) -> None:
            nonlocal masks
            bb = bufs if ix is None else bufs[ix]
            mode = self.held[bb]
            sb, xb = bb[mode == SHARE], bb[mode == EXCLUSIVE]
            assert sb.size + xb.size == bb.size, "unlock of a buffer not locked"
            seg.buf_lock_shared[sb] -= 1
            seg.buf_lock_excl[xb] = -1
            self.held[bb] = UNLOCKED
            w = seg.buf_waiters[bb]
            for b in bb[(w != 0) & (seg.buf_lock_shared[bb] == 0)].tolist():
                masks |= self._waiters[b]
                self._waiters[b] = 0

        self._by_partition(seg.buf_part[bufs], unlock)
        if masks:
            self._wake(masks)

    def unlock_unpin_batch(self, bufs: np.ndarray) -> None:
        """``unlock_batch`` then ``unpin_batch`` (one pin each) in one pass over the
        buffers' partition locks: what ``unlock_unpin`` is for one buffer."""
        bufs = np.asarray(bufs, dtype=np.int64)
        if not bufs.size:
            return
        seg = self.seg
        masks = 0

        def unlock_unpin(ix) -> None:
            # locked and pinned buffers hold valid pages: nothing retags them meanwhile
            nonlocal masks
            bb = bufs if ix is None else bufs[ix]
            mode = self.held[bb]
            share = mode == SHARE
            if share.all():
                seg.buf_lock_shared[bb] -= 1
            else:
                xb = bb[mode == EXCLUSIVE]
                assert share.sum() + xb.size == bb.size, "unlock of a buffer not locked"
                seg.buf_lock_shared[bb[share]] -= 1
                seg.buf_lock_excl[xb] = -1
            self.held[bb] = UNLOCKED
            mine = self.pins[bb]
            assert mine.min() > 0, "unpin of a buffer not pinned"
            self.pins[bb] = mine - 1
            last = mine == 1
            seg.buf_refcount[bb if last.all() else bb[last]] -= 1
            # as unlock_unpin, buffer by buffer, for those with someone waiting
            w = (seg.buf_waiters[bb] != 0) | ((seg.buf_flags[bb] & BM_PIN_COUNT_WAITER) != 0)
            if not w.any():
                return
            for b, was_last in zip(bb[w].tolist(), last[w].tolist()):
                wake = 0
                if self._waiters[b] and self._shared[b] == 0:
                    wake = self._waiters[b]
                    self._waiters[b] = 0
                if (was_last and self._refcount[b] <= 1
                        and self._flags[b] & BM_PIN_COUNT_WAITER):
                    wake |= self._waiters[b]
                    self._waiters[b] = 0
                    self._flags[b] &= ~BM_PIN_COUNT_WAITER
                masks |= wake

        self._by_partition(seg.buf_part[bufs], unlock_unpin)
        if masks:
            self._wake(masks)

    # ------------------------------------------------------------------------------------
    # dirtying
    def mark_dirty(self, b: int) -> None:
        """Mark a buffer dirty; the caller holds its exclusive content lock."""
        assert self._held[b] == EXCLUSIVE, "mark_dirty without an exclusive content lock"
        if self._flags[b] & BM_DIRTY:
            return
        p = self._lock_buf_part(b)
        self._flags[b] |= BM_DIRTY
        self.part_locks[p].release()

    def mark_dirty_hint(self, b: int) -> None:
        """Mark dirty after setting a hint (share lock suffices; MarkBufferDirtyHint).

        The first hint change of a clean page after a checkpoint's redo point logs an image
        of the page (``xloginsert.log_hint``), with this backend's ``delay_chkpt`` flag set
        meanwhile so that a checkpoint cannot slip between the decision and the dirtying."""
        assert self._held[b] != UNLOCKED, "mark_dirty_hint without a content lock"
        if self._flags[b] & BM_DIRTY:
            return
        wal = self.wal
        logging = wal is not None and not wal.shared.ctl[7]  # WAL_RECOVERY
        if logging:
            self.seg.proc_delay_chkpt[self.slot] = 1
        try:
            if logging and self._tag_fork(b) == MAIN_FORKNUM:
                from minidb.storage.xloginsert import log_hint
                log_hint(self, b, self.seg.buf_pages[b])
            p = self._lock_buf_part(b)
            self._flags[b] |= BM_DIRTY
            self.part_locks[p].release()
        finally:
            if logging:
                self.seg.proc_delay_chkpt[self.slot] = 0

    def _tag_fork(self, b: int) -> int:
        return (self._tag[b] >> 32) & 3

    def mark_dirty_hint_batch(self, bufs: np.ndarray) -> None:
        bufs = np.asarray(bufs, dtype=np.int64)
        bufs = bufs[(self.seg.buf_flags[bufs] & BM_DIRTY) == 0]
        if not bufs.size:
            return
        if self.wal is not None:
            for b in bufs.tolist():
                self.mark_dirty_hint(b)
            return
        parts = self.seg.buf_part[bufs]
        uparts = np.unique(parts).tolist()
        for p in uparts:
            self.part_locks[p].acquire()
        try:
            self.seg.buf_flags[bufs] |= BM_DIRTY
        finally:
            for p in uparts:
                self.part_locks[p].release()

    # ------------------------------------------------------------------------------------
    # allocation: victims and tag changes
    def _alloc(self, tag: int, bucket: int, p: int, strategy) -> tuple[int, bool]:
        """Pin a buffer for ``tag``: (buffer, True) for a victim we retagged and whose read
        we now own (I/O in progress), or (buffer, False) for one that had the tag already."""
        while True:
            victim = self._clock_sweep() if strategy is None else self._get_victim(strategy)
            if self._flags[victim] & BM_DIRTY:
                try:
                    self._flush(victim)
                except BaseException:
                    self.unpin(victim)
                    raise
            got = self._install(victim, tag, bucket, p)
            if got != victim:
                self.unpin(victim)
                if got >= 0:
                    return got, False
                continue  # the victim was pinned or dirtied meanwhile: choose another
            return victim, True

    def _claim(self, b: int, max_usage: int) -> bool:
        """Pin ``b`` if it is unpinned and its usage count is at most ``max_usage``."""
        p = self._lock_buf_part(b)
        ok = (self._refcount[b] == 0 and self._usage[b] <= max_usage
              and not self._flags[b] & BM_IO_IN_PROGRESS)
        if ok:
            self._refcount[b] = 1
            self._pins[b] = 1
        _, give, idx = self._psem[p]   # _unlock_part, inline
        self._hw[idx] = 0
        give()
        return ok

    def _get_victim(self, strategy: AccessStrategy | None) -> int:
        if strategy is not None:
            slot, b = strategy.next_slot()
            if b >= 0 and self._claim(b, 1):
                self.stats[C["ring_reused"]] += 1
                self._trace(f"ring {strategy.kind} reuses buffer {b}")
                return b
            b = self._clock_sweep()
            strategy.ring[slot] = b
            return b
        return self._clock_sweep()

    def _clock_sweep(self) -> int:
        """A victim: from the free list of never-used buffers first, then the sweep."""
        while self._never_used[0] < self.nbuffers:   # (next_never_used's unlocked look)
            b = next_never_used(self.seg, self.locks.strategy, self.nbuffers)
            if b < 0:
                break
            if self._claim(b, 0):
                if self._settings.trace_buffers:
                    self._trace(f"free list gave buffer {b}")
                return b
        trycounter = self.nbuffers
        while True:
            cand, pinned, decremented = sweep_slice(self._sweep_views, self.locks.strategy,
                                                    self.nbuffers, SWEEP_STEP)
            if cand >= 0 and self._claim(cand, 0):
                if self._settings.trace_buffers:
                    self._trace(f"clock sweep chose buffer {cand}")
                return cand
            if decremented:
                trycounter = self.nbuffers
            else:
                trycounter -= pinned + (cand >= 0)
                if trycounter <= 0:
                    raise InsufficientResources(
                        f"no unpinned buffers available (all {self.nbuffers} buffers of "
                        "shared_buffers are pinned)")

    def _install(self, b: int, tag: int, bucket: int, p: int) -> int:
        """Give victim ``b`` (pinned by us alone) the new tag, with I/O in progress.

        Returns ``b`` on success; the id of another buffer (pinned for us) if the tag
        appeared meanwhile; -1 if the victim was pinned or dirtied meanwhile.
        """
        oldp = self._part[b]
        first, second = (oldp, p) if oldp <= p else (p, oldp)
        # both partition locks, in ascending order, taken inline (``LWLock.fast``)
        locks, psem, hw = self.part_locks, self._psem, self._hw
        try1, give1, idx1 = psem[first]
        if not try1(False):
            locks[first].acquire()
        hw[idx1] = self._pidc[0]
        if second != first:
            try2, give2, idx2 = psem[second]
            if not try2(False):
                try:
                    locks[second].acquire()
                except BaseException:
                    hw[idx1] = 0
                    give1()
                    raise
            hw[idx2] = self._pidc[0]
        try:
            if self._refcount[b] != 1 or self._flags[b] & BM_DIRTY:
                return -1
            tags, nxt, heads = self._tag, self._next, self._heads
            other = heads[bucket]                   # BufTable.lookup, inline
            while other >= 0 and tags[other] != tag:
                other = nxt[other]
            if other >= 0:
                self._pin_locked(other, None)
                return other
            old = tags[b]
            if old >= 0:
                h = ((old >> 4) * _GOLDEN) & _M64   # BufTable.hash / delete, inline
                ob = (((h ^ (h >> 29)) & self._gmask) << 4) | (old & 15)
                c = heads[ob]
                if c == b:
                    heads[ob] = nxt[b]
                else:
                    while c >= 0 and nxt[c] != b:
                        c = nxt[c]
                    if c < 0:
                        raise AssertionError(f"buffer {b} not in the chain of bucket {ob}")
                    nxt[c] = nxt[b]
                if self._flags[b] & BM_VALID:
                    self.counts[_EVICTED] += 1
            nxt[b] = heads[bucket]                  # BufTable.insert, inline
            heads[bucket] = b
            tags[b] = tag
            self._part[b] = p
            self._flags[b] = BM_TAG_VALID | BM_IO_IN_PROGRESS
            self._usage[b] = 1
            return b
        finally:
            if second != first:
                hw[idx2] = 0
                give2()
            hw[idx1] = 0
            give1()

    def _finish_io(self, b: int, ok: bool, lock_mode: int = UNLOCKED) -> bool:
        """End the I/O we own on pinned ``b``: valid if ``ok``, else untagged; wake the
        waiters.  With ``ok`` and ``lock_mode``, also take the content lock in that mode in
        the same critical section if it is free (nobody can have locked a page still being
        read in, so it is, short of a bug); returns whether it was taken."""
        part, psem, hw = self._part, self._psem, self._hw
        while True:  # _lock_buf_part
            p = part[b]
            try_, give, idx = psem[p]
            if not try_(False):
                self.part_locks[p].acquire()
            hw[idx] = self._pidc[0]
            if part[b] == p:
                break
            hw[idx] = 0
            give()
        locked = False
        try:
            if ok:
                self._flags[b] = (self._flags[b] & ~BM_IO_IN_PROGRESS) | BM_VALID
                if (lock_mode and self._held[b] == UNLOCKED and self._excl[b] < 0
                        and (lock_mode == SHARE or self._shared[b] == 0)):
                    if lock_mode == SHARE:
                        self._shared[b] += 1
                    else:
                        self._excl[b] = self.slot
                    self._held[b] = lock_mode
                    locked = True
            else:
                self._drop_tag_locked(b, p)
            wake = self._waiters[b]
            if wake:
                self._waiters[b] = 0
        finally:
            hw[idx] = 0                    # _unlock_part, inline
            give()
        if wake:
            self._wake(wake)
        return locked

    def _drop_tag_locked(self, b: int, p: int) -> None:
        """Untag buffer ``b`` (its partition lock ``p`` held; takes partition 0 too)."""
        self.table.delete(self.table.hash(self._tag[b])[0], b)
        if p != 0:
            self.part_locks[0].acquire()
        self._tag[b] = -1
        self._part[b] = 0
        self._flags[b] = 0
        self._usage[b] = 0
        if p != 0:
            self.part_locks[0].release()

    def _wait_io(self, b: int, deadline: float) -> bool:
        """Wait until no I/O is in progress on pinned ``b``; True if it is then valid."""
        tag = self._tag[b]
        while True:
            p = self._lock_buf_part(b)
            flags = self._flags[b]
            if not flags & BM_IO_IN_PROGRESS or self._tag[b] != tag:
                self.part_locks[p].release()
                return bool(flags & BM_VALID) and self._tag[b] == tag
            self._waiters[b] |= self.bit
            self.part_locks[p].release()
            self._sleep(b, deadline, "another backend's read")

    def _read_run(self, rfn: int, fork: int, first_block: int, bufs: list[int],
                  lock_mode: int = UNLOCKED) -> bool:
        """Read consecutive blocks into buffers we own the I/O of (one request), then
        verify them and make them valid - or, during a read batch, queue them for
        ``finish_reads``.  A failed read finishes (failed) and unpins the buffers.
        ``lock_mode`` (a single page verified here): take its content lock as it becomes
        valid if the lock is free; returns whether it was taken."""
        pages = self._pages
        try:
            self.smgr.read_blocks(rfn, fork, first_block,
                                  [pages[b] or self._page_mv(b) for b in bufs])
        except BaseException:
            self._fail_run(bufs)
            raise
        if self._pending is not None:
            self._pending.append((rfn, first_block, bufs, fork))
            return False
        try:
            if len(bufs) == 1:   # _verify_runs of one page, directly
                return self._verify_one(rfn, first_block, bufs, fork, lock_mode)
            self._verify_runs([(rfn, first_block, bufs, fork)])
            return False
        except BaseException:
            for b in bufs:
                self.unpin(b)
            raise

    def _verify_runs(self, runs: list) -> None:
        """Verify the pages of runs read (``(rfn, first block, buffers, fork)``) with one
        vectorized checksum pass and make them valid; if any page is bad (or anything
        fails), every run's I/O fails (the buffers stay pinned) and the error is raised.
        A bad page of the free-space map is zeroed instead: that fork is not WAL-logged, so a
        torn page of it is simply forgotten (PostgreSQL reads FSM pages with
        RBM_ZERO_ON_ERROR)."""
        allbufs = [b for _, _, bufs, _ in runs for b in bufs]
        if not allbufs:
            return
        if len(allbufs) == 1:
            self._verify_one(*next(r for r in runs if r[2]))
            return
        try:
            pages = self.seg.buf_pages[allbufs]
            if self._settings.verify_checksums:
                blocknos = np.concatenate([np.arange(f, f + len(bufs))
                                           for _, f, bufs, _ in runs])
                good = pg.verify_checksums(pages, blocknos)
            else:
                good = np.ones(len(allbufs), dtype=bool)
            if not good.all():
                k = 0
                for _, _, bufs, fork in runs:
                    if fork != MAIN_FORKNUM:
                        for j in np.flatnonzero(~good[k:k + len(bufs)]).tolist():
                            self.seg.buf_pages[bufs[j]].fill(0)
                            pages[k + j].fill(0)  # (pages is a copy: its header is checked)
                            good[k + j] = True
                    k += len(bufs)
            k = 0
            for rfn, first, bufs, _ in runs:
                for j in range(len(bufs)):
                    if good[k]:
                        pg.check_page_header(pages[k], f"block {first + j} of relation "
                                                       f"{self.describe_rel(rfn)}")
                    k += 1
            if not good.all():
                bad = int(np.flatnonzero(~good)[0])
                k = 0
                for rfn, first, bufs, _ in runs:
                    if bad < k + len(bufs):
                        raise DataCorrupted(
                            f"invalid page in block {first + bad - k} of relation "
                            f"{self.describe_rel(rfn)}: page verification failed, "
                            f"calculated checksum does not match the stored one")
                    k += len(bufs)
        except BaseException as e:
            if isinstance(e, DataCorrupted):
                self.stats[C["checksum_failures"]] += 1
            for b in allbufs:
                self._finish_io(b, False)
            raise
        for b in allbufs:
            self._finish_io(b, True)
        self.stats[C["buffers_read"]] += len(allbufs)

    def _verify_one(self, rfn: int, block: int, bufs: list[int], fork: int,
                    lock_mode: int = UNLOCKED) -> bool:
        """``_verify_runs`` of a single page, in scalar code (``pg.verify_page_checksum``;
        the relation is named only in an error): the same checks, outcome and counts.
        ``lock_mode``: as ``_finish_io``'s (returns whether the content lock was taken)."""
        b = bufs[0]
        try:
            page = self._page_mv(b)
            # the checksum compared first (over the buffer's kept uint64 view);
            # ``verify_page_checksum`` (which also accepts an all-zero page) only when it
            # differs
            if (self._settings.verify_checksums
                    and pg.page_checksum(page, block, self._page_words(b))
                    != _CKS.unpack_from(page, 8)[0]
                    and not pg.verify_page_checksum(page, block)):
                if fork != MAIN_FORKNUM:
                    self.seg.buf_pages[b].fill(0)
                else:
                    raise DataCorrupted(
                        f"invalid page in block {block} of relation "
                        f"{self.describe_rel(rfn)}: page verification failed, "
                        f"calculated checksum does not match the stored one")
            try:
                pg.check_page_header(page, "")
            except DataCorrupted:
                pg.check_page_header(page, f"block {block} of relation "
                                           f"{self.describe_rel(rfn)}")
                raise
        except BaseException as e:
            if isinstance(e, DataCorrupted):
                self.stats[C["checksum_failures"]] += 1
            self._finish_io(b, False)
            raise
        locked = self._finish_io(b, True, lock_mode)
        self.counts[_READ] += 1
        return locked

    def _fail_run(self, bufs: list[int]) -> None:
        for b in bufs:
            self._finish_io(b, False)
            self.unpin(b)

    # ------------------------------------------------------------------------------------
    # new pages
    def extend(self, rfn: int, count: int = 1, fork: int = MAIN_FORKNUM,
               strategy: AccessStrategy | None = None) -> tuple[int, list[int]]:
        """Add ``count`` zeroed pages; returns (first block, buffers pinned and exclusively
        locked, one per page).  The caller initialises the pages and marks them dirty."""
        ext = self.locks.extension[rfn % len(self.locks.extension)]
        bufs: list[int] = []
        with ext:
            # The new blocks get their buffers (tagged, I/O in progress) BEFORE the file
            # grows, as in PostgreSQL's ExtendBufferedRelShared: a backend that sees the
            # larger size and pins a new block then waits for our "I/O" instead of reading
            # the zero page from disk and installing it under our feet.
            first = self.smgr.nblocks(rfn, fork)
            try:
                for i in range(count):
                    tag = make_tag(rfn, fork, first + i)
                    bucket, p = self.table.hash(tag)
                    b, mine = self._alloc(tag, bucket, p, strategy)
                    if not mine:
                        self.unpin(b)
                        raise DataCorrupted(
                            f"unexpected buffer for block {first + i} beyond the end of "
                            f"relation {self.describe_rel(rfn)}")
                    bufs.append(b)
                self.smgr.extend(rfn, fork, first, count)
            except BaseException:
                for b in bufs:
                    self._finish_io(b, False)
                    self.unpin(b)
                raise
            for b in bufs:
                self.seg.buf_pages[b].fill(0)
                self._held[b] = EXCLUSIVE
                self._excl[b] = self.slot  # waiters for the I/O wait for this lock next
                self._finish_io(b, True)
        self.stats[C["buffers_extended"]] += count
        return first, bufs

    def pin_for_redo(self, rfn: int, fork: int, block: int, zero: bool) -> int:
        """Pin and exclusively lock a block for replay (XLogReadBufferExtended): the file is
        extended with zero pages up to ``block`` if shorter; with ``zero`` the page is not
        read at all but zeroed (an image will overwrite it: RBM_ZERO_AND_LOCK)."""
        n = self.smgr.nblocks(rfn, fork)
        if block >= n:
            self.smgr.extend(rfn, fork, n, block + 1 - n)
        if zero:
            tag = make_tag(rfn, fork, block)
            bucket, p = self.table.hash(tag)
            lk = self.part_locks[p]
            lk.acquire()
            b = self.table.lookup(tag, bucket)
            if b >= 0:
                self._pin_locked(b, None)
            lk.release()
            if b < 0:
                b, mine = self._alloc(tag, bucket, p, None)
                if mine:
                    self.seg.buf_pages[b].fill(0)
                    self._finish_io(b, True)
        else:
            b = self.pin(rfn, block, fork)
        self.lock(b, EXCLUSIVE)
        return b

    # ------------------------------------------------------------------------------------
    # write-back
    def _flush(self, b: int) -> bool:
        """Write a pinned buffer if dirty (FlushBuffer).  True if it wrote."""
        already = self._held[b]
        if already == UNLOCKED:
            self.lock(b, SHARE)
        try:
            p = self._lock_buf_part(b)
            flags = self._flags[b]
            if not flags & BM_DIRTY or flags & BM_IO_IN_PROGRESS:
                self.part_locks[p].release()
                return False
            self._flags[b] = (flags & ~BM_DIRTY) | BM_IO_IN_PROGRESS
            self.part_locks[p].release()
            rfn, fork, block = tag_parts(self._tag[b])
            copy = self.seg.buf_pages[b].copy()  # hint bits may change under a share lock
        finally:
            if already == UNLOCKED:
                self.unlock(b)
        ok = False
        try:
            wal = self.wal
            if wal is not None and not wal.shared.ctl[7]:  # not during recovery
                lsn = pg.get_lsn(copy)
                if lsn > wal.shared.ctl[5]:  # WAL_FLUSHED: the WAL rule
                    wal.flush(lsn)
                    self.stats[C["buffers_wal_flushed"]] += 1
                if lsn > wal.shared.ctl[5]:
                    self.stats[C["wal_rule_violations"]] += 1
            pg.set_checksum(copy, block)
            self.smgr.write_blocks(rfn, fork, block, [copy])
            ok = True
        finally:
            p = self._lock_buf_part(b)
            flags = self._flags[b] & ~BM_IO_IN_PROGRESS
            if not ok:
                flags |= BM_DIRTY
            self._flags[b] = flags
            wake = self._waiters[b]
            self._waiters[b] = 0
            self.part_locks[p].release()
            if wake:
                self._wake(wake)
        self.stats[C["buffers_written"]] += 1
        self._trace(f"wrote buffer {b} (block {block} of {self.describe_rel(rfn)})")
        return True

    def _pin_existing(self, b: int, expect_tag: int) -> bool:
        p = self._lock_buf_part(b)
        ok = self._tag[b] == expect_tag and self._flags[b] & BM_VALID
        if ok:
            self._pin_locked(b, None, bump=False)
        self.part_locks[p].release()
        return bool(ok)

    def flush_buffers(self, rfn: int | None = None, pace=None) -> int:
        """Write every dirty buffer (of one relation, or all: a checkpoint).  ``pace(done,
        total)``, if given, is called after each buffer (unpinned): a spread checkpoint
        sleeps there (CheckpointWriteDelay)."""
        dirty = np.flatnonzero(self.seg.buf_flags & BM_DIRTY)
        if rfn is not None:
            dirty = dirty[(self.seg.buf_tag[dirty] >> 34) == rfn]
        order = np.argsort(self.seg.buf_tag[dirty], kind="stable")
        n = 0
        todo = dirty[order].tolist()
        for i, b in enumerate(todo):
            tag = self._tag[b]
            if tag < 0 or not self._pin_existing(b, tag):
                continue
            try:
                n += self._flush(b)
            finally:
                self.unpin(b)
            if pace is not None:
                pace(i + 1, len(todo))
        return n

    def drop_relation_buffers(self, rfn: int, from_block: int = 0, fork: int | None = None) -> None:
        """Forget the buffers of a dropped or truncated relation without writing them.

        The caller guarantees nobody uses the relation (it is being dropped / truncated).
        """
        tags = self.seg.buf_tag
        sel = np.flatnonzero((tags >= 0) & ((tags >> 34) == rfn)
                             & ((tags & 0xFFFFFFFF) >= from_block))
        if fork is not None:
            sel = sel[((tags[sel] >> 32) & 3) == fork]
        for b in sel.tolist():
            p = self._lock_buf_part(b)
            try:
                t = self._tag[b]
                if t < 0 or (t >> 34) != rfn:
                    continue
                if self._refcount[b] != 0:
                    rfn_, fork_, block = tag_parts(t)
                    raise InsufficientResources(
                        f"cannot drop buffer of block {block} of relation "
                        f"{self.describe_rel(rfn)}: it is still pinned")
                self._drop_tag_locked(b, p)
            finally:
                self.part_locks[p].release()

    # ------------------------------------------------------------------------------------
    # cleanup
    def release_all(self) -> None:
        """Release every content lock and pin this backend holds (error or exit path)."""
        for b in np.flatnonzero(self.held != UNLOCKED).tolist():
            self.unlock(b)
        for b in np.flatnonzero(self.pins > 0).tolist():
            self._pins[b] = 1
            self.unpin(b)

    def holds_nothing(self) -> bool:
        return not self.pins.any() and not self.held.any()

    def counters(self) -> dict[str, int]:
        return {name: int(self.stats[i]) for name, i in C.items()}
