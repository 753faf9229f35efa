"""The hot paths that take an LWLock inline (``LWLock.fast``) keep its holder protocol.

What is proven here:
  * the buffer manager's single-buffer calls (pin_lock, read_recent, unlock_unpin, pin,
    lock, unlock, unpin) take each partition lock as ``acquire`` / ``release`` do: the
    semaphore, then this process recorded as the holder, ..., the holder cleared, then the
    semaphore given back - one such section per call, for the partition of the buffer;
  * ``with lock:`` and the WAL insertion (its insertion lock taken inline) do the same;
  * a process killed inside an inline section leaves its pid as the holder, and a backend
    whose inline try fails takes the blocking path, finds the dead holder and raises
    ``LWLockHolderDied`` (the crash flag set) instead of waiting.

Not proven: anything about speed (the commit messages carry the measurements).
"""

from __future__ import annotations

import os
import signal

import pytest

from minidb.errors import LWLockHolderDied
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE, SHARE
from minidb.wal import record as rec


def _add_pages(bm, rfn: int, n: int) -> None:
    for _ in range(n):
        _block, bufs = bm.extend(rfn, 1)
        pg.init_page(bm.page(bufs[0]))
        bm.mark_dirty(bufs[0])
        bm.unlock(bufs[0])
        bm.unpin(bufs[0])


class _Recorder:
    """Stands for the holder table's word view and logs every write into it."""

    def __init__(self, words, events):
        self.words, self.events = words, events

    def __setitem__(self, i, v):
        self.events.append(("hold", i, v))
        self.words[i] = v

    def __getitem__(self, i):
        return self.words[i]


def _check_sections(events, holders, pid) -> list[int]:
    """Every section is take, holder := pid, holder := 0, give (the holder word already 0
    when the semaphore is given back); returns the lock index of each section."""
    assert events and len(events) % 4 == 0, events
    idx = []
    for k in range(0, len(events), 4):
        take, hold, clear, give = events[k:k + 4]
        i = take[1]
        assert take[0] == "take"
        assert hold == ("hold", i, pid)
        assert clear == ("hold", i, 0)
        assert give == ("give", i, 0)
        idx.append(i)
    return idx



def _recording(try_, give, i, events, holders):
    """A semaphore's try and give that append ("take", lock) and ("give", lock, the holder
    word when given back) to ``events``."""
    def t(block):
        events.append(("take", i))
        return try_(block)

    def g():
        events.append(("give", i, int(holders[i])))
        return give()
    return t, g

def test_buffer_calls_take_their_partition_lock_with_the_holder_recorded(instance, make_table):
    rfn = make_table(instance, "t", [("a", "integer")]).relfilenode
    holders = instance.locks.holders
    with instance.connect() as b:
        bm = b.bufmgr
        _add_pages(bm, rfn, 2)
        events: list = []
        orig_psem, orig_hw = bm._psem, bm._hw

        bm._psem = [(*_recording(try_, give, i, events, holders), i)
                    for try_, give, i in orig_psem]
        bm._hw = _Recorder(orig_hw, events)
        try:
            x = bm.pin_lock(rfn, 0, SHARE)
            bm.unlock_unpin(x)
            y = bm.read_recent(rfn, 0, x, EXCLUSIVE)
            assert y == x
            bm.unlock_unpin(y)
            z = bm.pin(rfn, 1)
            bm.lock(z, SHARE)
            bm.unlock(z)
            bm.unpin(z)
        finally:
            bm._psem, bm._hw = orig_psem, orig_hw
        idx = _check_sections(events, holders, os.getpid())
        part = [lk._index for lk in instance.locks.partition]
        p0 = part[int(instance.seg.buf_part[x])]
        p1 = part[int(instance.seg.buf_part[z])]
        assert idx == [p0] * 4 + [p1] * 4
        assert not holders[1:len(instance.locks.all_lwlocks) + 1].any()


def test_with_lock_and_wal_insertion_record_the_holder(instance):
    holders = instance.locks.holders
    lock = instance.locks.syncscan
    with lock:
        assert lock.holder() == os.getpid()
    assert lock.holder() == 0
    with instance.connect() as b:
        wal = b.bufmgr.wal
        sh = wal.shared
        events: list = []
        try_, give, hw, i = sh.insert_fast
        assert hw is instance.locks.holder_words and i == instance.locks.wal_insert._index
        t, g = _recording(try_, give, i, events, holders)
        orig = sh.insert_fast
        sh.insert_fast = (t, g, _Recorder(hw, events), i)
        try:
            before = wal.insert_lsn()
            end = wal.insert(rec.RM_XLOG, rec.XLOG_NOOP, 0, b"12345678")
        finally:
            sh.insert_fast = orig
        assert end == wal.insert_lsn() > before
        assert _check_sections(events, holders, os.getpid()) == [i]


def test_killed_inside_an_inline_section_is_found_by_the_next_taker(instance, make_table):
    rfn = make_table(instance, "t", [("a", "integer")]).relfilenode
    with instance.connect() as b:
        bm = b.bufmgr
        _add_pages(bm, rfn, 1)
        x = bm.pin_lock(rfn, 0, SHARE)
        bm.unlock_unpin(x)
        p = int(instance.seg.buf_part[x])
        try_, _give, hw, i = instance.locks.partition[p].fast()

        def child():
            try_(False)                      # the inline protocol's first two steps,
            hw[i] = os.getpid()              # then a death inside the section
            os.kill(os.getpid(), signal.SIGKILL)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                child()
            finally:
                os._exit(1)
        os.waitpid(pid, 0)
        assert instance.locks.partition[p].holder() == pid
        with pytest.raises(LWLockHolderDied, match=f"process {pid} died holding the "
                                                   f"buffer mapping partition {p} lock"):
            bm.pin_lock(rfn, 0, SHARE)
        assert instance.locks.crashed() is not None
        assert not bm.pins.any() and not bm.held.any()
        instance.locks.reset_crash()
        instance.locks.partition[p].release()
