"""Relation files and the transaction: pending deletes (PostgreSQL's ``catalog/storage.c``).

A file system has no MVCC, so the files of relations are created and removed around the
transaction that changes the catalog rows naming them:

* CREATE TABLE / CREATE INDEX / TRUNCATE create the new file at once, log a Storage CREATE
  record (``create_relation_storage``) and append ``(relfilenode, False)`` to
  ``xact.pending_deletes``: removed if the transaction aborts.  The backend's
  ``PROC_CREATED_FILES`` bit (shared memory) is set until its transaction's end has run
  the list: a process that dies meanwhile (a CREATE INDEX killed mid-way) is a crash, and
  the crash restart's recovery removes the file (``remove_orphan_files``);
* DROP TABLE / DROP INDEX / TRUNCATE append ``(old relfilenode, True)``: removed when it
  commits, and not before (a ROLLBACK keeps it, with its rows);
* the commit (abort) record carries the relfilenodes the commit (abort) removes, and is
  flushed before they go (a commit that drops files is flushed even with synchronous_commit
  off), so recovery removes them again if the crash came first;
* ``at_xact_end`` runs once the commit (or abort) is visible in the proc array: it bumps the
  shared invalidation counter if the catalog changed and committed, drops the backend's
  overlay, then executes the list: forget the relation's buffers without writing them, and
  unlink its files.  A table created and dropped in one transaction is listed twice and is
  removed either way.

A buffer of a relation being removed may still be pinned by a backend that read it before
the commit (there are no relation locks yet to make it wait): the buffers are dropped as
soon as their pins go, with a bounded wait, and the file is unlinked after.  A write-back of
such a buffer after the unlink is discarded (``Smgr.write_blocks``).  The files of a
transaction interrupted by a crash are removed at the end of crash recovery
(``minidb.recovery.remove_orphan_files``: every file no committed pg_class row names;
PostgreSQL leaves them as orphans).
"""

from __future__ import annotations

import sys
import time

from minidb.errors import InsufficientResources
from minidb.shmem import PROC_CREATED_FILES
from minidb.storage.xloginsert import log_smgr_create

DROP_WAIT_S = 30.0


def create_relation_storage(backend, rfn: int) -> None:
    """RelationCreateStorage: create ``rfn``'s file, log a Storage CREATE record (with the
    transaction's xid) and list the file for removal if the transaction aborts."""
    xact = backend.xact
    seg = backend.instance.seg
    seg.proc_flags[backend.slot] |= PROC_CREATED_FILES  # a death now leaves an orphan file
    backend.instance.smgr.create(rfn)
    log_smgr_create(backend.wal, rfn, 0, xact.xid)
    xact.pending_deletes.append((rfn, False))


def drop_relation_storage(backend, rfn: int) -> None:
    """Forget ``rfn``'s buffers (waiting for other backends' pins to go) and unlink it."""
    bm = backend.bufmgr
    deadline = time.monotonic() + DROP_WAIT_S
    while True:
        try:
            bm.drop_relation_buffers(rfn)
            break
        except InsufficientResources:
            if time.monotonic() > deadline:
                print(f"WARNING:  relation file base/{rfn} still in use after "
                      f"{DROP_WAIT_S:.0f} s: unlinked with buffers left", file=sys.stderr)
                break
            time.sleep(0.001)
    backend.instance.smgr.unlink(rfn)
    try:
        bm.drop_relation_buffers(rfn)  # read in by someone just before the unlink
    except InsufficientResources:
        pass


def at_subxact_abort(backend) -> None:
    """A rolled-back savepoint level changed the catalog: this backend's own view of it is
    rebuilt (the level's rows carry an aborted xid now)."""
    cat = backend.__dict__.get("_catalog")
    if cat is not None:
        cat.after_subxact_abort()


def at_xact_end(backend, committed: bool) -> None:
    """The catalog's and the files' part of ending a transaction (see the docstring)."""
    xact = backend.xact
    pending = xact.pending_deletes
    if pending:
        xact.pending_deletes = []
    changed = xact.catalog_changed
    if changed:
        xact.catalog_changed = False
    cat = backend.__dict__.get("_catalog")
    dropped = []
    if cat is not None:
        dropped = cat.dropped_oids
        if dropped or cat._local is not None:   # (else nothing to reset)
            cat.end_of_xact()
    if changed and committed:
        backend.instance.catalog_cache.bump()
    for rfn, at_commit in pending:
        if at_commit == committed:
            drop_relation_storage(backend, rfn)
    flags = backend.proc_flags    # (a memoryview of seg.proc_flags)
    slot = backend.slot
    if flags[slot] & PROC_CREATED_FILES:   # (a read costs less than the update)
        flags[slot] &= ~PROC_CREATED_FILES
    if committed and dropped:
        from minidb.heap import pgstat
        inst = backend.instance
        for oid in dropped:
            pgstat.forget(inst.seg, inst.locks.stats, oid)
