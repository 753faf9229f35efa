"""The B-tree checker and printer (PostgreSQL's amcheck ``bt_index_check(heapallindexed)``
and pageinspect's ``bt_page_items``, in one module).

``check_btree(backend, index, heapallindexed=True)`` raises DataCorrupted with a message
naming the index, the block, the offset and what is wrong, or returns a summary dict.
It verifies, level by level from the root down (every page read under a share lock,
one at a time):

  1. the metapage: magic, version, root block and level, fast root = root;
  2. every page: the generic page checks (``page.check_page``), level, LEAF flag iff
     level 0, no META/DELETED/HALF_DEAD flag, ROOT flag on the root only, the root has
     no siblings;
  3. within a page: leaf items are not pivots, internal items are; each item's t_info
     size equals its line pointer's length; sort keys strictly increase; every sort key
     is < the high key; an internal page's first item is minus infinity (empty key);
  4. across a level: left links mirror right links; a page that is not rightmost has a
     high key; high keys strictly increase; the first sort key of a right sibling is
     >= the left page's high key (equal is allowed: the high key was that item's key
     when the page split);
  5. parent and child: the downlinks of level L, in order, are exactly the pages of
     level L-1 in right-link order, except right halves of a page flagged
     INCOMPLETE_SPLIT (no downlink yet); the child of the downlink with separator S(i)
     holds only sort keys >= S(i) (the parent's own lower bound for a first item), and
     the last page of its incomplete-split chain has the next separator (or the parent's
     high key) as its high key - or is rightmost when the parent is;
  6. with ``heapallindexed``: every heap tuple that is not dead to everyone (the set an
     index build would index: ``build.collect_entries``) has an entry with its key and
     its chain root's TID that is not LP_DEAD.  An LP_DEAD entry for such a tuple means a
     tuple was killed while some snapshot could still see it.  And the converse: every
     entry that is not LP_DEAD names a heap line pointer in use (VACUUM removed the
     entries of the slots it recycled) and, where that is a plain tuple, one with the
     entry's key (no entry names another row).

The heap part assumes a quiet table (no transaction in progress writes it): an insert
between its heap tuple and its index entry would be reported.  Pages not reachable from
the root (left by a split that failed after extending the file) are counted, not
reported: they are harmless.

``dump_btree(backend, index)`` prints the metapage and every page, level by level, with
flags, links, LSN, free space, high key and items (decoded keys, heap TIDs or
downlinks, LP_DEAD marks).
"""

from __future__ import annotations

from minidb.errors import DataCorrupted
from minidb.storage.htup import HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE
from minidb.index import btpage as bt
from minidb.index.build import collect_entries
from minidb.index.rel import IndexRel, open_index
from minidb.index.search import release
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE

__all__ = ["check_btree", "dump_btree"]


def _read(bm, irel: IndexRel, blk: int) -> bytes:
    b = bm.pin(irel.relfilenode, blk)
    try:
        bm.lock(b, SHARE)
        return bm.page(b).tobytes()
    finally:
        release(bm, b)


class _Checker:
    def __init__(self, backend, irel: IndexRel):
        self.bm = backend.bufmgr
        self.irel = irel
        self.name = irel.name

    def fail(self, msg: str):
        raise DataCorrupted(f'index "{self.name}": {msg}')

    def keytext(self, sortkey: bytes | None, pivot: bool = True) -> str:
        if sortkey is None:
            return "+infinity"
        if sortkey == b"":
            return "-infinity"
        try:
            if pivot:
                vals = self.irel.codec.decode(sortkey[:-bt.TID_SIZE])
                tid = bt.TID_BE.unpack(sortkey[-bt.TID_SIZE:])
                return f"{vals} tid {tid}"
            return str(self.irel.codec.decode(sortkey))
        except Exception:  # noqa: BLE001 - a printer must not fail on bad bytes
            return sortkey.hex()

    # -- one page ----------------------------------------------------------------------------------
    def page(self, blk: int, level: int, is_root: bool):
        data = _read(self.bm, self.irel, blk)
        what = f'index "{self.name}" block {blk}'
        pg.check_page(data, what)
        if pg.page_is_new(data):
            self.fail(f"block {blk} is an uninitialised page inside the tree")
        prev, nxt, lvl, flags, _c = bt.opaque(data)
        if lvl != level:
            self.fail(f"block {blk} has level {lvl}, expected {level}")
        if bool(flags & bt.BTP_LEAF) != (level == 0):
            self.fail(f"block {blk} at level {level} has flags {bt.flag_names(flags)}")
        if flags & (bt.BTP_META | bt.BTP_DELETED | bt.BTP_HALF_DEAD):
            self.fail(f"block {blk} has flags {bt.flag_names(flags)}")
        if bool(flags & bt.BTP_ROOT) != is_root:
            self.fail(f"block {blk}: ROOT flag is {'set' if flags & bt.BTP_ROOT else 'clear'}"
                      f" but the metapage says the root is {'it' if is_root else 'elsewhere'}")
        leaf = level == 0
        first = bt.first_data(nxt)
        maxoff = bt.nitems(data)
        if nxt != bt.P_NONE and maxoff < 1:
            self.fail(f"block {blk} is not rightmost but has no high key")
        hikey = bt.pivot_key(data, bt.P_HIKEY) if nxt != bt.P_NONE else None
        keys, dead, entries, downlinks = [], 0, [], []
        for off in range(1, maxoff + 1):
            lp_off, lp_flags, lp_len = pg.get_item_id(data, off)
            if lp_flags not in (pg.LP_NORMAL, pg.LP_DEAD) or lp_len < bt.ITUP_HEADER_SIZE:
                self.fail(f"block {blk} offset {off}: line pointer state {lp_flags}, "
                          f"length {lp_len}")
            tb, to, info = bt.ITUP.unpack_from(data, lp_off)
            if info & bt.INDEX_SIZE_MASK != lp_len:
                self.fail(f"block {blk} offset {off}: t_info size {info & bt.INDEX_SIZE_MASK}"
                          f" but the item has {lp_len} bytes")
            pivot = bool(info & bt.INDEX_PIVOT)
            if off == bt.P_HIKEY and nxt != bt.P_NONE:
                if not pivot:
                    self.fail(f"block {blk}: the high key is not a pivot tuple")
                continue
            if pivot == leaf:
                self.fail(f"block {blk} offset {off}: {'pivot' if pivot else 'leaf'} tuple "
                          f"on a {'leaf' if leaf else 'internal'} page")
            if leaf:
                sk = bt.leaf_sortkey(data, off)
                if lp_flags == pg.LP_DEAD:
                    dead += 1
                entries.append((bt.leaf_key(data, off), (tb, to), lp_flags == pg.LP_DEAD))
            else:
                if lp_flags != pg.LP_NORMAL:
                    self.fail(f"block {blk} offset {off}: internal item is LP_DEAD")
                sk = bt.pivot_key(data, off)
                if off == first:
                    if sk != b"":
                        self.fail(f"block {blk}: first internal item has key "
                                  f"{self.keytext(sk)}, expected minus infinity")
                downlinks.append(tb)
            keys.append(sk)
        cmp_from = 0 if leaf else 1
        for i in range(cmp_from + 1, len(keys)):
            if not keys[i - 1] < keys[i]:
                self.fail(f"block {blk}: items at offsets {first + i - 1} and {first + i} "
                          f"are out of order ({self.keytext(keys[i - 1])} >= "
                          f"{self.keytext(keys[i])})")
        real = keys[cmp_from:]
        if hikey is not None and real and not real[-1] < hikey:
            self.fail(f"block {blk}: item {self.keytext(real[-1])} is not below the high key "
                      f"{self.keytext(hikey)}")
        return {"blk": blk, "prev": prev, "next": nxt, "flags": flags, "hikey": hikey,
                "keys": real, "first_key": real[0] if real else None, "downlinks": downlinks,
                "sep": keys, "entries": entries, "dead": dead, "items": len(keys)}

    # -- the tree ----------------------------------------------------------------------------------
    def run(self, heapallindexed: bool, backend) -> dict:
        meta = bt.read_meta(_read(self.bm, self.irel, bt.BTREE_METAPAGE), self.name)
        if meta.fastroot != meta.root or meta.fastlevel != meta.level:
            self.fail(f"fast root {meta.fastroot}/{meta.fastlevel} differs from root "
                      f"{meta.root}/{meta.level}")
        nblocks = self.bm.smgr.nblocks(self.irel.relfilenode)
        if not 1 <= meta.root < nblocks:
            self.fail(f"metapage root {meta.root} is outside the file ({nblocks} blocks)")
        seen: set[int] = set()
        summary = {"levels": meta.level + 1, "root": meta.root, "pages": 0, "leaf_pages": 0,
                   "leaf_items": 0, "dead_items": 0}
        # level by level: pages in right-link order, each with its parent's bounds
        level = meta.level
        expected = None   # from the parent level: [(child block, low bound, high bound)]
        leftmost = meta.root
        entries = []
        while level >= 0:
            pages = self.walk_level(leftmost, level, meta.root, seen)
            summary["pages"] += len(pages)
            if level == meta.level:
                if len(pages) != 1 or pages[0]["prev"] or pages[0]["next"]:
                    self.fail(f"root block {meta.root} has siblings")
            if expected is not None:
                self.match_parent(level, pages, expected)
            if level == 0:
                summary["leaf_pages"] = len(pages)
                for p in pages:
                    summary["leaf_items"] += len(p["entries"])
                    summary["dead_items"] += p["dead"]
                    entries.extend(p["entries"])
                break
            expected = []
            for p in pages:
                seps = p["sep"]
                for i, child in enumerate(p["downlinks"]):
                    low = seps[i] if i else None  # None: the parent's own lower bound
                    high = seps[i + 1] if i + 1 < len(seps) else p["hikey"]
                    expected.append((child, low, high, p["blk"], i + bt.first_data(p["next"])))
            leftmost = pages[0]["downlinks"][0] if pages[0]["downlinks"] else None
            if leftmost is None:
                self.fail(f"internal block {pages[0]['blk']} has no downlinks")
            level -= 1
        summary["unreachable_pages"] = nblocks - 1 - len(seen)
        if heapallindexed:
            summary["heap_tuples_checked"] = self.heap_all_indexed(backend, entries)
        return summary

    def walk_level(self, leftmost: int, level: int, root: int, seen: set) -> list:
        pages = []
        blk, prev = leftmost, bt.P_NONE
        last = None
        while blk != bt.P_NONE:
            if blk in seen:
                self.fail(f"block {blk} reached twice (right-link cycle at level {level})")
            seen.add(blk)
            p = self.page(blk, level, blk == root)
            if p["prev"] != prev:
                self.fail(f"block {blk} has left link {p['prev']}, but block {prev} links "
                          "right to it")
            if last is not None:
                if p["first_key"] is not None and not p["first_key"] >= last["hikey"]:
                    self.fail(f"block {blk}: first item {self.keytext(p['first_key'])} is "
                              f"below the high key {self.keytext(last['hikey'])} of its left "
                              f"sibling {last['blk']}")
                if p["hikey"] is not None and not last["hikey"] < p["hikey"]:
                    self.fail(f"block {blk}: high key {self.keytext(p['hikey'])} is not above "
                              f"its left sibling's {self.keytext(last['hikey'])}")
            pages.append(p)
            last = p
            prev, blk = blk, p["next"]
        return pages

    def match_parent(self, level: int, pages: list, expected: list) -> None:
        i = 0
        for child, low, high, pblk, poff in expected:
            if i >= len(pages) or pages[i]["blk"] != child:
                got = pages[i]["blk"] if i < len(pages) else "nothing"
                self.fail(f"downlink at block {pblk} offset {poff} points to block {child}, "
                          f"but the next page of level {level} is {got}")
            chain_first = pages[i]
            while pages[i]["flags"] & bt.BTP_INCOMPLETE_SPLIT and i + 1 < len(pages):
                i += 1
            chain_last = pages[i]
            i += 1
            if low is not None and chain_first["first_key"] is not None \
                    and not chain_first["first_key"] >= low:
                self.fail(f"block {child}: first item {self.keytext(chain_first['first_key'])}"
                          f" is below its separator {self.keytext(low)} (block {pblk} "
                          f"offset {poff})")
            if chain_last["hikey"] != high:
                self.fail(f"block {chain_last['blk']}: high key "
                          f"{self.keytext(chain_last['hikey'])} differs from the parent's "
                          f"bound {self.keytext(high)} (block {pblk} offset {poff})")
        if i != len(pages):
            self.fail(f"block {pages[i]['blk']} at level {level} has no downlink")

    def heap_all_indexed(self, backend, entries) -> int:
        irel = self.irel
        hrel = backend.catalog.heap_rel(irel.table)
        live = {}
        for key, tid, is_dead in entries:
            k = (key, tid)
            live[k] = live.get(k, False) or not is_dead
        keys, blocks, offsets, _alive, _nulls = collect_entries(backend, irel, hrel)
        n = len(blocks)
        fixed = not isinstance(keys, list)
        blob = keys.tobytes() if fixed else None
        w = keys.shape[1] if fixed else 0
        bl, ol = blocks.tolist(), offsets.tolist()
        for i in range(n):
            key = blob[i * w:(i + 1) * w] if fixed else keys[i]
            tid = (bl[i], ol[i])
            state = live.get((key, tid))
            if state is None:
                self.fail(f'heap tuple {tid} of "{irel.table}" with key '
                          f"{self.keytext(key, pivot=False)} has no index entry")
            if state is False:
                self.fail(f'heap tuple {tid} of "{irel.table}" with key '
                          f"{self.keytext(key, pivot=False)} is not dead to everyone, but "
                          "its index entry is LP_DEAD")
        self.entries_point_into_heap(backend, hrel, entries)
        return n

    def entries_point_into_heap(self, backend, hrel, entries) -> None:
        """Every entry that is not LP_DEAD names a heap line pointer in use, and a plain
        (not HOT-updated) tuple there has the entry's key: VACUUM removed the entries of
        every slot it recycled, and no entry names somebody else's row."""
        bm = self.bm
        irel = self.irel
        nblocks = bm.smgr.nblocks(hrel.relfilenode)
        by_block: dict[int, list] = {}
        for key, tid, is_dead in entries:
            if not is_dead:
                by_block.setdefault(tid[0], []).append((tid[1], key))
        for blk, items in sorted(by_block.items()):
            if blk >= nblocks:
                self.fail(f'entry points to heap block {blk} beyond the end of "{irel.table}"')
            b = bm.pin(hrel.relfilenode, blk)
            try:
                bm.lock(b, SHARE)
                page = bm.page(b).tobytes()
            finally:
                release(bm, b)
            n = pg.max_offset(page)
            for off, key in items:
                state = pg.get_item_id(page, off)[1] if 1 <= off <= n else pg.LP_UNUSED
                if state == pg.LP_UNUSED:
                    self.fail(f"entry {self.keytext(key, pivot=False)} points to heap tuple "
                              f"({blk},{off}), which is unused")
                if state != pg.LP_NORMAL:
                    continue
                data = pg.get_item(page, off)
                im2 = int.from_bytes(data[30:32], "little")
                if im2 & (HEAP_HOT_UPDATED | HEAP_ONLY_TUPLE):
                    continue
                row = hrel.layout.decode(data)
                if irel.codec.encode(irel.key_of_row(row)) != key:
                    self.fail(f"entry {self.keytext(key, pivot=False)} points to heap tuple "
                              f"({blk},{off}), whose key is {irel.key_of_row(row)}")


def check_btree(backend, index, heapallindexed: bool = True) -> dict:
    """Verify the structure of ``index`` (and that it covers its table); see the module
    docstring.  Raises DataCorrupted; returns a summary."""
    irel = open_index(backend, index)
    return _Checker(backend, irel).run(heapallindexed, backend)


def dump_btree(backend, index, *, max_items: int | None = 20) -> str:
    """A page-by-page listing of the tree (at most ``max_items`` items per page)."""
    irel = open_index(backend, index)
    bm = backend.bufmgr
    ck = _Checker(backend, irel)
    meta = bt.read_meta(_read(bm, irel, bt.BTREE_METAPAGE), irel.name)
    lines = [f'index "{irel.name}" on "{irel.table}" ({", ".join(irel.columns)})'
             f"{' unique' if irel.unique else ''}: root {meta.root}, level {meta.level}, "
             f"{bm.smgr.nblocks(irel.relfilenode)} blocks"]
    blk, level = meta.root, meta.level
    while True:
        lines.append(f"level {level}:")
        leftmost_child = None
        cur = blk
        while cur != bt.P_NONE:
            data = _read(bm, irel, cur)
            prev, nxt, lvl, flags, _c = bt.opaque(data)
            maxoff = bt.nitems(data)
            lines.append(f"  block {cur}: {bt.flag_names(flags)} prev={prev} next={nxt} "
                         f"lsn={pg.get_lsn(data)} items={maxoff} free={pg.free_space(data)}")
            first = bt.first_data(nxt)
            if nxt != bt.P_NONE:
                lines.append(f"    high key: {ck.keytext(bt.pivot_key(data, bt.P_HIKEY))}")
            shown = 0
            for off in range(first, maxoff + 1):
                if max_items is not None and shown >= max_items:
                    lines.append(f"    ... {maxoff - off + 1} more")
                    break
                shown += 1
                word = bt.lp_word(data, off)
                mark = " DEAD" if bt.lp_is_dead(word) else ""
                if flags & bt.BTP_LEAF:
                    key = ck.keytext(bt.leaf_key(data, off), pivot=False)
                    lines.append(f"    {off:4d}: {key} -> heap {bt.item_tid(data, off)}{mark}")
                else:
                    key = ck.keytext(bt.pivot_key(data, off))
                    lines.append(f"    {off:4d}: {key} -> block {bt.downlink(data, off)}")
            if leftmost_child is None and not flags & bt.BTP_LEAF and maxoff >= first:
                leftmost_child = bt.downlink(data, first)
            cur = nxt
        if level == 0 or leftmost_child is None:
            break
        blk, level = leftmost_child, level - 1
    return "\n".join(lines)
