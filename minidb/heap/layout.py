"""Heap tuple layout: one fixed row shape per table, built so numpy can read a column in one go.

A `RowLayout` is made from a table's columns.  It turns a row of Python values into tuple bytes
(`encode`, one row; `encode_batch`, millions of rows with numpy), turns tuple bytes back into
Python values (`decode`), and reads a few columns, or the header, of many tuples at once straight
out of a flat byte buffer such as the buffer pool (`gather`, `gather_header`).

Tuple layout (little-endian; every tuple starts 8-aligned in its page)::

    OFFSET      SIZE              FIELD
    0           8                 t_xmin          uint64, inserting transaction
    8           8                 t_xmax          uint64, deleting/locking transaction, 0 = invalid
    16          4                 t_cmin          uint32, command id of the insert
    20          4                 t_cmax          uint32, command id of the delete/update
    24          4                 t_ctid block    uint32 \\ this tuple's TID, or its newer
    28          2                 t_ctid offset   uint16 /  version's after an UPDATE
    30          2                 t_infomask2     uint16, low 11 bits natts, HOT flags
    32          2                 t_infomask      uint16, flags and hint bits
    34          1                 t_hoff          uint8, offset of the user data (multiple of 8)
    35          ceil(natts/8)     t_bits          null bitmap, always present; bit i set = column
                                                  i NOT null; bit i is bit i%8 of byte i//8
    t_hoff      ...               fixed part      columns in declaration order, each at an
                                                  offset aligned to its type's alignment
    fixed_size  ...               tail            UTF-8 bytes of the variable-length columns,
                                                  in column order, unaligned

In the fixed part a fixed-width column takes ``type.size`` bytes (int 4, bigint 8, double 8,
boolean 1 as 0/1, timestamp 8 as int64 microseconds since 2000-01-01; smallint 2, real 4 as
float32, date 4 as int32 days since 2000-01-01, time 8 and timestamptz 8 as int64
microseconds, interval 16 as PostgreSQL's struct, uuid 16 bytes; see ``minidb.types``).  A
variable-length column (char, varchar, text, numeric as its decimal text, bytea) takes a
4-byte descriptor: uint16 offset of its bytes from the tuple start, uint16 length in bytes.  With natts <= 40 the bitmap fits before byte 40, so t_hoff is 40.

Example, pgbench_accounts (aid int, bid int, abalance int, filler char(84))::

    0..34 header, 35 bitmap (1 byte), 36..39 padding, 40 aid, 44 bid, 48 abalance,
    52 filler descriptor (56, 84), 56..139 filler bytes;  length 140, 144 on the page

Invariants
1. Every column has the same offset in every tuple of the table (``offsets[i]``), aligned to its
   type's alignment relative to the tuple start; since tuples start 8-aligned, a column of many
   tuples is read with one integer index into a typed view of the buffer:
   ``flat.view('<i4')[(starts + offsets[i]) >> 2]``.
2. A NULL column keeps its slot, zero-filled (a varlena descriptor of 0, 0), and its bitmap bit
   is clear.  HEAP_HASNULL is set iff some bitmap bit of the tuple's natts columns is clear.
3. t_infomask2 & HEAP_NATTS_MASK == natts of the layout that wrote the tuple; t_hoff ==
   layout.t_hoff.  `decode` checks the first and raises DataCorrupted if it does not hold.
4. Tail bytes of column c lie at [off, off + len) with fixed_size <= off and off + len <= the
   tuple length; tails follow each other in column order with no gaps, so the tuple length is
   fixed_size + the sum of the non-null varlena lengths.
5. A tuple is at most MAX_TUPLE_SIZE bytes, so it always fits on an empty page.
6. A freshly encoded tuple has xmax = 0, cmax = 0 and HEAP_XMAX_INVALID set; HEAP_HASVARWIDTH is
   set in every tuple of a table that has a variable-length column (a property of the layout,
   not of the row, unlike PostgreSQL, which sets it only when a varlena value is present).
7. A NOT NULL column is NULL in no stored tuple: encode and encode_batch refuse it, and whoever
   adds NOT NULL to a table with rows must check them first, as PostgreSQL does.  `gather`
   relies on it and reads no bitmap for NOT NULL columns.

Departures from PostgreSQL, and why
- 64-bit xids (no wraparound, no freezing) and separate t_cmin / t_cmax instead of one combo
  cid: the header is 35 bytes, not 23.  Simplicity over 12 bytes per tuple.
- The null bitmap is always present and a NULL keeps its fixed slot: PostgreSQL omits both to
  save space, but then a column's offset depends on which earlier columns are NULL, and no
  vectorized gather is possible.
- Variable-length values have a descriptor in the fixed part and their bytes in a tail, instead
  of PostgreSQL's inline varlena headers (1- or 4-byte length words) that shift every later
  column.  char(n) is stored blank-padded in the tail, as PostgreSQL stores bpchar.
- MAX_TUPLE_SIZE is PostgreSQL's MaxHeapTupleSize, 8160 = 8192 - MAXALIGN(24 + 4): a tuple
  occupies MAXALIGN(len) bytes on the page below one 4-byte line pointer and the 24-byte page
  header.  (8192 - 24 - 4 = 8164 would not fit: MAXALIGN(8164) + 28 > 8192.)
- The fixed part is not padded to 8 at its end; the page pads each tuple to 8 when it places it.

Left out: TOAST and compression (a row longer than MAX_TUPLE_SIZE is an error, not moved out of
line), arrays, NULLs beyond natts (ALTER TABLE ADD COLUMN would need a table rewrite:
adding a column can grow the bitmap and t_hoff and so move every column), dropped columns.

Interface
- `Column(name, type, not_null=False)`; `RowLayout(columns)`: .natts .bitmap_size .t_hoff
  .offsets .fixed_size .var_columns .dtype, .column_index(name)
- `RowLayout.encode(values, xmin=, cmin=, ctid=, infomask=)` -> bytes;
  `RowLayout.decode(buf, start)`
- `RowLayout.encode_row(values, xmin, cmin, ctid_block, ctid_offset, infomask)`: the same
  bytes from a function written for the layout (the per-column loop unrolled); `decode` is
  written per layout the same way (a row without NULLs in one tuple display, a row with
  NULLs through the general loop)
- `RowLayout.encode_batch(columns, nrows, xmin=, cmin=)` -> (data, lengths), ctid left 0
- `RowLayout.gather(flat_or_views, starts, cols, infomask=None)` -> [(values, mask|None)]
- `RowLayout.null_mask(flat_or_views, starts, col)`
- `gather_header(flat_or_views, starts)` -> dict of arrays;  `decode_header(buf, start)`
- `FlatViews(flat)`: the typed views (.u8 .u16 .i32 .u32 .i64 .u64 .f64) of one buffer; build
  it once per buffer and pass it instead of the raw array

Speed when written (this machine, one core, 1 M pgbench_accounts rows, throwaway script):
encode ~1.5 us/row, decode ~1.2 us/row, encode_batch ~10 M rows/s, gather of one int column
~80 M rows/s from memory not in cache.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

import minidb.errors as errors
from minidb.config import BLCKSZ
from minidb.storage.htup import HEAP_HASNULL, HEAP_HASVARWIDTH, HEAP_NATTS_MASK, HEAP_XMAX_INVALID
from minidb.types import (
    STORAGE_ZERO, SqlType, coerce_array, encode_strings, from_storage, int_to_timestamp,
    parse_type, storage_converter,
)

__all__ = [
    "Column", "RowLayout", "FlatViews", "gather_header", "decode_header",
    "HEAP_TUPLE_HEADER_SIZE", "BITMAP_OFFSET", "MAX_TUPLE_SIZE", "MAX_COLUMNS", "MAXALIGN", "maxalign",
]

# -- constants ---------------------------------------------------------------------------------

MAXALIGN = 8
PAGE_HEADER_SIZE = 24           # PostgreSQL's SizeOfPageHeaderData
LINE_POINTER_SIZE = 4           # sizeof(ItemIdData)


def maxalign(n: int) -> int:
    return (n + MAXALIGN - 1) & ~(MAXALIGN - 1)


HEAP_TUPLE_HEADER_SIZE = 35     # fixed header, before the null bitmap
BITMAP_OFFSET = HEAP_TUPLE_HEADER_SIZE
# The largest tuple an empty page can hold (PostgreSQL's MaxHeapTupleSize): see the docstring.
MAX_TUPLE_SIZE = BLCKSZ - maxalign(PAGE_HEADER_SIZE + LINE_POINTER_SIZE)
MAX_COLUMNS = 1600              # PostgreSQL's MaxHeapAttributeNumber

# header fields: (name, numpy dtype, offset); the struct codes below must agree
HEADER_FIELDS = (
    ("t_xmin", "<u8", 0),
    ("t_xmax", "<u8", 8),
    ("t_cmin", "<u4", 16),
    ("t_cmax", "<u4", 20),
    ("t_ctid_block", "<u4", 24),
    ("t_ctid_offset", "<u2", 28),
    ("t_infomask2", "<u2", 30),
    ("t_infomask", "<u2", 32),
    ("t_hoff", "u1", 34),
)
_HEADER_STRUCT = struct.Struct("<QQIIIHHHB")
HEADER_STRUCT = _HEADER_STRUCT   # a header's fields in decode_header's order (for writers)
assert _HEADER_STRUCT.size == HEAP_TUPLE_HEADER_SIZE

_STRUCT_CODE = {"integer": "i", "bigint": "q", "double precision": "d", "boolean": "?",
                "timestamp": "q", "smallint": "h", "real": "f", "date": "i", "time": "q",
                "timestamptz": "q", "interval": "16s", "uuid": "16s"}

# rows handled per step where encode_batch builds index arrays, to bound their memory
_BATCH_CHUNK = 1 << 16
# bytes of rows encode_batch writes per step in its uniform path: about an L2 cache
_CACHE_CHUNK_BYTES = 256 << 10


@dataclass
class Column:
    """A table column.  ``type`` may be given as a spelling ('varchar(10)') and is parsed."""

    name: str
    type: SqlType
    not_null: bool = False

    def __post_init__(self):
        if not isinstance(self.type, SqlType):
            self.type = parse_type(self.type)


# -- buffer views --------------------------------------------------------------------------------

class FlatViews:
    """Typed views of one flat byte buffer, for gathering aligned fields with one index.

    Build it once per buffer (the buffer pool's) and pass it to `gather` / `gather_header`.
    Each view covers the longest prefix of the buffer that is a whole number of its items; an
    aligned field of a tuple that lies inside the buffer always lies inside that prefix.
    """

    __slots__ = ("flat", "u8", "u16", "i32", "u32", "i64", "u64", "f64", "_mv")

    def __init__(self, flat):
        if not isinstance(flat, np.ndarray):
            flat = np.frombuffer(flat, dtype=np.uint8)
        if flat.dtype != np.uint8:
            flat = flat.view(np.uint8)
        flat = flat.reshape(-1)           # raises (copies are useless) unless contiguous
        if not flat.flags.c_contiguous:
            raise errors.InternalError("FlatViews needs a C-contiguous buffer")
        n = flat.shape[0]
        self.flat = self.u8 = flat
        self.u16 = flat[: n - n % 2].view("<u2")
        self.i32 = flat[: n - n % 4].view("<i4")
        self.u32 = self.i32.view("<u4")
        self.i64 = flat[: n - n % 8].view("<i8")
        self.u64 = self.i64.view("<u8")
        self.f64 = self.i64.view("<f8")
        self._mv = None

    @property
    def mv(self) -> memoryview:
        if self._mv is None:
            self._mv = memoryview(self.flat)
        return self._mv


def _views(flat_or_views) -> FlatViews:
    return flat_or_views if isinstance(flat_or_views, FlatViews) else FlatViews(flat_or_views)


_HEADER_VIEW = np.dtype({
    "names": ["xmin", "xmax", "cmin", "cmax", "ctid_block", "ctid_offset", "infomask2",
              "infomask"],
    "formats": ["<u8", "<u8", "<u4", "<u4", "<u4", "<u2", "<u2", "<u2"],
    "offsets": [0, 8, 16, 20, 24, 28, 30, 32],
    "itemsize": 40,
})
_HEADER_WORDS = np.arange(5, dtype=np.int64)    # the header lies in a tuple's first 5 words


def gather_header(flat_or_views, starts: np.ndarray) -> dict[str, np.ndarray]:
    """The header fields of the tuples at ``starts`` (absolute, 8-aligned byte offsets).

    One gather of each tuple's first 40 bytes (every tuple is at least t_hoff >= 40 bytes
    long); the arrays returned are strided views into that copy, not into the buffer.
    """
    v = _views(flat_or_views)
    starts = np.asarray(starts, dtype=np.int64)
    words = np.take(v.u64, (starts >> 3)[:, None] + _HEADER_WORDS)
    rec = words.view(_HEADER_VIEW).reshape(-1)
    return {name: rec[name] for name in _HEADER_VIEW.names}


def decode_header(buf, start: int = 0) -> dict:
    """One tuple's header as a dict (for page dumps and single-row visibility checks)."""
    (xmin, xmax, cmin, cmax, blk, off, im2, im, hoff) = _HEADER_STRUCT.unpack_from(buf, start)
    return {"xmin": xmin, "xmax": xmax, "cmin": cmin, "cmax": cmax, "ctid": (blk, off),
            "infomask2": im2, "infomask": im, "natts": im2 & HEAP_NATTS_MASK, "t_hoff": hoff}


# -- the layout ----------------------------------------------------------------------------------

_CODE: dict[str, object] = {}   # source of a generated function -> its compiled code
_CODE_MAX = 1024


def _define(src: str, env: dict, name: str):
    """The function ``name`` that ``src`` (a def built from a layout alone) defines, with
    ``env`` as its globals.  Compiling is what costs (about 0.4 ms a function); the code
    is kept by its source, so a layout built again - a parallel worker rebuilds the
    table's layout for every task, a relation cache entry after an invalidation - only
    runs the def."""
    code = _CODE.get(src)
    if code is None:
        if len(_CODE) >= _CODE_MAX:
            _CODE.clear()
        code = _CODE[src] = compile(src, f"<RowLayout.{name}>", "exec")
    exec(code, env)   # noqa: S102 - source built from the layout alone
    return env[name]


class RowLayout:
    """The tuple layout of one table schema; see the module docstring."""

    def __init__(self, columns: Sequence[Column]):
        columns = list(columns)
        if len(columns) > MAX_COLUMNS:
            raise errors.ProgramLimitExceeded(f"tables can have at most {MAX_COLUMNS} columns")
        self.columns = columns
        self.names = [c.name for c in columns]
        self.natts = n = len(columns)
        self.bitmap_size = (n + 7) // 8
        self.t_hoff = maxalign(BITMAP_OFFSET + self.bitmap_size)

        offsets, pos = [], self.t_hoff
        for c in columns:
            a = c.type.align
            pos = (pos + a - 1) & ~(a - 1)
            offsets.append(pos)
            pos += c.type.size
        self.offsets = offsets
        self.fixed_size = pos
        self.var_columns = [i for i, c in enumerate(columns) if not c.type.fixed]
        self._index = {c.name: i for i, c in enumerate(columns)}
        # per set of indexed columns, how an update compares them on the stored bytes
        # (``minidb.heap.modify._byte_plan``'s cache, kept with the layout it describes)
        self.key_byte_plans: dict = {}
        self._full_bits = (1 << n) - 1
        self._base_infomask = HEAP_XMAX_INVALID | (HEAP_HASVARWIDTH if self.var_columns else 0)

        # numpy dtype of the fixed part, header included
        names = [f[0] for f in HEADER_FIELDS] + ["t_bits"]
        formats = [f[1] for f in HEADER_FIELDS] + [("u1", (self.bitmap_size,))]
        offs = [f[2] for f in HEADER_FIELDS] + [BITMAP_OFFSET]
        for c, off in zip(columns, offsets):
            if c.type.fixed:
                names.append(c.name)
                formats.append(c.type.np_dtype)
                offs.append(off)
            else:
                names += [f"{c.name}.off", f"{c.name}.len"]
                formats += ["<u2", "<u2"]
                offs += [off, off + 2]
        seen = set()
        for c in columns:
            if c.name in seen:
                raise errors.DuplicateColumn(f'column "{c.name}" specified more than once')
            seen.add(c.name)
        if len(set(names)) != len(names):
            clash = next(x for x in names if names.count(x) > 1)
            raise errors.DuplicateColumn(
                f'column name "{clash}" conflicts with a field of the tuple header')
        self._field_names = names
        self.dtype = np.dtype({"names": names, "formats": formats, "offsets": offs,
                               "itemsize": self.fixed_size})
        # staging dtype for encode_batch: the same, padded to whole 8-byte words
        self._stage_dtype = np.dtype({"names": names, "formats": formats, "offsets": offs,
                                      "itemsize": maxalign(self.fixed_size)})

        # struct for the whole fixed part; args: 9 header values, bitmap, then the columns
        fmt, pos, slots = ["<QQIIIHHHB", f"{self.bitmap_size}s"], BITMAP_OFFSET + self.bitmap_size, []
        template = [0, 0, 0, 0, 0, 0, n, 0, self.t_hoff, b""]
        for c, off in zip(columns, offsets):
            if off > pos:
                fmt.append(f"{off - pos}x")
            slots.append(len(template))
            if c.type.fixed:
                fmt.append(_STRUCT_CODE[c.type.name])
                template.append(STORAGE_ZERO[c.type.name])
            else:
                fmt.append("HH")
                template += [0, 0]
            pos = off + c.type.size
        if self.fixed_size > pos:           # no columns: the tuple still ends at t_hoff
            fmt.append(f"{self.fixed_size - pos}x")
        self._struct = struct.Struct("".join(fmt))
        assert self._struct.size == self.fixed_size, (self._struct.size, self.fixed_size)
        self._template = template
        self._encode_plan = [(slots[i], storage_converter(c.type, c.name), not c.type.fixed,
                              c.not_null, c.name)
                             for i, c in enumerate(columns)]
        self._decode_plan = [(slots[i], _decode_kind(c.type)) for i, c in enumerate(columns)]
        self.encode_row = self._compile_encoder()
        # kinds 3 and 4 (types converted from their stored form): the function per slot
        self._from_stored = {slots[i]: from_storage(c.type) for i, c in enumerate(columns)
                             if from_storage(c.type) is not None}
        self.decode = self._compile_decoder()

    def __repr__(self):
        cols = ", ".join(f"{c.name} {c.type}{' NOT NULL' if c.not_null else ''}"
                         for c in self.columns)
        return f"RowLayout({cols})"

    def column_index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise errors.UndefinedColumn(f'column "{name}" does not exist') from None

    # -- one row -------------------------------------------------------------------------------

    def encode(self, values: Sequence, *, xmin: int = 0, cmin: int = 0,
               ctid: tuple[int, int] = (0, 0), infomask: int = 0) -> bytes:
        """The tuple bytes (unpadded) of one row of Python values; ``infomask``: bits to
        set in t_infomask besides those the row implies (an update's HEAP_UPDATED).
        ``encode_row`` gives the same bytes (and errors) a little faster."""
        if len(values) != self.natts:
            raise self._arity_error(len(values))
        args = self._template.copy()
        args[0] = xmin
        args[2] = cmin
        args[4], args[5] = ctid
        bits, bit = 0, 1
        pos = self.fixed_size
        tail = []
        for v, (slot, conv, var, not_null, name) in zip(values, self._encode_plan):
            if v is None:
                if not_null:
                    raise _not_null(name)
            else:
                bits |= bit
                x = conv(v)
                if var:
                    args[slot] = pos
                    args[slot + 1] = len(x)
                    pos += len(x)
                    tail.append(x)
                else:
                    args[slot] = x
            bit <<= 1
        if pos > MAX_TUPLE_SIZE:
            raise _too_big(pos)
        args[7] = (self._base_infomask if bits == self._full_bits else (
            self._base_infomask | HEAP_HASNULL)) | infomask
        args[9] = bits.to_bytes(self.bitmap_size, "little")
        data = self._struct.pack(*args)
        return data + b"".join(tail) if tail else data

    def _compile_encoder(self):
        """``encode`` as one function written for this layout (the loop over
        ``_encode_plan`` unrolled, as ``collections.namedtuple`` writes its class): the
        same bytes and the same errors in the same order, without a per-column tuple
        unpack and bit shift.  Called as ``encode_row(values, xmin, cmin, ctid_block,
        ctid_offset, infomask)`` by the heap's writers (``heapam.heap_insert``,
        ``modify.heap_update``)."""
        n = self.natts
        env = {"_not_null": _not_null, "_too_big": _too_big, "MAX_TUPLE_SIZE": MAX_TUPLE_SIZE,
               "_pack": self._struct.pack, "_arity": self._arity_error}
        vs = [f"v{i}" for i in range(n)]
        src = ["def encode_row(values, xmin, cmin, cblk, coff, infomask):",
               f"    if len(values) != {n}:",
               "        raise _arity(len(values))"]
        if n:
            src.append(f"    {', '.join(vs)}, = values")
        src.append(f"    bits = {self._full_bits}")
        pos_used = False
        pack_args, tail = [], []
        for i, (slot, conv, var, not_null, name) in enumerate(self._encode_plan):
            env[f"conv{i}"] = conv
            env[f"name{i}"] = name
            src.append(f"    if v{i} is None:")
            if not_null:
                src.append(f"        raise _not_null(name{i})")
            else:
                src.append(f"        bits ^= {1 << i}")
                if var:
                    src.append(f"        x{i} = b''")
                    src.append(f"        o{i} = l{i} = 0")
                else:
                    env[f"zero{i}"] = self._template[slot]
                    src.append(f"        x{i} = zero{i}")
            src.append("    else:")
            src.append(f"        x{i} = conv{i}(v{i})")
            if var:
                if not pos_used:
                    src.insert(3 + bool(n), f"    pos = {self.fixed_size}")
                    pos_used = True
                src.append(f"        o{i} = pos")
                src.append(f"        l{i} = len(x{i})")
                src.append(f"        pos += l{i}")
                pack_args += [f"o{i}", f"l{i}"]
                tail.append(f"x{i}")
            else:
                pack_args.append(f"x{i}")
        if pos_used:
            src.append("    if pos > MAX_TUPLE_SIZE:")
            src.append("        raise _too_big(pos)")
        elif self.fixed_size > MAX_TUPLE_SIZE:
            src.append(f"    raise _too_big({self.fixed_size})")
        base = self._base_infomask
        src.append(f"    im = ({base} if bits == {self._full_bits} else {base | HEAP_HASNULL})"
                   " | infomask")
        args = ["xmin", "0", "cmin", "0", "cblk", "coff", str(n), "im", str(self.t_hoff),
                f"bits.to_bytes({self.bitmap_size}, 'little')"] + pack_args
        if tail:
            src.append(f"    return _pack({', '.join(args)}) + b''.join(({', '.join(tail)},))")
        else:
            src.append(f"    return _pack({', '.join(args)})")
        return _define("\n".join(src), env, "encode_row")

    def decode(self, buf, start: int = 0) -> tuple:
        """The Python values of the tuple at ``buf[start:]``: None for NULL.  (Each layout
        replaces this by a function written for it, ``_compile_decoder``: the same values
        and errors; this is the general loop it falls back on for a row with NULLs.)"""
        f = self._struct.unpack_from(buf, start)
        if f[6] & HEAP_NATTS_MASK != self.natts:
            raise self._natts_error(f[6], start)
        return self._decode_fields(buf, start, f)

    def _natts_error(self, im2: int, start: int):
        return errors.DataCorrupted(
            f"tuple at offset {start} has {im2 & HEAP_NATTS_MASK} attributes, "
            f"the table has {self.natts}")

    def _compile_decoder(self):
        """``decode`` written out for this layout: a row without NULLs (its bitmap all
        ones, compared as bytes) becomes one tuple display of its columns - the struct
        value as is, a converted one, or a string sliced from a memoryview of the buffer -
        with no per-column loop; a row with NULLs goes through ``_decode_fields``."""
        env = {"_unpack": self._struct.unpack_from, "_fields": self._decode_fields,
               "_natts_error": self._natts_error, "_ts": int_to_timestamp,
               "MASK": HEAP_NATTS_MASK}
        full = self._full_bits.to_bytes(self.bitmap_size, "little")
        env["FULL"] = full
        src = ["def decode(buf, start=0):",
               "    f = _unpack(buf, start)",
               f"    if f[6] & MASK != {self.natts}:",
               "        raise _natts_error(f[6], start)",
               "    if f[9] != FULL:",
               "        return _fields(buf, start, f)"]
        if any(kind in (2, 4) for _slot, kind in self._decode_plan):
            src += ["    mv = memoryview(buf)",
                    "    if mv.format != 'B' or mv.ndim != 1:",
                    "        mv = mv.cast('B')"]
        vals = []
        for slot, kind in self._decode_plan:
            if kind == 0:
                vals.append(f"f[{slot}]")
            elif kind == 1:
                vals.append(f"_ts(f[{slot}])")
            elif kind == 3:
                env[f"_conv{slot}"] = self._from_stored[slot]
                vals.append(f"_conv{slot}(f[{slot}])")
            else:
                src.append(f"    a{slot} = start + f[{slot}]")
                piece = f"mv[a{slot}:a{slot} + f[{slot + 1}]]"
                if kind == 2:
                    vals.append(f"str({piece}, 'utf-8')")
                else:
                    env[f"_conv{slot}"] = self._from_stored[slot]
                    vals.append(f"_conv{slot}({piece})")
        src.append(f"    return ({', '.join(vals)}{',' if len(vals) == 1 else ''})")
        return _define("\n".join(src), env, "decode")

    def _decode_fields(self, buf, start: int, f) -> tuple:
        """``decode`` past the struct unpack and the attribute count check."""
        bits = int.from_bytes(f[9], "little")
        mv = None
        out = []
        for slot, kind in self._decode_plan:
            if not bits & 1:
                out.append(None)
            elif kind == 0:
                out.append(f[slot])
            elif kind == 1:
                out.append(int_to_timestamp(f[slot]))
            elif kind == 2:
                if mv is None:
                    mv = memoryview(buf)
                    if mv.format != "B" or mv.ndim != 1:
                        mv = mv.cast("B")
                a = start + f[slot]
                out.append(str(mv[a:a + f[slot + 1]], "utf-8"))
            elif kind == 3:
                out.append(self._from_stored[slot](f[slot]))
            else:
                if mv is None:
                    mv = memoryview(buf)
                    if mv.format != "B" or mv.ndim != 1:
                        mv = mv.cast("B")
                a = start + f[slot]
                out.append(self._from_stored[slot](mv[a:a + f[slot + 1]]))
            bits >>= 1
        return tuple(out)

    def _arity_error(self, got: int):
        return errors.DatatypeMismatch(
            f"row has {got} values but the table has {self.natts} columns")

    # -- many rows -----------------------------------------------------------------------------

    def encode_batch(self, columns: dict, nrows: int, *, xmin: int = 0,
                     cmin: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Encode ``nrows`` rows given column by column; returns (data, lengths).

        ``columns`` maps column names to sequences or numpy arrays of length ``nrows``; a
        missing column is all NULL.  NULLs are None entries, masked entries of a numpy masked
        array, or NaT in a datetime64 array.  ``data`` (uint8) is every tuple in row order, each
        padded with zeros to a multiple of 8 bytes, so row i starts at the sum of the padded
        lengths before it; ``lengths`` (int64) are the unpadded tuple lengths (the line pointers'
        lp_len).  ctid is left (0, 0): the heap writes it when it places each tuple.  Values are
        validated with the same rules, and raise the same errors, as `encode`.
        """
        nrows = int(nrows)
        unknown = [k for k in columns if k not in self._index]
        if unknown:
            raise errors.UndefinedColumn(f'column "{unknown[0]}" does not exist')
        fixed_vals, tails, masks, uniform, row_len = self._batch_columns(columns, nrows)
        if nrows and int(row_len.max()) > MAX_TUPLE_SIZE:
            raise _too_big(int(row_len.max()))
        padded = (row_len + 7) & ~7
        if nrows == 0:
            return np.zeros(0, dtype=np.uint8), row_len
        fields = self._batch_fields(nrows, xmin, cmin, fixed_vals, tails, masks, uniform)
        if uniform:
            return self._stamp_uniform_rows(fields, tails, nrows, int(padded[0])), row_len
        return self._write_rows(fields, tails, nrows, padded), row_len

    def _batch_columns(self, columns: dict, nrows: int):
        """Step 1 of ``encode_batch``: validate every column, work out NULLs and where each
        row's variable-length values go.  Returns (fixed_vals, tails, masks, uniform,
        row_len): ``fixed_vals`` (name, stored values) per fixed-width column; ``tails``
        (column, tail offsets, lengths, mask, encoded | None, const) per varlena column;
        ``masks`` (column index, NULL mask); ``uniform``: every varlena column has one value
        of one length in all rows and no NULL; ``row_len`` the unpadded tuple lengths."""
        fixed_vals = []
        tails = []
        masks = []
        uniform = True
        tail_off = np.full(nrows, self.fixed_size, dtype=np.int64)
        for i, col in enumerate(self.columns):
            src = columns.get(col.name)
            if col.type.fixed:
                vals, mask = coerce_array(col.type, src, nrows, col.name)
                fixed_vals.append((col.name, vals))
            else:
                encoded, const, lens, mask = encode_strings(col.type, src, nrows, col.name)
                tails.append((col, tail_off.copy(), lens, mask, encoded, const))
                uniform = uniform and const is not None and mask is None
                tail_off += lens
            if mask is not None:
                if col.not_null:
                    raise _not_null(col.name)
                masks.append((i, mask))
        return fixed_vals, tails, masks, uniform, tail_off

    def _batch_fields(self, nrows: int, xmin: int, cmin: int, fixed_vals, tails, masks,
                      uniform: bool) -> list:
        """Step 2 of ``encode_batch``: the staged fixed part as (field, value, one value per
        row?) - header fields, null bitmap, fixed-width columns, varlena descriptors."""
        fields = [("t_xmin", xmin, False), ("t_cmin", cmin, False),
                  ("t_infomask2", self.natts, False), ("t_hoff", self.t_hoff, False)]
        if masks:
            bitmap = np.full((nrows, self.bitmap_size), 0xFF, dtype=np.uint8)
            if self.natts % 8:
                bitmap[:, -1] = (1 << (self.natts % 8)) - 1
            any_null = np.zeros(nrows, dtype=bool)
            for i, mask in masks:
                bitmap[:, i // 8] &= ~(mask.view(np.uint8) << (i % 8)).astype(np.uint8)
                any_null |= mask
            fields.append(("t_bits", bitmap, True))
            fields.append(("t_infomask", self._base_infomask
                           | (any_null.astype(np.uint16) * HEAP_HASNULL), True))
        else:
            if self.bitmap_size:
                fields.append(("t_bits", np.frombuffer(
                    self._full_bits.to_bytes(self.bitmap_size, "little"), dtype=np.uint8),
                    False))
            fields.append(("t_infomask", self._base_infomask, False))
        fields += [(name, vals, True) for name, vals in fixed_vals]
        for col, offs, lens, mask, _, const in tails:
            if uniform:             # const, at the same offset in every row
                fields += [(f"{col.name}.off", int(offs[0]), False),
                           (f"{col.name}.len", len(const), False)]
            else:
                fields += [(f"{col.name}.off", offs if mask is None else np.where(mask, 0, offs),
                            True), (f"{col.name}.len", lens, True)]
        return fields

    def _stamp_uniform_rows(self, fields: list, tails, nrows: int, row_size: int
                            ) -> np.ndarray:
        """Step 3 of ``encode_batch`` when every row has one length and all tails are
        constant: stamp a template row holding every constant, then write the varying
        fields, chunk by chunk so that the chunk stays in cache across the field writes (one
        pass over memory instead of one per field)."""
        rdtype = np.dtype({"names": self._field_names,
                           "formats": [self._stage_dtype.fields[f][0]
                                       for f in self._field_names],
                           "offsets": [self._stage_dtype.fields[f][1]
                                       for f in self._field_names],
                           "itemsize": row_size})
        template = np.zeros(row_size, dtype=np.uint8)
        trec = template.view(rdtype)
        varying = []
        for name, val, per_row in fields:
            if per_row:
                varying.append((name, val))
            else:
                trec[name] = val
        for col, offs, _, _, _, const in tails:
            a = int(offs[0])
            template[a: a + len(const)] = np.frombuffer(const, dtype=np.uint8)
        data = np.empty(nrows * row_size, dtype=np.uint8)
        rows = data.reshape(nrows, row_size)
        rec = data.view(rdtype)
        step = max(64, _CACHE_CHUNK_BYTES // row_size)
        for a in range(0, nrows, step):
            b = min(a + step, nrows)
            rows[a:b] = template
            chunk = rec[a:b]
            for name, val in varying:
                chunk[name] = val[a:b]
        return data

    def _write_rows(self, fields: list, tails, nrows: int, padded: np.ndarray) -> np.ndarray:
        """Step 3 of ``encode_batch`` in general: stage the fixed parts in a record array,
        copy them as whole 8-byte words to each row's start, then scatter each varlena
        column's bytes to its rows' tails (over the zero padding of the last word)."""
        data = np.zeros(int(padded.sum()), dtype=np.uint8)
        rec = np.zeros(nrows, dtype=self._stage_dtype)
        for name, val, _ in fields:
            rec[name] = val
        row_start = np.cumsum(padded) - padded
        words = rec.view("<u8").reshape(nrows, -1)
        data64 = data.view("<u8")
        w = np.arange(words.shape[1], dtype=np.int64)
        for a in range(0, nrows, _BATCH_CHUNK):
            b = min(a + _BATCH_CHUNK, nrows)
            data64[(row_start[a:b, None] >> 3) + w] = words[a:b]
        for col, offs, lens, _, encoded, const in tails:
            if const is not None:
                encoded = itertools.repeat(const, nrows)
            elif encoded is None:           # all NULL
                continue
            blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
            if not blob.size:
                continue
            src_end = np.cumsum(lens)
            dst_minus_src = row_start + offs - (src_end - lens)
            for a in range(0, nrows, _BATCH_CHUNK):
                b = min(a + _BATCH_CHUNK, nrows)
                s0 = int(src_end[a - 1]) if a else 0
                s1 = int(src_end[b - 1])
                if s1 == s0:
                    continue
                dst = np.repeat(dst_minus_src[a:b], lens[a:b]) + np.arange(s0, s1)
                data[dst] = blob[s0:s1]
        return data

    # -- vectorized reading --------------------------------------------------------------------

    gather_header = staticmethod(gather_header)     # the header is the same for every layout

    def null_mask(self, views, starts: np.ndarray, col: int) -> np.ndarray:
        """Bool array, True where column ``col`` of the tuple at ``starts`` is NULL."""
        v = _views(views)
        byte = np.take(v.u8, np.asarray(starts, dtype=np.int64) + (BITMAP_OFFSET + col // 8))
        return (byte & (1 << (col % 8))) == 0

    def gather(self, flat_or_views, starts: np.ndarray, cols: Sequence[int], *,
               infomask: np.ndarray | None = None, no_nulls: bool = False,
               ) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """Read columns ``cols`` of the tuples at ``starts`` (absolute, 8-aligned offsets).

        Returns, per column, (values, null mask or None when no tuple has a NULL there).  Values:
        int32/int64/float64 arrays, bool for boolean, int64 microseconds since 2000-01-01 for
        timestamp (see `minidb.types.ints_to_datetime64`), object arrays of str (None for NULL)
        for char/varchar/text; the later types as `_gather_other` / `_gather_varlena` say.
        Fixed-width columns take one integer index each into a typed view; NULL slots hold 0.  To know whether any NULL is there at all, gather reads the
        tuples' t_infomask (HEAP_HASNULL) unless the caller passes it in ``infomask`` (a scan has
        it from `gather_header`), or unless every requested column is NOT NULL, or unless the
        caller knows no tuple has a NULL (``no_nulls``: every page has PD_NO_NULLS, see
        ``minidb.heap.heapam.pages_without_nulls``).
        """
        v = _views(flat_or_views)
        starts = np.asarray(starts, dtype=np.int64)
        has_null = False
        if starts.size and not no_nulls and any(not self.columns[c].not_null for c in cols):
            if infomask is None:
                infomask = np.take(v.u16, (starts >> 1) + (32 >> 1))
            has_null = bool((infomask & HEAP_HASNULL).any())
        shifted = {}

        def index(shift):
            s = shifted.get(shift)
            if s is None:
                s = shifted[shift] = starts >> shift
            return s

        out = []
        for c in cols:
            col = self.columns[c]
            off = self.offsets[c]
            mask = None
            if has_null and not col.not_null:
                mask = self.null_mask(v, starts, c)
                if not mask.any():
                    mask = None
            name = col.type.name
            if name == "integer":
                vals = np.take(v.i32, index(2) + (off >> 2))
            elif name == "bigint" or name == "timestamp":
                vals = np.take(v.i64, index(3) + (off >> 3))
            elif name == "double precision":
                vals = np.take(v.f64, index(3) + (off >> 3))
            elif name == "boolean":
                vals = np.take(v.u8, starts + off) != 0
            elif col.type.fixed:
                vals = _gather_other(v, starts, off, name, index)
            else:
                if name == "text" or name == "varchar" or name == "char":
                    vals = _gather_strings(v, starts, off, mask)
                else:
                    vals = _gather_varlena(v, starts, off, name, mask)
            out.append((vals, mask))
        return out


# -- helpers -------------------------------------------------------------------------------------

def _not_null(name: str) -> errors.NotNullViolation:
    return errors.NotNullViolation(f'null value in column "{name}" violates not-null constraint')


def _too_big(size: int) -> errors.ProgramLimitExceeded:
    return errors.ProgramLimitExceeded(
        f"row is too big: size {size}, maximum size {MAX_TUPLE_SIZE}")


def _decode_kind(t: SqlType) -> int:
    """0: the struct value as is; 1: timestamp; 2: string varlena; 3: a fixed-width value
    converted by ``types.from_storage``; 4: a varlena value (numeric, bytea) converted so."""
    conv = from_storage(t)
    if not t.fixed:
        return 2 if conv is None else 4
    if conv is not None:
        return 3
    return 1 if t.name == "timestamp" else 0


def _gather_other(v: FlatViews, starts: np.ndarray, off: int, name: str, index) -> np.ndarray:
    """gather() of the fixed-width types added after the first eight: smallint int16, real
    as float64 (float32 values), date int32 days, time / timestamptz int64 microseconds,
    interval and uuid object arrays of `types.Interval` / `uuid.UUID` (NULL slots hold the
    zero interval and the nil uuid)."""
    if name == "smallint":
        return np.take(v.u16.view("<i2"), index(1) + (off >> 1))
    if name == "real":
        return np.take(v.u32.view("<f4"), index(2) + (off >> 2)).astype(np.float64)
    if name == "date":
        return np.take(v.i32, index(2) + (off >> 2))
    if name == "time" or name == "timestamptz":
        return np.take(v.i64, index(3) + (off >> 3))
    raw = np.take(v.u8, (starts + off)[:, None] + np.arange(16, dtype=np.int64))
    conv = from_storage(_TYPES_BY_NAME[name])
    out = np.empty(starts.shape[0], dtype=object)
    out[:] = [conv(b) for b in map(bytes, raw)]
    return out


_TYPES_BY_NAME = {n: parse_type(n) for n in ("interval", "uuid", "numeric", "bytea")}


def _gather_varlena(v: FlatViews, starts: np.ndarray, off: int, name: str, mask) -> np.ndarray:
    """gather() of numeric (Decimal) and bytea (bytes): object arrays, NULL slots holding
    Decimal 0 / b""."""
    n = starts.shape[0]
    out = np.empty(n, dtype=object)
    if n == 0:
        return out
    desc = (starts + off) >> 1
    begin = starts + np.take(v.u16, desc)
    end = begin + np.take(v.u16, desc + 1)
    lo, hi = int(starts.min()), int(end.max())
    raw = v.flat[lo:hi].tobytes()
    conv = from_storage(_TYPES_BY_NAME[name])
    if name == "bytea":
        out[:] = [raw[a:b] for a, b in zip((begin - lo).tolist(), (end - lo).tolist())]
    else:
        out[:] = [conv(raw[a:b]) if b > a else None
                  for a, b in zip((begin - lo).tolist(), (end - lo).tolist())]
    if mask is not None:
        out[mask] = conv(b"0") if name == "numeric" else b""
    return out


# Below this span, _gather_strings copies the buffer region the tuples lie in to one bytes
# object and slices that: slicing bytes is faster than slicing a memoryview of numpy memory.
_STRING_SPAN_COPY = 16 << 20


def _gather_strings(v: FlatViews, starts: np.ndarray, off: int, mask) -> np.ndarray:
    n = starts.shape[0]
    out = np.empty(n, dtype=object)
    if n == 0:
        return out
    desc = (starts + off) >> 1
    begin = starts + np.take(v.u16, desc)
    end = begin + np.take(v.u16, desc + 1)
    lo, hi = int(starts.min()), int(end.max())
    if hi - lo <= max(_STRING_SPAN_COPY, 4 * int((end - begin).sum())):
        raw = v.flat[lo:hi].tobytes()
        out[:] = [raw[a:b].decode() for a, b in zip((begin - lo).tolist(), (end - lo).tolist())]
    else:
        mv = v.mv
        out[:] = [str(mv[a:b], "utf-8") for a, b in zip(begin.tolist(), end.tolist())]
    if mask is not None:
        out[mask] = None
    return out
