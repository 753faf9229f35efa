"""Parallel sequential scan: the engine of a Gather node (``nodeGather.c``, ``execParallel.c``).

``ParallelSeqScan(backend, rel, columns, snapshot, predicate=..., aggregates=...)`` scans a
table with the leader and up to ``nworkers`` processes of the instance's pool
(``minidb.workers.pool``), and either streams the matching rows back in batches
(``rows()``) or returns aggregates computed by every participant and combined by the
leader (``aggregate()``: count, sum, min, max, avg - avg travels as sum and count).

One query, step by step:

1. the leader takes a parallel scan slot (``minidb.heap.parallel.SharedScan``) and
   initialises it: relation, its size now, the chunk policy and caps from its settings,
   whether the scan is synchronized (``synchronize_seqscans`` and the table larger than
   ``shared_buffers / 4``, the serial scan's test);
2. it claims workers (``max_parallel_workers`` in use at most, across the instance), starts
   those not running, and sends each the task: the slot, the relation's file and columns,
   its snapshot (xmin, xmax, xip, curcid and its xid, so a worker sees exactly what the
   leader sees, its own uncommitted rows included), its session settings, the predicate
   and the aggregates;
3. every participant (the leader too, unless ``parallel_leader_participation`` is off and
   some worker was launched) runs the same loop: ``startblock_init``, then a ``HeapScan``
   whose ``block_source`` is its own ``BlockAllocator`` (and so its own bulk-read ring),
   with the MVCC filter, opportunistic pruning, then the predicate on each batch;
4. a worker sends ``rows`` messages (one per batch) or one ``partial`` message, then
   ``done`` with its statistics; the leader, between its own batches, takes whatever its
   workers have sent (without waiting), and when it has no more work of its own it waits
   for them, checking every 0.1 s that they are alive.

Failure and cancellation.  A worker's exception reaches the leader as the same exception
(minidb's errors pickle with their sqlstate; an exception that does not pickle arrives as
``InternalError`` naming it), with a note naming the worker; the worker's traceback is in
``exc.worker_traceback``.  On any exception in the leader - a worker's error,
``KeyboardInterrupt``, the consumer closing the generator early (a LIMIT) - the leader
sets the slot's CANCEL flag (workers stop before their next run of blocks), reads its
workers' remaining messages until each sent its final one (``lock_wait_timeout_ms`` +
``CANCEL_TIMEOUT_S`` at most - a worker's own waits end before - then the worker is killed
and restarts on demand), gives the workers back, releases the slot and re-raises.  A worker that dies makes the leader raise ``OperationalError``.

Contract for predicates and aggregates.  ``columns`` are the table's column names or
indexes to gather; ``predicate(cols) -> bool mask`` receives them as a list of
``(values, null mask or None)`` numpy pairs in that order, and must be picklable (it is
sent to the workers; a class with ``__call__`` defined at module level, or a compiled
expression that pickles as its source tree).  An ``Aggregate(func, column)`` names a
position in ``columns`` (``None`` only for ``count(*)``).  If the task does not pickle,
the leader scans alone (``stats.reason`` says why).

Left out: rescans (``SharedScan.reinitialize`` exists), ordered gathering (Gather Merge),
GROUP BY partial aggregation, parallel index scans.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from minidb.config import SETTINGS
from minidb.errors import (InsufficientResources, InternalError, OperationalError,
                           ProgrammingError)
from minidb.heap.heapam import SCAN_BATCH_PAGES, HeapRel, HeapScan
from minidb.heap.layout import RowLayout
from minidb.heap.mvcc import MVCCFilter
from minidb.heap.parallel import (F_STATE, BlockAllocator, SharedScan, trace_printer)
from minidb.heap.syncscan import SyncScanTable
from minidb.shmem import C as BUF_COUNTER
from minidb.txn.procarray import Snapshot
from minidb.workers.channel import POLL_S, wait_any
from minidb.workers.pool import P_PID, new_task_id, process_alive

AGG_FUNCS = ("count", "sum", "min", "max", "avg")
CANCEL_TIMEOUT_S = 5.0
SEND_TASK_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Aggregate:
    """``func`` over position ``column`` of the scan's columns (None: ``count(*)``)."""
    func: str
    column: int | None = None

    def __post_init__(self):
        if self.func not in AGG_FUNCS:
            raise ProgrammingError(f"unknown aggregate {self.func!r} (one of "
                                   f"{', '.join(AGG_FUNCS)})")
        if self.column is None and self.func != "count":
            raise ProgrammingError(f"{self.func}() needs a column")


def compute_parallel_workers(nblocks: int, settings) -> int:
    """PostgreSQL's compute_parallel_worker for a table: none below
    ``min_parallel_table_scan_size``, then one more each time the table triples, capped
    by ``max_parallel_workers_per_gather``.  For the planner."""
    threshold = settings.min_parallel_table_scan_size
    if nblocks < threshold:
        return 0
    t = max(threshold, 1)
    workers = 1
    while nblocks >= t * 3:
        workers += 1
        t *= 3
    return min(workers, settings.max_parallel_workers_per_gather)


# ---------------------------------------------------------------------------------------------
# partial aggregates
class PartialAggregates:
    """Per-participant aggregate state; ``combine`` merges another participant's."""

    __slots__ = ("aggs", "state")

    def __init__(self, aggs):
        self.aggs = list(aggs)
        self.state = [0 if a.func == "count" else [None, 0] if a.func in ("sum", "avg")
                      else None for a in self.aggs]

    def add(self, cols, nrows: int) -> None:
        st = self.state
        for i, a in enumerate(self.aggs):
            if a.column is None:
                st[i] += nrows
                continue
            vals, mask = cols[a.column]
            if mask is not None and mask.any():
                vals = vals[~mask]
            if a.func == "count":
                st[i] += len(vals)
            elif not len(vals):
                continue
            elif a.func in ("sum", "avg"):
                s = _sum(vals)
                st[i] = [s if st[i][0] is None else st[i][0] + s, st[i][1] + len(vals)]
            else:
                v = _min(vals) if a.func == "min" else _max(vals)
                if st[i] is None or (v < st[i] if a.func == "min" else v > st[i]):
                    st[i] = v

    def combine(self, other: list) -> None:
        st = self.state
        for i, a in enumerate(self.aggs):
            o = other[i]
            if a.func == "count":
                st[i] += o
            elif a.func in ("sum", "avg"):
                if o[1]:
                    st[i] = [o[0] if st[i][0] is None else st[i][0] + o[0], st[i][1] + o[1]]
            elif o is not None and (st[i] is None
                                    or (o < st[i] if a.func == "min" else o > st[i])):
                st[i] = o

    def result(self) -> list:
        out = []
        for a, s in zip(self.aggs, self.state):
            if a.func == "sum":
                out.append(s[0])
            elif a.func == "avg":
                out.append(None if not s[1] else s[0] / s[1])
            else:
                out.append(s)
        return out


def _sum(vals: np.ndarray):
    if vals.dtype.kind in "iub":
        if vals.dtype.itemsize < 8 or len(vals) < (1 << 31) // 4 and \
                max(abs(int(vals.max())), abs(int(vals.min()))) < (1 << 62) // max(len(vals), 1):
            return int(vals.sum(dtype=np.int64))
        return sum(vals.tolist())  # exact beyond int64, as PostgreSQL's numeric sum
    if vals.dtype.kind == "f":
        return float(vals.sum())
    return sum(vals.tolist())


def _min(vals: np.ndarray):
    return vals.min().item() if vals.dtype.kind in "iubf" else min(vals.tolist())


def _max(vals: np.ndarray):
    return vals.max().item() if vals.dtype.kind in "iubf" else max(vals.tolist())


# ---------------------------------------------------------------------------------------------
# statistics
@dataclass
class ParticipantStats:
    """What one participant did (for EXPLAIN ANALYZE and for the tests)."""
    who: str                # "leader" or "worker N"
    pid: int = 0
    start_block: int = -1
    chunks: int = 0         # chunks taken from the shared counter
    blocks: int = 0         # blocks handed out to it
    pages: int = 0          # pages it pinned and scanned
    tuples: int = 0         # LP_NORMAL tuples looked at
    visible: int = 0        # tuples its snapshot sees
    rows: int = 0           # rows that passed the predicate
    buffers_hit: int = 0
    buffers_read: int = 0
    io: dict | None = None  # its I/O model counters (None: io_model is none)
    runs: list | None = None  # (first block, count) of every run, if recorded
    cancelled: bool = False
    end_reported: bool = False  # it made the end-of-scan syncscan report
    cpu_s: float = 0.0      # CPU time its process spent on the scan (time.thread_time)
    wall_s: float = 0.0     # from its start block to its last batch


@dataclass
class GatherStats:
    workers_planned: int = 0
    workers_launched: int = 0
    nblocks: int = 0
    policy: str = ""
    syncscan: bool = False
    start_block: int = -1
    reason: str = ""        # why fewer workers than planned were launched, if known
    participants: list = field(default_factory=list)

    def total(self, name: str) -> int:
        return sum(getattr(p, name) for p in self.participants)

    def io(self) -> dict[str, int]:
        """The I/O model counters of all participants, summed."""
        out: dict[str, int] = {}
        for p in self.participants:
            for k, v in (p.io or {}).items():
                out[k] = out.get(k, 0) + v
        return out

    def explain_lines(self, analyze: bool = True) -> list[str]:
        """PostgreSQL-style detail lines for a Gather node in EXPLAIN (ANALYZE)."""
        lines = [f"Workers Planned: {self.workers_planned}"]
        if not analyze:
            return lines
        lines.append(f"Workers Launched: {self.workers_launched}")
        lines.append(f"Chunk Policy: {self.policy}"
                     + (f"  Synchronized Start: block {self.start_block}"
                        if self.syncscan else ""))
        for p in sorted(self.participants, key=lambda p: (p.who != "leader", p.who)):
            lines.append(f"{p.who.capitalize()}: rows={p.rows} pages={p.pages} "
                         f"chunks={p.chunks} buffers hit={p.buffers_hit} "
                         f"read={p.buffers_read}")
        io = self.io()
        if io:
            lines.append(f"I/O Model: requests={io['requests']} bytes={io['bytes']} "
                         f"seeks={io['seeks']} os cache hits={io['cache_hits']} "
                         f"misses={io['cache_misses']} read-ahead={io['readahead_pages']} "
                         f"wait={io['wait_us'] / 1000:.1f} ms")
        return lines


class RowBatch:
    """Rows from one participant's batch: ``columns`` as ``(values, null mask or None)``
    pairs in the scan's column order; ``blocks``/``offsets`` (TIDs) if asked for."""

    __slots__ = ("columns", "blocks", "offsets", "participant")

    def __init__(self, columns, blocks=None, offsets=None, participant: str = ""):
        self.columns = columns
        self.blocks = blocks
        self.offsets = offsets
        self.participant = participant

    def __len__(self) -> int:
        return len(self.columns[0][0]) if self.columns else 0


# ---------------------------------------------------------------------------------------------
# one participant's scan (the leader's and every worker's)
def _prune_hook(backend, rel):
    try:
        from minidb.heap import prune
    except ImportError:  # pragma: no cover
        return None
    fn = getattr(prune, "heap_page_prune_opt", None)
    return None if fn is None else (lambda bufs, first: fn(backend, rel, bufs, first))


def participant_batches(backend, rel: HeapRel, cols, snapshot, shared: SharedScan, spec: dict,
                        stats: ParticipantStats):
    """Yield (columns, nrows, blocks, offsets) for the rows this participant finds."""
    bm = backend.bufmgr
    settings = backend.settings
    ss = SyncScanTable(bm.seg, bm.locks.syncscan) if shared.syncscan else None
    alloc = BlockAllocator(shared, ss, participant=stats.who,
                           trace=trace_printer(settings, stats.who),
                           record=spec.get("record_runs", False))
    stats.start_block = alloc.startblock_init()
    if ss is not None and settings.trace_syncscan:
        print(f"[syncscan pid {os.getpid()}] \"{rel.name}\" (base/{rel.relfilenode}): "
              f"parallel {stats.who} starts at block {stats.start_block} of {alloc.nblocks}",
              file=sys.stderr)
    io = backend.instance.smgr.iomodel
    io0 = io.local_counters() if io is not None else None
    hit0, read0 = int(bm.stats[BUF_COUNTER["buffers_hit"]]), int(bm.stats[BUF_COUNTER["buffers_read"]])
    filt = MVCCFilter(bm, snapshot, backend.instance.clog)
    scan = HeapScan(backend, rel, cols, batch_pages=spec.get("batch_pages", SCAN_BATCH_PAGES),
                    tuple_filter=filt,
                    prepare_pages=_prune_hook(backend, rel) if spec.get("prune", True) else None,
                    block_source=alloc)
    predicate = spec.get("predicate")
    with_tids = spec.get("with_tids", False)
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    try:
        for batch in scan.batches():
            columns = batch.columns
            n = len(batch)
            stats.visible += n
            blocks = offsets = None
            if with_tids:
                blocks, offsets = batch.blocks, batch.offsets
            if predicate is not None:
                mask = np.asarray(predicate(columns), dtype=bool)
                if mask.shape != (n,):
                    raise ProgrammingError(f"the scan predicate returned shape {mask.shape} "
                                           f"for a batch of {n} rows")
                if not mask.all():
                    columns = [(v[mask], None if m is None else m[mask]) for v, m in columns]
                    if with_tids:
                        blocks, offsets = blocks[mask], offsets[mask]
                    n = int(np.count_nonzero(mask))
            stats.rows += n
            if n:
                yield columns, n, blocks, offsets
    finally:
        stats.chunks = alloc.chunks
        stats.blocks = alloc.blocks
        stats.pages = scan.pages_scanned
        stats.tuples = scan.tuples_seen
        stats.runs = alloc.runs
        stats.cancelled = shared.cancelled
        stats.end_reported = alloc.end_reported
        stats.cpu_s = time.thread_time() - cpu0
        stats.wall_s = time.perf_counter() - wall0
        stats.buffers_hit = int(bm.stats[BUF_COUNTER["buffers_hit"]]) - hit0
        stats.buffers_read = int(bm.stats[BUF_COUNTER["buffers_read"]]) - read0
        if io is not None:
            io1 = io.local_counters()
            stats.io = {k: io1[k] - io0[k] for k in io1}


# ---------------------------------------------------------------------------------------------
# the worker's side
def _apply_settings(backend, values: dict) -> None:
    s = backend.settings
    for name, value in values.items():
        if SETTINGS[name].context == "session" and s.get(name) != value:
            s.set(name, value)


def run_worker_task(backend, results, task_id: int, spec: dict) -> None:
    """Run one scan task in a pool worker; every outcome ends with a final message."""
    leader = spec["leader_pid"]

    def send(msg):
        results.send(msg, alive=lambda: process_alive(leader))

    stats = ParticipantStats(who=f"worker {spec['worker']}", pid=os.getpid())
    try:
        _apply_settings(backend, spec["settings"])
        inst = backend.instance
        shared = SharedScan(inst.seg, inst.locks, spec["slot"])
        if shared.gen != spec["gen"] or not shared.row[F_STATE]:
            raise InternalError(f"parallel scan slot {spec['slot']} was released before "
                                "the worker started")
        rel = HeapRel(spec["rel_name"], spec["rfn"], RowLayout(spec["rel_columns"]),
                      spec["rel_oid"])
        xmin, xmax, xip, curcid, myxid = spec["snapshot"]
        snapshot = Snapshot(xmin, xmax, np.array(xip, dtype=np.int64), curcid, myxid)
        aggs = spec.get("aggregates")
        partial = PartialAggregates(aggs) if aggs else None
        for columns, n, blocks, offsets in participant_batches(backend, rel, spec["cols"],
                                                              snapshot, shared, spec, stats):
            if partial is not None:
                partial.add(columns, n)
            else:
                send(("rows", task_id, columns, blocks, offsets))
        if partial is not None:
            send(("partial", task_id, partial.state))
        send(("done", task_id, stats))
    except BrokenPipeError:
        pass  # the leader is gone: nobody to tell
    except BaseException as e:  # noqa: BLE001 - everything goes back to the leader
        tb = traceback.format_exc()
        try:
            pickle.loads(pickle.dumps(e))
            payload = e
        except Exception:  # noqa: BLE001
            payload = InternalError(f"{type(e).__name__}: {e}")
        try:
            send(("error", task_id, payload, tb, stats))
        except (BrokenPipeError, TimeoutError, OSError):
            pass
    finally:
        try:
            backend.bufmgr.release_all()
        except Exception:  # pragma: no cover
            pass


# ---------------------------------------------------------------------------------------------
# the leader's side
class ParallelSeqScan:
    """A parallel sequential scan led by ``backend`` (see the module docstring).

    ``nworkers`` is the number of workers planned (default: ``max_parallel_workers_per_gather``);
    fewer are launched when the pool is busy.  ``stats`` (``GatherStats``) is filled as the
    scan runs and complete once it ended.
    """

    def __init__(self, backend, rel: HeapRel, columns, snapshot=None, *, predicate=None,
                 aggregates=None, nworkers: int | None = None, prune: bool = True,
                 with_tids: bool = False, record_runs: bool = False,
                 batch_pages: int = SCAN_BATCH_PAGES):
        self.backend = backend
        self.rel = rel
        self.cols = [rel.layout.column_index(c) if isinstance(c, str) else int(c)
                     for c in columns]
        if snapshot is None:
            snapshot = backend.xact.current_snapshot()
        self.snapshot = snapshot
        self.predicate = predicate
        self.aggregates = [a if isinstance(a, Aggregate) else Aggregate(*a)
                           for a in (aggregates or [])]
        for a in self.aggregates:
            if a.column is not None and not 0 <= a.column < len(self.cols):
                raise ProgrammingError(f"aggregate {a.func} names column position "
                                       f"{a.column}, the scan has {len(self.cols)} columns")
        s = backend.settings
        self.nworkers = s.max_parallel_workers_per_gather if nworkers is None else int(nworkers)
        self.prune = prune
        self.with_tids = with_tids
        self.record_runs = record_runs
        self.batch_pages = batch_pages
        self.stats = GatherStats()

    # -- public ----------------------------------------------------------------------------------
    def rows(self):
        """Generator of ``RowBatch`` es (workers' and leader's, interleaved)."""
        if self.aggregates:
            raise ProgrammingError("a scan with aggregates returns them from aggregate()")
        return self._run(None)

    def aggregate(self) -> list:
        """The aggregates' final values, in order (avg as a float, sum None over no rows)."""
        if not self.aggregates:
            raise ProgrammingError("no aggregates were asked for")
        partial = PartialAggregates(self.aggregates)
        for _ in self._run(partial):
            pass
        return partial.result()

    # -- the Gather loop -------------------------------------------------------------------------
    def _trace(self, msg: str) -> None:
        if self.backend.settings.trace_parallel:
            print(f"[parallel leader pid {os.getpid()}] {msg}", file=sys.stderr)

    def _spec(self, shared: SharedScan) -> dict:
        s = self.backend.settings
        snap = self.snapshot
        return {
            "leader_pid": os.getpid(), "slot": shared.slot, "gen": shared.gen,
            "rel_name": self.rel.name, "rfn": self.rel.relfilenode, "rel_oid": self.rel.oid,
            "rel_columns": list(self.rel.layout.columns), "cols": self.cols,
            "snapshot": (snap.xmin, snap.xmax, snap.xip.tolist(), snap.curcid, snap.myxid),
            "settings": dict(s.items()), "predicate": self.predicate,
            "aggregates": self.aggregates, "prune": self.prune, "with_tids": self.with_tids,
            "record_runs": self.record_runs, "batch_pages": self.batch_pages,
        }

    def _run(self, partial: PartialAggregates | None):
        backend = self.backend
        bm = backend.bufmgr
        inst = backend.instance
        s = backend.settings
        st = self.stats
        pool = getattr(inst, "pool", None)
        nblocks = bm.smgr.nblocks(self.rel.relfilenode)
        st.nblocks = nblocks
        st.policy = s.parallel_chunk_policy
        st.workers_planned = max(0, self.nworkers)
        shared = None
        active: dict[int, ParticipantStats] = {}
        task_id = new_task_id()
        local = None
        try:
            try:
                shared = SharedScan.acquire(inst.seg, inst.locks)
            except InsufficientResources:  # every slot in use: the leader scans alone
                shared = SharedScan.private()
                st.reason = "no free parallel scan slot"
            st.syncscan = bool(s.synchronize_seqscans and nblocks > bm.nbuffers // 4)
            shared.initialize(self.rel.relfilenode, nblocks, policy=s.parallel_chunk_policy,
                              max_chunk=s.parallel_max_chunk_blocks,
                              fixed_chunk=s.parallel_fixed_chunk_blocks,
                              nchunks=s.parallel_seqscan_nchunks, syncscan=st.syncscan)
            spec = self._spec(shared)
            if st.workers_planned and pool is None:
                st.reason = "no worker pool (max_worker_processes = 0)"
            elif st.workers_planned and shared.slot >= 0:
                self._launch(pool, spec, task_id, active)
            st.workers_launched = len(active)
            self._trace(f"\"{self.rel.name}\": {nblocks} blocks, policy {st.policy}, "
                        f"workers planned {st.workers_planned}, launched {len(active)}"
                        + (f" ({st.reason})" if st.reason else ""))
            if not active or s.parallel_leader_participation:
                lead = ParticipantStats(who="leader", pid=os.getpid())
                st.participants.append(lead)
                local = participant_batches(backend, self.rel, self.cols, self.snapshot,
                                            shared, spec, lead)
            while True:
                yield from self._poll(pool, active, task_id, 0.0, partial)
                if local is not None:
                    try:
                        columns, n, blocks, offsets = next(local)
                    except StopIteration:
                        local = None
                        continue
                    if partial is not None:
                        partial.add(columns, n)
                    else:
                        yield RowBatch(columns, blocks, offsets, "leader")
                    continue
                if not active:
                    break
                yield from self._poll(pool, active, task_id, POLL_S, partial)
            st.start_block = shared.start_block
            pgstat = backend.pgstat
            pgstat.count(self.rel.oid, "seq_scan")
            pgstat.count(self.rel.oid, "seq_tup_read", st.total("visible"))
        except BaseException:
            if shared is not None:
                shared.cancel()
            if local is not None:
                local.close()
                local = None
            self._stop_workers(pool, active, task_id)
            raise
        finally:
            if local is not None:
                local.close()
            for w in list(active):  # only if stopping them failed: never leave a claim
                pool.give_up(w)
            active.clear()
            if shared is not None:
                shared.release()

    def _launch(self, pool, spec: dict, task_id: int, active: dict) -> None:
        s = self.backend.settings
        try:
            pickle.dumps(spec)
        except Exception as e:  # noqa: BLE001
            self.stats.reason = f"the task cannot be sent to workers: {e}"
            return
        claimed = pool.claim(self.stats.workers_planned, s.max_parallel_workers)
        if len(claimed) < self.stats.workers_planned:
            self.stats.reason = "not enough free workers (max_parallel_workers or the pool)"
        try:
            for w in pool.start_claimed(claimed):
                msg = ("scan", task_id, dict(spec, worker=w))
                try:
                    pool.tasks[w].send(msg, timeout=SEND_TASK_TIMEOUT_S)
                except (TimeoutError, OSError):
                    pool.give_up(w)
                    continue
                active[w] = ParticipantStats(who=f"worker {w}",
                                             pid=int(pool.table[w, P_PID]))
        except BaseException:  # interrupted while starting: no claim may outlive us
            for w in claimed:
                if w not in active:
                    pool.give_up(w)
            raise

    def _poll(self, pool, active: dict, task_id: int, timeout: float, partial):
        """Take the messages the active workers have sent (waiting up to ``timeout`` for
        one); yields row batches; raises a worker's error or death."""
        if not active:
            return
        chans = {pool.results[w]: w for w in active}
        ready = wait_any(list(chans), timeout)
        if not ready:
            if timeout > 0:
                self._check_alive(pool, active)
            return
        for ch in ready:
            w = chans[ch]
            while w in active:
                msg = ch.recv(0.0)
                if msg is None:
                    break
                if len(msg) < 2 or msg[1] != task_id:
                    continue  # left over from an earlier task
                kind = msg[0]
                if kind == "rows":
                    if partial is None:
                        yield RowBatch(msg[2], msg[3], msg[4], active[w].who)
                elif kind == "partial":
                    if partial is not None:
                        partial.combine(msg[2])
                elif kind == "done":
                    self.stats.participants.append(msg[2])
                    del active[w]
                    pool.release(w)
                elif kind == "error":
                    del active[w]
                    pool.release(w)
                    self.stats.participants.append(msg[4])
                    raise _worker_error(msg[2], msg[3], w, msg[4].pid)

    def _check_alive(self, pool, active: dict) -> None:
        for w, ps in list(active.items()):
            pid = int(pool.table[w, P_PID]) or ps.pid
            if not process_alive(pid):
                del active[w]
                pool.give_up(w)
                raise OperationalError(f"parallel worker {w} (pid {pid}) exited unexpectedly "
                                       f"during a scan of \"{self.rel.name}\"")

    def _stop_workers(self, pool, active: dict, task_id: int) -> None:
        """After a cancel: read each worker's messages up to its final one, or kill it."""
        if pool is None or pool.closed:  # the instance closed first: its pool stopped them
            active.clear()
            return
        # a worker's own waits end within lock_wait_timeout_ms: kill only after that
        deadline = (time.monotonic() + CANCEL_TIMEOUT_S
                    + self.backend.settings.lock_wait_timeout_ms / 1000.0)
        while active and time.monotonic() < deadline:
            for w in list(active):
                ch = pool.results[w]
                while True:
                    msg = ch.recv(0.0)
                    if msg is None:
                        break
                    if len(msg) >= 2 and msg[1] == task_id and msg[0] in ("done", "error"):
                        st = msg[2] if msg[0] == "done" else msg[4]
                        self.stats.participants.append(st)
                        del active[w]
                        pool.release(w)
                        break
                if w in active and not process_alive(int(pool.table[w, P_PID])):
                    del active[w]
                    pool.give_up(w)
            if active:
                wait_any([pool.results[w] for w in active], 0.05)
        for w in list(active):
            del active[w]
            pool.give_up(w)


def _worker_error(exc: BaseException, tb: str, w: int, pid: int) -> BaseException:
    if not isinstance(exc, BaseException):  # pragma: no cover
        exc = InternalError(repr(exc))
    exc.worker_traceback = tb
    exc.add_note(f"raised in parallel worker {w} (pid {pid}); its traceback is in "
                 ".worker_traceback")
    return exc


def parallel_seq_scan(backend, rel: HeapRel, columns, snapshot=None, **kw) -> ParallelSeqScan:
    """Shorthand for ``ParallelSeqScan(...)`` (see its docstring)."""
    return ParallelSeqScan(backend, rel, columns, snapshot, **kw)
