"""The flag bits of a heap tuple's header (PostgreSQL's ``htup_details.h``).

The heap writes these bits (``heap/layout.py`` lays out the header that holds them) and the
visibility rules read them (``txn/visibility.py``); both import them from here, below both.

t_infomask2 (uint16)::

    BITS        NAME                 MEANING
    0x07FF      HEAP_NATTS_MASK      number of attributes the writing layout had
    0x2000      HEAP_KEYS_UPDATED    deleted, or updated with a change of a key column
    0x4000      HEAP_HOT_UPDATED     updated, and the new version is a heap-only tuple
    0x8000      HEAP_ONLY_TUPLE      a heap-only tuple: no index entry points at it

t_infomask (uint16)::

    BITS        NAME                 MEANING
    0x0001      HEAP_HASNULL         some column is NULL (the bitmap has a clear bit)
    0x0002      HEAP_HASVARWIDTH     the table has a variable-length column
    0x0010      HEAP_XMAX_KEYSHR_LOCK  some transaction locked this version FOR KEY SHARE:
                                     its lockers are in minidb.txn.multixact's table
                                     (PostgreSQL: the xmax locker's strength)
    0x0080      HEAP_XMAX_LOCK_ONLY  xmax only locked the row; it did not delete it
    0x0100      HEAP_XMIN_COMMITTED  hint: xmin is known committed
    0x0200      HEAP_XMIN_INVALID    hint: xmin is known aborted (both xmin bits: frozen)
    0x0400      HEAP_XMAX_COMMITTED  hint: xmax is known committed
    0x0800      HEAP_XMAX_INVALID    hint: xmax is invalid or known aborted
    0x2000      HEAP_UPDATED         this is the newer version of an updated row

The values are PostgreSQL's, so a page dump reads the same in both.
"""

# t_infomask2
HEAP_NATTS_MASK = 0x07FF
HEAP_KEYS_UPDATED = 0x2000
HEAP_HOT_UPDATED = 0x4000
HEAP_ONLY_TUPLE = 0x8000
# t_infomask
HEAP_HASNULL = 0x0001
HEAP_HASVARWIDTH = 0x0002
HEAP_XMAX_KEYSHR_LOCK = 0x0010
HEAP_XMAX_LOCK_ONLY = 0x0080
HEAP_XMIN_COMMITTED = 0x0100
HEAP_XMIN_INVALID = 0x0200
HEAP_XMAX_COMMITTED = 0x0400
HEAP_XMAX_INVALID = 0x0800
HEAP_UPDATED = 0x2000
