"""The crash-and-recover loop shared by the crash tests (test_crash_recovery.py,
test_crash_ddl.py, test_crash_machine.py).

``power_loss(conn, rng, run, reopen, ...)``: install the crash-test file layer
(``minidb.fileio.CrashFiles``), arm it to lose power at a random write or fsync, run the
workload (``run()``; if it ends before the armed point the power goes right after it), drop
the instance as a power loss would (``crash_abandon``: no checkpoint, no buffer written),
optionally lose power again part-way through the recovery (``reopen()`` under a second
layer armed a few writes ahead), then restore the real file layer and run ``reopen()`` once
more: that is the recovery whose result counts.  It returns what the first layer counted
(writes, syncs, bytes: a case that lost nothing proves nothing) and ``reopen()``'s value.

``reopen`` opens the directory, checks it against the model and closes it again (it is
called twice when recovery itself crashes: the first call dies with ``SimulatedCrash``).
``check_database(conn, tables)`` is the common part of such checks: ``check_catalog``
finds nothing, and the heap and B-tree checkers pass on every table and index named.
"""

from __future__ import annotations

import random
from typing import Callable

import minidb
import minidb.fileio as fileio
from minidb.catalog import check_catalog
from minidb.heap.check import check_heap
from minidb.index import check_btree

__all__ = ["power_loss", "recovery_crash", "abandon", "forget_instances", "check_database"]


def forget_instances() -> None:
    """After ``crash_abandon``: the process's registry of open instances lets the
    abandoned one go, so that the next connect opens (and recovers) the directory."""
    minidb.instance._SHARED.clear()


def abandon(conn) -> None:
    """Drop ``conn``'s instance as a power loss would (no checkpoint, no buffer written)
    and forget it, so that the next connect recovers the directory."""
    conn._instance.crash_abandon()
    forget_instances()


def recovery_crash(rng: random.Random, reopen: Callable, within: int = 30) -> bool:
    """Open the directory under a crash layer that loses power at one of the next
    ``within`` writes or syncs (recovery's own writes: its pages, its checkpoint, the
    control file).  Returns True when the power went before ``reopen`` finished."""
    layer = fileio.CrashFiles()
    old = fileio.set_layer(layer)
    try:
        layer.crash_after(rng.randint(1, within), rng)
        try:
            reopen()
        except fileio.SimulatedCrash:
            return True   # the half-opened instance released the directory on its way out
        return False
    finally:
        fileio.set_layer(old)
        forget_instances()


def power_loss(conn, rng: random.Random, run: Callable[[], None], reopen: Callable,
               *, within: int, crash_in_recovery: bool = False):
    """One power loss during ``run()`` at one of the next ``within`` writes or syncs, then
    recovery (see the module docstring).  Returns ``(counts, reopen())``."""
    layer = fileio.CrashFiles()
    old = fileio.set_layer(layer)
    try:
        layer.crash_after(rng.randint(1, within), rng)
        try:
            run()
            layer.crash(rng)  # the workload ended first: lose power now
        except fileio.SimulatedCrash:
            pass
        lost = dict(layer.counts)
        abandon(conn)
    finally:
        fileio.set_layer(old)
    if crash_in_recovery:
        recovery_crash(rng, reopen)
    return lost, reopen()


def check_database(conn, tables: dict[str, set[str]]) -> None:
    """The catalog agrees with itself and the files; every table's heap and every index
    named in ``tables`` (table -> index names) passes its checker."""
    inst = conn._instance
    with inst.connect() as b:
        assert check_catalog(b) == []
        for name, indexes in tables.items():
            check_heap(b, inst.catalog.heap_rel(name))
            for iname in indexes:
                check_btree(b, iname)
