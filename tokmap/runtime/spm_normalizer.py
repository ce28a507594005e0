"""SentencePiece's normalizer, run over the charsmap mapped from the .mtok file (no copy).

At each position: the longest user-defined symbol, left as is; else the longest key of the
precompiled charsmap (a Darts-clone double-array trie walked in place over a memoryview), replaced
by its NUL-terminated value; else one UTF-8 character (an invalid byte becomes U+FFFD and consumes
one byte). Around that: remove_extra_whitespaces drops leading spaces, collapses runs and trims the
end; the dummy prefix adds one space at the start (the end with treat_whitespace_as_suffix); and
escape_whitespaces turns ' ' into U+2581. This is SentencePiece's longest match, not HF's
grapheme-cluster Precompiled rule (CONFORMANCE §3, §11).
"""

from __future__ import annotations

import re

from .. import mtok

SPACE = "\u2581".encode("utf-8")
MAX_TRIE_RESULTS = 32  # SentencePiece keeps the first 32 prefix matches and takes the longest of those
_FFFD = "\ufffd".encode("utf-8")


def char_len(data, i: int) -> tuple[bool, int]:
    """(valid, length) of the UTF-8 character at data[i], by SentencePiece's own decoder: strict
    (no overlongs, surrogates or code points past U+10FFFF); an invalid sequence is 1 byte long."""
    b0 = data[i]
    if b0 < 0x80:
        return True, 1
    n = len(data) - i
    if b0 & 0xE0 == 0xC0:
        need, cp, lo = 2, b0 & 0x1F, 0x80
    elif b0 & 0xF0 == 0xE0:
        need, cp, lo = 3, b0 & 0x0F, 0x800
    elif b0 & 0xF8 == 0xF0:
        need, cp, lo = 4, b0 & 0x07, 0x10000
    else:
        return False, 1
    if n < need:
        return False, 1
    for k in range(1, need):
        c = data[i + k]
        if c & 0xC0 != 0x80:
            return False, 1
        cp = (cp << 6) | (c & 0x3F)
    if cp < lo or 0xD800 <= cp < 0xE000 or cp > 0x10FFFF:
        return False, 1
    return True, need


class CharsMap:
    """The precompiled charsmap: u32 trie size, the double array (u32 units), the value strings."""

    def __init__(self, blob: memoryview):
        if len(blob) < 4:
            raise ValueError("charsmap shorter than its header")
        size = int.from_bytes(blob[:4], "little")
        if size % 4 or size == 0 or 4 + size > len(blob):
            raise ValueError(f"charsmap trie size {size} does not fit the {len(blob)}-byte section")
        self.units = blob[4 : 4 + size].cast("I")
        self.pool = blob[4 + size :]
        self._values: dict[int, bytes] = {}
        self._starts: dict[int, bool] = {}

    def value(self, v: int) -> bytes:
        s = self._values.get(v)
        if s is None:
            pool = self.pool
            if not 0 <= v < len(pool):
                raise ValueError(f"charsmap value offset {v} outside the string pool")
            end = v
            while end < len(pool) and pool[end] != 0:
                end += 1
            s = self._values[v] = bytes(pool[v:end])
        return s

    def longest(self, data, pos: int) -> tuple[int, int]:
        """(length, value offset) of the longest of the first 32 keys that prefix data[pos:]; (0, 0)."""
        units = self.units
        n = len(units)
        u = units[0]
        node = (u >> 10) << ((u & 0x200) >> 6)
        best_len = best_val = found = 0
        for i in range(pos, len(data)):
            c = data[i]
            node ^= c
            if node >= n:
                break
            u = units[node]
            if u & 0x800000FF != c:
                break
            node ^= (u >> 10) << ((u & 0x200) >> 6)
            if u & 0x100:
                if node >= n:
                    break
                best_len, best_val = i + 1 - pos, units[node] & 0x7FFFFFFF
                found += 1
                if found == MAX_TRIE_RESULTS:
                    break
        return best_len, best_val

    def starts_with(self, b: int) -> bool:
        """Whether some key begins with byte b (memoised; lets plain ASCII runs skip the trie)."""
        hit = self._starts.get(b)
        if hit is None:
            units = self.units
            u = units[0]
            node = ((u >> 10) << ((u & 0x200) >> 6)) ^ b
            hit = self._starts[b] = node < len(units) and units[node] & 0x800000FF == b
        return hit


class SpmNormalizer:
    def __init__(self, f, step: dict):
        self.add_dummy_prefix = bool(step["add_dummy_prefix"])
        self.remove_extra = bool(step["remove_extra_whitespaces"])
        self.escape = bool(step["escape_whitespaces"])
        self.suffix = bool(step["treat_whitespace_as_suffix"])
        self.charsmap = CharsMap(f.view(mtok.SECTION_SPM_CHARSMAP, mtok.U8)) if step.get("charsmap") else None
        # User-defined symbols are few: a set of their bytes, and their lengths longest first.
        types = f.view(mtok.SECTION_SPM_TYPES, mtok.U8)
        tb = f.view(mtok.SECTION_TOKEN_BYTES, mtok.U8)
        off = f.view(mtok.SECTION_TOKEN_OFFSETS, mtok.U32)
        self.user = {bytes(tb[off[i] : off[i + 1]]) for i in range(len(types)) if types[i] == 4}
        self.user_lens = sorted({len(u) for u in self.user}, reverse=True)
        user_first = {u[0] for u in self.user}
        # Bytes copied through untouched in runs: ASCII other than ' ' that starts no key or symbol.
        plain = [b for b in range(0x80) if b != 0x20 and b not in user_first
                 and not (self.charsmap is not None and self.charsmap.starts_with(b))]
        self.plain_run = re.compile(b"[" + b"".join(re.escape(bytes([b])) for b in plain) + b"]+") if plain else None

    def prefix(self, data, pos: int) -> tuple[bytes, int]:
        """SentencePiece's NormalizePrefix: (normalized bytes, input bytes consumed)."""
        for ln in self.user_lens:
            if data[pos : pos + ln] in self.user:
                return data[pos : pos + ln], ln
        if self.charsmap is not None:
            ln, v = self.charsmap.longest(data, pos)
            if ln:
                return self.charsmap.value(v), ln
        ok, ln = char_len(data, pos)
        return (data[pos : pos + ln], ln) if ok else (_FFFD, 1)

    def normalize(self, text: str, want_align: bool = False):
        return self.normalize_bytes(text.encode("utf-8", "surrogatepass")).decode("utf-8"), None

    def normalize_bytes(self, data: bytes) -> bytes:
        n = len(data)
        pos = 0
        if self.remove_extra:
            while pos < n:
                sp, ln = self.prefix(data, pos)
                if sp != b" ":
                    break
                pos += ln
        if pos >= n:
            return b""
        ws = SPACE if self.escape else b" "
        out = bytearray()
        if self.add_dummy_prefix and not self.suffix:
            out += ws
        prev_space = self.remove_extra
        plain = self.plain_run
        while pos < n:
            if plain is not None:
                m = plain.match(data, pos)
                if m is not None:
                    out += m.group()
                    pos = m.end()
                    prev_space = False
                    continue
            sp, ln = self.prefix(data, pos)
            if prev_space:
                sp = sp.lstrip(b" ")
            if sp:
                prev_space = sp.endswith(b" ")
                out += sp.replace(b" ", SPACE) if self.escape else sp
            pos += ln
            if not self.remove_extra:
                prev_space = False
        if self.remove_extra:
            while out.endswith(ws):
                del out[-len(ws):]
        if self.add_dummy_prefix and self.suffix:
            out += ws
        return bytes(out)
