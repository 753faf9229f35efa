"""The checker can fail: each test damages a valid tree in one way (through the buffer
pool, as a bug would) and expects DataCorrupted naming the problem.  Also the printer.

What this does not prove: that every possible corruption is caught (amcheck's own
documentation says the same); it pins down one case per invariant."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from minidb import index as ix
from minidb.errors import DataCorrupted
from minidb.index import btpage as bt
from minidb.session import Session
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE

from tests.index.helpers import make_table


@pytest.fixture
def tree(instance):
    make_table(instance, "t", [("a", "integer"), ("b", "text")])
    s = Session(instance)
    s.insert_many("t", [(i, "v") for i in range(2000)])
    ix.create_index(s.backend, "t", "t_a", ["a"])
    assert ix.check_btree(s.backend, "t_a")["levels"] == 2
    s.backend.xact.commit()
    yield s.backend
    s.close()


def _damage(backend, blk, fn):
    irel = ix.open_index(backend, "t_a")
    bm = backend.bufmgr
    b = bm.pin(irel.relfilenode, blk)
    try:
        bm.lock(b, EXCLUSIVE)
        fn(bm.page(b))
        bm.mark_dirty(b)
        bm.unlock(b)
    finally:
        bm.unpin(b)


def _check_fails(backend, match):
    with pytest.raises(DataCorrupted, match=match):
        ix.check_btree(backend, "t_a")
    backend.xact.commit()


LEAF = 2  # the second leaf written by the build (not leftmost, not rightmost)


def _swap_items(page):
    w2, w3 = bt.lp_word(page, 3), bt.lp_word(page, 4)
    struct.pack_into("<II", page, 24 + 4 * 2, w3, w2)


def test_items_out_of_order(tree):
    _damage(tree, LEAF, _swap_items)
    _check_fails(tree, r"block 2: items at offsets 3 and 4 are out of order")


def test_broken_left_link(tree):
    _damage(tree, LEAF, lambda p: bt.set_prev(p, 7))
    _check_fails(tree, r"block 2 has left link 7, but block 1 links right to it")


def test_item_above_high_key(tree):
    def lower_high_key(page):
        lp_off, _f, _l = pg.get_item_id(page, 1)
        page[lp_off + 8:lp_off + 13] = np.frombuffer(bytes.fromhex("0080000000"),
                                                     np.uint8)  # key 0
    _damage(tree, LEAF, lower_high_key)
    _check_fails(tree, r"block 2: item .* is not below the high key")


def test_missing_entry_found_by_heapallindexed(tree):
    _damage(tree, LEAF, lambda p: pg.delete_items(p, [10]))
    _check_fails(tree, r'heap tuple \(\d+, \d+\) of "t" with key \(\d+,\) has no index entry')


def test_live_entry_marked_dead(tree):
    _damage(tree, LEAF, lambda p: pg.set_item_dead(p, 10, keep_storage=True))
    _check_fails(tree, r"is not dead to everyone, but its index entry is LP_DEAD")


def test_entry_naming_another_row(tree):
    def retarget(page):   # item 10's heap TID -> item 11's row
        lp10, lp11 = pg.get_item_id(page, 10)[0], pg.get_item_id(page, 11)[0]
        page[lp10:lp10 + 6] = page[lp11:lp11 + 6]
    _damage(tree, LEAF, retarget)
    _check_fails(tree, r"(has no index entry|points to heap tuple .* whose key is)")


def test_wrong_root_flag_and_parent_bound(tree):
    _damage(tree, LEAF, lambda p: bt.set_flags(p, bt.get_flags(p) | bt.BTP_ROOT))
    _check_fails(tree, r"block 2: ROOT flag is set")


def test_dump_btree_lists_levels_and_items(tree):
    out = ix.dump_btree(tree, "t_a", max_items=2)
    assert out.startswith('index "t_a" on "t" (a): root')
    assert "level 1:" in out and "level 0:" in out
    assert "-infinity -> block 1" in out and "... " in out
    assert "(0,) -> heap (0, 1)" in out
