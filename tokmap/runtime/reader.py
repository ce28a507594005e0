"""Map a .mtok file and hand out zero-copy, bounds-checked views of its sections.

Everything read from the file is checked before it is used: the header, the table checksum, and
each section's bounds, alignment, type and order. Section payload checksums are checked only by
verify(), so the default load touches nothing but the header and the table.
"""

from __future__ import annotations

import mmap
import os
import zlib

from .. import mtok
from ..errors import FormatError


class MtokFile:
    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < mtok.HEADER.size:
                    raise FormatError(self.path, f"file is {size} bytes, shorter than the {mtok.HEADER.size}-byte header",
                                      section="header", offset=size)
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise FormatError(self.path, f"cannot open: {e.strerror or e}") from None
        self.size = size
        self._mv = memoryview(self._map)
        self.sections: dict[int, tuple[int, int, int, int]] = {}  # id -> (dtype, offset, length, crc)
        self._parse_header()

    def _parse_header(self):
        magic, version, _flags, n, file_size, table_crc, _ = mtok.HEADER.unpack_from(self._map, 0)
        if magic != mtok.MAGIC:
            raise FormatError(self.path, f"not a .mtok file (magic {magic!r}, expected {mtok.MAGIC!r})",
                              section="header", offset=0)
        if version != mtok.FORMAT_VERSION:
            raise FormatError(self.path, f"format version {version} is not supported by this tokmap "
                              f"(reads version {mtok.FORMAT_VERSION}); re-export the tokenizer or upgrade tokmap",
                              section="header", offset=8)
        if file_size != self.size:
            raise FormatError(self.path, f"header says {file_size} bytes but the file has {self.size} "
                              f"(truncated or padded copy)", section="header", offset=16)
        self.version = version
        table_off = mtok.HEADER.size
        table_end = table_off + n * mtok.ENTRY.size
        if n == 0 or table_end > self.size:
            raise FormatError(self.path, f"section table of {n} entries does not fit in the file",
                              section="table", offset=table_off)
        table = self._mv[table_off:table_end]
        if zlib.crc32(table) != table_crc:
            raise FormatError(self.path, "section table checksum mismatch (corrupted header)",
                              section="table", offset=table_off)
        prev_end = mtok.align_up(table_end)
        for i in range(n):
            at = table_off + i * mtok.ENTRY.size
            sid, dtype, off, length, crc, _ = mtok.ENTRY.unpack_from(self._map, at)
            name = mtok.section_name(sid)
            if sid in self.sections:
                raise FormatError(self.path, f"duplicate section id {sid}", section=name, offset=at)
            if dtype not in mtok.DTYPES:
                raise FormatError(self.path, f"unknown element type {dtype}", section=name, offset=at + 4)
            if off % mtok.ALIGN:
                raise FormatError(self.path, f"section offset {off} is not {mtok.ALIGN}-byte aligned",
                                  section=name, offset=at + 8)
            if off < prev_end:
                raise FormatError(self.path, f"section starts at {off}, overlapping what ends at {prev_end}",
                                  section=name, offset=at + 8)
            if off + length > self.size:
                raise FormatError(self.path, f"section [{off}, {off + length}) runs past the end of the "
                                  f"{self.size}-byte file", section=name, offset=at + 16)
            if length % mtok.DTYPES[dtype][1]:
                raise FormatError(self.path, f"length {length} is not a multiple of the element size",
                                  section=name, offset=at + 16)
            self.sections[sid] = (dtype, off, length, crc)
            prev_end = off + length
        for sid, dtype in mtok.REQUIRED.items():
            if sid not in self.sections:
                raise FormatError(self.path, "required section is missing", section=mtok.section_name(sid))
            if self.sections[sid][0] != dtype:
                raise FormatError(self.path, f"element type {self.sections[sid][0]}, expected {dtype}",
                                  section=mtok.section_name(sid))

    def has(self, sid: int) -> bool:
        return sid in self.sections

    def view(self, sid: int, dtype: int | None = None) -> memoryview:
        """A memoryview of the section cast to its element type (no copy)."""
        if sid not in self.sections:
            raise FormatError(self.path, "section is missing", section=mtok.section_name(sid))
        dt, off, length, _ = self.sections[sid]
        if dtype is not None and dt != dtype:
            raise FormatError(self.path, f"element type {dt}, expected {dtype}", section=mtok.section_name(sid),
                              offset=off)
        mv = self._mv[off : off + length]
        fmt = mtok.DTYPES[dt][0]
        return mv if fmt == "B" else mv.cast(fmt)

    def array(self, sid: int):
        """The section as a read-only numpy array over the map (numpy imported only here)."""
        import numpy as np

        dt, off, length, _ = self.sections[sid]
        npdt = np.dtype(mtok.DTYPES[dt][2])
        return np.frombuffer(self._map, dtype=npdt, count=length // npdt.itemsize, offset=off)

    def verify(self) -> None:
        """Check every section's checksum; raise FormatError naming the first bad one."""
        for sid in sorted(self.sections):
            self.verify_section(sid)

    def verify_section(self, sid: int) -> None:
        """Check one section's checksum (for data whose damage no later check would notice)."""
        _dt, off, length, crc = self.sections[sid]
        if zlib.crc32(self._mv[off : off + length]) != crc:
            raise FormatError(self.path, "checksum mismatch (file corrupted)", section=mtok.section_name(sid),
                              offset=off)

    def describe(self) -> list[dict]:
        return [
            {"id": sid, "name": mtok.section_name(sid), "dtype": mtok.DTYPES[dt][2], "offset": off,
             "length": length, "crc32": f"{crc:08x}"}
            for sid, (dt, off, length, crc) in sorted(self.sections.items(), key=lambda kv: kv[1][1])
        ]
