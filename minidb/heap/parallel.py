"""The parallel sequential scan's block allocator (``tableam.c``: table_block_parallelscan_*).

A parallel scan is one relation scanned by several participants (the leader and its
workers, each a separate process).  They share a *scan slot* in the segment and ask it
for blocks; every block of the table goes to exactly one participant.

Shared state, one row of the ``pscan`` region per slot (guarded by ``pscan[slot % 16]``,
PostgreSQL's ``ParallelBlockTableScanDescData``):

==============  =========================================================================
field           meaning
==============  =========================================================================
STATE           0 free, 1 in use
OWNER           pid of the leader that holds the slot (a dead owner's slot is reclaimed)
GEN             bumped at every acquire, so a stale handle can tell
RFN, NBLOCKS    the relation's file and its size, fixed when the scan is initialised
STARTBLOCK      -1 until the first participant sets it (0, or the syncscan hint)
NALLOCATED      relative positions handed out so far (the 64-bit atomic counter)
POLICY          ``block``, ``fixed`` or ``pg14`` (``parallel_chunk_policy``)
MAX_CHUNK       ``parallel_max_chunk_blocks``
FIXED_CHUNK     ``parallel_fixed_chunk_blocks``
NCHUNKS         ``parallel_seqscan_nchunks`` (2048 = PARALLEL_SEQSCAN_NCHUNKS)
SYNCSCAN        1 if the scan is synchronized (same test as a serial scan)
CANCEL          set by the leader: participants stop at their next chunk
==============  =========================================================================

Per participant (``BlockAllocator``, private: ``ParallelBlockTableScanWorkerData``):
``chunk_size``, ``chunk_remaining`` and ``nallocated`` (the last relative position this
participant obtained).

``startblock_init`` (once per participant): compute the chunk size, then set the shared
start block exactly once - 0 for an unsynchronized scan, else the syncscan hint, fetched
*outside* the slot's lock (PostgreSQL cannot call ``ss_get_location`` under a spinlock)
and retried; the first participant to set it wins.

Chunk size by policy:

=======  ==========================================================================
block    1: each participant takes the next single block (PostgreSQL 9.6 - 13)
fixed    ``parallel_fixed_chunk_blocks`` (capped by MAX_CHUNK), never shrinks
pg14     ``next_pow2(max(nblocks // NCHUNKS, 1))`` capped by MAX_CHUNK; when a
         participant needs a new chunk and its own last position is past
         ``nblocks - chunk_size * 64`` it halves its chunk size first (ramp-down)
=======  ==========================================================================

``next_block`` is PostgreSQL's ``table_block_parallelscan_nextpage`` line for line: inside
the current chunk take the next position; else (maybe ramp down, then) fetch-add the
chunk size to the shared counter.  Position ``n`` is block ``(n + startblock) % nblocks``;
``n >= nblocks`` means the scan is over for this participant, and the one participant
that draws exactly ``n == nblocks`` reports the start block to the syncscan table.

With syncscan on, a participant reports its position when it *reads* a page, not when the
page is handed out: PostgreSQL reports each page in ``nextpage``, right before the
participant reads it, and only then asks for the next, so there the two moments are one.
Here a participant takes runs ahead of reading them (a batch's worth, or a chunk's rest),
so reporting at hand-out would publish pages not read yet, and a query joining there
would find them missing from the OS cache.  So ``_deliver`` queues the blocks handed out,
and the reader (``HeapScan``) calls ``pages_read(n)`` as it reads the next ``n`` of them,
in the order handed out: the last multiple of 16 among them is reported (the table keeps
only those).  A reader that never calls ``pages_read`` (the allocator's own tests, a
caller of ``next_block``) has read what it was handed when it asks for more, as in
PostgreSQL's rhythm, and its pages are reported then.  The end-of-scan report (the start
block) is made once the participant that drew the end has reported every page it was
handed, so that its own last page reports never come after it.

``next_run(max_n)`` hands out the same blocks as ``max_n`` calls of ``next_block`` would
(the same positions, the same shared fetch-adds, at the same moments), but as one run of
consecutive blocks: the rest of the current chunk, cut at ``max_n`` and at the table's
end (a chunk that crosses the end of a synchronized scan is split in two runs).  A
scan then reads each run with one vectorized batch.  ``next_run`` returns None once the
leader set CANCEL: participants check it before every run they take.

Pacing.  Under the ``block`` policy (``paced_by_reads``) the reader takes its next block
only once the read of its previous one completed: a PostgreSQL participant reads and
processes a page before it calls ``nextpage`` again, so two participants' blocks
alternate and each process's file sees a strided pattern.  ``HeapScan`` waits for the
read (the I/O model's ``pace``) before each ``next_run``; it still decodes the pages in
batches.  Chunks are not paced: a chunk's blocks belong to one participant anyway.

``next_runs(max_n)`` is a batch of ``next_run`` calls (what a warm scan takes for one
decode batch): the same runs in the same order, with all their fetch-adds done under one
acquisition of the slot's lock - a schedule in which no other participant came between
them, one ``next_run`` allows as well - and the CANCEL flag checked once.  Per chunk
that is a few integer operations; a lock round trip and a cancel check per chunk of 8
blocks cost as much as decoding the chunk (pg14's chunks at 1,000,000 pgbench rows are 8
blocks).

Invariants (tested for many (nblocks, participants, startblock) combinations):
  1. Every block in [0, nblocks) is handed out exactly once across all participants.
  2. NALLOCATED only grows; it overshoots nblocks by at most one chunk per participant.
  3. The end-of-scan syncscan report happens exactly once (when the participant that
     drew the end reads all it was handed), after that participant's page reports.

Departures: the atomic fetch-add is a short critical section under the slot's lock; the
start block's spinlock is the same lock.  The ``block`` and ``fixed`` policies and the
NCHUNKS setting are minidb's, so that 2020's experiments can be rerun (and scaled down:
PostgreSQL's formula gives tiny chunks on small tables).
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque

import numpy as np

from minidb.errors import InsufficientResources
from minidb.heap.syncscan import SYNC_SCAN_REPORT_INTERVAL
from minidb.shmem import N_PSCAN_FIELDS

PARALLEL_SEQSCAN_NCHUNKS = 2048
PARALLEL_SEQSCAN_RAMPDOWN_CHUNKS = 64
PARALLEL_SEQSCAN_MAX_CHUNK_SIZE = 8192

POLICIES = ("block", "fixed", "pg14")

# fields of a pscan row
F_STATE, F_OWNER, F_GEN, F_RFN, F_NBLOCKS, F_STARTBLOCK, F_NALLOCATED = 0, 1, 2, 3, 4, 5, 6
F_POLICY, F_MAX_CHUNK, F_FIXED_CHUNK, F_NCHUNKS, F_SYNCSCAN, F_CANCEL = 7, 8, 9, 10, 11, 12
INVALID_BLOCK = -1


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def initial_chunk_size(policy: str, nblocks: int, max_chunk: int, fixed_chunk: int,
                       nchunks: int = PARALLEL_SEQSCAN_NCHUNKS) -> int:
    if policy == "block":
        return 1
    if policy == "fixed":
        return max(1, min(fixed_chunk, max_chunk))
    return max(1, min(next_pow2(max(nblocks // nchunks, 1)), max_chunk))


class SharedScan:
    """A leader's (or participant's) handle on one scan slot."""

    __slots__ = ("seg", "slot", "row", "lock", "gen")

    def __init__(self, seg, locks, slot: int):
        self.seg = seg
        self.slot = slot
        self.row = seg.pscan[slot]
        self.lock = locks.pscan[slot % len(locks.pscan)]
        self.gen = int(self.row[F_GEN])

    @classmethod
    def acquire(cls, seg, locks, owner: int | None = None) -> "SharedScan":
        """Take a free slot (or one whose owner died); InsufficientResources if none."""
        owner = owner or os.getpid()
        tab = seg.pscan
        for slot in range(tab.shape[0]):
            lock = locks.pscan[slot % len(locks.pscan)]
            with lock:
                row = tab[slot]
                if row[F_STATE] and _alive(int(row[F_OWNER])):
                    continue
                gen = int(row[F_GEN]) + 1
                row[:] = 0
                row[F_STATE] = 1
                row[F_OWNER] = owner
                row[F_GEN] = gen
                row[F_STARTBLOCK] = INVALID_BLOCK
            return cls(seg, locks, slot)
        raise InsufficientResources(f"no free parallel scan slot (all {tab.shape[0]} in use)")

    @classmethod
    def private(cls) -> "SharedScan":
        """A slot in private memory, for a leader that found no free shared one and scans
        alone (``slot`` is -1; no worker can attach to it)."""
        class _Seg:
            pscan = np.zeros((1, N_PSCAN_FIELDS), dtype=np.int64)

        class _Locks:
            pscan = [threading.Lock()]
        h = cls(_Seg(), _Locks(), 0)
        h.row[F_STATE] = 1
        h.row[F_STARTBLOCK] = INVALID_BLOCK
        h.slot = -1
        return h

    def initialize(self, rfn: int, nblocks: int, *, policy: str = "pg14",
                   max_chunk: int = PARALLEL_SEQSCAN_MAX_CHUNK_SIZE, fixed_chunk: int = 64,
                   nchunks: int = PARALLEL_SEQSCAN_NCHUNKS, syncscan: bool = False) -> None:
        """table_block_parallelscan_initialize: fix the relation, its size and the policy."""
        with self.lock:
            r = self.row
            r[F_RFN] = rfn
            r[F_NBLOCKS] = nblocks
            r[F_STARTBLOCK] = INVALID_BLOCK
            r[F_NALLOCATED] = 0
            r[F_POLICY] = POLICIES.index(policy)
            r[F_MAX_CHUNK] = max_chunk
            r[F_FIXED_CHUNK] = fixed_chunk
            r[F_NCHUNKS] = nchunks
            r[F_SYNCSCAN] = int(syncscan)
            r[F_CANCEL] = 0

    def reinitialize(self) -> None:
        """table_block_parallelscan_reinitialize (a rescan): only the counter restarts."""
        with self.lock:
            self.row[F_NALLOCATED] = 0

    def cancel(self) -> None:
        self.row[F_CANCEL] = 1

    @property
    def cancelled(self) -> bool:
        """CANCEL was set, or the slot was given to another scan since this handle was made
        (a participant that outlived its leader must not take the new scan's blocks)."""
        return bool(self.row[F_CANCEL]) or int(self.row[F_GEN]) != self.gen

    @property
    def nblocks(self) -> int:
        return int(self.row[F_NBLOCKS])

    @property
    def rfn(self) -> int:
        return int(self.row[F_RFN])

    @property
    def syncscan(self) -> bool:
        return bool(self.row[F_SYNCSCAN])

    @property
    def policy(self) -> str:
        return POLICIES[int(self.row[F_POLICY])]

    @property
    def start_block(self) -> int:
        return int(self.row[F_STARTBLOCK])

    @property
    def nallocated(self) -> int:
        return int(self.row[F_NALLOCATED])

    def fetch_add(self, k: int) -> int:
        """The atomic fetch-add of the shared counter: returns the old value (or a value
        past the end if the slot now belongs to another scan)."""
        with self.lock:
            return self.fetch_add_locked(k)

    def fetch_add_locked(self, k: int) -> int:
        """``fetch_add`` for a caller that holds ``lock`` (several fetch-adds in a row)."""
        row = self.row
        if int(row[F_GEN]) != self.gen:
            return 1 << 62
        n = int(row[F_NALLOCATED])
        row[F_NALLOCATED] = n + k
        return n

    def release(self) -> None:
        with self.lock:
            if int(self.row[F_GEN]) == self.gen:
                self.row[F_STATE] = 0
                self.row[F_OWNER] = 0


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


class BlockAllocator:
    """One participant's side of a parallel scan (see the module docstring).

    Also the ``block_source`` of ``HeapScan``: ``nblocks`` and ``next_run(max_n)``."""

    def __init__(self, shared: SharedScan, syncscan_table=None, *, participant: int = 0,
                 trace=None, record: bool = False):
        self.shared = shared
        self.ss = syncscan_table
        self.participant = participant
        self.trace = trace  # a print-like function, or None
        self.chunk_size = 0
        self.chunk_remaining = 0
        self.nallocated = 0
        self.initial_chunk = 0
        self.chunks = 0        # chunks fetched from the shared counter
        self.blocks = 0        # blocks handed out to this participant
        self.runs: list[tuple[int, int]] | None = [] if record else None
        self.ended = False
        self.end_reported = False
        self.end_pending = False  # drew the end; reports it once its pages are read
        self._unread: deque = deque()  # [first, count] handed out, not yet reported read
        self._reader_reports = False  # the reader calls pages_read (else: at next request)
        self._nblocks = shared.nblocks
        self._start = INVALID_BLOCK
        self._rfn = shared.rfn
        self._pg14 = shared.policy == "pg14"
        self._block_policy = shared.policy == "block"
        self._sync = syncscan_table if (syncscan_table is not None and shared.syncscan) else None
        # participants expected to share the scan (a hint the reader may use to keep its
        # batches small enough near the end that they all finish together; 1: alone)
        self.participants = 1

    def remaining(self) -> int:
        """Positions not handed out yet (a hint: the shared counter read without the
        slot's lock; 0 once the slot was reused)."""
        row = self.shared.row
        if int(row[F_GEN]) != self.shared.gen:
            return 0
        return max(0, self._nblocks - int(row[F_NALLOCATED]))

    def whole_chunks(self, n: int) -> int:
        """At most ``n`` blocks that end where a chunk does: the rest of the current chunk
        and then whole chunks (of the current size), or ``n`` when that is none.  A warm
        batch that takes this many leaves no piece of a chunk to the next batch - a piece
        that, the shared counter having moved on meanwhile, would be a run of its own
        there, pinned by its own call."""
        c = self.chunk_size
        r = self.chunk_remaining
        if c <= 1 or n <= r:
            return n
        k = r + (n - r) // c * c
        return k if k > 0 else n

    @property
    def nblocks(self) -> int:
        return self._nblocks

    @property
    def start_block(self) -> int:
        return self._start

    @property
    def paced_by_reads(self) -> bool:
        """The reader takes its next block only after its previous read completed (the
        ``block`` policy: PostgreSQL's participants read and process a page before they
        ask for the next, so their single blocks alternate; see ``HeapScan``).  Chunked
        policies hand out a chunk at a time and are not paced."""
        return self._block_policy

    def startblock_init(self) -> int:
        """table_block_parallelscan_startblock_init; returns the shared start block."""
        s = self.shared
        row = s.row
        nblocks = self._nblocks
        self.chunk_remaining = 0
        self.nallocated = 0
        self.chunk_size = self.initial_chunk = initial_chunk_size(
            s.policy, nblocks, int(row[F_MAX_CHUNK]), int(row[F_FIXED_CHUNK]),
            int(row[F_NCHUNKS]) or PARALLEL_SEQSCAN_NCHUNKS)
        sync_start = INVALID_BLOCK
        while True:
            with s.lock:
                start = int(row[F_STARTBLOCK])
                if start == INVALID_BLOCK:
                    if not row[F_SYNCSCAN]:
                        row[F_STARTBLOCK] = start = 0
                    elif sync_start != INVALID_BLOCK:
                        row[F_STARTBLOCK] = start = sync_start
            if start != INVALID_BLOCK:
                break
            # the syncscan lookup takes its own lock: never under the slot's lock
            sync_start = self.ss.get_location(self._rfn, nblocks) if self.ss else 0
        self._start = start
        if self.trace:
            self.trace(f"start block {start} of {nblocks}, policy {s.policy}, chunk size "
                       f"{self.chunk_size}")
        return start

    def _new_chunk(self, fetch_add=None) -> int:
        """Ramp down if due, then fetch-add a chunk; returns its first position.
        ``fetch_add``: the shared counter's (default) or its locked variant."""
        nblocks = self._nblocks
        c = self.chunk_size
        if self._pg14:
            # PostgreSQL compares unsigned numbers: nblocks - c * 64 never goes below 0
            limit = nblocks - c * PARALLEL_SEQSCAN_RAMPDOWN_CHUNKS
            if c > 1 and limit >= 0 and self.nallocated > limit:
                self.chunk_size = c = c >> 1
        n = (fetch_add or self.shared.fetch_add)(c)
        self.chunks += 1
        if self.trace and n < nblocks:
            self.trace(f"chunk of {c} at position {n} (block {(n + self._start) % nblocks})")
        return n

    def next_block(self) -> int | None:
        """table_block_parallelscan_nextpage: the next block, or None when done."""
        self._before_request()
        if self.chunk_remaining > 0:
            self.nallocated += 1
            self.chunk_remaining -= 1
            n = self.nallocated
        else:
            n = self.nallocated = self._new_chunk()
            self.chunk_remaining = self.chunk_size - 1
        return self._deliver(n, 1)

    def _deliver(self, n: int, k: int):
        """Position ``n`` (and ``k - 1`` more) was taken: map to blocks (queued to be
        reported when read); a position past the end ends the scan for this participant."""
        nblocks = self._nblocks
        if n >= nblocks:
            self.ended = True
            if n == nblocks and self._sync is not None:
                self.end_pending = True
                if not self._reader_reports:  # what it was handed counts as read
                    self._consume(sum(k for _, k in self._unread))
                self._report_end()
            return None
        page = (n + self._start) % nblocks
        self.blocks += k
        if self.runs is not None:
            self.runs.append((page, k))
        if self._sync is not None:
            self._unread.append([page, k])
        return page

    def pages_read(self, n: int) -> None:
        """The reader has read the next ``n`` blocks it was handed (they are read in the
        order they were handed out): report the last multiple of 16 among them, as
        PostgreSQL reports each page a participant goes on to read; then the end of the
        scan, if this participant drew it and has now read everything it was handed."""
        if self._sync is None:
            return
        self._reader_reports = True
        self._consume(n)
        if self.end_pending:
            self._report_end()

    def _consume(self, n: int) -> None:
        """Take ``n`` blocks off the front of the unread runs and report the last multiple
        of 16 among them (``report_pages``' rule)."""
        q = self._unread
        report = None
        while n > 0 and q:
            run = q[0]
            first, k = run
            t = min(k, n)
            last = first + t - 1
            last -= last % SYNC_SCAN_REPORT_INTERVAL
            if last >= first:
                report = last
            if t == k:
                q.popleft()
            else:
                run[0], run[1] = first + t, k - t
            n -= t
        if report is not None:
            self._sync.report_location(self._rfn, report)

    def _before_request(self) -> None:
        """A reader that does not call ``pages_read`` has read what it was handed when it
        asks for more (PostgreSQL's rhythm: a page is processed before the next is asked
        for): report those pages now."""
        if self._unread and not self._reader_reports:
            self._consume(sum(k for _, k in self._unread))

    def _report_end(self) -> None:
        """The end-of-scan report (the start block, so that the hint does not creep), made
        once every page this participant was handed has been reported."""
        if self._unread or self.end_reported:
            return
        self.end_pending = False
        self.end_reported = True
        self._sync.report_location(self._rfn, self._start)

    def _advance(self, max_n: int, fetch_add=None) -> tuple[int, int]:
        """``next_run``'s arithmetic: take the next positions, (first position, count);
        a position ``>= nblocks`` (count 1) is the end."""
        nblocks = self._nblocks
        if self.chunk_remaining > 0:
            n = self.nallocated + 1
            avail = self.chunk_remaining
        else:
            n = self._new_chunk(fetch_add)
            avail = self.chunk_size
        if n >= nblocks:  # as next_block: one position consumed, then the end
            self.nallocated = n
            self.chunk_remaining = avail - 1
            return n, 1
        page = (n + self._start) % nblocks
        k = max(1, min(avail, max_n, nblocks - n, nblocks - page))
        self.nallocated = n + k - 1
        self.chunk_remaining = avail - k
        return n, k

    def next_run(self, max_n: int) -> tuple[int, int] | None:
        """The next run of at most ``max_n`` consecutive blocks, as (first block, count),
        or None when the scan is over for this participant (or was cancelled)."""
        if self.ended:
            return None
        self._before_request()
        if self.shared.cancelled:
            self.ended = True
            return None
        n, k = self._advance(max_n)
        page = self._deliver(n, k)
        return None if page is None else (page, k)

    def next_runs(self, max_n: int) -> tuple[list[tuple[int, int]], bool]:
        """The runs that calls of ``next_run`` would hand out, one after another, until
        ``max_n`` blocks are taken or the scan ends: ``(runs, ended)``.

        The same positions in the same order, with the same fetch-adds, done back to back
        under ONE acquisition of the slot's lock (a schedule in which no other participant
        came between them, which ``next_run`` allows too); the cancel flag is checked once.
        A warm scan takes a batch's runs this way: a stretch of whole chunks costs a few
        integer operations, instead of a lock round trip and a cancel check per chunk.  A
        stretch of consecutive chunks comes back as one run (``runs`` records one entry per
        chunk).  The syncscan position is reported as the runs are read (``pages_read``)."""
        if self.ended:
            return [], True
        self._before_request()
        s = self.shared
        if s.cancelled:
            self.ended = True
            return [], True
        taken = []
        total = 0
        nblocks, start = self._nblocks, self._start
        row = s.row
        with s.lock:
            # the shared counter as a local while the lock is held (the slot's generation
            # cannot change under it: acquire takes the same lock)
            counter = int(row[F_NALLOCATED]) if int(row[F_GEN]) == s.gen else None

            def fetch(k: int) -> int:
                nonlocal counter
                if counter is None:
                    return 1 << 62
                n = counter
                counter = n + k
                return n
            # whole chunks that need no ramp-down and do not reach the end or wrap are taken
            # in one step: m fetch-adds of c in a row are positions [n, n + m * c), which
            # is what _advance and _new_chunk would compute m times
            fast = counter is not None and self.trace is None
            rampdown = PARALLEL_SEQSCAN_RAMPDOWN_CHUNKS if self._pg14 else None
            while total < max_n:
                if fast and self.chunk_remaining <= 0:
                    c = self.chunk_size
                    n = counter
                    need = max_n - total
                    m = min(-(-need // c),                         # chunks wanted,
                            (nblocks - n) // c)                    # not reaching the end
                    if m > 0:                                      # nor the wrap
                        m = min(m, (nblocks - (n + start) % nblocks) // c)
                    if rampdown is not None and c > 1 and nblocks - c * rampdown >= 0:
                        limit = nblocks - c * rampdown
                        if self.nallocated > limit:
                            m = 0                                  # ramp down first
                        else:  # the j-th chunk after n is checked at n + j * c - 1
                            m = min(m, (limit - n + 1) // c + 1)
                    if m > 0:
                        counter = n + m * c
                        self.chunks += m
                        k = min(m * c, need)
                        self.nallocated = n + k - 1
                        self.chunk_remaining = m * c - k
                        taken.append((n, k, c))
                        total += k
                        continue
                n, k = self._advance(max_n - total, fetch)
                taken.append((n, k, k))
                if n >= nblocks:
                    break
                total += k
            if counter is not None:
                row[F_NALLOCATED] = counter
        runs = []
        record, self.runs = self.runs, None  # recorded here, one entry per chunk
        try:
            for n, k, c in taken:
                page = self._deliver(n, k)
                if page is None:
                    break
                if record is not None:
                    record.extend((page + i, min(c, k - i)) for i in range(0, k, c))
                runs.append((page, k))
        finally:
            self.runs = record
        return runs, self.ended


def trace_printer(settings, who: str):
    """A trace function for ``trace_parallel`` (stderr), or None when it is off."""
    if not settings.trace_parallel:
        return None
    return lambda msg: print(f"[parallel {who} pid {os.getpid()}] {msg}", file=sys.stderr)
