"""Write a .mtok container: sections laid out in id order, aligned, checksummed, atomically.

The same sections always give the same bytes (no timestamps, sorted ids, zeroed padding), so an
export is reproducible and a file's sha256 identifies its content.
"""

from __future__ import annotations

import os
import tempfile
import zlib

from .. import mtok


def build(sections: dict[int, tuple[int, bytes]]) -> bytes:
    """sections: id -> (dtype code, payload bytes). Returns the whole file's bytes."""
    ids = sorted(sections)
    table_end = mtok.HEADER.size + mtok.ENTRY.size * len(ids)
    pos = mtok.align_up(table_end)
    entries, layout = [], []
    for sid in ids:
        dtype, payload = sections[sid]
        size = mtok.DTYPES[dtype][1]
        if len(payload) % size:
            raise ValueError(f"section {mtok.section_name(sid)}: {len(payload)} bytes is not a multiple of {size}")
        entries.append(mtok.ENTRY.pack(sid, dtype, pos, len(payload), zlib.crc32(payload), 0))
        layout.append((pos, payload))
        pos = mtok.align_up(pos + len(payload))
    file_size = pos
    table = b"".join(entries)
    header = mtok.HEADER.pack(mtok.MAGIC, mtok.FORMAT_VERSION, 0, len(ids), file_size, zlib.crc32(table), b"")
    out = bytearray(file_size)
    out[: len(header)] = header
    out[len(header) : len(header) + len(table)] = table
    for off, payload in layout:
        out[off : off + len(payload)] = payload
    return bytes(out)


def write_atomic(path, data: bytes) -> None:
    """Write to a temporary file beside `path`, fsync, then rename: readers never see half a file."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".mtok-", suffix=".tmp", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a tokenizer file is meant to be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
