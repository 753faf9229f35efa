"""One backend's transaction: its state, xid, command ids and snapshots (``xact.c``).

State machine (``Transaction.state``)::

    state        event                           next        performed by
    ----------   -----------------------------   ---------   --------------------------
    IDLE         begin()  (BEGIN)                INPROGRESS  begin
    IDLE         start_statement() (implicit)    INPROGRESS  start_statement
    INPROGRESS   error inside a BEGIN block      FAILED      fail (xid aborted at once;
                                                             with savepoints, only the
                                                             innermost level's)
    INPROGRESS   savepoint() / release()         INPROGRESS  savepoint / release
    INPROGRESS   rollback_to()                   INPROGRESS  rollback_to
    INPROGRESS   commit()                        IDLE        commit
    INPROGRESS   rollback()                      IDLE        rollback
    FAILED       rollback_to() (a live level)    INPROGRESS  rollback_to
    FAILED       commit() / rollback()           IDLE        rollback (commit = rollback)
    FAILED       start_statement()               error 25P02 start_statement

A transaction gets an xid only at its first write (``xid_for_write``); a read-only
transaction never takes one and never appears in anyone's snapshot.  Each statement runs
under a command id; ``command_done(wrote=True)`` advances it so that the next statement sees
what this one wrote and a statement never sees its own writes (cmin/cmax).

Snapshots: READ COMMITTED takes a fresh snapshot at every statement and drops it (and the
published xmin) at the end of the statement, so an idle-in-transaction session does not
hold back pruning; REPEATABLE READ takes one at its first statement and keeps it until the
end.  SERIALIZABLE is refused with a clear error (SSI is not implemented).

Savepoints (``savepoint`` / ``release`` / ``rollback_to``) are subtransactions with xids of
their own: ``minidb.txn.subxact`` has their rules.  ``xid`` stays the top-level xid;
``xid_for_write`` returns the innermost level's (the one a write stamps on its tuples) and
``mine_xids`` is None without subtransaction xids, else the set of the transaction's live
xids (TransactionIdIsCurrentTransactionId's answer).

Catalog changes: ``catalog_changed`` says this transaction changed the catalog (its end
invalidates every process's catalog cache) and ``pending_deletes`` lists (relfilenode,
at_commit) - a relation file created in the transaction is removed if it aborts, one
dropped or truncated when it commits.  The ``on_end`` callback (``minidb.catalog.storage``
via the backend) consumes both once the end is visible in the proc array.

The end of a transaction with an xid, in order (RecordTransactionCommit, then
CommitTransaction's steps): (1) the commit (abort) record, carrying the relation files to
drop and the live subtransaction xids, is written to the WAL and - for a commit, unless
synchronous_commit is off - flushed; (2) the commit log gets the status (of the whole tree
at once), with the commit record's LSN as its page's group LSN (the page is not written
before that WAL is); (3) the xid leaves the proc array; (4) the
``on_end`` callback: catalog invalidation, pending deletes, statistics; (5) the relation
locks are released.  A checkpoint that takes its redo point between (1) and (2) waits
for (2) before it writes the commit log (``delay_chkpt``): otherwise neither replay (the
record is before the redo point) nor the checkpoint would give the commit log the status.

Heavyweight locks (``minidb.txn.lmgr``) are transaction-scoped: commit, abort and the
abort of a failed block release them all, last - after the transaction has left the proc
array and after the ``on_end`` callback has sent the catalog invalidation and removed the
pending files (PostgreSQL's order: a waiter that gets an AccessExclusive holder's lock sees
the transaction ended, the new catalog and no stale buffers of a dropped file).

Autocommit is the caller's business: a statement outside ``begin()`` starts an implicit
transaction, and the caller commits it when the statement ends.
"""

from __future__ import annotations

import datetime as _dt
import struct
import sys
import time as _time

from minidb.errors import (ActiveSqlTransaction, InFailedSqlTransaction, NotSupportedError,
                           NoActiveSqlTransaction)
from minidb.txn.clog import ABORTED
from minidb.txn.procarray import ProcArray, Snapshot
from minidb.txn.subxact import Level, find_level
from minidb.wal.record import RM_XACT, XLOG_XACT_ABORT, XLOG_XACT_COMMIT

XACT = struct.Struct("<qI")  # commit time (us since the epoch), relations to drop; then rfns
# then, when the transaction has subtransaction xids: their count (uint32) and the xids
_NSUB = struct.Struct("<I")


def pack_xact(when_us: int, rels, subxids=()) -> bytes:
    """The main data of a commit / abort record (``minidb.recovery.unpack_xact`` reads it)."""
    data = XACT.pack(when_us, len(rels)) + struct.pack(f"<{len(rels)}Q", *rels)
    if subxids:
        data += _NSUB.pack(len(subxids)) + struct.pack(f"<{len(subxids)}Q", *subxids)
    return data


def unpack_xact(data: bytes) -> tuple[int, list[int], list[int]]:
    """(time, relations to drop, subtransaction xids) of a commit / abort record; records
    without subtransactions (and those written before them) end after the relations."""
    when, n = XACT.unpack_from(data, 0)
    at = XACT.size + 8 * n
    rels = list(struct.unpack_from(f"<{n}Q", data, XACT.size))
    subs: list[int] = []
    if len(data) >= at + _NSUB.size:
        (k,) = _NSUB.unpack_from(data, at)
        subs = list(struct.unpack_from(f"<{k}Q", data, at + _NSUB.size))
    return when, rels, subs

IDLE, INPROGRESS, FAILED = "idle", "in progress", "failed"
READ_COMMITTED, REPEATABLE_READ = "read committed", "repeatable read"


class Transaction:
    """The transaction state of one backend (see the module docstring)."""

    def __init__(self, procarray: ProcArray, slot: int, settings, on_end=None, lockmgr=None):
        self.procarray = procarray
        self.lockmgr = lockmgr  # minidb.txn.lmgr.LockManager: its locks go at xact end
        self.slot = slot
        self.settings = settings
        self.state = IDLE
        self.explicit = False
        self.xid = 0
        self.cid = 0
        self.isolation = READ_COMMITTED
        self.snapshot: Snapshot | None = None
        self._start_ts: float | None = None   # time.time() at the start (start_time)
        self._start_dt: _dt.datetime | None = None
        self._statement_snapshot: Snapshot | None = None
        self._on_end = on_end  # callbacks run at commit/abort (statistics, locks)
        self.pending_deletes: list[tuple[int, bool]] = []  # (relfilenode, at_commit)
        self.catalog_changed = False
        self.wal = None  # minidb.wal.xlog.WalHandle (set by the backend)
        self.levels: list[Level] = []  # savepoint levels, innermost last (minidb.txn.subxact)
        self.mine_xids: frozenset | None = None  # top xid + live subxids, None if no subxid
        self._top_aborted = False  # FAILED by an abort of the whole transaction
        self.on_subabort = None  # callback after a level's rollback (the catalog's overlay)

    # -- starting --------------------------------------------------------------------------------
    def begin(self, isolation: str | None = None) -> None:
        if self.state != IDLE:
            raise ActiveSqlTransaction("there is already a transaction in progress")
        self._start(isolation)
        self.explicit = True

    def _start(self, isolation: str | None) -> None:
        iso = isolation or self.settings.default_transaction_isolation
        if iso != READ_COMMITTED and iso != REPEATABLE_READ:   # (the common ones as is)
            iso = self._check_isolation(iso)
        self.isolation = iso
        self.state = INPROGRESS
        self.explicit = False
        self.xid = 0
        self.cid = 0
        self.snapshot = None
        if self.levels:
            self.levels = []
        self.mine_xids = None
        self._top_aborted = False
        # now() / CURRENT_TIMESTAMP, as PostgreSQL: the clock read here, the datetime made
        # when first asked for (``start_time``)
        self._start_ts = _time.time()
        self._start_dt = None
        if self.settings.trace_xact:   # (formatting the message costs more than the check)
            self._trace(f"begin ({iso})")

    @property
    def start_time(self) -> _dt.datetime | None:
        """The local time the transaction started (``datetime.now()`` then; None before
        the first transaction)."""
        st = self._start_dt
        if st is None:
            ts = self._start_ts
            if ts is None:
                return None
            st = self._start_dt = _dt.datetime.fromtimestamp(ts)
        return st

    @staticmethod
    def _check_isolation(iso: str) -> str:
        """The isolation level named ``iso`` (any case), or an error."""
        iso = iso.lower()
        if iso == "serializable":
            raise NotSupportedError(
                "isolation level SERIALIZABLE is not supported (minidb has no SSI); "
                "use REPEATABLE READ, which gives snapshot isolation")
        if iso == "read uncommitted":  # PostgreSQL treats it as READ COMMITTED
            iso = READ_COMMITTED
        if iso not in (READ_COMMITTED, REPEATABLE_READ):
            raise NotSupportedError(f'unknown isolation level "{iso}"')
        return iso

    def start_implicit(self) -> None:
        """Start an implicit transaction (no snapshot yet) if none is open: the SQL layer
        takes a statement's relation locks inside the transaction that will release them,
        before the statement's snapshot (as PostgreSQL locks during parse analysis)."""
        if self.state == IDLE:
            self._start(None)

    def set_isolation(self, isolation: str) -> None:
        """SET TRANSACTION ISOLATION LEVEL: only before the first statement."""
        if self.snapshot is not None or self._statement_snapshot is not None:
            raise ActiveSqlTransaction(
                "SET TRANSACTION ISOLATION LEVEL must be called before any query")
        if self.state == IDLE:
            raise NoActiveSqlTransaction("SET TRANSACTION can only be used in transaction blocks")
        explicit = self.explicit
        self._start(isolation)
        self.explicit = explicit

    @property
    def in_block(self) -> bool:
        return self.state != IDLE and self.explicit

    # -- statements --------------------------------------------------------------------------------
    def start_statement(self) -> Snapshot:
        """Begin a statement (implicitly a transaction if none); returns its snapshot."""
        if self.state == FAILED:
            raise InFailedSqlTransaction(
                "current transaction is aborted, commands ignored until end of transaction block")
        if self.state == IDLE:
            self._start(None)
        if self.isolation == REPEATABLE_READ:
            if self.snapshot is None:
                self.snapshot = self.procarray.get_snapshot(self.slot, self.xid, self.cid)
            snap = self.snapshot.with_cid(self.cid)
        else:
            snap = self.procarray.get_snapshot(self.slot, self.xid, self.cid)
        self._statement_snapshot = snap
        if self.settings.trace_xact:  # (formatting xip costs more than the check)
            self._trace(f"statement snapshot xmin={snap.xmin} xmax={snap.xmax} "
                        f"xip={snap.xip.tolist()} cid={snap.curcid}")
        return snap

    def current_snapshot(self) -> Snapshot:
        if self._statement_snapshot is None:
            return self.start_statement()
        return self._statement_snapshot

    def xid_for_write(self) -> int:
        """The transaction's xid, assigned now if this is its first write."""
        if self.state != INPROGRESS:
            raise NoActiveSqlTransaction("no transaction in progress")
        if not self.xid:
            self.xid = self.procarray.assign_xid(self.slot)
            if self._statement_snapshot is not None:
                self._statement_snapshot.myxid = self.xid
            if self.snapshot is not None:
                self.snapshot.myxid = self.xid
            if self.settings.trace_xact:
                self._trace(f"xid {self.xid} assigned")
        if self.levels:
            level = self.levels[-1]
            if not level.xid:
                self._assign_subxids()
            return level.xid
        return self.xid

    # -- savepoints (minidb.txn.subxact) ---------------------------------------------------------
    def _assign_subxids(self) -> None:
        """Give every level without an xid one, outermost first (parents before children)."""
        for level in self.levels:
            if not level.xid:
                level.xid = self.procarray.add_subxid(self.slot, self.xid)
                self._trace(f"subxid {level.xid} assigned (savepoint {level.name})")
                self._set_mine((self.mine_xids or frozenset((self.xid,))) | {level.xid})

    def _set_mine(self, mine: frozenset | None) -> None:
        """Publish the live xids to this transaction's snapshots (their ``subxids``)."""
        self.mine_xids = mine if mine and len(mine) > 1 else None
        subs = (mine - {self.xid}) if self.mine_xids else frozenset()
        for snap in (self._statement_snapshot, self.snapshot):
            if snap is not None and snap.myxid == self.xid:
                snap.subxids = subs

    def _require_block(self, what: str) -> None:
        if not self.in_block:
            raise NoActiveSqlTransaction(f"{what} can only be used in transaction blocks")

    def savepoint(self, name: str) -> None:
        """SAVEPOINT name: a new level (its xid comes with its first write)."""
        self._require_block("SAVEPOINT")
        if self.state == FAILED:
            raise InFailedSqlTransaction(
                "current transaction is aborted, commands ignored until end of transaction block")
        held = frozenset(self.lockmgr.local) if self.lockmgr is not None else frozenset()
        self.levels.append(Level(name, pending_mark=len(self.pending_deletes),
                                 locks_mark=held))
        self._trace(f"savepoint {name} (level {len(self.levels)})")

    def release(self, name: str) -> None:
        """RELEASE [SAVEPOINT] name: the level and those inside it merge into its parent."""
        self._require_block("RELEASE SAVEPOINT")
        if self.state == FAILED:
            raise InFailedSqlTransaction(
                "current transaction is aborted, commands ignored until end of transaction block")
        i = find_level(self.levels, name)
        xids = [x for level in self.levels[i:] for x in level.tree()]
        del self.levels[i:]
        if i:
            self.levels[-1].children.extend(xids)
        self._trace(f"release {name}: subxids {xids} merge into the parent")

    def rollback_to(self, name: str) -> None:
        """ROLLBACK TO [SAVEPOINT] name: abort the levels from it inward; it stays defined,
        empty.  A FAILED block whose failure aborted a level goes on."""
        self._require_block("ROLLBACK TO SAVEPOINT")
        i = find_level(self.levels, name)
        self._abort_levels(i)
        del self.levels[i + 1:]
        self.state = INPROGRESS

    def _abort_levels(self, i: int) -> None:
        """Abort the subtree of levels ``i`` and inward (AbortSubTransaction): the ABORT
        record, the commit log, then out of the proc array (waking waiters); level ``i``
        is left empty.  Its pending file deletes are undone (see ``minidb.txn.subxact``)."""
        levels = self.levels
        head = levels[i].xid
        xids = [x for level in levels[i:] for x in level.tree()]
        if xids:
            rest = [x for x in xids if x != head]
            if self.wal is not None:
                self.wal.insert(RM_XACT, XLOG_XACT_ABORT, head,
                                pack_xact(int(_time.time() * 1e6), [], rest))
            self.procarray.clog.set_tree(head, rest, ABORTED)
            self.procarray.remove_subxids(self.slot, xids)
            self._set_mine(self.mine_xids - set(xids) if self.mine_xids else None)
            self._trace(f"rollback to {levels[i].name}: subxids {xids} aborted")
        mark = levels[i].pending_mark
        kept = self.pending_deletes[:mark]
        for rfn, at_commit in self.pending_deletes[mark:]:
            if not at_commit:   # created in the level: gone at either end
                kept += [(rfn, False), (rfn, True)]
        self.pending_deletes = kept
        for level in levels[i:]:
            level.xid = 0
            level.children = []
        try:
            if xids and self.catalog_changed and self.on_subabort is not None:
                self.on_subabort()
        finally:   # the level's heavyweight locks, last (as at the top-level end)
            lm = self.lockmgr
            if lm is not None:
                held = levels[i].locks_mark
                lm.release_keys([k for k in lm.local if k not in held])

    def command_done(self, wrote: bool) -> None:
        """End of a statement: later statements see its writes; RC drops the snapshot."""
        if wrote:
            self.cid += 1
        self._statement_snapshot = None
        if self.isolation == READ_COMMITTED and self.state == INPROGRESS:
            self.procarray.clear_xmin(self.slot)

    def fail(self) -> None:
        """An error inside the transaction.  As PostgreSQL's AbortTransaction, the
        transaction ends at once - its xid is marked aborted, its row locks released and
        its waiters woken - but an explicit block stays FAILED (25P02 for every statement)
        until ROLLBACK; an implicit one (autocommit statement) simply ends."""
        if self.state == IDLE:
            return
        if not self.explicit:
            self.rollback()
            return
        if self.state == FAILED:
            return
        if self.levels:   # only the innermost level aborts (AbortSubTransaction)
            self._abort_levels(len(self.levels) - 1)
            self._statement_snapshot = None
            if self.isolation == READ_COMMITTED:
                self.procarray.clear_xmin(self.slot)
            self.state = FAILED
            return
        xid = self.xid
        self._log_end(xid, committed=False)
        self.procarray.end_transaction(self.slot, xid, committed=False)
        self._trace(f"abort xid {xid} (error in a transaction block)")
        self._top_aborted = True
        self.xid = 0
        self.snapshot = None
        self._statement_snapshot = None
        self.state = FAILED
        self._after_end(False)

    # -- ending ---------------------------------------------------------------------------------
    def commit(self) -> bool:
        """Commit (a FAILED block rolls back, as COMMIT does in PostgreSQL); True if it
        committed."""
        if self.state == IDLE:
            return False
        if self.state == FAILED:
            self.rollback()
            return False
        self._end(committed=True)
        return True

    def rollback(self) -> None:
        if self.state == IDLE:
            return
        if self.state == FAILED and self._top_aborted:  # aborted by fail(): the block ends
            self.state = IDLE
            self.explicit = False
            self.cid = 0
            self.levels = []
            self._top_aborted = False
            return
        self._end(committed=False)

    def _end(self, committed: bool) -> None:
        xid = self.xid
        if xid:
            subxids = sorted(self.mine_xids - {xid}) if self.mine_xids else ()
            lsn = self._log_end(xid, committed, subxids)
            try:
                self.procarray.end_transaction(self.slot, xid, committed, lsn=lsn,
                                               subxids=subxids)
            finally:
                if lsn:
                    self.procarray.delay_chkpt[self.slot] = 0
        else:   # read-only: no record, nothing to publish but the xmin (end_transaction)
            self.procarray.end_transaction(self.slot, 0, committed)
        if self.settings.trace_xact:
            self._trace(f"{'commit' if committed else 'abort'} xid {xid}")
        self.state = IDLE
        self.explicit = False
        self.xid = 0
        self.cid = 0
        self.snapshot = None
        self._statement_snapshot = None
        if self.levels:
            self.levels = []
        self.mine_xids = None
        try:        # (_after_end, inline: one call fewer per transaction)
            if self._on_end is not None:
                self._on_end(committed)
        finally:
            if self.lockmgr is not None:
                self.lockmgr.release_all()

    def _after_end(self, committed: bool) -> None:
        """The end's callbacks (catalog invalidation, pending deletes, statistics), then the
        heavyweight locks: released last, even if a callback fails."""
        try:
            if self._on_end is not None:
                self._on_end(committed)
        finally:
            if self.lockmgr is not None:
                self.lockmgr.release_all()

    def _log_end(self, xid: int, committed: bool, subxids=()) -> int:
        """RecordTransactionCommit / RecordTransactionAbort: the commit (abort) record with
        its time and the relations to drop, flushed before a commit returns unless
        synchronous_commit is off (a commit that drops files is always flushed).  Returns
        the commit record's end LSN - the commit log's group LSN for the status - with
        ``delay_chkpt`` set (until the commit log has the status: a checkpoint must not
        fall in between), or 0 (no xid, no log, or an abort: nothing set)."""
        wal = self.wal
        if not xid or wal is None:
            return 0
        when = int(_time.time() * 1e6)
        if self.pending_deletes:
            rels = [int(rfn) for rfn, at_commit in self.pending_deletes
                    if bool(at_commit) == committed]
            data = pack_xact(when, rels, subxids)
        else:
            rels = ()
            # (pack_xact's bytes for no relation and no subtransaction, packed directly)
            data = pack_xact(when, rels, subxids) if subxids else XACT.pack(when, 0)
        if not committed:
            wal.insert(RM_XACT, XLOG_XACT_ABORT, xid, data)  # never flushed by the aborter
            return 0
        delay = self.procarray.delay_chkpt
        slot = self.slot
        delay[slot] = 1
        try:
            s = self.settings
            if s.synchronous_commit or rels:
                lsn = wal.insert(RM_XACT, XLOG_XACT_COMMIT, xid, data)
                seg = self.procarray.seg
                siblings = s.commit_siblings
                wal.flush(lsn, s.commit_delay,
                          lambda: int((seg.proc_xid != 0).sum()) - 1 >= siblings)
            else:
                # the async-commit mark raised inside the record's insertion-lock hold
                lsn = wal.insert(RM_XACT, XLOG_XACT_COMMIT, xid, data, (), True)
        except BaseException:
            delay[slot] = 0
            raise
        return lsn

    def _trace(self, msg: str) -> None:
        if self.settings.trace_xact:
            print(f"[xact slot {self.slot}] {msg}", file=sys.stderr)
