"""Tests for minidb.storage.page: a state machine against a list model, plus unit tests.

What these do not prove: that the checksum catches *every* single-bit error (a 16-bit
checksum cannot; the bit-flip test samples positions with a fixed seed and the
pre-fold test shows the 64-bit sum always changes), nor anything about concurrent
access (the buffer manager's content locks are tested elsewhere).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule)

from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted, ProgramLimitExceeded
from minidb.storage import page as P


def new_page(special_size: int = 0) -> np.ndarray:
    """A page as the buffer pool hands it out: a row view of a larger array."""
    pool = np.zeros((3, BLCKSZ), dtype=np.uint8)
    pg = pool[1]
    P.init_page(pg, special_size)
    return pg


# -- state machine -----------------------------------------------------------------------------

class PageMachine(RuleBasedStateMachine):
    """Model: a list, index i = offset i+1, of [state, bytes-or-None, redirect target]."""

    @initialize(special_size=st.sampled_from([0, 16]))
    def init(self, special_size):
        self.page = new_page(special_size)
        self.special = BLCKSZ - P.maxalign(special_size)
        self.model: list[list] = []

    # helpers
    def offsets_in(self, *states):
        return [i + 1 for i, (s, _, _) in enumerate(self.model) if s in states]

    def add_expect_failure(self, before, exc, need):
        event("add_item refused: page full")
        lower, upper = P.get_lower(self.page), P.get_upper(self.page)
        assert need > upper - lower, str(exc)
        assert np.array_equal(self.page, before), "failed add_item changed the page"

    @rule(data=st.one_of(st.binary(min_size=1, max_size=40), st.binary(min_size=1, max_size=900)))
    def add_heap(self, data):
        before = self.page.copy()
        unused = self.offsets_in(P.LP_UNUSED)
        expected = unused[0] if unused else len(self.model) + 1
        need = P.maxalign(len(data)) + (0 if unused else P.ITEMID_SIZE)
        try:
            off = P.add_item(self.page, data)
        except ProgramLimitExceeded as exc:
            self.add_expect_failure(before, exc, need)
            return
        assert off == expected
        if unused:
            event("add_item reused an UNUSED slot")
            self.model[off - 1] = [P.LP_NORMAL, data, None]
        else:
            self.model.append([P.LP_NORMAL, data, None])
        assert P.get_lsn(self.page) == P.get_lsn(before)  # pd_lsn is the WAL's to set

    @rule(delta=st.integers(-12, 12), byte=st.integers(0, 255))
    def add_heap_near_limit(self, delta, byte):
        """An item sized around the free space, to hit the exact page-full boundary."""
        size = min(max(1, P.free_space(self.page) + delta), 8160)
        self.add_heap(bytes([byte]) * size)

    # Index pages have no redirects: shifting pointers would change what a redirect's
    # target number names (delete below has the same precondition).
    @precondition(lambda self: not self.offsets_in(P.LP_REDIRECT))
    @rule(data=st.binary(min_size=1, max_size=64), where=st.floats(0, 1))
    def index_insert(self, data, where):
        pos = 1 + int(where * len(self.model))
        before = self.page.copy()
        try:
            off = P.add_item(self.page, data, offset=pos, heap=False)
        except ProgramLimitExceeded as exc:
            self.add_expect_failure(before, exc, P.maxalign(len(data)) + P.ITEMID_SIZE)
            return
        assert off == pos
        self.model.insert(pos - 1, [P.LP_NORMAL, data, None])

    @precondition(lambda self: self.offsets_in(P.LP_NORMAL, P.LP_REDIRECT, P.LP_DEAD))
    @rule(pick=st.integers(0, 10**6), keep=st.booleans())
    def mark_dead(self, pick, keep):
        cands = self.offsets_in(P.LP_NORMAL, P.LP_REDIRECT, P.LP_DEAD)
        off = cands[pick % len(cands)]
        entry = self.model[off - 1]
        if entry[0] == P.LP_REDIRECT:
            keep = False
        P.set_item_dead(self.page, off, keep)
        self.model[off - 1] = [P.LP_DEAD, entry[1] if keep else None, None]

    @precondition(lambda self: self.offsets_in(P.LP_NORMAL, P.LP_REDIRECT, P.LP_DEAD))
    @rule(pick=st.integers(0, 10**6))
    def mark_unused(self, pick):
        cands = self.offsets_in(P.LP_NORMAL, P.LP_REDIRECT, P.LP_DEAD)
        off = cands[pick % len(cands)]
        P.set_item_unused(self.page, off)
        self.model[off - 1] = [P.LP_UNUSED, None, None]
        assert P.get_flags(self.page) & P.PD_HAS_FREE_LINES

    @precondition(lambda self: len(self.model) >= 2 and self.offsets_in(P.LP_NORMAL,
                                                                         P.LP_REDIRECT))
    @rule(pick=st.integers(0, 10**6), to=st.integers(0, 10**6))
    def redirect(self, pick, to):
        cands = self.offsets_in(P.LP_NORMAL, P.LP_REDIRECT)
        off = cands[pick % len(cands)]
        others = [o for o in range(1, len(self.model) + 1) if o != off]
        tgt = others[to % len(others)]
        P.set_item_redirect(self.page, off, tgt)
        self.model[off - 1] = [P.LP_REDIRECT, None, tgt]

    @rule()
    def repair(self):
        ref = self.page.copy()
        _relayout_repair(ref)
        P.repair_fragmentation(self.page)
        assert bytes(self.page) == bytes(ref)     # in-place moves = a full re-layout
        n = len(self.model)
        used = sum(P.maxalign(len(b)) for _, b, _ in self.model if b is not None)
        expected = max(0, self.special - 24 - 4 * n - used - 4)
        assert P.free_space(self.page) == expected
        assert P.get_upper(self.page) == self.special - used
        has_unused = bool(self.offsets_in(P.LP_UNUSED))
        assert bool(P.get_flags(self.page) & P.PD_HAS_FREE_LINES) == has_unused

    @precondition(lambda self: self.model and not self.offsets_in(P.LP_REDIRECT))
    @rule(picks=st.sets(st.integers(0, 10**6), min_size=1, max_size=5))
    def delete(self, picks):
        offs = {p % len(self.model) + 1 for p in picks}
        P.delete_items(self.page, sorted(offs))
        self.model = [e for i, e in enumerate(self.model) if i + 1 not in offs]
        used = sum(P.maxalign(len(b)) for _, b, _ in self.model if b is not None)
        assert P.get_upper(self.page) == self.special - used  # storage compacted

    @invariant()
    def matches_model(self):
        if not hasattr(self, "page"):
            return
        pg = self.page
        P.check_page(pg, "test page")
        assert P.max_offset(pg) == len(self.model)
        assert P.get_lower(pg) == 24 + 4 * len(self.model)
        assert P.get_special(pg) == self.special
        for off, (state, data, target) in enumerate(self.model, start=1):
            lp_off, flags, lp_len = P.get_item_id(pg, off)
            assert flags == state, (off, flags, state)
            if data is not None:
                assert lp_len == len(data)
                assert bytes(P.get_item(pg, off)) == data
            else:
                assert lp_len == 0
            if state == P.LP_REDIRECT:
                assert lp_off == target
        ranges = sorted((o, o + ln) for _, o, _, ln in P.items(pg) if ln)
        for (_, e1), (s2, _) in zip(ranges, ranges[1:]):
            assert e1 <= s2
        if ranges:
            assert ranges[0][0] >= P.get_upper(pg)
        assert not pg[P.get_lower(pg):P.get_upper(pg)].any(), "free space not zero"


def _relayout_compact(page, words, lower, upper, special):
    """PageRepairFragmentation as a full re-layout: every item copied into a new storage
    area (padding zero) written back whole - the reference for ``_compact``'s in-place
    moves.  (Validation is ``_compact``'s; the machine builds only valid pages.)"""
    stored = sorted(((v & 0x7FFF, v >> 17, i) for i, v in enumerate(words) if v >> 17),
                    reverse=True)
    total = sum(P.maxalign(n) for _, n, _ in stored)
    new_upper = special - total
    mv = memoryview(page)
    old = mv[upper:special].tobytes()
    area = bytearray(total)
    pos = total
    for lp_off, lp_len, i in stored:
        pos -= P.maxalign(lp_len)
        area[pos:pos + lp_len] = old[lp_off - upper:lp_off - upper + lp_len]
        words[i] = (words[i] & ~0x7FFF) | (new_upper + pos)
    mv[new_upper:special] = area
    if new_upper > lower:
        mv[lower:new_upper] = bytes(new_upper - lower)
    return new_upper


def _relayout_repair(page):
    saved = P._compact
    P._compact = _relayout_compact
    try:
        P.repair_fragmentation(page)
    finally:
        P._compact = saved


TestPageMachine = PageMachine.TestCase
TestPageMachine.settings = settings(max_examples=100, stateful_step_count=40, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])


# -- header and line pointers ------------------------------------------------------------------

def test_init_page_header():
    pg = new_page(16)
    assert (P.get_lower(pg), P.get_upper(pg), P.get_special(pg)) == (24, 8176, 8176)
    assert P.get_lsn(pg) == 0 and P.get_flags(pg) == 0 and P.get_prune_xid(pg) == 0
    assert int.from_bytes(bytes(pg[18:20]), "little") == 8192 | 5  # layout version 5
    assert not P.page_is_new(pg)
    assert P.max_offset(pg) == 0
    assert P.free_space(pg) == 8176 - 24 - 4


def test_init_page_works_in_place():
    pool = np.full((2, BLCKSZ), 0xAB, dtype=np.uint8)
    P.init_page(pool[1])
    assert (pool[0] == 0xAB).all()
    assert P.get_upper(pool[1]) == BLCKSZ and not pool[1][24:].any()


def test_header_setters_and_64bit_lsn():
    pg = new_page()
    P.set_prune_xid(pg, 2**31 + 5)
    assert P.get_prune_xid(pg) == 2**31 + 5
    P.set_prune_xid(pg, 2**63 + 5)   # 32 bits, as PostgreSQL's: saturates (a hint)
    assert P.get_prune_xid(pg) == 2**32 - 1
    P.set_flags(pg, P.PD_ALL_VISIBLE | P.PD_PAGE_FULL)
    assert P.get_flags(pg) == 6
    P.set_lsn(pg, 2**40 + 7)
    assert P.get_lsn(pg) == 2**40 + 7
    P.bump_lsn(pg)
    assert P.get_lsn(pg) == 2**40 + 8


@pytest.mark.parametrize("lp", [(0, 0, 0), (8191, 3, 8191), (32767, 3, 32767), (24, 1, 1),
                                (8184, 2, 0), (12345, 1, 321)])
def test_line_pointer_bit_packing(lp):
    pg = new_page()
    P.add_item(pg, b"x")
    P.set_item_id(pg, 1, *lp)
    assert P.get_item_id(pg, 1) == lp
    word = int.from_bytes(bytes(pg[24:28]), "little")
    assert word == lp[0] | (lp[1] << 15) | (lp[2] << 17)


@given(st.integers(0, 32767), st.integers(0, 3), st.integers(0, 32767))
def test_line_pointer_roundtrip_property(lp_off, flags, lp_len):
    pg = new_page()
    P.add_item(pg, b"x")
    P.set_item_id(pg, 1, lp_off, flags, lp_len)
    assert P.get_item_id(pg, 1) == (lp_off, flags, lp_len)


def test_offsets_out_of_range_are_corruption():
    pg = new_page()
    P.add_item(pg, b"abc")
    for off in (0, 2, -1):
        with pytest.raises(DataCorrupted):
            P.get_item(pg, off)
        with pytest.raises(DataCorrupted):
            P.get_item_id(pg, off)
    with pytest.raises(DataCorrupted):
        P.delete_items(pg, [2])


def test_corrupt_line_pointer_detected_by_get_item_and_repair():
    pg = new_page()
    P.add_item(pg, b"abc")
    P.set_item_id(pg, 1, 8190, P.LP_NORMAL, 100)  # runs past the page end
    with pytest.raises(DataCorrupted):
        P.get_item(pg, 1)
    before = pg.copy()
    with pytest.raises(DataCorrupted):
        P.repair_fragmentation(pg)
    assert np.array_equal(pg, before)


def test_overlapping_items_detected():
    pg = new_page()
    P.add_item(pg, b"a" * 16)
    P.add_item(pg, b"b" * 16)
    lp_off, _, _ = P.get_item_id(pg, 1)
    P.set_item_id(pg, 2, lp_off - 8, P.LP_NORMAL, 16)
    with pytest.raises(DataCorrupted, match="overlap"):
        P.check_page(pg, "test")
    with pytest.raises(DataCorrupted, match="overlap"):
        P.repair_fragmentation(pg)


# -- adding items ------------------------------------------------------------------------------

def test_add_items_grow_down_aligned():
    pg = new_page()
    assert P.add_item(pg, b"12345") == 1
    assert P.add_item(pg, bytearray(b"x" * 9)) == 2
    assert P.add_item(pg, memoryview(b"yy")) == 3
    assert P.add_item(pg, np.arange(3, dtype=np.uint8)) == 4
    assert [(o, off, f, ln) for o, off, f, ln in P.items(pg)] == [
        (1, 8184, 1, 5), (2, 8168, 1, 9), (3, 8160, 1, 2), (4, 8152, 1, 3)]
    assert bytes(P.get_item(pg, 4)) == b"\x00\x01\x02"
    assert P.get_lsn(pg) == 0  # page functions leave pd_lsn to the WAL


def test_get_item_is_writable_view_into_page():
    pg = new_page()
    P.add_item(pg, b"hello")
    P.get_item(pg, 1)[0:1] = b"J"
    assert bytes(P.get_item(pg, 1)) == b"Jello"
    P.overwrite_item(pg, 1, b"world")
    assert bytes(P.get_item(pg, 1)) == b"world"
    with pytest.raises(Exception):
        P.overwrite_item(pg, 1, b"longer!")


def test_page_full_raises_and_leaves_page_unchanged():
    pg = new_page()
    n = 0
    while True:
        before = pg.copy()
        try:
            P.add_item(pg, b"z" * 100)
        except ProgramLimitExceeded as exc:
            assert "100 bytes" in str(exc)
            break
        n += 1
    assert np.array_equal(pg, before)
    assert n == (8192 - 24) // (104 + 4)
    assert P.free_space(pg) < 104


def test_page_full_with_stale_free_lines_hint_leaves_page_unchanged():
    pg = new_page()
    while P.free_space(pg) >= 200:
        P.add_item(pg, b"q" * 200)
    P.set_item_dead(pg, 1, keep_storage=False)
    P.set_item_unused(pg, 1)
    before = pg.copy()
    with pytest.raises(ProgramLimitExceeded):
        P.add_item(pg, b"q" * 200)  # storage of item 1 not reclaimed yet
    assert np.array_equal(pg, before)
    P.repair_fragmentation(pg)
    assert P.add_item(pg, b"q" * 200) == 1


@pytest.mark.parametrize("special_size", [0, 16])
def test_item_too_large(special_size):
    pg = new_page(special_size)
    limit = (BLCKSZ - P.maxalign(special_size) - 24 - 4) & ~7
    before = pg.copy()
    with pytest.raises(ProgramLimitExceeded, match="too large"):
        P.add_item(pg, b"x" * (limit + 1))
    assert np.array_equal(pg, before)
    assert P.add_item(pg, b"x" * limit) == 1
    assert P.free_space(pg) == 0
    if special_size == 0:
        assert limit == 8160  # MaxHeapTupleSize


def test_max_items():
    pg = new_page()
    for _ in range(3):
        P.add_item(pg, b"a", max_items=3)
    with pytest.raises(ProgramLimitExceeded, match="3 items"):
        P.add_item(pg, b"a", max_items=3)
    assert P.heap_free_space(pg, 3) == 0
    assert P.heap_free_space(pg, 4) == P.free_space(pg) > 0
    P.set_item_unused(pg, 2)
    assert P.heap_free_space(pg, 3) == P.free_space(pg)
    assert P.add_item(pg, b"b", max_items=3) == 2  # reuse does not add a line pointer
    assert P.heap_free_space(pg, 3) == 0


def test_reuse_of_unused_slots_and_flag():
    pg = new_page()
    for i in range(5):
        P.add_item(pg, bytes([65 + i]) * 10)
    P.set_item_dead(pg, 2, keep_storage=False)
    P.set_item_unused(pg, 2)
    P.set_item_unused(pg, 4)  # NORMAL -> UNUSED (pruned heap-only tuple)
    assert P.get_flags(pg) & P.PD_HAS_FREE_LINES
    assert P.add_item(pg, b"new2") == 2
    assert P.get_flags(pg) & P.PD_HAS_FREE_LINES  # offset 4 still unused
    assert P.add_item(pg, b"new4") == 4
    assert not P.get_flags(pg) & P.PD_HAS_FREE_LINES
    assert P.add_item(pg, b"six") == 6
    assert bytes(P.get_item(pg, 3)) == b"C" * 10


def test_heap_add_at_explicit_offset_fills_unused_slot_only():
    pg = new_page()
    for _ in range(3):
        P.add_item(pg, b"abc")
    P.set_item_unused(pg, 2)
    with pytest.raises(Exception):
        P.add_item(pg, b"x", offset=1)  # in use
    assert P.add_item(pg, b"x", offset=2) == 2
    assert not P.get_flags(pg) & P.PD_HAS_FREE_LINES
    assert P.add_item(pg, b"y", offset=4) == 4


def test_index_insert_shifts_line_pointers():
    pg = new_page(16)
    for k in (b"a", b"c", b"e"):
        P.add_item(pg, k, heap=False)
    P.add_item(pg, b"b", offset=2, heap=False)
    P.add_item(pg, b"d", offset=4, heap=False)
    P.add_item(pg, b"f", offset=6, heap=False)
    P.add_item(pg, b"0", offset=1, heap=False)
    assert [bytes(P.get_item(pg, o)) for o in range(1, 8)] == [b"0", b"a", b"b", b"c", b"d",
                                                               b"e", b"f"]


def test_state_transitions_are_asserted():
    pg = new_page()
    P.add_item(pg, b"abc")
    P.add_item(pg, b"def")
    P.set_item_dead(pg, 1, keep_storage=False)
    with pytest.raises(AssertionError):
        P.set_item_redirect(pg, 1, 2)  # DEAD -> REDIRECT is not a transition
    P.set_item_unused(pg, 1)
    with pytest.raises(AssertionError):
        P.set_item_unused(pg, 1)
    with pytest.raises(AssertionError):
        P.set_item_dead(pg, 1, keep_storage=False)


def test_page_changes_leave_lsn_to_the_wal():
    pg = new_page()
    P.set_lsn(pg, 12345)
    seen = [P.get_lsn(pg)]

    def step(fn, *args, **kw):
        fn(pg, *args, **kw)
        lsn = P.get_lsn(pg)
        assert lsn == seen[-1], fn.__name__
        seen.append(lsn)

    step(P.add_item, b"one")
    step(P.add_item, b"two")
    step(P.add_item, b"three")
    step(P.overwrite_item, 1, b"ONE")
    step(P.set_item_redirect, 1, 2)
    step(P.set_item_dead, 3, True)
    step(P.set_item_unused, 1)
    step(P.repair_fragmentation)
    step(P.delete_items, [3])
    step(P.set_item_id, 1, 0, 0, 0)


# -- compaction --------------------------------------------------------------------------------

def test_repair_fragmentation_keeps_offsets_and_reclaims_space():
    pg = new_page()
    payloads = [bytes([i]) * (i * 7 + 1) for i in range(1, 20)]
    for p in payloads:
        P.add_item(pg, p)
    P.set_item_redirect(pg, 3, 5)
    P.set_item_dead(pg, 4, keep_storage=False)
    P.set_item_dead(pg, 7, keep_storage=True)  # index-style: storage kept
    P.set_item_unused(pg, 9)
    free_before = P.free_space(pg)
    P.repair_fragmentation(pg)
    gone = {3, 4, 9}
    expected_used = sum(P.maxalign(len(p)) for i, p in enumerate(payloads, 1) if i not in gone)
    assert P.get_upper(pg) == BLCKSZ - expected_used
    assert P.free_space(pg) > free_before
    for i, p in enumerate(payloads, 1):
        if i not in gone:
            assert bytes(P.get_item(pg, i)) == p
    assert P.get_item_id(pg, 3) == (5, P.LP_REDIRECT, 0)
    assert P.get_flags(pg) & P.PD_HAS_FREE_LINES
    assert P.max_offset(pg) == 19  # no truncation of line pointers
    P.check_page(pg, "test")


def test_repair_fragmentation_clears_stale_free_lines_flag():
    pg = new_page()
    P.add_item(pg, b"a")
    P.set_flags(pg, P.PD_HAS_FREE_LINES)
    P.repair_fragmentation(pg)
    assert P.get_flags(pg) == 0


def test_delete_items_renumbers_and_compacts():
    pg = new_page(16)
    keys = [bytes([97 + i]) * (i + 1) for i in range(8)]
    for k in keys:
        P.add_item(pg, k, heap=False)
    P.delete_items(pg, [2, 5, 8, 5])
    remaining = [k for i, k in enumerate(keys, 1) if i not in (2, 5, 8)]
    assert P.max_offset(pg) == len(remaining)
    assert [bytes(P.get_item(pg, o)) for o in range(1, 6)] == remaining
    assert P.get_upper(pg) == P.get_special(pg) - sum(P.maxalign(len(k)) for k in remaining)
    assert not pg[P.get_lower(pg):P.get_upper(pg)].any()
    P.check_page(pg, "test")
    lsn = P.get_lsn(pg)
    P.delete_items(pg, [])
    assert P.get_lsn(pg) == lsn


def test_special_space_untouched():
    pg = new_page(16)
    pg[8176:] = 0xEE
    for i in range(30):
        P.add_item(pg, bytes([i]) * 33, heap=False)
    P.set_item_dead(pg, 3, keep_storage=True)
    P.delete_items(pg, [1, 10, 20])
    P.repair_fragmentation(pg)
    assert (pg[8176:] == 0xEE).all()


# -- header verification -----------------------------------------------------------------------

def test_check_page_header_accepts_valid_and_zero_pages():
    P.check_page_header(new_page(), "block 0")
    P.check_page_header(np.zeros(BLCKSZ, np.uint8), "block 1")
    assert P.page_is_new(np.zeros(BLCKSZ, np.uint8))


@pytest.mark.parametrize("field,value,fragment", [
    (12, 20, "out of order"),          # lower < 24
    (12, 8180, "out of order"),        # lower > upper
    (16, 8200, "out of order"),        # special > BLCKSZ
    (14, 8190, "out of order"),        # upper > special
    (18, 8192 | 3, "version"),
    (12, 26, "line pointer"),
    (10, 0x80, "flags"),
])
def test_check_page_header_errors(field, value, fragment):
    pg = new_page(16)
    pg[field:field + 2] = np.frombuffer(int(value).to_bytes(2, "little"), np.uint8)
    with pytest.raises(DataCorrupted, match=f"invalid page in block 7 of t.*{fragment}"):
        P.check_page_header(pg, "block 7 of t")
    assert not P.check_page_headers(pg[None])[0]


def test_check_page_header_special_alignment():
    pg = new_page()
    pg[16:18] = np.frombuffer((8188).to_bytes(2, "little"), np.uint8)
    pg[14:16] = np.frombuffer((8184).to_bytes(2, "little"), np.uint8)
    with pytest.raises(DataCorrupted, match="aligned"):
        P.check_page_header(pg, "x")


def test_new_but_not_zero_page_is_corrupt():
    pg = np.zeros(BLCKSZ, np.uint8)
    pg[5000] = 1
    with pytest.raises(DataCorrupted, match="not all zero"):
        P.check_page_header(pg, "block 3")
    assert not P.check_page_headers(pg[None])[0]


def test_batch_headers():
    pool = np.zeros((4, BLCKSZ), np.uint8)
    P.init_page(pool[0])
    P.init_page(pool[2], 16)
    P.add_item(pool[2], b"abc")
    pool[3, 18] = 9  # bad version
    h = P.page_headers(pool)
    assert h["pd_upper"].tolist() == [8192, 0, 8176 - 8, 0]
    assert h["pd_lower"].tolist() == [24, 0, 28, 0]
    assert P.check_page_headers(pool).tolist() == [True, True, True, False]


# -- checksums ---------------------------------------------------------------------------------

def random_pages(n, seed=1):
    rng = np.random.default_rng(seed)
    pages = np.zeros((n, BLCKSZ), np.uint8)
    for i in range(n):
        P.init_page(pages[i])
        while True:
            try:
                P.add_item(pages[i], rng.integers(0, 256, int(rng.integers(1, 300)),
                                                  dtype=np.uint8))
            except ProgramLimitExceeded:
                break
    return pages


def test_checksum_roundtrip_and_ignores_stored_value():
    pages = random_pages(8)
    blocks = np.arange(100, 108)
    before = pages.copy()
    c = P.compute_checksums(pages, blocks)
    assert np.array_equal(pages, before)  # input untouched
    assert c.dtype == np.uint16 and (c != 0).all()
    for i in range(8):
        P.set_checksum(pages[i], int(blocks[i]))
    assert np.array_equal(P.compute_checksums(pages, blocks), c)  # pd_checksum masked out
    assert [P.get_checksum(pages[i]) for i in range(8)] == c.tolist()
    assert P.verify_checksums(pages, blocks).all()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), block=st.integers(0, 2**32 - 2),
       zero_checksum=st.booleans(), flips=st.lists(st.integers(0, BLCKSZ * 8 - 1), max_size=3))
def test_single_page_checksum_is_the_batch_checksum(seed, block, zero_checksum, flips):
    """page_checksum / verify_page_checksum (the scalar path of writes and single-block
    reads) give exactly what the vectorized batch routines give, on valid, corrupted and
    all-zero pages alike."""
    page = np.random.default_rng(seed).integers(0, 256, BLCKSZ, dtype=np.uint8)
    if zero_checksum:
        page[8:10] = 0
    blocks = np.array([block])
    assert P.page_checksum(page, block) == int(P.compute_checksums(page[None], blocks)[0])
    # through a memoryview and a kept uint64 view of the page (the buffer manager's reads)
    assert (P.page_checksum(memoryview(page), block, page.view("<u8"))
            == int(P.compute_checksums(page[None], blocks)[0]))
    P.set_checksum(page, block)
    assert P.get_checksum(page) == int(P.compute_checksums(page[None], blocks)[0])
    for bit in flips:
        page[bit // 8] ^= 1 << (bit % 8)
    assert P.verify_page_checksum(page, block) == bool(P.verify_checksums(page[None], blocks)[0])
    zero = np.zeros(BLCKSZ, np.uint8)
    assert P.verify_page_checksum(zero, block) and P.verify_checksums(zero[None], blocks)[0]


def test_checksum_block_number_matters():
    pages = random_pages(4)
    for i in range(4):
        P.set_checksum(pages[i], i)
    assert P.verify_checksums(pages, np.arange(4)).all()
    assert not P.verify_checksums(pages, np.arange(4) + 1).any()
    # the same page image at 4096 different block numbers: checksums are well spread
    same = np.repeat(pages[:1], 4096, axis=0)
    assert len(set(P.compute_checksums(same, np.arange(4096)).tolist())) > 3900


def test_checksum_detects_single_bit_flips():
    """Fixed-seed sample of positions all over the page (checksum bytes excluded)."""
    pages = random_pages(1, seed=7)
    P.set_checksum(pages[0], 42)
    rng = np.random.default_rng(12345)
    positions = rng.choice(np.setdiff1d(np.arange(BLCKSZ), [4, 5]), size=3000, replace=False)
    positions = np.concatenate([positions, [0, 3, 6, 7, 8, 23, 24, 8191]])
    bits = rng.integers(0, 8, len(positions))
    for chunk in np.array_split(np.arange(len(positions)), 6):
        batch = np.repeat(pages, len(chunk), axis=0)
        batch[np.arange(len(chunk)), positions[chunk]] ^= (1 << bits[chunk]).astype(np.uint8)
        ok = P.verify_checksums(batch, np.full(len(chunk), 42))
        assert not ok.any(), positions[chunk][ok]


@settings(max_examples=200, deadline=None)
@given(word=st.integers(0, 1023), delta=st.integers(1, 2**64 - 1))
def test_checksum_prefold_sum_changes_with_any_word(word, delta):
    """Odd weights make w -> w*K injective mod 2**64: any change to a word (outside the
    masked checksum bytes) changes the 64-bit sum before the fold."""
    w = np.zeros((2, 1024), np.uint64)
    if word == 0:
        delta &= 0xFFFF0000FFFFFFFF
        assume(delta)
    w[1, word] = np.uint64(delta)
    k = P._CHECKSUM_K
    assert (k & 1).all() and len(np.unique(k)) == 1024
    sums = w @ k
    assert sums[0] != sums[1]


def test_all_zero_page_verifies_and_damaged_zero_page_does_not():
    pages = np.zeros((3, BLCKSZ), np.uint8)
    pages[1, 100] = 1
    P.init_page(pages[2])  # initialised but checksum never set
    assert P.verify_checksums(pages, np.arange(3)).tolist() == [True, False, False]
    assert P.compute_checksums(pages[:1], [0])[0] != 0


def test_checksum_single_page_and_noncontiguous_batch():
    pages = random_pages(4)
    c = P.compute_checksums(pages, np.arange(4))
    assert P.compute_checksums(pages[1], 1)[0] == c[1]  # a 1-D page is a batch of one
    assert np.array_equal(P.compute_checksums(pages[::2], [0, 2]), c[::2])


def test_smgr_has_block_trusts_only_sizes_it_has_seen(tmp_path, monkeypatch):
    """``Smgr.has_block`` answers as ``nblocks`` does, calling fstat only for a block at or
    beyond the largest size it saw (main forks never shrink); a dropped relation is
    forgotten."""
    from minidb.storage import smgr as smgr_mod
    sm = smgr_mod.Smgr(str(tmp_path))
    sm.create(7)
    calls = []
    real = smgr_mod.Smgr.nblocks
    monkeypatch.setattr(smgr_mod.Smgr, "nblocks",
                        lambda self, rfn, fork=0: calls.append(rfn) or real(self, rfn, fork))
    assert not sm.has_block(7, 0) and len(calls) == 1
    sm.extend(7, smgr_mod.MAIN_FORKNUM, 0, 3)
    assert sm.has_block(7, 2) and len(calls) == 2       # beyond the size seen: look
    assert sm.has_block(7, 0) and sm.has_block(7, 1) and len(calls) == 2   # below: trusted
    assert not sm.has_block(7, 3) and len(calls) == 3
    sm.unlink(7)
    sm.create(7)
    assert not sm.has_block(7, 0) and len(calls) == 4   # forgotten with the file
    sm.close()


def test_prune_items_equals_item_by_item_then_repair():
    """prune_items (one pass over the pointer array) leaves the bytes set_item_unused /
    set_item_dead / set_item_redirect one by one and repair_fragmentation leave."""
    rng = random.Random(7)
    for _case in range(60):
        pg = new_page()
        n = rng.randint(2, 60)
        for _ in range(n):
            P.add_item(pg, bytes(rng.randrange(1, 256) for _ in range(rng.randint(1, 90))))
        offs = list(range(1, n + 1))
        rng.shuffle(offs)
        k = rng.randint(0, n // 3)
        unused, dead, rest = offs[:k], offs[k:2 * k], offs[2 * k:]
        redirects = [(root, rng.choice([o for o in offs if o != root]))
                     for root in rest[:rng.randint(0, len(rest) // 2)]]
        a, b = pg.copy(), pg.copy()
        for off in unused:
            P.set_item_unused(a, off)
        for off in dead:
            P.set_item_dead(a, off, keep_storage=False)
        for root, target in redirects:
            P.set_item_redirect(a, root, target)
        P.repair_fragmentation(a)
        P.prune_items(b, redirects, dead, unused)
        assert bytes(a) == bytes(b)


def _random_layout(rng, order: str):
    """A page whose items are stored in the given order of lp_off by offset number
    (``down``: as add_item fills a page, ``up``: as a bulk load does, ``up_down``: a
    bulk load and then add_item below it, ``up_down_mixed``: the same with a line pointer
    of the load reused below, ``mixed``), with
    random gaps between them (storage that lost its pointer) and some pointers without
    storage; padding and free space zero.  Returns (page, words, lower, upper, special)."""
    special_size = rng.choice([0, 0, 16])
    pg = new_page(special_size)
    special = P.get_special(pg)
    n = rng.randint(1, 70)
    lens = [rng.randint(1, 90) for _ in range(n)]
    gaps = [rng.choice([0, 0, 0, 8, 40]) for _ in range(n)]
    slots = list(range(n))
    if order == "up":
        slots.reverse()
    elif order.startswith("up_down"):
        m = rng.randint(1, n)
        slots = slots[m - 1::-1] + slots[m:]
        if order == "up_down_mixed" and m > 1:
            slots.append(slots.pop(rng.randrange(m)))
    elif order == "mixed":
        rng.shuffle(slots)
    pos = special
    words = [0] * n
    for k in slots:  # k-th pointer, placed from pd_special down in this order
        pos -= P.maxalign(lens[k]) + gaps[k]
        if pos < 24 + 4 * n + 8:
            break
        pg[pos:pos + lens[k]] = [rng.randrange(1, 256) for _ in range(lens[k])]
        words[k] = pos | (P.LP_NORMAL << 15) | (lens[k] << 17)
    for k in range(n):  # some pointers lose their storage (a prune's plan)
        if words[k] and rng.random() < 0.2:
            words[k] = rng.choice([0, P.LP_DEAD << 15, ((k + 1) % n + 1) | (P.LP_REDIRECT << 15)])
    lower = 24 + 4 * n
    upper = min([w & 0x7FFF for w in words if w >> 17], default=special)
    return pg, words, lower, upper, special


@pytest.mark.parametrize("order", ["down", "up", "up_down", "up_down_mixed", "mixed"])
def test_compact_moves_equal_rebuild(order):
    """``_compact`` (moves only what moves, runs as one slice) leaves the bytes and line
    pointers ``_compact_rebuild`` (the whole area rebuilt) leaves."""
    rng = random.Random(hash(order) & 0xFFFF)
    for _case in range(150):
        pg, words, lower, upper, special = _random_layout(rng, order)
        a, b = pg.copy(), pg.copy()
        wa, wb = words[:], words[:]
        assert P._compact(a, wa, lower, upper, special) == \
            P._compact_rebuild(b, wb, lower, upper, special)
        assert wa == wb
        assert bytes(a) == bytes(b)


def test_compact_unaligned_start_as_rebuild():
    """An item whose start is not 8-byte aligned (against invariant 2; the rebuild copes)
    makes ``_compact`` take the rebuild: the same bytes."""
    pg = new_page()
    for k in range(3):
        P.add_item(pg, bytes([k + 1]) * 21)
    lower, upper, special = P.get_lower(pg), P.get_upper(pg), P.get_special(pg)
    words = [P._U32.unpack_from(pg, P._lp_pos(o))[0] for o in (1, 2, 3)]
    words[1] += 3  # item 2 starts 3 bytes later, still inside its old slot
    words[0] = P.LP_DEAD << 15  # item 1 loses its storage: the others move
    a, b = pg.copy(), pg.copy()
    wa, wb = words[:], words[:]
    assert P._compact(a, wa, lower, upper, special) == \
        P._compact_rebuild(b, wb, lower, upper, special)
    assert wa == wb and bytes(a) == bytes(b)


def test_compact_corrupt_raises_as_rebuild():
    """On overlapping, out-of-range or flagless storage ``_compact`` raises what the
    rebuild raises, and writes nothing."""
    pg = new_page()
    for k in range(4):
        P.add_item(pg, bytes([k + 1]) * 30)
    lower, upper, special = P.get_lower(pg), P.get_upper(pg), P.get_special(pg)
    words = [P._U32.unpack_from(pg, P._lp_pos(o))[0] for o in (1, 2, 3, 4)]
    mask = 0x7FFF
    cases = [
        [words[0], (words[1] & ~mask) | ((words[2] & mask) + 8), words[2], words[3]],  # overlap
        [words[0], words[1], (words[2] & ~mask) | (upper - 8), words[3]],  # below pd_upper
        [words[0], words[1], words[2], (words[3] & ~mask) | (special - 16)],  # past the end
        [words[0], words[1] & ~(3 << 15), words[2], words[3]],  # storage on an UNUSED pointer
    ]
    before = bytes(pg)
    for bad in cases:
        with pytest.raises(DataCorrupted) as fast:
            P._compact(pg, bad[:], lower, upper, special)
        with pytest.raises(DataCorrupted) as whole:
            P._compact_rebuild(pg, bad[:], lower, upper, special)
        assert str(fast.value) == str(whole.value)
        assert bytes(pg) == before


def test_check_page_sees_nonzero_padding():
    """Invariant 5's padding (``_compact`` moves runs of items with their padding)."""
    pg = new_page()
    P.add_item(pg, b"z" * 13)
    P.check_page(pg, "test page")
    lp_off, _f, lp_len = P.get_item_id(pg, 1)
    pg[lp_off + lp_len] = 1
    with pytest.raises(DataCorrupted, match="padding"):
        P.check_page(pg, "test page")


# -- add_heap_tuple: add_item + t_ctid, byte for byte --------------------------------------------

def _heap_tuple(rng: random.Random, size: int, hasnull: bool) -> bytearray:
    t = bytearray(rng.randbytes(size))
    t[32] = (t[32] & ~0x1) | (0x1 if hasnull else 0)   # HEAP_HASNULL in t_infomask's low byte
    return t


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_before=st.integers(0, 60),
       unused=st.lists(st.integers(0, 59), max_size=4), no_nulls=st.booleans(),
       hasnull=st.booleans(), size=st.integers(33, 400), max_items=st.sampled_from([8, 40, 291]))
def test_add_heap_tuple_equals_add_item_then_ctid(seed, n_before, unused, no_nulls, hasnull,
                                                  size, max_items):
    """Whatever the page's state (free lines, PD_NO_NULLS, full, at max_items), the page
    bytes, the result and the error are those of add_item followed by a t_ctid write."""
    rng = random.Random(seed)
    pg = new_page()
    for _ in range(n_before):
        try:
            P.add_item(pg, _heap_tuple(rng, rng.randint(33, 200), False))
        except ProgramLimitExceeded:
            break
    for off in sorted(set(unused)):
        if off < P.max_offset(pg) and P.get_item_id(pg, off + 1)[1] == P.LP_NORMAL:
            P.set_item_unused(pg, off + 1)
    if no_nulls:
        P.set_flags(pg, P.get_flags(pg) | P.PD_NO_NULLS)
    tup = _heap_tuple(rng, size, hasnull)
    ref = pg.copy()
    try:
        off = P.add_item(ref, tup, max_items=max_items)
    except ProgramLimitExceeded as e:
        with pytest.raises(ProgramLimitExceeded, match=str(e)[:20]):
            P.add_heap_tuple(pg, tup, 7, max_items)
        assert bytes(pg) == bytes(ref)
        return
    start = P.get_item_id(ref, off)[0]
    ref[start + 24:start + 30] = np.frombuffer((7).to_bytes(4, "little")
                                               + off.to_bytes(2, "little"), dtype=np.uint8)
    got = P.add_heap_tuple(pg, tup, 7, max_items)
    assert got == (off, start, P.get_flags(ref))
    assert start == P.get_upper(ref)
    assert bytes(pg) == bytes(ref)
