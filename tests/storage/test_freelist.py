"""The clock sweep's step (``freelist.sweep_slice``) against a model of PostgreSQL's
buffer-by-buffer sweep: the same candidate, pinned count, decrements and hand."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from minidb.storage.buf_internals import BM_IO_IN_PROGRESS
from minidb.storage.freelist import SWEEP_STEP, sweep_slice, sweep_views


def _model(refcount, usage, flags, hand, nbuffers, step):
    """One buffer at a time, as StrategyGetBuffer's loop, for at most ``step`` buffers."""
    pinned, decremented = 0, False
    for k in range(min(step, nbuffers)):
        b = (hand + k) % nbuffers
        if refcount[b]:
            pinned += 1
        elif usage[b]:
            usage[b] -= 1
            decremented = True
        elif not flags[b] & BM_IO_IN_PROGRESS:
            return b, pinned, decremented, hand + k + 1
    return -1, pinned, decremented, hand + min(step, nbuffers)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 80).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 5), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n),
    st.integers(0, 10 ** 6), st.sampled_from([1, 7, SWEEP_STEP, 200]))))
def test_sweep_slice_matches_the_buffer_by_buffer_sweep(case):
    refs, uses, io, hand, step = case
    n = len(refs)
    seg = SimpleNamespace(buf_refcount=np.array(refs, dtype="<i4"),
                          buf_usage=np.array(uses, dtype="u1"),
                          buf_flags=np.array([BM_IO_IN_PROGRESS if x else 0 for x in io],
                                             dtype="<u2"),
                          control=np.array([hand, 0, 0], dtype="<i8"))
    usage = list(uses)
    want = _model(refs, usage, seg.buf_flags.tolist(), hand, n, step)
    got = sweep_slice(sweep_views(seg), threading.Lock(), n, step)
    assert got == want[:3]
    assert seg.buf_usage.tolist() == usage
    assert int(seg.control[0]) == want[3]
