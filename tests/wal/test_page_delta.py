"""``wal.record.page_delta``: the word-wise path gives exactly the fragments of the
bytewise one (``_page_delta_bytes``), and ``apply_delta`` turns the old page into the new
one - on generated pages with few and many changed bytes, changes at the page's edges,
changes inside one word and across word boundaries."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from minidb.config import BLCKSZ
from minidb.wal import record as rec

_CHANGE = st.tuples(st.integers(0, BLCKSZ - 1), st.integers(1, 300), st.integers(0, 2**32))


@settings(max_examples=150, deadline=None)
@given(st.lists(_CHANGE, max_size=12), st.lists(st.integers(0, BLCKSZ - 1), max_size=30),
       st.integers(0, 2**32))
def test_word_wise_delta_is_the_bytewise_delta(spans, bits, seed):
    rng = np.random.default_rng(seed)
    before = rng.integers(0, 256, BLCKSZ, dtype=np.uint8)
    before[rng.integers(0, BLCKSZ, 2000)] = 0          # zero bytes: changes to/from zero
    after = before.copy()
    for at, length, s in spans:
        r = np.random.default_rng(s)
        after[at:at + length] = r.integers(0, 256, len(after[at:at + length]), dtype=np.uint8)
    for at in bits:
        after[at] ^= 1 << (at % 8)
    got = rec.page_delta(before, after)
    assert got == rec._page_delta_bytes(before, after)
    page = before.copy()
    rec.apply_delta(page, got)
    assert np.array_equal(page, after)


def test_gaps_of_four_and_five_unchanged_bytes():
    before = np.zeros(BLCKSZ, dtype=np.uint8)
    for gap in range(0, 12):
        after = before.copy()
        after[[7, 8 + gap, 4000, 8191]] = 1            # across a word boundary, the end
        assert rec.page_delta(before, after) == rec._page_delta_bytes(before, after)
    assert rec.page_delta(before, before.copy()) == b""


def test_logical_block_data_round_trips_with_its_flag():
    """A block registered with logical data keeps it verbatim and is marked so redo hands
    it to the resource manager's routine instead of pasting it as a delta."""
    page = np.zeros(BLCKSZ, dtype=np.uint8)
    blocks = [(7, 0, 3, page, rec.REGBUF_STANDARD | rec.REGBUF_LOGICAL, b"\x01\x02tuple"),
              (7, 0, 4, page, rec.REGBUF_STANDARD, b"\x00\x10\x00\x01z")]
    body, nimg = rec.assemble(blocks, b"main", [None, None])
    assert nimg == 0
    buf = rec.finish(body, 5, 0, rec.XLOG_HEAP_INSERT, rec.RM_HEAP)
    r = rec.decode(buf, 64, None)
    assert [(b.block, b.logical, b.data) for b in r.blocks] == \
        [(3, True, b"\x01\x02tuple"), (4, False, b"\x00\x10\x00\x01z")]
    assert rec.opcode(rec.RM_HEAP, rec.XLOG_HEAP_INSERT | rec.XLOG_HEAP_INIT_PAGE) == \
        rec.XLOG_HEAP_INSERT
