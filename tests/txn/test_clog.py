"""The commit log as an SLRU (minidb/txn/clog.py): layout, buffers, writes, truncation, faults.

Most tests build a shared segment with a few commit-log buffers and one or more
``CommitLog`` handles over it, without an instance: a second handle over the same segment
is what another process of the instance sees (its own page copies, the same buffers).
"""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from minidb.config import Settings
from minidb.errors import DataCorrupted, DiskFull, IOError_
from minidb.instance import Instance
from minidb.shmem import SharedLocks, Segment, n_clog_buffers
from minidb.txn.clog import (ABORTED, COMMITTED, FIRST_NORMAL_XID, IN_PROGRESS,
                             LOCAL_PAGES, PAGES_PER_SEGMENT, SEGMENT_SIZE, XACTS_PER_PAGE,
                             XACTS_PER_SEGMENT, CommitLog, segment_name)

BLCKSZ = 8192


class Shared:
    """A segment and locks sized for ``nbuf`` commit-log buffers."""

    def __init__(self, nbuf: int = 4):
        self.settings = Settings({"shared_buffers": 16, "max_connections": 2,
                                  "max_worker_processes": 0, "transaction_buffers": nbuf})
        self.seg = Segment(self.settings)
        self.locks = SharedLocks(self.settings)

    def clog(self, datadir) -> CommitLog:
        return CommitLog(str(datadir), self.seg, self.locks)


@pytest.fixture
def shared():
    sh = Shared()
    yield sh
    sh.seg.close()


def outcome(xid: int) -> int:
    return ABORTED if xid % 3 == 0 else COMMITTED


def test_buffer_count_follows_postgresql():
    assert n_clog_buffers(Settings({"shared_buffers": 16384})) == 32
    assert n_clog_buffers(Settings({"shared_buffers": 16})) == 4
    assert n_clog_buffers(Settings({"shared_buffers": 4 * 1024 * 1024})) == 128
    assert n_clog_buffers(Settings({"transaction_buffers": 200})) == 200


def test_new_directory_has_one_zero_page(tmp_path, shared):
    clog = shared.clog(tmp_path)
    assert os.listdir(tmp_path / "pg_xact") == ["0000"]
    assert (tmp_path / "pg_xact" / "0000").read_bytes() == bytes(BLCKSZ)
    assert clog.status(FIRST_NORMAL_XID) == IN_PROGRESS


def test_round_trip_across_page_and_segment_boundaries(tmp_path, shared):
    xids = [FIRST_NORMAL_XID, 4, 5, 6, XACTS_PER_PAGE - 1, XACTS_PER_PAGE, XACTS_PER_PAGE + 1,
            XACTS_PER_SEGMENT - 1, XACTS_PER_SEGMENT, 3 * XACTS_PER_SEGMENT + 7,
            (1 << 40) + 5]
    clog = shared.clog(tmp_path)
    for x in xids:
        clog.set_status(x, outcome(x))
    assert [clog.status(x) for x in xids] == [outcome(x) for x in xids]
    assert clog.statuses(np.array(xids)).tolist() == [outcome(x) for x in xids]
    # neighbours sharing their bytes are untouched
    assert clog.status(7) == IN_PROGRESS and clog.status(XACTS_PER_PAGE + 2) == IN_PROGRESS
    clog.flush_all()
    files = sorted(os.listdir(tmp_path / "pg_xact"))
    assert files == ["0000", "0001", "0003", "100000"]      # 2^40 >> 20 = 0x100000
    assert segment_name((1 << 40) >> 20) == "100000"
    # files grow page by page: 0000 up to page 31 (xid 2^20 - 1), 0001 and 0003 one page
    assert os.path.getsize(tmp_path / "pg_xact" / "0000") == SEGMENT_SIZE
    assert os.path.getsize(tmp_path / "pg_xact" / "0001") == BLCKSZ
    assert os.path.getsize(tmp_path / "pg_xact" / "0003") == BLCKSZ
    # the bytes where the layout table says: xid 2^20 is byte 0, bits 0-1 of 0001
    data = (tmp_path / "pg_xact" / "0001").read_bytes()
    assert data[0] & 3 == outcome(XACTS_PER_SEGMENT)
    page1 = (tmp_path / "pg_xact" / "0000").read_bytes()[BLCKSZ:]
    x = XACTS_PER_PAGE + 1
    assert (page1[(x % XACTS_PER_PAGE) // 4] >> (2 * (x % 4))) & 3 == outcome(x)
    # another process (a fresh handle, no page copies) reads the same
    other = shared.clog(tmp_path)
    assert [other.status(x) for x in xids] == [outcome(x) for x in xids]


def test_special_xids(tmp_path, shared):
    clog = shared.clog(tmp_path)
    assert [clog.status(x) for x in (0, 1, 2)] == [ABORTED, COMMITTED, COMMITTED]
    assert clog.statuses(np.array([0, 1, 2, 3])).tolist() == [ABORTED, COMMITTED, COMMITTED,
                                                             IN_PROGRESS]
    with pytest.raises(AssertionError):
        clog.set_status(2, COMMITTED)


def test_illegal_transition_is_refused(tmp_path, shared):
    clog = shared.clog(tmp_path)
    clog.set_status(10, COMMITTED)
    clog.set_status(10, COMMITTED)                # repeating is fine (redo)
    with pytest.raises(AssertionError):
        clog.set_status(10, ABORTED)


def test_batch_agrees_with_scalar_on_every_shape(tmp_path, shared):
    clog = shared.clog(tmp_path)
    rng = np.random.default_rng(7)
    span = (LOCAL_PAGES + 3) * XACTS_PER_PAGE
    chosen = rng.integers(FIRST_NORMAL_XID, span, 3000)
    for x in np.unique(chosen).tolist():
        clog.set_status(x, outcome(x))
    other = shared.clog(tmp_path)
    batches = [chosen[:200],                                  # spread wider than the copies
               np.sort(chosen)[:300],                         # a few neighbouring pages
               np.full(50, chosen[0]),                        # one page
               np.array([0, 1, 2, int(chosen[1]), 3]),         # special xids mixed in
               rng.integers(FIRST_NORMAL_XID, span, 500)]     # mostly never set
    for b in batches:
        for c in (clog, other):
            assert c.statuses(b).tolist() == [c.status(int(x)) for x in b]
    assert all(clog.status(int(x)) == outcome(int(x)) for x in chosen[:100])


def test_copies_see_statuses_set_elsewhere(tmp_path, shared):
    """A process's page copy showing IN_PROGRESS is looked at again."""
    mine, theirs = shared.clog(tmp_path), shared.clog(tmp_path)
    xs = np.array([100, 101, 102], dtype=np.int64)
    assert mine.status(100) == IN_PROGRESS
    assert mine.statuses(xs).tolist() == [IN_PROGRESS] * 3
    theirs.set_status(100, COMMITTED)
    theirs.set_status(102, ABORTED)
    assert mine.status(100) == COMMITTED
    assert mine.statuses(xs).tolist() == [COMMITTED, IN_PROGRESS, ABORTED]


def test_eviction_with_more_pages_than_buffers(tmp_path, shared):
    clog = shared.clog(tmp_path)
    assert clog.nslots == 4
    npages = 10
    xids = [p * XACTS_PER_PAGE + k for p in range(npages) for k in (3, 77, 32000)]
    for x in xids:
        clog.set_status(x, outcome(x))
    st = clog.stats()
    assert st["evictions"] >= npages - 4
    assert st["blks_written"] >= npages - 4          # dirty victims were written first
    assert len(set(shared.seg.clog_pageno.tolist())) == 4
    other = shared.clog(tmp_path)                     # no copies: through the buffers
    assert [other.status(x) for x in xids] == [outcome(x) for x in xids]
    assert other.statuses(np.array(xids)).tolist() == [outcome(x) for x in xids]
    assert clog.stats()["blks_read"] >= npages - 4    # evicted pages came back from disk


def test_latest_page_is_never_evicted(tmp_path, shared):
    clog = shared.clog(tmp_path)
    latest = 5 * XACTS_PER_PAGE
    clog.extend(latest)
    for p in range(12):                      # read more pages than there are buffers
        if p != 5:
            clog.status(p * XACTS_PER_PAGE + 3)
    assert latest // XACTS_PER_PAGE in shared.seg.clog_pageno.tolist()
    assert clog.stats()["blks_zeroed"] == 1


def test_extend_zeroes_a_new_page_over_stale_bytes(tmp_path, shared):
    clog = shared.clog(tmp_path)
    x = 2 * XACTS_PER_PAGE
    clog.set_status(x + 5, COMMITTED)      # stale bits on a page the counter has not entered
    clog.flush_all()
    clog.extend(x + 1)                     # not the first xid of its page: nothing happens
    assert clog.status(x + 5) == COMMITTED
    clog.extend(x)
    assert shared.clog(tmp_path).status(x + 5) == IN_PROGRESS
    clog.flush_all()
    assert (tmp_path / "pg_xact" / "0000").read_bytes()[2 * BLCKSZ:] == bytes(BLCKSZ)


def test_persistence_across_reopen(tmp_path):
    sh = Shared()
    clog = sh.clog(tmp_path)
    xids = list(range(FIRST_NORMAL_XID, 3000, 7)) + [XACTS_PER_SEGMENT + 9]
    for x in xids:
        clog.set_status(x, outcome(x))
    clog.close()
    sh.seg.close()
    sh2 = Shared()
    clog2 = sh2.clog(tmp_path)
    assert [clog2.status(x) for x in xids] == [outcome(x) for x in xids]
    assert clog2.status(4) == IN_PROGRESS
    sh2.seg.close()


def test_instance_keeps_commits_across_reopen(tmp_path):
    with Instance(tmp_path / "d", max_worker_processes=0, shared_buffers=32) as inst:
        with inst.connect() as be:
            be.xact.begin()
            committed = be.xact.xid_for_write()
            be.xact.commit()
            be.xact.begin()
            aborted = be.xact.xid_for_write()
            be.xact.rollback()
    assert sorted(os.listdir(tmp_path / "d" / "pg_xact")) == ["0000"]
    with Instance(tmp_path / "d", max_worker_processes=0, shared_buffers=32) as inst:
        assert inst.clog.status(committed) == COMMITTED
        assert inst.clog.status(aborted) == ABORTED


def test_concurrent_setters_in_forked_processes(tmp_path, shared):
    """Four processes set interleaved xids over more pages than buffers (evictions, waits
    for I/O, writes from every process); every status arrives."""
    clog = shared.clog(tmp_path)
    nproc, npages = 4, 9
    xids = np.arange(FIRST_NORMAL_XID, npages * XACTS_PER_PAGE, 97, dtype=np.int64)
    pids = []
    for k in range(nproc):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for x in xids[k::nproc].tolist():
                    clog.set_status(x, outcome(x))
                    if x % 5 == 0:
                        clog.status(int(xids[(x * 7) % len(xids)]))
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    want = [outcome(x) for x in xids.tolist()]
    assert clog.statuses(xids).tolist() == want
    clog.flush_all()
    assert shared.clog(tmp_path).statuses(xids).tolist() == want
    assert clog.stats()["evictions"] > 0


def test_truncate_before_removes_whole_segments(tmp_path, shared):
    clog = shared.clog(tmp_path)
    xids = [s * XACTS_PER_SEGMENT + 10 for s in range(4)]
    for x in xids:
        clog.set_status(x, COMMITTED)
    clog.flush_all()
    assert sorted(os.listdir(tmp_path / "pg_xact")) == ["0000", "0001", "0002", "0003"]
    cut = 2 * XACTS_PER_SEGMENT + 500          # in segment 2: 0000 and 0001 go
    assert clog.truncate_before(cut) == 2
    assert sorted(os.listdir(tmp_path / "pg_xact")) == ["0002", "0003"]
    assert clog.truncate_before(cut) == 0
    assert clog.status(xids[2]) == COMMITTED and clog.status(xids[3]) == COMMITTED
    assert not ((shared.seg.clog_pageno >= 0)
                & (shared.seg.clog_pageno < 2 * PAGES_PER_SEGMENT)).any()
    with pytest.raises(DataCorrupted, match=r'status of transaction \d+: file "pg_xact/0001"'):
        shared.clog(tmp_path).status(xids[1] + 1)
    assert clog.stats()["truncates"] == 1


def test_truncation_is_found_again_at_open(tmp_path):
    sh = Shared()
    clog = sh.clog(tmp_path)
    clog.set_status(3 * XACTS_PER_SEGMENT + 1, COMMITTED)
    clog.truncate_before(3 * XACTS_PER_SEGMENT)
    clog.close()
    sh.seg.close()
    sh2 = Shared()
    clog2 = sh2.clog(tmp_path)
    assert clog2.status(3 * XACTS_PER_SEGMENT + 1) == COMMITTED
    with pytest.raises(DataCorrupted):
        clog2.status(50)
    sh2.seg.close()


class Recorder:
    """A fake WAL: records flushes; the clog's writes are checked against them."""

    def __init__(self, clog):
        self.flushed = 0
        self.calls = []
        self.lsn_of = {}          # xid -> the LSN given with its status
        self.writes = 0
        real = clog._write_page

        def write_page(segno, offset, data):
            page = segno * PAGES_PER_SEGMENT + offset // BLCKSZ
            arr = np.frombuffer(data, dtype=np.uint8)
            for xid, lsn in self.lsn_of.items():
                if xid // XACTS_PER_PAGE == page:
                    byte = arr[(xid % XACTS_PER_PAGE) // 4]
                    if (byte >> (2 * (xid % 4))) & 3:        # this status is in the write
                        assert lsn <= self.flushed, (xid, lsn, self.flushed)
            self.writes += 1
            real(segno, offset, data)

        clog._write_page = write_page
        clog.wal_flush = self.flush

    def flush(self, lsn):
        self.calls.append(lsn)
        self.flushed = max(self.flushed, lsn)


def test_group_lsn_orders_writes_after_the_wal(tmp_path, shared):
    clog = shared.clog(tmp_path)
    rec = Recorder(clog)
    lsn = 1000
    for p in range(8):                       # more pages than buffers: eviction writes
        for k in (3, 500, 9000):
            x = p * XACTS_PER_PAGE + k
            lsn += 37
            rec.lsn_of[x] = lsn
            clog.set_status(x, COMMITTED, lsn=lsn)
    clog.flush_all()
    assert rec.writes >= 8
    assert rec.calls and all(c >= 1000 for c in rec.calls)
    # the group LSN of a page is the highest given for it
    for slot, page in enumerate(shared.seg.clog_pageno.tolist()):
        if page >= 0:
            top = max(v for x, v in rec.lsn_of.items() if x // XACTS_PER_PAGE == page)
            assert shared.seg.clog_group_lsn[slot].max() == top


def test_no_wal_flush_without_an_lsn(tmp_path, shared):
    clog = shared.clog(tmp_path)
    rec = Recorder(clog)
    clog.set_status(10, COMMITTED)
    clog.flush_all()
    assert rec.writes == 1 and rec.calls == []


def enospc(*_args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_at_checkpoint_is_53100_and_recoverable(tmp_path, shared, monkeypatch):
    clog = shared.clog(tmp_path)
    clog.set_status(10, COMMITTED)
    monkeypatch.setattr(clog, "_write_page", enospc)
    with pytest.raises(DiskFull) as ei:
        clog.flush_all()
    assert ei.value.sqlstate == "53100"
    assert str(ei.value) == ('could not write to file "pg_xact/0000" at offset 0: '
                             "No space left on device")
    assert clog.status(10) == COMMITTED          # still in its buffer, still dirty
    clog.set_status(11, ABORTED)                 # and usable
    monkeypatch.undo()
    assert clog.flush_all() == 1
    other = shared.clog(tmp_path)
    shared.seg.clog_pageno[:] = -1               # forget the buffers: read from the file
    shared.seg.clog_state[:] = 0
    assert other.status(10) == COMMITTED and other.status(11) == ABORTED


def test_disk_full_on_eviction_and_extension(tmp_path, shared, monkeypatch):
    clog = shared.clog(tmp_path)
    for p in range(4):                            # every buffer dirty
        clog.set_status(p * XACTS_PER_PAGE + 5, COMMITTED)
    monkeypatch.setattr(clog, "_write_page", enospc)
    with pytest.raises(DiskFull, match="No space left on device"):
        clog.set_status(7 * XACTS_PER_PAGE + 5, COMMITTED)   # needs a victim
    with pytest.raises(DiskFull):
        clog.extend(8 * XACTS_PER_PAGE)
    assert all(clog.status(p * XACTS_PER_PAGE + 5) == COMMITTED for p in range(4))
    monkeypatch.undo()
    clog.extend(8 * XACTS_PER_PAGE)
    clog.set_status(7 * XACTS_PER_PAGE + 5, COMMITTED)
    clog.set_status(8 * XACTS_PER_PAGE + 5, ABORTED)
    clog.flush_all()
    shared.seg.clog_pageno[:] = -1
    shared.seg.clog_state[:] = 0
    other = shared.clog(tmp_path)
    assert [other.status(p * XACTS_PER_PAGE + 5) for p in (0, 1, 2, 3, 7, 8)] == \
        [COMMITTED] * 5 + [ABORTED]


def test_other_write_errors_name_the_file(tmp_path, shared, monkeypatch):
    clog = shared.clog(tmp_path)
    clog.set_status(XACTS_PER_SEGMENT + 3, COMMITTED)

    def eio(*_args):
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    monkeypatch.setattr(clog, "_write_page", eio)
    with pytest.raises(IOError_, match='could not write to file "pg_xact/0001" at offset 0'):
        clog.flush_all()


def test_disk_full_in_an_instance(tmp_path, monkeypatch):
    """ENOSPC writing pg_xact at a checkpoint: 53100, the instance goes on, and once the
    disk has room again nothing committed is lost."""
    d = tmp_path / "d"
    with Instance(d, max_worker_processes=0, shared_buffers=32) as inst:
        monkeypatch.setattr(inst.clog, "_write_page", enospc)
        with inst.connect() as be:
            be.xact.begin()
            x1 = be.xact.xid_for_write()
            be.xact.commit()
        with pytest.raises(DiskFull):
            inst.checkpoint()
        with inst.connect() as be:
            be.xact.begin()
            x2 = be.xact.xid_for_write()
            be.xact.commit()
        monkeypatch.undo()
    with Instance(d, max_worker_processes=0, shared_buffers=32) as inst:
        assert inst.clog.status(x1) == COMMITTED and inst.clog.status(x2) == COMMITTED


def test_old_sparse_commit_log_is_converted(tmp_path, shared):
    """The single sparse file of earlier versions becomes segment files, once."""
    old = tmp_path / "pg_xact"
    far = XACTS_PER_SEGMENT + 3 * XACTS_PER_PAGE + 40
    with open(old, "w+b") as f:
        f.truncate(1 << 30)                      # sparse, as the old map was
        for x, st in ((5, COMMITTED), (6, ABORTED), (far, COMMITTED)):
            f.seek(x >> 2)
            cur = f.read(1)[0]
            f.seek(x >> 2)
            f.write(bytes([cur | (st << (2 * (x & 3)))]))
    clog = shared.clog(tmp_path)
    assert old.is_dir() and not (tmp_path / "pg_xact.sparse").exists()
    assert sorted(os.listdir(old)) == ["0000", "0001"]
    assert os.path.getsize(old / "0001") == 4 * BLCKSZ          # pages 0-2 holes, page 3
    assert [clog.status(x) for x in (5, 6, 7, far)] == [COMMITTED, ABORTED, IN_PROGRESS,
                                                       COMMITTED]
    assert os.path.getsize(old / "0000") == BLCKSZ
