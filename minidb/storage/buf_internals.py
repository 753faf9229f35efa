"""The bits of a buffer descriptor (PostgreSQL's ``buf_internals.h``).

The buffer manager (``bufmgr.py``) and the clock sweep (``freelist.py``) both read the
descriptor's flags and usage count, so the constants live here, below both of them.

=======================  ======  ===================================================
flag (``buf_flags``)     value   meaning
=======================  ======  ===================================================
``BM_TAG_VALID``         0x1     the tag names a page (the buffer is in the mapping table)
``BM_VALID``             0x2     the page's contents are loaded
``BM_DIRTY``             0x4     changed since it was last written
``BM_IO_IN_PROGRESS``    0x8     a backend is reading the page in; others wait
``BM_PIN_COUNT_WAITER``  0x10    a backend waits for a cleanup lock (pins to drop)
=======================  ======  ===================================================

The usage count (``buf_usage``) runs from 0 to ``BM_MAX_USAGE_COUNT``: a pin raises it by
one, the clock hand passing lowers it by one.
"""

BM_TAG_VALID = 0x1
BM_VALID = 0x2
BM_DIRTY = 0x4
BM_IO_IN_PROGRESS = 0x8
BM_PIN_COUNT_WAITER = 0x10

# PostgreSQL's value: a page used five times survives five passes of the hand
BM_MAX_USAGE_COUNT = 5
