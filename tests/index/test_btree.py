"""B-tree structure and scans: build, splits at every level, NULLs, several columns, text,
backward scans, scans that run while pages split, incomplete splits, limits, drop.

Every test that writes ends with ``check_btree`` (structure + every live heap tuple
indexed).  What these do not prove: behaviour under concurrent processes (see
test_concurrent.py) or after crashes mid-split (minidb has no WAL; an incomplete split
is simulated by an error between the two steps)."""

from __future__ import annotations

import random

import pytest

from minidb import index as ix
from minidb.errors import InternalError, ProgramLimitExceeded, UndefinedObject
from minidb.index import btpage as bt
from minidb.index import insert as ins
from minidb.index.search import release
from minidb.instance import Instance
from minidb.session import Session
from minidb.storage.bufmgr import SHARE

from tests.index.helpers import Table, make_table


@pytest.fixture
def sess(instance):
    s = Session(instance)
    yield s
    s.close()


def _keys(backend, name, *args, **kw):
    """Index keys (decoded from the heap rows) of a scan, in scan order."""
    irel = ix.open_index(backend, name)
    return [irel.key_of_row(r) for _t, r in ix.index_scan(backend, name, *args,
                                                          **kw).visible_rows()]


def test_build_over_existing_rows_then_scan_in_order(instance, sess, assert_no_pins):
    make_table(instance, "t", [("a", "integer"), ("b", "text")])
    rng = random.Random(1)
    vals = [rng.randint(-500, 500) for _ in range(3000)]
    sess.insert_many("t", [(v, f"row{i}") for i, v in enumerate(vals)])
    b = sess.backend
    ix.create_index(b, "t", "t_a", ["a"])
    summary = ix.check_btree(b, "t_a")
    assert summary["leaf_items"] == 3000 and summary["levels"] == 2
    tids = list(ix.index_scan(b, "t_a"))
    assert len(tids) == 3000
    got = _keys(b, "t_a")
    assert got == sorted((v,) for v in vals)
    # equal keys come in heap TID order (TID is the last key column)
    rows = sess.select_tids("t")
    by_tid = {tid: r for tid, r in rows}
    scan = list(ix.index_scan(b, "t_a"))
    assert scan == sorted(scan, key=lambda t: (by_tid[t][0], t))
    b.xact.commit()
    assert_no_pins(instance)


def test_splits_at_leaf_internal_and_root_levels(instance, sess, assert_no_pins):
    make_table(instance, "t", [("k", "text")])
    b = sess.backend
    ix.create_index(b, "t", "t_k", ["k"])
    t = Table(sess, "t")
    rng = random.Random(2)
    keys = [f"{rng.randrange(10**6):07d}" + "x" * 1000 for _ in range(300)]
    for k in keys:
        t.insert((k,))
    s = ix.check_btree(b, "t_k")
    assert s["levels"] >= 3          # leaf, internal, root: the root split twice at least
    # every page but the first root came from a split or a new root (one per level added)
    assert b.counters()["index_splits"] == s["pages"] - s["levels"]
    assert _keys(b, "t_k") == sorted((k,) for k in keys)
    for k in rng.sample(keys, 20):
        assert [r for _t, r in ix.lookup_visible(b, "t_k", k)] == [(k,)] * keys.count(k)
    b.xact.commit()
    assert_no_pins(instance)


def test_ascending_inserts_leave_left_pages_fillfactor_full(instance, sess):
    make_table(instance, "t", [("a", "integer")])
    b = sess.backend
    ix.create_index(b, "t", "asc", ["a"])
    make_table(instance, "u", [("a", "integer")])
    ix.create_index(b, "u", "rnd", ["a"])
    t, u = Table(sess, "t"), Table(sess, "u")
    sess.begin()
    vals = list(range(4000))
    for v in vals:
        t.insert((v,))
    random.Random(3).shuffle(vals)
    for v in vals:
        u.insert((v,))
    sess.commit()
    asc, rnd = ix.check_btree(b, "asc"), ix.check_btree(b, "rnd")
    # 90/10 splits at the right end pack leaves; random inserts split 50/50
    assert asc["leaf_pages"] < rnd["leaf_pages"]
    per_leaf = asc["leaf_items"] / asc["leaf_pages"]
    full = bt.PAGE_ROOM // (8 + 5 + 3 + 4)   # 16-byte items + line pointer
    assert per_leaf > 0.8 * full
    b.xact.commit()


def test_nulls_sort_last_and_comparisons_skip_them(instance, sess):
    make_table(instance, "t", [("a", "integer"), ("b", "text")])
    t = Table(sess, "t")
    b = sess.backend
    ix.create_index(b, "t", "t_a", ["a"])
    vals = [5, None, 3, None, 9, 1, None, 7]
    for i, v in enumerate(vals):
        t.insert((v, str(i)))
    assert _keys(b, "t_a") == [(1,), (3,), (5,), (7,), (9,), (None,), (None,), (None,)]
    assert _keys(b, "t_a", 4, None) == [(5,), (7,), (9,)]          # a >= 4: no NULLs
    assert _keys(b, "t_a", None, 6) == [(1,), (3,), (5,)]          # a <= 6
    assert _keys(b, "t_a", (None,), (None,)) == [(None,)] * 3       # a IS NULL
    assert len(ix.lookup_visible(b, "t_a", (None,))) == 3
    assert _keys(b, "t_a", direction="backward")[:3] == [(None,)] * 3
    ix.check_btree(b, "t_a")
    b.xact.commit()


def test_multicolumn_keys_and_range_over_leading_column(instance, sess):
    make_table(instance, "t", [("a", "integer"), ("b", "text"), ("c", "double precision")])
    t = Table(sess, "t")
    b = sess.backend
    ix.create_index(b, "t", "t_ab", ["a", "b"])
    rng = random.Random(4)
    rows = [(rng.randint(0, 9), rng.choice(["x", "y", "zz", "é", None]), rng.random())
            for _ in range(600)]
    sess.begin()
    for r in rows:
        t.insert(r)
    sess.commit()

    def order(r):
        return (r[0], r[1] is None, (r[1] or "").encode())
    want = sorted(((r[0], r[1]) for r in rows if 3 <= r[0] <= 5), key=lambda k: order(k))
    assert _keys(b, "t_ab", 3, 5) == want
    assert _keys(b, "t_ab", 3, 5, low_inclusive=False, high_inclusive=False) == \
        [k for k in want if k[0] == 4]
    # a prefix bound and a complete bound together: a = 3 and b > 'x'
    got = _keys(b, "t_ab", (3, "x"), (3,), low_inclusive=False)
    assert got == [k for k in want if k[0] == 3 and (k[1] is None or k[1].encode() > b"x")]
    assert _keys(b, "t_ab", 3, 5, direction="backward") == want[::-1]
    ix.check_btree(b, "t_ab")
    b.xact.commit()


def test_text_keys_non_ascii_in_c_collation(instance, sess):
    make_table(instance, "t", [("s", "varchar(20)")])
    t = Table(sess, "t")
    b = sess.backend
    words = ["zebra", "Zebra", "\u00e9t\u00e9", "ete", "\u65e5\u672c", "a", "", "\U0001F600",
             "ab", "a b", "A"]
    for w in words:
        t.insert((w,))
    ix.create_index(b, "t", "t_s", ["s"])
    for w in ["\u00fcber", "~", "a\u00e9"]:
        t.insert((w,))
        words.append(w)
    assert [k[0] for k in _keys(b, "t_s")] == sorted(words, key=lambda w: w.encode())
    assert [k[0] for k in _keys(b, "t_s", "a", "b")] == \
        sorted((w for w in words if "a" <= w <= "b"), key=lambda w: w.encode())
    ix.check_btree(b, "t_s")
    b.xact.commit()


def test_backward_equals_reversed_forward_on_random_ranges(instance, sess):
    make_table(instance, "t", [("a", "bigint")])
    b = sess.backend
    rng = random.Random(5)
    sess.insert_many("t", [(rng.randint(0, 3000),) for _ in range(3000)])
    ix.create_index(b, "t", "t_a", ["a"])
    for _ in range(30):
        lo, hi = sorted(rng.randint(-10, 3010) for _ in range(2))
        li, hinc = rng.random() < 0.5, rng.random() < 0.5
        fw = list(ix.index_scan(b, "t_a", lo, hi, low_inclusive=li, high_inclusive=hinc))
        bw = list(ix.index_scan(b, "t_a", lo, hi, low_inclusive=li, high_inclusive=hinc,
                                direction="backward"))
        assert bw == fw[::-1]
    assert list(ix.index_scan(b, "t_a", direction="backward")) == \
        list(ix.index_scan(b, "t_a"))[::-1]
    assert list(ix.index_scan(b, "t_a", 5, 4)) == []
    b.xact.commit()


def _leaf_blocks(backend, name):
    irel = ix.open_index(backend, name)
    bm = backend.bufmgr
    blk = None
    out = []
    from minidb.index.search import search
    bb, blk, data, _ = search(bm, irel, b"")
    release(bm, bb)
    while blk != bt.P_NONE:
        out.append(blk)
        bb = bm.pin(irel.relfilenode, blk)
        bm.lock(bb, SHARE)
        blk = bt.opaque(bm.page(bb))[1]
        release(bm, bb)
    return out


def test_scans_survive_splits_of_the_pages_around_them(instance, sess):
    """A scan holds no lock or pin between batches; pages it has read, or is about to
    read, split meanwhile (another session inserts around the scan's position).  Every
    row of the scan's snapshot is returned exactly once, in order."""
    make_table(instance, "t", [("a", "integer")])
    b = sess.backend
    sess.insert_many("t", [(v * 10,) for v in range(2000)])
    ix.create_index(b, "t", "t_a", ["a"])
    other = Session(instance)
    ot = Table(other, "t")
    for direction in ("forward", "backward"):
        b.xact.commit()
        want = sorted(r[0] for r in sess.select("t"))
        if direction == "backward":
            want.reverse()
        splits0 = other.backend.counters()["index_splits"]
        got = []
        scan = ix.index_scan(b, "t_a", direction=direction)
        for i, (_tid, row) in enumerate(scan.visible_rows()):
            got.append(row[0])
            if i in (150, 700, 1300):
                other.begin()
                for k in range(300):   # split the scan's page and its neighbours
                    ot.insert((row[0] - 1500 + k * 10 + 5,))
                other.commit()
        assert other.backend.counters()["index_splits"] >= splits0 + 3
        assert got == want, direction
        if direction == "backward":
            assert scan.left_refinds > 0   # the Lehman & Yao re-find to the left ran
    ix.check_btree(b, "t_a")
    other.close()
    b.xact.commit()


def test_item_larger_than_a_third_of_a_page_is_refused(instance, sess):
    make_table(instance, "t", [("s", "text")])
    b = sess.backend
    ix.create_index(b, "t", "t_s", ["s"])
    t = Table(sess, "t")
    t.insert(("x" * 2600,))
    with pytest.raises(ProgramLimitExceeded, match='index "t_s"'):
        t.insert(("x" * 2800,))
    ix.check_btree(b, "t_s")
    b.xact.commit()
    sess.insert("t", ("y" * 3000,))     # heap only: a build must refuse it too
    with pytest.raises(ProgramLimitExceeded, match='index "t_s2"'):
        ix.create_index(b, "t", "t_s2", ["s"])
    assert "t_s2" not in instance.catalog.indexes


def test_duplicate_entry_for_same_tid_is_an_internal_error(instance, sess):
    make_table(instance, "t", [("a", "integer")])
    b = sess.backend
    ix.create_index(b, "t", "t_a", ["a"])
    tid = Table(sess, "t").insert((1,))
    with pytest.raises(InternalError, match="already has an entry"):
        ix.insert_entry(b, "t_a", (1,), tid)
    b.xact.commit()


def test_incomplete_split_is_finished_by_the_next_inserter(instance, sess, monkeypatch,
                                                           assert_no_pins):
    make_table(instance, "t", [("a", "integer"), ("pad", "text")])
    b = sess.backend
    ix.create_index(b, "t", "t_a", ["a"])
    t = Table(sess, "t")
    sess.begin()
    for v in range(0, 600, 2):
        t.insert((v, "p" * 40))
    sess.commit()
    real = ins._insert_parent
    calls = []

    def failing(backend, irel, lb, lblk, rb, rblk, stack, was_root):
        if not calls and not was_root:
            calls.append(lblk)
            release(backend.bufmgr, rb)
            release(backend.bufmgr, lb)
            raise RuntimeError("simulated failure between split and downlink")
        return real(backend, irel, lb, lblk, rb, rblk, stack, was_root)
    monkeypatch.setattr(ins, "_insert_parent", failing)
    odd = iter(range(1, 600, 2))
    with pytest.raises(RuntimeError):
        for v in odd:
            t.insert((v, "q" * 40))
    lblk = calls[0]
    irel = ix.open_index(b, "t_a")
    bb = b.bufmgr.pin(irel.relfilenode, lblk)
    assert bt.get_flags(b.bufmgr.page(bb)) & bt.BTP_INCOMPLETE_SPLIT
    b.bufmgr.unpin(bb)
    ix.check_btree(b, "t_a")          # legal state: the right half has no downlink yet
    assert len(list(ix.index_scan(b, "t_a"))) >= 300   # readers move right across it
    for v in odd:
        t.insert((v, "q" * 40))
    bb = b.bufmgr.pin(irel.relfilenode, lblk)
    assert not bt.get_flags(b.bufmgr.page(bb)) & bt.BTP_INCOMPLETE_SPLIT
    b.bufmgr.unpin(bb)
    ix.check_btree(b, "t_a")
    b.xact.commit()
    assert_no_pins(instance)


def test_index_on_empty_table_drop_and_reopen(tmp_path):
    with Instance(tmp_path / "d", shared_buffers=32) as inst:
        make_table(inst, "t", [("a", "integer")])
        with Session(inst) as s:
            b = s.backend
            ix.create_index(b, "t", "t_a", ["a"])
            assert inst.catalog.heap_rel("t").indexed_columns == frozenset({0})
            t = Table(s, "t")
            for v in range(500):
                t.insert((v,))
            b.xact.commit()
    with Instance(tmp_path / "d", shared_buffers=32) as inst:
        with Session(inst) as s:
            b = s.backend
            assert ix.check_btree(b, "t_a")["leaf_items"] == 500
            assert [r for _t, r in ix.lookup_visible(b, "t_a", 42)] == [(42,)]
            rfn = ix.open_index(b, "t_a").relfilenode
            ix.drop_index(b, "t_a")
            assert inst.smgr.exists(rfn)  # until the DROP commits
            assert b.catalog.heap_rel("t").indexed_columns == frozenset()
            with pytest.raises(UndefinedObject):
                ix.check_btree(b, "t_a")
            b.xact.commit()
            assert not inst.smgr.exists(rfn)
            assert inst.catalog.heap_rel("t").indexed_columns == frozenset()


def test_trace_btree_prints_splits_kills_and_deletions(instance, capsys):
    make_table(instance, "t", [("a", "integer")])
    s = Session(instance, trace_btree=True)
    b = s.backend
    s.insert_many("t", [(i,) for i in range(300)])
    ix.create_index(b, "t", "t_a", ["a"])
    s.delete("t", lambda r: True)
    list(ix.index_scan(b, "t_a").visible_rows())
    b.xact.commit()
    t = Table(s, "t")
    for i in range(700):
        t.insert((1000 + i,))
    err = capsys.readouterr().err
    assert '[btree "t_a"' in err
    assert "built: 300 entries" in err
    assert "killed 300 items of block 1" in err
    assert "simple deletion removed 300 LP_DEAD items from block 1" in err
    assert "split leaf block 1" in err and "new root block" in err
    s.close()


def test_create_index_refuses_bad_definitions(instance, sess):
    from minidb.errors import DuplicateTable, UndefinedColumn, UndefinedTable
    make_table(instance, "t", [("a", "integer")])
    b = sess.backend
    with pytest.raises(UndefinedColumn, match='column "nope" does not exist'):
        ix.create_index(b, "t", "i1", ["nope"])
    with pytest.raises(UndefinedTable):
        ix.create_index(b, "missing", "i1", ["a"])
    ix.create_index(b, "t", "i1", ["a"])
    with pytest.raises(DuplicateTable, match='relation "i1" already exists'):
        ix.create_index(b, "t", "i1", ["a"])
    with pytest.raises(DuplicateTable):
        ix.create_index(b, "t", "t", ["a"])
    assert instance.catalog.table("t").indexes == ["i1"]
    with pytest.raises(UndefinedObject):
        ix.drop_index(b, "i2")
