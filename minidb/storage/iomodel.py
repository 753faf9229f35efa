"""The I/O model: a simulated OS page cache, Linux-style read-ahead, and one shared disk.

This machine reads a gigabyte in half a second even cold, so the I/O effects the seed
experiments are about (kernel read-ahead defeated by block-at-a-time parallel allocation;
concurrent scans of a table larger than memory) cannot be seen on the real device.  With
``io_model`` set to ``hdd``, ``ssd`` or ``custom``, every read of a relation file
(``Smgr.read_blocks``, i.e. every buffer-pool miss) also goes through this model, which
decides what the read *would* have cost and makes the reader pay it by sleeping.  The data
itself still comes from the real file; the model only adds time and counts.

Three parts, all shared by every process of the instance (``minidb.shmem``: regions
``oc_tag``, ``oc_stamp``, ``oc_ready``, ``io_state``, ``io_busy``, ``io_counters``; one
lock, ``iomodel``, guards them all, so a lookup, the disk reservation and the cache
insertion of one read are one critical section, as a page-cache miss in Linux inserts the
locked page before it submits the I/O):

1. **OS page cache** of ``os_cache_mb``: ``C = os_cache_mb * 128`` pages, organised as
   ``C / 8`` sets of 8 ways.  Page ``(file, block)`` lives in set
   ``(block + hash(file)) mod (C / 8)``, so consecutive blocks of a file fall in
   consecutive sets and a sequential scan sees exact LRU (block ``b`` evicts block
   ``b - C``); other patterns see 8-way set-associative LRU.  Each page has an LRU stamp
   and a *ready time*: the moment its disk read completes.  A read that finds its page
   costs no disk time, but waits until the page is ready if it is still in flight (as a
   reader waits on a locked page in Linux).  Pages written by the buffer manager enter the
   cache as ready (write-back to the disk is not modelled: it happens later, off the
   writer's path).
2. **Read-ahead**, ``io_readahead_policy``: ``ondemand`` (Linux 2.6.23 and later, the
   default) or ``perfile`` (the kernels before it).  Both keep state per stream: a
   stream is one thread of one process reading one file fork (a backend with its own
   file descriptor, as in PostgreSQL).

   *ondemand* (``_ondemand``, Linux's ``ondemand_readahead`` of 2.6.31 to 5.x).  Read-ahead
   is called only when a read finds a demanded page missing (synchronous) or finds one
   that carries a *marker* (asynchronous; the marker, Linux's ``PG_readahead``, is a flag
   on the page in the shared cache, ``oc_mark``, cleared by the reader that meets it).
   A plain hit does nothing.  The stream's ``file_ra_state`` (start, size, async_size)
   then decides: at block 0, or for a sequential miss (the block this stream read last
   or the next), an initial window ``init(n)``; at the expected next position, the next
   window ``next(size)``; on a marker another stream left, the window continues from
   the first page after it that is not cached (so any process reaching the marker keeps
   a shared stream going); otherwise *context read-ahead*: if more pages than asked are
   cached just before the read, it is a stream (a window of that history plus the read,
   at most ``max``); else a random read, which reads only what was asked.  The window's
   page ``start + size - async_size`` gets the marker if this read brought it in.  So
   the participants of a ``block``-allocated parallel scan, each reading every other
   block, still get read-ahead, as on Linux (the seed's 742 -> 331 MB/s, not a
   collapse).

   *perfile* (``_readahead``), the state machine below: strict, as Linux's before
   2.6.23 for one file descriptor.  Its state: where its
   previous read ended (``prev_end``), its window ``win`` (0: none) and how far it has
   read ahead (``ra_end``).  For a read of blocks [b, b + n), ``end = b + n``:

   =============================================  ========================================
   the read ...                                    read-ahead does
   =============================================  ========================================
   begins where the stream's previous read ended   sequential: ``win = init(n)`` if it was
   (``b == prev_end``), or at block 0               0 (and ``ra_end = end``); then if
                                                   ``ra_end - end < win`` (the reader is
                                                   within a window of the read-ahead end,
                                                   Linux's PG_readahead marker): ``win =
                                                   next(win)`` unless just set, and read
                                                   [max(ra_end, end), + win) ahead
   begins anywhere else                            reset: ``win = 0``, ``ra_end = end``
   =============================================  ========================================

   with ``max = io_readahead_kb / 8`` blocks, ``init(n) = 4p`` if ``p <= max/32``, ``2p``
   if ``p <= max/4``, else ``max`` (``p`` = n rounded up to a power of two), and
   ``next(s) = 4s`` if ``s < max/16``, ``2s`` if ``s <= max/2``, else ``max`` (Linux's
   ``get_init_ra_size`` / ``get_next_ra_size``: a stream reading one block at a time
   gets windows of 2, 4, 8, 16, 16 ... blocks, and keeps one to two windows ahead).  A
   read's demanded pages that are missing, and the window's pages that are missing, are
   read from the disk in maximal runs of consecutive blocks, one request per run.  The
   reader waits only for its demanded pages; read-ahead pages arrive in the background
   (Linux's asynchronous read-ahead).  Sequential detection is strict, as FreeBSD's and
   as Linux's for a single stream: a participant of a ``block``-allocated parallel scan
   reads every other block, never continues its previous read, and gets no read-ahead.
3. **The disk**: one queue shared by all processes, rotational or solid state
   (``io_rotational``; the ``hdd`` preset is rotational, ``ssd`` is not).  The device's
   bandwidth and seek (or latency) live in the shared segment (``io_device``), so an
   experiment can calibrate them in the run that uses them (``set_device``).

   *Rotational.*  A request of ``k`` pages issued at time ``a`` starts at ``s = max(a,
   busy_until)`` and occupies the disk until ``busy_until = s + seek + k' * 8192 /
   bandwidth``, page ``j`` ready at ``s + seek + (j + 1 - cached) * 8192 / bandwidth``:

   ===================================================  ===================================
   the request ...                                      pays
   ===================================================  ===================================
   continues the previous request on the disk (same     no seek (the disk is streaming)
   file, starts at its end) and was issued before
   that request finished
   continues it but arrives after the disk went idle    no seek: the drive kept reading
                                                        into its read-ahead (track) cache
                                                        while idle; ``cached`` = the pages
                                                        it read meanwhile (the idle time
                                                        over a page's time, at most
                                                        ``io_drive_cache_kb``) are ready
                                                        at once, the rest stream on
   with ``io_scheduler = cfq``: continues this          no seek: its time slice goes on
   process's own previous request, within               (Linux's CFQ: slice_sync 100 ms,
   ``io_cfq_slice_idle_ms`` of its end, and the         slice_idle 8 ms, the defaults of
   process has used less than                           2.6.18's block/cfq-iosched.c)
   ``io_cfq_slice_sync_ms`` of disk time since its
   slice began (its last seek)
   anything else                                        ``io_seek_ms``
   ===================================================  ===================================

   Without the drive's cache (``io_drive_cache_kb = 0``) a request that arrives after
   the disk went idle pays the seek even at the next block.  CFQ is modelled by what its
   slices do to the disk's work, not by reordering: requests are still served in arrival
   order, but a process streaming through its slice is not charged a seek for the other
   processes' requests served in between (CFQ would have served them in their own
   slices).  So the throughput of N interleaved sequential readers is CFQ's (one seek per
   slice each, not one per switch); their waits are spread over their requests instead
   of bunched between slices, and the disk idles for no one (slice_idle's waiting is
   not charged).  ``noop`` and ``deadline`` serve requests in arrival order; deadline's
   sorting of a queue never applies here, because a request is reserved when it arrives.

   *Solid state.*  The device serves ``io_queue_depth`` requests at once: a request
   takes the command slot that frees first, pays the latency (``io_seek_ms``) there,
   overlapping other requests' latencies, then transfers its pages over the bandwidth the
   requests share (``busy_until``).  Every request pays the latency: there is no seek to
   save by contiguity, only the request count.  The ``ssd`` preset has queue depth 32
   (SATA's NCQ); with depth 1 the device serves one request at a time.

Paying the cost.  Each thread keeps a virtual clock ``vt`` (``max(vt, now)`` at each
read); a read advances it to the time its demanded pages are ready, and the thread sleeps
``vt - now`` once that reaches ``SLEEP_SLICE_S`` (1 ms), so time is owed in small amounts
and paid in slices of at least 1 ms.  Parallel overlap and contention are therefore real
in wall-clock time, and CPU work overlaps with read-ahead as it does in Linux.  A reader
that must hold a page before it asks for the next (a ``block``-allocated parallel
participant) calls ``pace`` first, which sleeps off what it owes (waking
``PACE_WAKE_EARLY_S``, a sleep's least overshoot, early): in wall-clock time it then takes
its next block when its previous read completed, not up to a slice earlier.

Presets (``io_model``): ``hdd`` = 150 MB/s, 8 ms seek, rotational; ``ssd`` = 500 MB/s,
0.1 ms latency, queue depth 32; ``custom`` = ``io_seq_mb_per_s``, ``io_seek_ms``,
``io_rotational`` and ``io_queue_depth``.  ``none`` (the default) skips the model: reads
go straight to the file and nothing here is counted.

Counters (``minidb.shmem.IO_COUNTERS``, exact, in shared memory and per thread): requests, bytes and
seeks of the disk; cache hits and misses (demanded pages only); read-ahead pages (pages
read from the disk that nobody had demanded yet); pages written into the cache; the
disk's busy time and the time readers waited (microseconds); pages served from the
drive's read-ahead cache; requests that overlapped another (queue depth).

Invariants:
  1. A page is in at most one way of its set (lookups and insertions happen under the
     ``iomodel`` lock).
  2. ``busy_until`` never decreases; requests are served in the order they were reserved.
  3. Counters only grow, except when the instance restarts.

Left out: the I/O scheduler's sorting and merging of queued requests (and CFQ's real
reordering, see above), a rotational drive's command queueing (NCQ) and its several cache
segments (its cache follows the last request only), write-back of dirty pages to the disk,
the active/inactive page lists (replacement is LRU), and the request size limit
(``max_sectors_kb``).
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from minidb.config import BLCKSZ
from minidb.shmem import IO_COUNTERS, OS_CACHE_WAYS

# io_model presets: bandwidth MB/s, seek (rotational) or latency (solid state) ms,
# rotational, queue depth
PRESETS = {"hdd": (150.0, 8.0, True, 1), "ssd": (500.0, 0.1, False, 32)}
SLEEP_SLICE_S = 0.001  # owed time is paid in sleeps of at least this much
# ``pace`` wakes this much before the demanded pages are ready: a sleep overshoots by at
# least Linux's default timer slack (50 us, prctl PR_SET_TIMERSLACK), so asking for the
# full wait would add that much to every paced read
PACE_WAKE_EARLY_S = 50e-6
_HASH = 2654435761     # Knuth's multiplicative hash, spreads files over the sets

IC = {name: i for i, name in enumerate(IO_COUNTERS)}
_HITS, _WAIT = IC["cache_hits"], IC["wait_us"]

# io_state entries (int64)
S_LAST_FILE = 0   # file key of the previous request on the disk
S_LAST_END = 1    # block after its last block
S_CLOCK = 2       # LRU stamp counter
# io_device entries (float64)
D_PAGE_TIME = 0   # seconds to transfer one page
D_SEEK = 1        # seconds of a seek (rotational) or of a request's latency (solid state)


def disk_parameters(settings) -> tuple[float, float]:
    """(bandwidth in MB/s, seek or latency in ms) of the configured model."""
    if settings.io_model in PRESETS:
        return PRESETS[settings.io_model][:2]
    return float(settings.io_seq_mb_per_s), float(settings.io_seek_ms)


def device_kind(settings) -> tuple[bool, int]:
    """(rotational, queue depth) of the configured model."""
    if settings.io_model in PRESETS:
        return PRESETS[settings.io_model][2:]
    return bool(settings.io_rotational), int(settings.io_queue_depth)


def init_ra_size(n: int, ra_max: int) -> int:
    """Linux's get_init_ra_size: the first window for a read of ``n`` blocks."""
    p = 1 << max(0, (n - 1).bit_length())
    if p <= ra_max // 32:
        return 4 * p
    if p <= ra_max // 4:
        return 2 * p
    return ra_max


def next_ra_size(cur: int, ra_max: int) -> int:
    """Linux's get_next_ra_size: how the window grows."""
    if cur < ra_max // 16:
        return 4 * cur
    if cur <= ra_max // 2:
        return 2 * cur
    return ra_max


class _Stream:
    """Read-ahead state of one (thread, file fork): ``perfile``'s window and read-ahead
    end, ``ondemand``'s ``file_ra_state`` (start, size, async_size)."""
    __slots__ = ("prev_end", "win", "ra_end", "start", "size", "async_size")

    def __init__(self):
        self.prev_end = -1
        self.win = 0
        self.ra_end = 0
        self.start = 0
        self.size = 0
        self.async_size = 0


class _ThreadState(threading.local):
    def __init__(self):
        self.pid = os.getpid()
        self.vt = 0.0
        self.streams: dict[int, _Stream] = {}
        self.counters = np.zeros(len(IO_COUNTERS), dtype=np.int64)
        # CFQ: this process's queue - file, block after its last request, when that
        # ended, disk time used in its current slice
        self.cfq = [-1, -1, -1e18, 0.0]


class IOModel:
    """One process's handle on the shared I/O model (created at open, inherited by forks)."""

    def __init__(self, seg, lock, settings):
        self.name = settings.io_model
        mb_s, seek_ms = disk_parameters(settings)
        self.rotational, qd = device_kind(settings)
        self.ra_max = settings.io_readahead_kb * 1024 // BLCKSZ
        self.drive_cache_pages = (settings.io_drive_cache_kb * 1024 // BLCKSZ
                                  if self.rotational else 0)
        self.scheduler = settings.io_scheduler if self.rotational else "none"
        self.slice_sync = settings.io_cfq_slice_sync_ms / 1000.0
        self.slice_idle = settings.io_cfq_slice_idle_ms / 1000.0
        self.lock = lock
        self.tag = seg.oc_tag
        self.stamp = seg.oc_stamp
        self.ready = seg.oc_ready
        self.mark = seg.oc_mark
        self.ondemand = settings.io_readahead_policy == "ondemand"
        self.state = seg.io_state
        self.busy = seg.io_busy
        self.device = seg.io_device
        self.slots = seg.io_slots[:qd] if not self.rotational else seg.io_slots[:1]
        self.shared_counters = seg.io_counters
        self.nsets = len(self.tag) // OS_CACHE_WAYS
        self._tag2 = self.tag.reshape(self.nsets, OS_CACHE_WAYS)
        self._stamp2 = self.stamp.reshape(self.nsets, OS_CACHE_WAYS)
        self._ready2 = self.ready.reshape(self.nsets, OS_CACHE_WAYS)
        self._mark2 = self.mark.reshape(self.nsets, OS_CACHE_WAYS)
        self._local = _ThreadState()
        with self.lock:
            if self.device[D_PAGE_TIME] == 0.0:  # a new segment: the configured device
                self._set_device(mb_s, seek_ms)

    def _set_device(self, mb_s: float, seek_ms: float) -> None:
        self.device[D_PAGE_TIME] = BLCKSZ / (mb_s * 1e6)
        self.device[D_SEEK] = seek_ms / 1000.0

    def set_device(self, mb_s: float, seek_ms: float) -> None:
        """Change the device's bandwidth and seek (or latency) for every process of the
        instance (an experiment calibrates its device in the run that uses it)."""
        with self.lock:
            self._set_device(mb_s, seek_ms)

    @property
    def page_time(self) -> float:
        return float(self.device[D_PAGE_TIME])

    @property
    def seek_time(self) -> float:
        return float(self.device[D_SEEK])

    def describe(self) -> str:
        mb_s = BLCKSZ / self.page_time / 1e6
        if self.rotational:
            dev = (f"rotational, {mb_s:g} MB/s, seek {self.seek_time * 1000:g} ms, drive "
                   f"cache {self.drive_cache_pages * BLCKSZ // 1024} kB, scheduler "
                   f"{self.scheduler}")
            if self.scheduler == "cfq":
                dev += (f" (slice_sync {self.slice_sync * 1000:g} ms, slice_idle "
                        f"{self.slice_idle * 1000:g} ms)")
        else:
            dev = (f"solid state, {mb_s:g} MB/s, latency {self.seek_time * 1000:g} ms, "
                   f"queue depth {len(self.slots)}")
        policy = "ondemand" if self.ondemand else "perfile"
        return (f"io_model={self.name}: {dev}, read-ahead {self.ra_max} blocks ({policy}), "
                f"OS cache {len(self.tag)} pages")

    # -- per-thread state ---------------------------------------------------------------------
    def _thread(self) -> _ThreadState:
        st = self._local
        if st.pid != os.getpid():  # a forked child: its parent's streams are not its own
            st.__init__()
        return st

    def local_counters(self) -> dict[str, int]:
        """This thread's counters (what its reads cost), for per-query reporting."""
        c = self._thread().counters
        return {name: int(c[i]) for i, name in enumerate(IO_COUNTERS)}

    def counters(self) -> dict[str, int]:
        with self.lock:
            c = self.shared_counters.copy()
        return {name: int(c[i]) for i, name in enumerate(IO_COUNTERS)}

    # -- reads ---------------------------------------------------------------------------------
    def read(self, rfn: int, fork: int, first: int, n: int, file_blocks: int) -> None:
        """Charge the read of blocks [first, first + n) of a file of ``file_blocks``."""
        st = self._thread()
        now = time.monotonic()
        vt = max(st.vt, now)
        key = rfn * 4 + fork
        stream = st.streams.get(key)
        if stream is None:
            stream = st.streams[key] = _Stream()
        end = first + n
        with self.lock:
            mark_at = -1
            if n == 1 and self.ondemand:
                h1, r1, m1 = self._lookup1(key, first)
                if h1 and not m1:  # a plain hit: Linux's read-ahead is not even called
                    ra_lo = ra_hi = 0
                else:
                    ra_lo, ra_hi, mark_at = self._ondemand(
                        stream, key, first, n, first, m1, file_blocks)
            elif n == 1:
                h1, r1, _ = self._lookup1(key, first)
                ra_lo, ra_hi = self._readahead(stream, first, n)
                ra_hi = min(ra_hi, file_blocks)
            if n == 1:  # a single block (PostgreSQL's reads): plain Python while it hits
                if h1 and ra_hi <= ra_lo:
                    wait = max(0.0, r1 - vt)
                    vt = max(vt, r1)
                    sc, lc = self.shared_counters, st.counters
                    sc[_HITS] += 1
                    lc[_HITS] += 1
                    if wait > 0.0:
                        sc[_WAIT] += int(wait * 1e6)
                        lc[_WAIT] += int(wait * 1e6)
                    demand = None
                else:
                    demand = np.arange(first, end, dtype=np.int64)
                    hit = np.array([h1])
                    ready = np.array([r1])
            else:
                demand = np.arange(first, end, dtype=np.int64)
                hit, ready = self._lookup(key, demand)
                if self.ondemand:
                    # Linux looks at the request's pages in order: the first missing one
                    # starts a synchronous read-ahead, a marked one an asynchronous one
                    marked = self._marks(key, demand) if hit.any() else np.zeros(n, bool)
                    trig = np.flatnonzero(~hit | marked)
                    if trig.size:
                        i = int(trig[0])
                        ra_lo, ra_hi, mark_at = self._ondemand(
                            stream, key, first + i, n - i, first, bool(hit[i]), file_blocks)
                    else:
                        ra_lo = ra_hi = 0
                else:
                    ra_lo, ra_hi = self._readahead(stream, first, n)
                    ra_hi = min(ra_hi, file_blocks)
            if demand is not None:
                vt = self._read_general(key, first, n, demand, hit, ready, ra_lo, ra_hi,
                                        vt, st, mark_at)
        stream.prev_end = end
        st.vt = vt
        owed = vt - now
        if owed >= SLEEP_SLICE_S:
            time.sleep(max(0.0, vt - time.monotonic()))

    def owed(self) -> float:
        """Seconds until the pages this thread last demanded are ready (its virtual clock
        ahead of now; 0 or less: they are in its hands)."""
        return self._thread().vt - time.monotonic()

    def pace(self) -> bool:
        """Wait until the pages this thread demanded are ready, before it asks for more
        work: ``read`` pays owed time in slices of ``SLEEP_SLICE_S``, so a reader may run
        ahead of its reads by up to a slice; a parallel participant that takes its next
        block only once its previous read completed (PostgreSQL's rhythm,
        ``HeapScan._source_batches``) calls this first.  Wakes ``PACE_WAKE_EARLY_S`` early
        (the sleep's own overshoot covers it): a wait shorter than that is not slept.
        True if it slept."""
        st = self._thread()
        owed = st.vt - time.monotonic()
        if owed <= PACE_WAKE_EARLY_S:
            return False
        time.sleep(owed - PACE_WAKE_EARLY_S)
        return True

    def _read_general(self, key, first, n, demand, hit, ready, ra_lo, ra_hi, vt, st,
                      mark_at: int = -1) -> float:
        """The rest of ``read`` (the ``iomodel`` lock held): read what is missing of the
        demanded pages and of the read-ahead window [ra_lo, ra_hi), put the read-ahead
        marker on page ``mark_at`` if this read brought it in; returns the reader's new
        virtual clock."""
        end = first + n
        local = np.zeros(len(IO_COUNTERS), dtype=np.int64)
        local[IC["cache_hits"]] = int(np.count_nonzero(hit))
        local[IC["cache_misses"]] = n - local[IC["cache_hits"]]
        missing = demand[~hit]
        if ra_hi > ra_lo:
            window = np.arange(ra_lo, ra_hi, dtype=np.int64)
            window = window[(window < first) | (window >= end)]
            if window.size:
                whit, _ = self._lookup(key, window, touch=False)
                extra = window[~whit]
                local[IC["readahead_pages"]] = extra.size
                missing = np.union1d(missing, extra)
        if missing.size:
            done = self._disk(key, missing, vt, local)
            ready[~hit] = done[np.searchsorted(missing, demand[~hit])]
            if mark_at >= 0:
                i = int(np.searchsorted(missing, mark_at))
                if i < missing.size and int(missing[i]) == mark_at:
                    self._set_mark(key, mark_at)
        demand_ready = float(ready.max()) if ready.size else 0.0
        wait = max(0.0, demand_ready - vt)
        vt = max(vt, demand_ready)
        local[IC["wait_us"]] = int(wait * 1e6)
        self.shared_counters += local
        st.counters += local
        return vt

    def _ondemand(self, s: _Stream, key: int, offset: int, req: int, first: int,
                  hit_marker: bool, file_blocks: int) -> tuple[int, int, int]:
        """Linux's ondemand_readahead (mm/readahead.c, 2.6.31 to 5.x) for a read that
        reached ``offset`` (``req`` pages of the request left) either missing
        (``hit_marker`` False: synchronous read-ahead) or on a page carrying a marker
        (True: asynchronous; the marker is cleared).  Updates the stream's
        ``file_ra_state``; returns the window to read, [lo, hi), and the page to mark
        (-1: none)."""
        mx = self.ra_max
        if mx <= 0:
            return 0, 0, -1
        if hit_marker:
            self._marks(key, np.array([offset], dtype=np.int64), clear=True)
        initial = False
        if offset == 0:
            initial = True
        elif offset in (s.start + s.size - s.async_size, s.start + s.size) and s.size:
            # the expected next read: ramp the window up and read the next one
            s.start += s.size
            s.size = next_ra_size(s.size, mx)
            s.async_size = s.size
        elif hit_marker:
            # a marker someone (maybe another process) left: continue from the cache
            probe = np.arange(offset + 1, offset + 1 + mx, dtype=np.int64)
            cached, _ = self._lookup(key, probe, touch=False)
            miss = np.flatnonzero(~cached)
            if not miss.size:
                return 0, 0, -1
            start = int(probe[miss[0]])
            s.start = start
            s.size = next_ra_size(start - offset + req, mx)
            s.async_size = s.size
        elif req > mx or offset - s.prev_end in (-1, 0):
            initial = True    # an oversize read, or a sequential cache miss
        else:
            # context read-ahead: the pages just before it are in the cache
            lo = max(0, offset - mx)
            before = np.arange(lo, offset, dtype=np.int64)
            cached, _ = self._lookup(key, before, touch=False)
            gaps = np.flatnonzero(~cached)
            history = offset - lo - (int(gaps[-1]) + 1 if gaps.size else 0)
            if history <= req:
                return offset, min(offset + req, file_blocks), -1  # random: as asked
            if history >= offset:
                history *= 2   # cached from the start of the file: a long stream
            s.start = offset
            s.size = min(history + req, mx)
            s.async_size = 1
        if initial:
            s.start = offset
            s.size = init_ra_size(req, mx)
            s.async_size = s.size - req if s.size > req else s.size
        # a read that would hit its own marker right away: merge the next window in
        if offset == s.start and s.size == s.async_size:
            add = next_ra_size(s.size, mx)
            if s.size + add <= mx:
                s.async_size = add
                s.size += add
            else:
                s.size = mx
                s.async_size = mx >> 1
        lo, hi = s.start, min(s.start + s.size, file_blocks)
        mark = s.start + s.size - s.async_size
        return lo, hi, (mark if lo <= mark < hi else -1)

    def _readahead(self, s: _Stream, first: int, n: int) -> tuple[int, int]:
        """Update the stream for a read of [first, first + n); returns the blocks to read
        ahead now as [lo, hi) (empty if none)."""
        end = first + n
        if self.ra_max <= 0:
            return 0, 0
        if first != s.prev_end and first != 0:
            s.win = 0
            s.ra_end = end
            return 0, 0
        if s.win == 0:
            s.win = init_ra_size(n, self.ra_max)
            s.ra_end = end
        elif s.ra_end - end < s.win:
            s.win = next_ra_size(s.win, self.ra_max)
        if s.ra_end - end >= s.win:
            return 0, 0
        lo = max(s.ra_end, end)
        s.ra_end = lo + s.win
        return lo, s.ra_end

    # -- the cache -----------------------------------------------------------------------------
    def _sets(self, key: int, blocks: np.ndarray) -> np.ndarray:
        return (blocks + (key * _HASH) % self.nsets) % self.nsets

    def _lookup1(self, key: int, block: int) -> tuple[bool, float, bool]:
        """``_lookup`` of one block in plain Python: (hit, ready time, marked)."""
        s = (block + (key * _HASH) % self.nsets) % self.nsets
        tag = (key << 32) | block
        row = self._tag2[s].tolist()
        if tag not in row:
            return False, 0.0, False
        w = row.index(tag)
        clock = int(self.state[S_CLOCK]) + 1
        self._stamp2[s, w] = clock
        self.state[S_CLOCK] = clock
        return True, float(self._ready2[s, w]), bool(self._mark2[s, w])

    def _marks(self, key: int, blocks: np.ndarray, clear: bool = False) -> np.ndarray:
        """Which of ``blocks`` are cached with a read-ahead marker (cleared if asked)."""
        tags = (key << 32) | blocks
        sets = self._sets(key, blocks)
        match = self._tag2[sets] == tags[:, None]
        hit = match.any(axis=1)
        way = match.argmax(axis=1)
        marked = hit & (self._mark2[sets, way] != 0)
        if clear and marked.any():
            self._mark2[sets[marked], way[marked]] = 0
        return marked

    def _set_mark(self, key: int, block: int) -> None:
        s = (block + (key * _HASH) % self.nsets) % self.nsets
        row = self._tag2[s].tolist()
        tag = (key << 32) | block
        if tag in row:
            self._mark2[s, row.index(tag)] = 1

    def _lookup(self, key: int, blocks: np.ndarray, touch: bool = True):
        """(hit mask, ready times) of ``blocks``; hits get a fresh LRU stamp."""
        tags = (key << 32) | blocks
        sets = self._sets(key, blocks)
        ways = self._tag2[sets]
        match = ways == tags[:, None]
        hit = match.any(axis=1)
        way = match.argmax(axis=1)
        ready = np.where(hit, self._ready2[sets, way], 0.0)
        if touch and hit.any():
            hs, hw = sets[hit], way[hit]
            clock = int(self.state[S_CLOCK])
            self._stamp2[hs, hw] = clock + np.arange(1, hs.size + 1)
            self.state[S_CLOCK] = clock + hs.size
        return hit, ready

    def _insert(self, key: int, blocks: np.ndarray, ready: np.ndarray) -> None:
        """Put ``blocks`` (sorted, not cached) in the cache, each replacing its set's least
        recently used page."""
        tags = (key << 32) | blocks
        sets = self._sets(key, blocks)
        step = self.nsets
        for lo in range(0, blocks.size, step):
            s, t, r = sets[lo:lo + step], tags[lo:lo + step], ready[lo:lo + step]
            if np.unique(s).size != s.size:  # gaps in the blocks: one page at a time
                for i in range(s.size):
                    self._insert_distinct(s[i:i + 1], t[i:i + 1], r[i:i + 1])
            else:
                self._insert_distinct(s, t, r)

    def _insert_distinct(self, sets, tags, ready) -> None:
        way = self._stamp2[sets].argmin(axis=1)
        clock = int(self.state[S_CLOCK])
        self._tag2[sets, way] = tags
        self._stamp2[sets, way] = clock + np.arange(1, sets.size + 1)
        self._ready2[sets, way] = ready
        self._mark2[sets, way] = 0
        self.state[S_CLOCK] = clock + sets.size

    # -- the disk ------------------------------------------------------------------------------
    def _disk(self, key: int, blocks: np.ndarray, issued: float, local: np.ndarray) -> np.ndarray:
        """Read ``blocks`` (sorted, unique) in runs of consecutive blocks, one request per
        run, issued at ``issued``; insert them in the cache; return their ready times."""
        breaks = np.flatnonzero(np.diff(blocks) != 1) + 1
        starts = np.concatenate(([0], breaks))
        ends = np.concatenate((breaks, [blocks.size]))
        done = np.empty(blocks.size, dtype=np.float64)
        serve = self._rotational_request if self.rotational else self._solid_state_request
        for a, b in zip(starts.tolist(), ends.tolist()):
            done[a:b] = serve(key, int(blocks[a]), b - a, issued, local)
            local[IC["requests"]] += 1
            local[IC["bytes"]] += (b - a) * BLCKSZ
        self._insert(key, blocks, done)
        return done

    def _rotational_request(self, key: int, first: int, k: int, issued: float,
                            local: np.ndarray) -> np.ndarray:
        """One request of ``k`` pages at ``first`` on a spinning disk: the ready time of
        each page (see the module docstring: streaming, the drive's cache, CFQ)."""
        pt, seek_t = float(self.device[D_PAGE_TIME]), float(self.device[D_SEEK])
        busy = float(self.busy[0])
        last_file, last_end = int(self.state[S_LAST_FILE]), int(self.state[S_LAST_END])
        begin = max(issued, busy)
        contiguous = key == last_file and first == last_end
        cached = 0    # pages of the request already in the drive's read-ahead cache
        if contiguous and issued <= busy:
            seek = 0.0                              # the disk is still streaming
        elif contiguous and self.drive_cache_pages:
            # the drive kept reading after the last request while it was idle
            seek = 0.0
            cached = min(k, self.drive_cache_pages, int((issued - busy) / pt))
        else:
            seek = seek_t
        if seek and self.scheduler == "cfq":
            c = self._thread().cfq
            if (c[0] == key and c[1] == first and issued <= c[2] + self.slice_idle
                    and c[3] < self.slice_sync):
                seek = 0.0   # this process's slice goes on: its stream was not broken
        j = np.arange(1, k + 1, dtype=np.float64)
        done = begin + seek + pt * np.maximum(j - cached, 0.0)
        if cached:
            local[IC["drive_cache_pages"]] += cached
        local[IC["seeks"]] += seek > 0.0
        service = seek + (k - cached) * pt
        local[IC["disk_busy_us"]] += int(service * 1e6)
        end = float(done[-1])
        self.busy[0] = max(busy, end)
        self.state[S_LAST_FILE] = key
        self.state[S_LAST_END] = first + k
        if self.scheduler == "cfq":
            c = self._thread().cfq
            used = 0.0 if seek else c[3]
            c[:] = [key, first + k, end, used + service]
        return done

    def _solid_state_request(self, key: int, first: int, k: int, issued: float,
                             local: np.ndarray) -> np.ndarray:
        """One request on a solid-state device: it takes a free command slot (of
        ``io_queue_depth``), pays the latency there (overlapping other requests'), then
        transfers its pages over the bandwidth the requests share."""
        pt, lat = float(self.device[D_PAGE_TIME]), float(self.device[D_SEEK])
        slots = self.slots
        s = int(slots.argmin())
        start = max(issued, float(slots[s]))
        if len(slots) > 1 and (slots > start).any():
            local[IC["overlapped"]] += 1
        xfer = max(start + lat, float(self.busy[0]))
        done = xfer + pt * np.arange(1, k + 1, dtype=np.float64)
        end = float(done[-1])
        self.busy[0] = end
        slots[s] = end
        local[IC["seeks"]] += 1   # every request pays the latency (maybe overlapped)
        local[IC["disk_busy_us"]] += int((lat + k * pt) * 1e6)
        return done

    # -- writes and maintenance ----------------------------------------------------------------
    def wrote(self, rfn: int, fork: int, first: int, n: int) -> None:
        """Blocks written by the buffer manager enter the cache (ready at once)."""
        key = rfn * 4 + fork
        blocks = np.arange(first, first + n, dtype=np.int64)
        with self.lock:
            hit, _ = self._lookup(key, blocks)
            new = blocks[~hit]
            if new.size:
                self._insert(key, new, np.full(new.size, time.monotonic()))
            self.shared_counters[IC["pages_written"]] += n
        self._thread().counters[IC["pages_written"]] += n

    def drop_cache(self) -> None:
        """Empty the simulated OS cache (``echo 1 > /proc/sys/vm/drop_caches``) and forget
        the disk head's position; this thread's read-ahead state is reset too."""
        with self.lock:
            self.tag.fill(-1)
            self.stamp.fill(0)
            self.ready.fill(0.0)
            self.state[S_LAST_FILE] = -1
            self.state[S_LAST_END] = 0
        self._thread().streams.clear()
        self._thread().cfq[:] = [-1, -1, -1e18, 0.0]
