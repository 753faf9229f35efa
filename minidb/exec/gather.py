"""Gather: a parallel sequential scan's leader, and the plan nodes of a parallel aggregate
(PostgreSQL's ``nodeGather.c`` and ``execParallel.c``; Finalize Aggregate -> Gather -> Partial
Aggregate -> Parallel Seq Scan).

``ParallelSeqScan(backend, rel, columns, snapshot, predicate=..., aggregates=...)`` is the
Gather's loop: it scans a table with the leader and up to ``nworkers`` processes of the
instance's pool (``minidb.workers.pool``), and either streams the matching rows back in
batches (``rows()``), or returns every participant's partial aggregates (``partials()``) or
their combination (``aggregate()``: count, sum, min, max, avg).  What each participant runs
is in ``minidb.exec.parallel_scan``; the statistics EXPLAIN ANALYZE shows are ``GatherStats``.

One query, step by step:

1. the leader takes a parallel scan slot (``minidb.heap.parallel.SharedScan``) and
   initialises it: relation, its size now, the chunk policy and caps from its settings,
   whether the scan is synchronized (``synchronize_seqscans`` and the table larger than
   ``shared_buffers / 4``, the serial scan's test);
2. it claims workers (``max_parallel_workers`` in use at most, across the instance), starts
   those not running, and sends each the task ``parallel_scan.run_worker_task`` with its
   argument: the slot, the relation's file and columns, its snapshot, its session settings,
   the predicate and the aggregates;
3. every participant (the leader too, unless ``parallel_leader_participation`` is off and
   some worker was launched) runs ``parallel_scan.participant_batches``;
4. a worker sends ``rows`` messages (one per batch) or one ``partial`` message, then
   ``done`` with its statistics; the leader, between its own batches, takes whatever its
   workers have sent (without waiting), and when it has no more work of its own it waits
   for them, checking every 0.1 s that they are alive.

Failure and cancellation.  A worker's exception reaches the leader as the same exception,
with a note naming the worker; the worker's traceback is in ``exc.worker_traceback``.  On any
exception in the leader - a worker's error, ``KeyboardInterrupt``, the consumer closing the
generator early (a LIMIT) - the leader sets the slot's CANCEL flag (workers stop before their
next run of blocks), reads its workers' remaining messages until each sent its final one
(``lock_wait_timeout_ms`` + ``CANCEL_TIMEOUT_S`` at most - a worker's own waits end before -
then the worker is killed and restarts on demand), gives the workers back, releases the slot
and re-raises.  A worker that dies makes the leader raise ``OperationalError``.  If the task
does not pickle, the leader scans alone (``stats.reason`` says why).

The plan nodes.  Only the planner's narrow rule builds them (``Planner._parallel_agg``): one
table, no GROUP BY / HAVING / DISTINCT / ORDER BY / LIMIT / FOR UPDATE, aggregates count(*),
count(col) on a fixed-width column, and sum / avg / min / max of integer columns (exact
whatever the order in which participants combine, so the result equals the serial plan's), a
WHERE over fixed-width columns.  ``GatherNode`` runs: it builds the scan from the two nodes
below it - the WHERE travels to the workers as ``ScanPredicate`` (``ParallelSeqScanNode.
predicate``), the aggregates as ``PartialAggNode.specs`` - and returns one row per
participant holding its partial states (``minidb.exec.agg.AggState``, in object columns).
``FinalizeAggNode`` combines them and computes the final values with the serial Aggregate's
states.  ``PartialAggNode`` and ``ParallelSeqScanNode`` describe what every participant runs;
they do not run as nodes of the leader's tree.  Gather instruments itself and those two for
EXPLAIN ANALYZE from the participants' statistics (``GatherStats``), which see the workers'
rows and buffers that a leader-side per-node wrapper would not.

Left out: rescans (``SharedScan.reinitialize`` exists), ordered gathering (Gather Merge),
GROUP BY partial aggregation, parallel index scans.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from minidb.errors import (InsufficientResources, InternalError, OperationalError,
                           ProgrammingError)
from minidb.exec.agg import AggState
from minidb.exec.chunk import Chunk
from minidb.exec.compile import K, compile_expr
from minidb.exec.expr import and_all, deparse
from minidb.exec.nodes import PlanNode
from minidb.exec.parallel_scan import (Aggregate, PartialAggregates, ParticipantStats, RowBatch,
                                       ScanPredicate, participant_batches, run_worker_task)
from minidb.heap.heapam import SCAN_BATCH_PAGES, HeapRel
from minidb.heap.parallel import SharedScan
from minidb.storage.freelist import is_bulk_read
from minidb.workers.channel import POLL_S, wait_any
from minidb.workers.pool import P_PID, new_task_id, process_alive

__all__ = ["Aggregate", "GatherStats", "ParallelSeqScan", "RowBatch", "FinalizeAggNode",
           "GatherNode", "PartialAggNode", "ParallelSeqScanNode"]

CANCEL_TIMEOUT_S = 5.0
SEND_TASK_TIMEOUT_S = 5.0


# ---------------------------------------------------------------------------------------------
# statistics (EXPLAIN ANALYZE)
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
    began: float = 0.0      # time.monotonic(): the Gather started, its tasks were all sent,
    launched: float = 0.0   # it ended (compare with the participants' started / ended:
    ended: float = 0.0      # a worker's start latency, the leader's wait for its workers)

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



# ---------------------------------------------------------------------------------------------
# the leader's loop
class ParallelSeqScan:
    """A parallel sequential scan led by ``backend``: the Gather's loop (see the module
    docstring).

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
        return self._run(False)

    def partials(self):
        """Generator of every participant's ``PartialAggregates`` (the leader's when its own
        scan ends, each worker's when it arrives): the rows a Gather over a Partial
        Aggregate returns."""
        if not self.aggregates:
            raise ProgrammingError("no aggregates were asked for")
        return self._run(True)

    def aggregate(self) -> list:
        """The aggregates' final values, in order (avg as a float, sum None over no rows)."""
        total = PartialAggregates(self.aggregates)
        for part in self.partials():
            total.combine(part)
        return total.values()

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
            "snapshot": (snap.xmin, snap.xmax, snap.xip.tolist(), snap.curcid, snap.myxid,
                         sorted(snap.subxids)),
            "settings": dict(s.items()), "predicate": self.predicate,
            "aggregates": self.aggregates, "prune": self.prune, "with_tids": self.with_tids,
            "record_runs": self.record_runs, "batch_pages": self.batch_pages,
        }

    def _run(self, aggregating: bool):
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
        local = mine = None
        st.began = time.monotonic()
        try:
            try:
                shared = SharedScan.acquire(inst.seg, inst.locks)
            except InsufficientResources:  # every slot in use: the leader scans alone
                shared = SharedScan.private()
                st.reason = "no free parallel scan slot"
            st.syncscan = bool(s.synchronize_seqscans and is_bulk_read(nblocks, bm.nbuffers))
            shared.initialize(self.rel.relfilenode, nblocks, policy=s.parallel_chunk_policy,
                              max_chunk=s.parallel_max_chunk_blocks,
                              fixed_chunk=s.parallel_fixed_chunk_blocks,
                              nchunks=s.parallel_seqscan_nchunks, syncscan=st.syncscan)
            spec = self._spec(shared)
            if st.workers_planned and pool is None:
                st.reason = "no worker pool (max_worker_processes = 0)"
            elif st.workers_planned and shared.slot >= 0:
                # the participants a worker can expect (the leader's count is the real one)
                spec["participants"] = (st.workers_planned
                                        + bool(s.parallel_leader_participation))
                self._launch(pool, spec, task_id, active)
            st.workers_launched = len(active)
            st.launched = time.monotonic()
            self._trace(f"\"{self.rel.name}\": {nblocks} blocks, policy {st.policy}, "
                        f"workers planned {st.workers_planned}, launched {len(active)}"
                        + (f" ({st.reason})" if st.reason else ""))
            if not active or s.parallel_leader_participation:
                lead = ParticipantStats(who="leader", pid=os.getpid())
                st.participants.append(lead)
                local = participant_batches(backend, self.rel, self.cols, self.snapshot,
                                            shared, dict(spec, participants=len(active) + 1),
                                            lead)
                mine = PartialAggregates(self.aggregates) if aggregating else None
            while True:
                yield from self._poll(pool, active, task_id, 0.0, aggregating)
                if local is not None:
                    try:
                        columns, n, blocks, offsets = next(local)
                    except StopIteration:
                        local = None
                        if mine is not None:
                            yield mine
                        continue
                    if mine is not None:
                        mine.add(columns, n)
                    else:
                        yield RowBatch(columns, blocks, offsets, "leader")
                    continue
                if not active:
                    break
                yield from self._poll(pool, active, task_id, POLL_S, aggregating)
            st.start_block = shared.start_block
            st.ended = time.monotonic()
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
                try:
                    pool.send_task(w, task_id, run_worker_task, dict(spec, worker=w),
                                   timeout=SEND_TASK_TIMEOUT_S)
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

    def _poll(self, pool, active: dict, task_id: int, timeout: float, aggregating: bool):
        """Take the messages the active workers have sent (waiting up to ``timeout`` for
        one); yields row batches or partial aggregates; raises a worker's error or death."""
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
                    if not aggregating:
                        yield RowBatch(msg[2], msg[3], msg[4], active[w].who)
                elif kind == "partial":
                    if aggregating:
                        yield PartialAggregates(self.aggregates, msg[2])
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


# ---------------------------------------------------------------------------------------------
# the plan nodes
class ParallelSeqScanNode(PlanNode):
    """What every participant scans (shown by EXPLAIN; the Gather above runs it)."""
    label = "Parallel Seq Scan"

    def __init__(self, seq):
        super().__init__([], seq.keys, seq.types)
        self.entry = seq.entry
        self.attnos = list(seq.attnos)
        self.quals = list(seq.quals)

    def title(self):
        t = self.entry.table.name
        return f"Parallel Seq Scan on {t if self.entry.alias == t else f'{t} {self.entry.alias}'}"

    def details(self, qualify):
        return ["Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []

    def predicate(self, params, now):
        """The WHERE clause as a picklable ``ScanPredicate`` over the scan's columns (or None)."""
        if not self.quals:
            return None
        layout = {(self.entry.index, a): i for i, a in enumerate(self.attnos)}
        return ScanPredicate(and_all(self.quals), layout, params, now)

    def execute(self, ectx):   # pragma: no cover - never run on its own
        raise InternalError("a Parallel Seq Scan runs in the participants of its Gather")


class PartialAggNode(PlanNode):
    """What every participant aggregates (shown by EXPLAIN; the Gather above runs it).
    ``specs``: ``(func, position in the scan's columns or None)`` per aggregate."""
    label = "Partial Aggregate"

    def __init__(self, child, aggs):
        super().__init__([child], [("a", j) for j in range(len(aggs))], [a.type for a in aggs])
        attnos = list(child.attnos)
        self.specs = [(a.name, None if a.arg is None else attnos.index(a.arg.key[1]))
                      for a in aggs]

    def execute(self, ectx):   # pragma: no cover - never run on its own
        raise InternalError("a Partial Aggregate runs in the participants of its Gather")


class GatherNode(PlanNode):
    """Runs the parallel scan below it; one row per participant, each column an object array
    of that participant's ``AggState`` s (see the module docstring)."""
    label = "Gather"

    def __init__(self, child, nworkers):
        super().__init__([child], child.keys, child.types)
        self.nworkers = nworkers

    def details(self, qualify):
        return [f"Workers Planned: {self.nworkers}"]

    def run(self, ectx):
        return self.execute(ectx)   # it instruments itself (``_instrument``)

    def execute(self, ectx):
        partial = self.children[0]
        scan = partial.children[0]
        backend = ectx.backend
        rel = backend.catalog.heap_rel(scan.entry.table.name)
        pred = scan.predicate(ectx.params, ectx.session.xact.start_time)
        if pred is not None:
            probe = compile_expr(pred.expr, pred.layout, pred.params, pred.now)
            if isinstance(probe, K):       # a constant WHERE
                if not probe.value:
                    return                 # no participant, no rows
                pred = None
        nworkers = min(self.nworkers, backend.settings.max_parallel_workers_per_gather)
        t0 = time.perf_counter()
        ps = ParallelSeqScan(backend, rel, scan.attnos, ectx.snapshot, predicate=pred,
                             aggregates=[Aggregate(f, c) for f, c in partial.specs],
                             nworkers=nworkers)
        for part in ps.partials():
            cols = []
            for st in part.states:
                col = np.empty(1, dtype=object)
                col[0] = st
                cols.append((col, None))
            yield Chunk(cols, 1)
        if ectx.analyze:
            self._instrument(ectx, ps.stats, time.perf_counter() - t0)

    def _instrument(self, ectx, stats, elapsed):
        partial = self.children[0]
        scan = partial.children[0]
        nparts = max(len(stats.participants), 1)
        for node, loops, rows in ((self, 1, len(stats.participants)),
                                  (partial, nparts, nparts),
                                  (scan, nparts, stats.total("rows"))):
            ins = ectx.instr_for(node)
            ins.loops += loops
            ins.rows += rows
            ins.startup += elapsed * loops
            ins.total += elapsed * loops
        ex = ectx.instr_for(self).extra
        for line in stats.explain_lines(analyze=True)[1:]:
            k, _, v = line.partition(": ")
            ex[k] = v


class FinalizeAggNode(PlanNode):
    """Combines the participants' partial states (``AggState.combine``) and computes the
    final values."""
    label = "Finalize Aggregate"

    def __init__(self, gather, aggs, specs=None):
        super().__init__([gather], [("a", j) for j in range(len(aggs))], [a.type for a in aggs])
        self.aggs = list(aggs)
        if specs is not None and list(specs) != gather.children[0].specs:
            raise InternalError(f"Finalize Aggregate: the planner's aggregates {specs} are "
                                f"not those of the Partial Aggregate {gather.children[0].specs}")

    def execute(self, ectx):
        states = [AggState.for_agg(a) for a in self.aggs]
        it = self.children[0].run(ectx)
        try:
            for chunk in it:
                for st, (parts, _) in zip(states, chunk.cols):
                    for part in parts:
                        st.combine(part)
        finally:
            it.close()
        yield Chunk([st.result() for st in states], 1)
