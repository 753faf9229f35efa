"""Lock modes, their conflict table, lock tags and wait states (PostgreSQL's lockdefs.h and
the tag half of lock.h): the vocabulary shared by the lock manager (``minidb.txn.lmgr``) and
the deadlock detector (``minidb.txn.deadlock``), kept apart so neither imports the other's
module for it.

A mode set is a bitmask ``1 << mode``; ``CONFLICTS[m]`` is the set of modes that cannot be
held by another transaction while ``m`` is (symmetric; 4, 6, 7 and 8 conflict with
themselves).  A tag is a tuple ``(locktype, field1, field2)``.
"""

from __future__ import annotations


# -- modes ------------------------------------------------------------------------------------
NoLock = 0
AccessShareLock = 1
RowShareLock = 2
RowExclusiveLock = 3
ShareUpdateExclusiveLock = 4
ShareLock = 5
ShareRowExclusiveLock = 6
ExclusiveLock = 7
AccessExclusiveLock = 8
MAX_LOCKMODES = 9

MODE_NAMES = (None, "AccessShareLock", "RowShareLock", "RowExclusiveLock",
              "ShareUpdateExclusiveLock", "ShareLock", "ShareRowExclusiveLock",
              "ExclusiveLock", "AccessExclusiveLock")
SQL_MODES = {"ACCESS SHARE": 1, "ROW SHARE": 2, "ROW EXCLUSIVE": 3,
             "SHARE UPDATE EXCLUSIVE": 4, "SHARE": 5, "SHARE ROW EXCLUSIVE": 6,
             "EXCLUSIVE": 7, "ACCESS EXCLUSIVE": 8}


def _bits(*modes: int) -> int:
    m = 0
    for x in modes:
        m |= 1 << x
    return m


# PostgreSQL's LockConflicts table (lock.c), mode by mode
CONFLICTS = (
    0,
    _bits(8),
    _bits(7, 8),
    _bits(5, 6, 7, 8),
    _bits(4, 5, 6, 7, 8),
    _bits(3, 4, 6, 7, 8),
    _bits(3, 4, 5, 6, 7, 8),
    _bits(2, 3, 4, 5, 6, 7, 8),
    _bits(1, 2, 3, 4, 5, 6, 7, 8),
)
FASTPATH_MAX_MODE = RowExclusiveLock       # weak modes: fast path eligible
STRONG_MIN_MODE = ShareLock                # strong modes: disable the fast path

# -- tags ---------------------------------------------------------------------------------------
LOCKTAG_RELATION = 1
LOCKTAG_TRANSACTION = 2                    # described only: row waits use the proc array
LOCKTAG_OBJECT = 3
LOCKTYPE_NAMES = {LOCKTAG_RELATION: "relation", LOCKTAG_TRANSACTION: "transactionid",
                  LOCKTAG_OBJECT: "object"}

# -- wait status -----------------------------------------------------------------------------
NOT_WAITING, WAITING, GRANTED, REMOVED = 0, 1, 2, 3



def relation_tag(oid: int) -> tuple:
    return (LOCKTAG_RELATION, int(oid), 0)


def object_tag(classid: int, objid: int) -> tuple:
    return (LOCKTAG_OBJECT, int(classid), int(objid))


def tag_hash(tag: tuple) -> int:
    t, a, b = tag
    h = (t * 0x9E3779B1 + a * 0x85EBCA77 + b * 0xC2B2AE3D) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & 0xFFFFFFFF
    return h ^ (h >> 12)


def describe_tag(tag: tuple) -> str:
    """PostgreSQL's DescribeLockTag wording."""
    t, a, b = tag
    if t == LOCKTAG_RELATION:
        return f"relation {a} of database 1"
    if t == LOCKTAG_TRANSACTION:
        return f"transaction {a}"
    return f"object {b} of class {a} of database 1"
