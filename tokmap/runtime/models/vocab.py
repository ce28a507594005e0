"""The model vocabulary viewed in place: token bytes by id, and id by bytes (binary search).

Every model reads its vocabulary through this class, straight from the mapped TOKEN_BYTES,
TOKEN_OFFSETS and SORTED_IDS sections, so no per-token Python object is built at load.
"""

from __future__ import annotations

from ... import mtok


class VocabFile:
    """The model vocabulary straight from the file: token bytes by id, and lookup by bytes."""

    def __init__(self, f):
        self.tb = f.view(mtok.SECTION_TOKEN_BYTES, mtok.U8)
        self.off = f.view(mtok.SECTION_TOKEN_OFFSETS, mtok.U32)
        self.sorted_ids = f.view(mtok.SECTION_SORTED_IDS, mtok.U32)

    def token_bytes(self, i: int) -> bytes:
        off = self.off
        return bytes(self.tb[off[i] : off[i + 1]])

    def lookup(self, data: bytes) -> int | None:
        """Id of the model token with exactly these bytes (binary search over sorted ids)."""
        ids, tb, off = self.sorted_ids, self.tb, self.off
        lo, hi = 0, len(ids)
        while lo < hi:
            mid = (lo + hi) >> 1
            i = ids[mid]
            if tb[off[i] : off[i + 1]].tobytes() < data:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(ids):
            i = ids[lo]
            if tb[off[i] : off[i + 1]] == data:
                return i
        return None
