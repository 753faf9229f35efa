"""A parallel sequential scan, one participant's part: what the leader and every worker of a
Gather run (``nodeGather.c``'s ``ExecParallel*`` counterpart on the participants' side,
``table_block_parallelscan_*`` under it).

* ``participant_batches`` is one participant's scan: ``BlockAllocator.startblock_init`` on the
  shared scan slot (``minidb.heap.parallel.SharedScan``), then a ``HeapScan`` whose
  ``block_source`` is its own allocator (and so its own bulk-read ring), with the MVCC filter
  and opportunistic pruning (``minidb.heap.prune.PagePruner``), then the predicate on each
  batch.  It fills the participant's ``ParticipantStats``.
* ``run_worker_task`` is the task function a leader sends to a pool worker
  (``minidb.workers.pool``: the pool runs the function it is given and knows nothing of
  scans).  The worker applies the leader's session settings, rebuilds the relation and the
  leader's snapshot (xmin, xmax, xip, curcid and the leader's xid: it sees the leader's own
  uncommitted rows and nothing the leader does not), runs ``participant_batches`` and sends a
  ``rows`` message per batch, or one ``partial`` message with its aggregate states, then
  ``done`` with its statistics.  Every outcome ends with a final message (``done`` or
  ``error``): an exception travels back as itself when it pickles (minidb's errors pickle
  with their sqlstate), as ``InternalError`` naming its class when not, with the worker's
  traceback.
* ``PartialAggregates`` is a participant's partial aggregation: one ``minidb.exec.agg.
  AggState`` per ``Aggregate(func, column)``, the same states the serial Aggregate node uses;
  the leader combines the participants' states (``AggState.combine``).
* ``ScanPredicate`` is a WHERE clause that can travel to the workers.

Contract for predicates.  The scan's columns are handed to ``predicate(cols) -> bool mask``
as a list of ``(values, null mask or None)`` numpy pairs in the scan's column order; the
predicate must pickle: a class with ``__call__`` defined at module level, or a compiled
expression that pickles as its source tree (``ScanPredicate``).

The leader's side - claiming workers, interleaving its own batches with its workers'
messages, cancellation - is the Gather's (``minidb.exec.gather``).
"""

from __future__ import annotations

import os
import pickle
import resource
import sys
import time
import traceback
from dataclasses import dataclass

import numpy as np

from minidb.config import SETTINGS
from minidb.errors import InternalError, ProgrammingError
from minidb.exec.agg import AggState
from minidb.exec.chunk import Chunk
from minidb.exec.compile import compile_expr, truth
from minidb.heap.heapam import SCAN_BATCH_PAGES, HeapRel, HeapScan
from minidb.heap.layout import RowLayout
from minidb.heap.mvcc import MVCCFilter
from minidb.heap.parallel import F_STATE, BlockAllocator, SharedScan, trace_printer
from minidb.heap.prune import PagePruner
from minidb.heap.syncscan import SyncScanTable
from minidb.shmem import C as BUF_COUNTER
from minidb.txn.procarray import Snapshot
from minidb.workers.pool import process_alive

__all__ = ["AGG_FUNCS", "Aggregate", "PartialAggregates", "ParticipantStats", "RowBatch",
           "ScanPredicate", "participant_batches", "run_worker_task"]

AGG_FUNCS = ("count", "sum", "min", "max", "avg")


# ---------------------------------------------------------------------------------------------
# partial aggregates
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


class PartialAggregates:
    """One participant's partial aggregates: an ``AggState`` per ``Aggregate``."""

    __slots__ = ("aggs", "states")

    def __init__(self, aggs, states=None):
        self.aggs = list(aggs)
        self.states = [AggState(a.func) for a in self.aggs] if states is None else list(states)

    def add(self, cols, nrows: int) -> None:
        """The transition over one batch of ``nrows`` rows (the scan's columns)."""
        for a, st in zip(self.aggs, self.states):
            if a.column is None:
                st.add_rows(nrows)
            else:
                st.add(*cols[a.column])

    def combine(self, other: "PartialAggregates") -> None:
        for st, o in zip(self.states, other.states):
            st.combine(o)

    def values(self) -> list:
        """The final values, in order (avg a float, sum None over no rows)."""
        return [st.value() for st in self.states]


class ScanPredicate:
    """A WHERE clause for a parallel scan: picklable (its state is the expression tree, the
    column layout, the parameters and ``now``); compiled on first call in each process."""

    def __init__(self, expr, layout, params=(), now=None):
        self.expr = expr
        self.layout = dict(layout)
        self.params = list(params)
        self.now = now
        self._c = None

    def __getstate__(self):
        return {"expr": self.expr, "layout": self.layout, "params": self.params,
                "now": self.now}

    def __setstate__(self, st):
        self.__dict__.update(st)
        self._c = None

    def __call__(self, cols):
        if self._c is None:
            self._c = compile_expr(self.expr, self.layout, self.params, self.now)
        n = len(cols[0][0]) if cols else 0
        t = truth(self._c, Chunk(list(cols), n))
        if isinstance(t, (bool, np.bool_)):
            return np.full(n, bool(t))
        return np.asarray(t, dtype=bool)


# ---------------------------------------------------------------------------------------------
# statistics and rows
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
    waits: int = 0          # voluntary context switches meanwhile (it blocked: a lock, I/O)
    preempted: int = 0      # involuntary ones (another process took its core)
    page_faults: int = 0    # minor faults meanwhile (first touches of the shared pool)
    started: float = 0.0    # time.monotonic() when its scan started and ended (one clock
    ended: float = 0.0      # for every process of the machine: CLOCK_MONOTONIC)
    task_cpu_s: float = 0.0  # a worker: CPU of its whole task (setup, scan, messages)



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
def _thread_rusage():
    """This thread's resource usage (Linux), for the context-switch counts; else None."""
    try:
        return resource.getrusage(resource.RUSAGE_THREAD)
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not Linux
        return None


def participant_batches(backend, rel: HeapRel, cols, snapshot, shared: SharedScan, spec: dict,
                        stats: ParticipantStats):
    """Yield (columns, nrows, blocks, offsets) for the rows this participant finds."""
    bm = backend.bufmgr
    settings = backend.settings
    ss = SyncScanTable(bm.seg, bm.locks.syncscan) if shared.syncscan else None
    alloc = BlockAllocator(shared, ss, participant=stats.who,
                           trace=trace_printer(settings, stats.who),
                           record=spec.get("record_runs", False))
    alloc.participants = spec.get("participants", 1)
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
                    prepare_pages=PagePruner(backend, rel) if spec.get("prune", True) else None,
                    block_source=alloc)
    predicate = spec.get("predicate")
    with_tids = spec.get("with_tids", False)
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    stats.started = time.monotonic()
    ru0 = _thread_rusage()
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
        stats.ended = time.monotonic()
        ru1 = _thread_rusage()
        if ru0 is not None and ru1 is not None:
            stats.waits = ru1.ru_nvcsw - ru0.ru_nvcsw
            stats.preempted = ru1.ru_nivcsw - ru0.ru_nivcsw
            stats.page_faults = ru1.ru_minflt - ru0.ru_minflt
        stats.buffers_hit = int(bm.stats[BUF_COUNTER["buffers_hit"]]) - hit0
        stats.buffers_read = int(bm.stats[BUF_COUNTER["buffers_read"]]) - read0
        if io is not None:
            io1 = io.local_counters()
            stats.io = {k: io1[k] - io0[k] for k in io1}



# ---------------------------------------------------------------------------------------------
# the worker's side: the task function
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

    cpu0 = time.thread_time()
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
        xmin, xmax, xip, curcid, myxid, subxids = spec["snapshot"]
        snapshot = Snapshot(xmin, xmax, np.array(xip, dtype=np.int64), curcid, myxid,
                            frozenset(subxids))
        aggs = spec.get("aggregates")
        partial = PartialAggregates(aggs) if aggs else None
        for columns, n, blocks, offsets in participant_batches(backend, rel, spec["cols"],
                                                              snapshot, shared, spec, stats):
            if partial is not None:
                partial.add(columns, n)
            else:
                send(("rows", task_id, columns, blocks, offsets))
        if partial is not None:
            send(("partial", task_id, partial.states))
        stats.task_cpu_s = time.thread_time() - cpu0
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

