"""Subtransactions: SAVEPOINT / RELEASE / ROLLBACK TO (PostgreSQL's ``xact.c`` subtransaction
half, ``subtrans.c``'s job done by the proc array).

A transaction block keeps a stack of savepoint levels (``Transaction.levels``, innermost
last); the top level is the transaction itself.  Each level has a name, its own xid (0
until it first writes) and the xids of the children it absorbed (RELEASE).

========================  ===============================================================
event                     what happens
========================  ===============================================================
SAVEPOINT name            a level is pushed (no xid yet: lazy, as the top level)
first write in a level    ``Transaction.xid_for_write``: the top-level xid is assigned
                          first, then every enclosing level's, then this one's, so a
                          child's xid is always above its parent's (AssignTransactionId);
                          each subxid is published in the slot's subxids cache in the
                          shared segment (``ProcArray.add_subxid``)
RELEASE name              that level and those inside it end; their xids join the parent
                          level's children (nothing is logged, the commit log is not
                          touched: they commit or abort with the parent)
ROLLBACK TO name          the levels inside it end and it restarts empty (the savepoint
                          stays defined): their xids and the level's own - the subtree -
                          are aborted at once: an ABORT record naming the level's xid and
                          its children, then ABORTED in the commit log, then the xids
                          leave the proc array's cache, waking whoever waits on the slot
                          (a row lock taken in the subtree is free now); the heavyweight
                          locks first taken in the subtree are released
                          (``LockManager.release_keys``; a lock the level re-requested
                          that was held before it stays)
error in a block          with savepoints defined, the innermost level is aborted as by
                          ROLLBACK TO, and the block is FAILED (25P02) until ROLLBACK TO
                          (any live savepoint) or ROLLBACK; without savepoints the whole
                          transaction aborts at once, as before
COMMIT                    one commit record lists every live subxid; the commit log marks
                          the tree committed together (``CommitLog.set_tree``); the tree
                          leaves the proc array at once
========================  ===============================================================

Visibility: a live subxid (of a level on the stack or absorbed by one) is "me": the
statement snapshot lists them in ``Snapshot.subxids`` and the rules of
``minidb.txn.visibility`` treat them as the top-level xid (with the same command ids: one
counter for the whole transaction, as PostgreSQL).  An aborted subxid is not "me" any more:
its inserts are invisible and its deletes and row locks void (the commit log says ABORTED).

Other transactions: snapshots treat the subxids in the cache as running; a writer that
finds a row locked by a subxid waits until that subxid leaves the proc array - at its
ROLLBACK TO or at the end of its top-level transaction (XactLockTableWait); in the
wait-for graph the waiter waits for the top-level xid.

Departures from PostgreSQL, and why:

* **No pg_subtrans.**  The cache holds ``MAX_CACHED_SUBXIDS`` (64, PostgreSQL's
  PGPROC_MAX_CACHED_SUBXIDS) live subxids per transaction; a 65th is an error (54000)
  instead of an overflow into pg_subtrans.  Subxids that were rolled back leave the cache,
  so only subtransactions that wrote and are still live count.  Without the overflow no
  snapshot ever needs the parent lookup.
* **A row lock upgrade** in a level (a row locked by the parent, then updated in the
  level) replaces the parent's lock; rolling the level back leaves the row unlocked
  (PostgreSQL keeps both in a MultiXact).
* **Catalog changes** in a rolled-back level are undone for everyone (their rows carry the
  aborted subxid); a relation file created there is removed at the end of the
  transaction, whatever the end; a file dropped there is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minidb.errors import InvalidSavepointSpecification

__all__ = ["Level", "find_level"]


@dataclass
class Level:
    """One savepoint level of a transaction block."""
    name: str
    xid: int = 0                        # assigned at the level's first write
    children: list = field(default_factory=list)  # subxids of released inner levels
    pending_mark: int = 0               # len(pending_deletes) when the level started
    locks_mark: frozenset = frozenset()  # the heavyweight locks held when it started

    def tree(self) -> list[int]:
        """The level's xid and its absorbed children: what its rollback aborts."""
        return ([self.xid] if self.xid else []) + self.children


def find_level(levels: list[Level], name: str) -> int:
    """Index of the innermost level called ``name`` (3B001 if none, as PostgreSQL)."""
    for i in range(len(levels) - 1, -1, -1):
        if levels[i].name == name:
            return i
    raise InvalidSavepointSpecification(f'savepoint "{name}" does not exist')
