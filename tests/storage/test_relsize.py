"""The cached relation size (``Smgr.nblocks``): no ``fstat`` per row, right across processes.

What is proven here:
  * repeated ``nblocks`` of an unchanged fork asks the file once (``size_asks`` counts the
    ``fstat`` calls), for the main fork, the FSM fork and a fork never created; the free-space
    map's store / search / get ask no more once the sizes are known;
  * the extender's own size is known without asking the file;
  * another PROCESS's extension, truncation and drop are seen at the next ``nblocks``
    (the shared size generation changed), and the FSM fork another process added is read by
    ``freespace.get`` / ``search``; a relation of another stripe keeps its cached size;
  * an extension that failed halfway (ENOSPC) leaves no stale size behind;
  * a standalone ``Smgr`` (no shared segment) asks the file every time.

Not proven: anything about speed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from minidb import fileio
from minidb.config import BLCKSZ
from minidb.shmem import N_REL_SIZE_GEN
from minidb.storage import freespace as fsm
from minidb.storage import page as pg
from minidb.storage.smgr import FSM_FORKNUM, MAIN_FORKNUM, Smgr


def _in_child(fn) -> None:
    """Run ``fn`` in a forked process (a second backend's view of the same files and
    shared memory) and wait for it; its failure fails the test."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _extend_raw(inst, rfn: int, fork: int, count: int, init: bool = False) -> None:
    """What a backend's extension does to the file, under the relation's extension lock."""
    smgr = inst.smgr
    with inst.locks.extension[rfn % len(inst.locks.extension)]:
        first = smgr.nblocks(rfn, fork)
        smgr.extend(rfn, fork, first, count)
        if init:
            pages = []
            for _ in range(count):
                p = np.zeros(BLCKSZ, dtype=np.uint8)
                pg.init_page(p)
                pages.append(p)
            smgr.write_blocks(rfn, fork, first, pages)


@pytest.fixture
def rfns(instance, make_table):
    """Two tables whose relfilenodes fall in different size-generation stripes."""
    a = make_table(instance, "a", [("x", "integer")]).relfilenode
    b = make_table(instance, "b", [("x", "integer")]).relfilenode
    assert (a << 1) % N_REL_SIZE_GEN != (b << 1) % N_REL_SIZE_GEN
    return a, b


def test_unchanged_sizes_are_asked_once(instance, backend, rfns):
    a, _ = rfns
    smgr, bm = instance.smgr, backend.bufmgr
    n = smgr.nblocks(a)
    asks = smgr.size_asks
    for _ in range(20):
        assert smgr.nblocks(a) == n
        assert smgr.nblocks(a, FSM_FORKNUM) == 0   # never created: not even a stat
    assert smgr.size_asks == asks + 1               # the main fork was cached; FSM: one
    first, bufs = bm.extend(a, 2)
    for buf in bufs:
        pg.init_page(bm.page(buf))
        bm.mark_dirty(buf)
        bm.unlock(buf)
        bm.unpin(buf)
    asks = smgr.size_asks
    assert smgr.nblocks(a) == first + 2 == n + 2    # the extender knows its new size
    assert smgr.size_asks == asks
    # the free-space map's per-row calls ask no more once its fork's size is known
    fsm.record(bm, a, first, 4000)
    asks = smgr.size_asks
    for _ in range(10):
        fsm.record(bm, a, first + 1, 3000)
        assert fsm.get(bm, a, first) >= 3968
        assert fsm.search(bm, a, 3000, smgr.nblocks(a)) in (first, first + 1)
    assert smgr.size_asks == asks


def test_another_process_extension_is_seen(instance, backend, rfns):
    a, b = rfns
    smgr, bm = instance.smgr, backend.bufmgr
    na, nb = smgr.nblocks(a), smgr.nblocks(b)
    assert smgr.nblocks(a, FSM_FORKNUM) == 0
    assert fsm.get(bm, a, na + 1) == 0 and fsm.search(bm, a, 100, na + 3) == -1
    asks = smgr.size_asks

    def child():
        assert os.getpid() != parent
        _extend_raw(instance, a, MAIN_FORKNUM, 3)
        _extend_raw(instance, a, FSM_FORKNUM, 1, init=True)
        # record a category for heap block 1 straight into the new FSM page
        page = np.zeros(BLCKSZ, dtype=np.uint8)
        instance.smgr.read_blocks(a, FSM_FORKNUM, 0, [page])
        page[pg.PAGE_HEADER_SIZE + na + 1] = 100
        pg.set_checksum(page, 0)
        instance.smgr.write_blocks(a, FSM_FORKNUM, 0, [page])

    parent = os.getpid()
    _in_child(child)
    assert smgr.nblocks(b) == nb                    # another stripe: still cached
    assert smgr.size_asks == asks
    assert smgr.nblocks(a) == na + 3                # the other process's extension
    assert smgr.nblocks(a, FSM_FORKNUM) == 1        # and the fork it created
    assert fsm.get(bm, a, na + 1) == 100 * fsm.FSM_CAT_STEP
    assert fsm.search(bm, a, 3000, na + 3) == na + 1
    asks = smgr.size_asks
    assert smgr.nblocks(a) == na + 3
    assert smgr.size_asks == asks                   # known again


def test_another_process_truncation_and_drop_are_seen(instance, backend, rfns):
    a, _ = rfns
    smgr = instance.smgr
    _extend_raw(instance, a, FSM_FORKNUM, 3, init=True)
    assert smgr.nblocks(a, FSM_FORKNUM) == 3
    _in_child(lambda: instance.smgr.truncate(a, FSM_FORKNUM, 1))
    assert smgr.nblocks(a, FSM_FORKNUM) == 1
    n = smgr.nblocks(a)
    _in_child(lambda: instance.smgr.unlink(a))
    # this process still has the file open (as before the cache): the size it has, asked anew
    asks = smgr.size_asks
    assert smgr.nblocks(a) == n
    assert smgr.size_asks == asks + 1
    assert smgr.nblocks(a, FSM_FORKNUM) == 1        # the open descriptor still answers


def test_a_failed_extension_leaves_no_stale_size(instance, rfns, monkeypatch):
    a, _ = rfns
    smgr = instance.smgr
    n = smgr.nblocks(a)
    real = fileio.pwrite

    def half(fd, data, offset):  # a disk that fills up halfway through the write
        real(fd, bytes(len(data) // 2), offset)
        return len(data) // 2

    monkeypatch.setattr(fileio, "pwrite", half)
    with instance.locks.extension[a % len(instance.locks.extension)]:
        with pytest.raises(Exception, match="extend file"):
            smgr.extend(a, MAIN_FORKNUM, n, 2)
    monkeypatch.undo()
    asks = smgr.size_asks
    assert smgr.nblocks(a) == n
    assert smgr.size_asks == asks + 1               # asked the file again
    assert os.path.getsize(smgr.path(a)) == n * BLCKSZ


def test_a_standalone_smgr_asks_every_time(tmp_path):
    smgr = Smgr(str(tmp_path))
    smgr.create(7)
    smgr.extend(7, MAIN_FORKNUM, 0, 2)
    asks = smgr.size_asks
    assert [smgr.nblocks(7) for _ in range(3)] == [2, 2, 2]
    assert smgr.size_asks == asks + 3
    with open(smgr.path(7), "ab") as f:  # a change behind its back is seen
        f.write(bytes(BLCKSZ))
    assert smgr.nblocks(7) == 3
    smgr.close()
