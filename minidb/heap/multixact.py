"""Row locks of more than one strength (PostgreSQL 9.3's FOR KEY SHARE / FOR UPDATE).

``heap_lock_tuple_mode(backend, rel, tid, snapshot, mode)`` locks a row in ``mode``.
For now every mode is taken as FOR UPDATE (``heap_lock_tuple``): one locker at a time.
"""

from __future__ import annotations

from minidb.heap.modify import heap_lock_tuple

__all__ = ["LOCK_KEY_SHARE", "LOCK_UPDATE", "heap_lock_tuple_mode"]

LOCK_KEY_SHARE, LOCK_UPDATE = "key share", "update"


def heap_lock_tuple_mode(backend, rel, tid, snapshot, mode: str):
    """Lock the version at ``tid`` in ``mode``: (TM result, newer TID when TM_UPDATED)."""
    return heap_lock_tuple(backend, rel, tid, snapshot)
