"""``wal.record.build`` + ``seal`` (the insertion path's one-buffer record) give byte for
byte what ``assemble`` + ``finish`` give, padded with zeros to the next multiple of 8 (with
the images given as bytes or as ``PageImage`` references build copies itself): the
on-disk format is one, whichever way a record is put together.  Generated records: no
blocks, up to four blocks with images (with and without a hole), logical and delta data,
WILL_INIT, empty and long main data; each decodes back to what went in."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from minidb.config import BLCKSZ
from minidb.storage import page as pg
from minidb.wal import record as rec

_FLAGS = st.sampled_from([rec.REGBUF_STANDARD, rec.REGBUF_STANDARD | rec.REGBUF_LOGICAL,
                          rec.REGBUF_WILL_INIT | rec.REGBUF_LOGICAL, rec.REGBUF_FORCE_IMAGE])
_BLOCK = st.tuples(st.integers(0, 2**40), st.integers(0, 1), st.integers(0, 2**31),
                   _FLAGS, st.binary(max_size=300), st.integers(0, 2))   # image: no/hole/whole


def _page(kind: int) -> np.ndarray:
    page = np.arange(BLCKSZ, dtype=np.uint32).astype(np.uint8)
    if kind == 1:
        pg.init_page(page)
        page[pg.PAGE_HEADER_SIZE:pg.PAGE_HEADER_SIZE + 8] = 7
    return page


@settings(max_examples=120, deadline=None)
@given(st.lists(_BLOCK, max_size=4), st.binary(max_size=200), st.integers(0, 2**63 - 1),
       st.integers(0, 2**63 - 1), st.sampled_from([(rec.RM_HEAP, rec.XLOG_HEAP_UPDATE),
                                                   (rec.RM_XACT, rec.XLOG_XACT_COMMIT),
                                                   (rec.RM_BTREE, rec.XLOG_BTREE_SPLIT_L)]))
def test_build_and_seal_give_the_assembled_record(blocks, main, xid, prev, op):
    rmid, info = op
    refs, images = [], []
    for rfn, fork, blk, flags, data, img in blocks:
        page = _page(img)
        refs.append((rfn, fork, blk, page, flags, data))
        images.append(rec.page_image(page) if img else None)
    body, nimg = rec.assemble(refs, main, images)
    want = rec.finish(body, xid, prev, info, rmid)
    refs_images = [rec.page_image_ref(r[3]) if im is not None else None
                   for r, im in zip(refs, images)]
    for imgs in (images, refs_images):   # image bytes, or images copied by build itself
        buf, tot, nimg2 = rec.build(refs, main, imgs if any(imgs) else None)
        rec.seal(buf, tot, xid, prev, info, rmid, rec.body_crc(buf, tot))
        assert (tot, nimg2) == (len(want), nimg)
        assert bytes(buf) == want + bytes(rec.align(tot) - tot)
    r = rec.decode(bytes(buf[:tot]), 64, prev)
    assert (r.xid, r.prev, r.info, r.rmid, r.main) == (xid, prev, info, rmid, main)
    assert [(b.relfilenode, b.block, b.has_image) for b in r.blocks] == \
        [(x[0], x[2], im is not None) for x, im in zip(refs, images)]
