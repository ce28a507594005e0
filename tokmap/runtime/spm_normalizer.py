"""SentencePiece's normalizer, run over the charsmap mapped from the .mtok file (no copy).

At each position: the longest user-defined symbol, left as is; else the longest key of the
precompiled charsmap (a Darts-clone double-array trie walked in place over a memoryview), replaced
by its NUL-terminated value; else one UTF-8 character (an invalid byte becomes U+FFFD and consumes
one byte). Around that: remove_extra_whitespaces drops leading spaces, collapses runs and trims the
end; the dummy prefix adds one space at the start (the end with treat_whitespace_as_suffix); and
escape_whitespaces turns ' ' into U+2581. This is SentencePiece's longest match, not HF's
grapheme-cluster Precompiled rule (CONFORMANCE §3, §11).

Most text never needs that loop: the characters the trie and the user-defined symbols provably
leave alone (Inert) are found once, so a text made of them only has its spaces handled, and a text
with a few others has each of those replaced as it would be anywhere, or, where that depends on
what stands there (a user-defined symbol, a key into the next character), as prefix() finds it
at that position, all over str.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from .. import mtok

SPACE = "\u2581".encode("utf-8")
_SPACES = re.compile(" {2,}")
# _by_pieces leaves a text to the byte loop once _alone has analysed more than ALONE_MIN + one in
# ALONE_SHARE of its chars: utf8seq.txt holds a new char every 23, each a trie analysis (next_chars).
ALONE_MIN, ALONE_SHARE = 1024, 256
# In a text of LEARN_TEXT chars or more, once LEARN_AFTER single characters came out unchanged,
# the text's characters that always do, when there are LEARN_MIN new ones, join the inert runs
# (_learn: ~10-20 ms, mostly compiling the regexes again) and the text starts over.
LEARN_TEXT = 1 << 16
LEARN_AFTER = 512
LEARN_MIN = 8
LEARN_CHARS = 8192  # ... of those the text holds (if more: those met, learned at its end)
LEARN_MAX = 1 << 14  # characters learned so, after which no more are
MAX_TRIE_RESULTS = 32  # SentencePiece keeps the first 32 prefix matches and takes the longest of those
_FFFD = "\ufffd".encode("utf-8")
_USER_TYPE = re.compile(b"\x04")  # SentencePiece's USER_DEFINED piece type
# Whitespace other than " " that a charsmap may make a plain space (_compile_pieces checks each).
SPACE_LIKE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
              "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


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

    def longest(self, data, pos: int) -> tuple[int, int, bool]:
        """(length, value offset) of the longest of the first 32 keys that prefix data[pos:], (0, 0)
        when none; and whether the walk was still on the trie at the end of data (so that more
        data could have made a longer key)."""
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
        else:
            return best_len, best_val, True
        return best_len, best_val, False

    def walk(self, key: bytes) -> tuple[bool, int | None]:
        """(whether some key is a prefix of `key`, the trie node after all of `key` or None when
        no key continues that far): the two facts the inert-character analysis needs."""
        units = self.units
        n = len(units)
        u = units[0]
        node = (u >> 10) << ((u & 0x200) >> 6)
        hit = False
        for c in key:
            node ^= c
            if node >= n:
                return hit, None
            u = units[node]
            if u & 0x800000FF != c:
                return hit, None
            node ^= (u >> 10) << ((u & 0x200) >> 6)
            if u & 0x100:
                hit = True
        return hit, node

    def step(self, node: int, c: int):
        """(the node after byte c from `node`, whether a key ends there), or None off the trie."""
        units = self.units
        node ^= c
        if node >= len(units):
            return None
        u = units[node]
        if u & 0x800000FF != c:
            return None
        return node ^ ((u >> 10) << ((u & 0x200) >> 6)), bool(u & 0x100)

    def next_chars(self, node: int, limit: int = 512):
        """The characters whose UTF-8 bytes some key goes on with from `node` (a node walk()
        returned): a frozenset, or None when a key ends inside such a character, a child byte
        starts no valid character, or there are more than `limit` of them."""
        out = set()
        todo = [(node, b"")]
        while todo:
            at, head = todo.pop()
            for c in self.children(at):
                key = head + bytes([c])
                got = self.step(at, c)
                if got is None:
                    continue
                nxt, key_end = got
                need = 1 if key[0] < 0x80 else 2 if 0xC2 <= key[0] < 0xE0 else 3 if 0xE0 <= key[0] < 0xF0 \
                    else 4 if 0xF0 <= key[0] < 0xF5 else 0
                if not need or (len(key) > 1 and c & 0xC0 != 0x80):
                    return None
                if len(key) < need:
                    if key_end:
                        return None
                    todo.append((nxt, key))
                    continue
                try:
                    out.add(key.decode("utf-8"))
                except UnicodeDecodeError:  # (an overlong or surrogate form: no text holds it)
                    continue
                if len(out) > limit:
                    return None
        return frozenset(out)

    def children(self, node: int) -> list[int]:
        """The bytes that continue some key from `node` (a node walk() returned), in order.

        Darts places a node's child for byte c at node ^ c, so they all lie in the 256-unit block
        holding node, and the one for c is a child when its label byte equals c (and it is no
        leaf). The label bytes of the block, XORed with the labels expected at each slot, are
        zero exactly at the children: one big-int XOR and a few finds instead of 256 unit reads
        (this runs on the first encode)."""
        units = self.units
        base, low = node & ~0xFF, node & 0xFF
        if base + 256 > len(units):
            return sorted(c for c in range(256) if (node ^ c) < len(units) and units[node ^ c] & 0x800000FF == c)
        labels = units[base : base + 256].tobytes()[0::4]  # units are little-endian u32
        diff = (int.from_bytes(labels, "little") ^ _IDENT ^ (low * _REP)).to_bytes(256, "little")
        out = []
        k = diff.find(0)
        while k >= 0:
            if not units[base + k] & 0x80000000:
                out.append(k ^ low)
            k = diff.find(0, k + 1)
        return sorted(out)


_IDENT = int.from_bytes(bytes(range(256)), "little")  # byte k = k
_REP = int.from_bytes(b"\x01" * 256, "little")  # times b: byte k = b


class Inert:
    """Which characters the charsmap and the user-defined symbols provably leave alone.

    A character is inert at a position when NormalizePrefix there returns it unchanged and consumes
    exactly it: no user-defined symbol starts with it and the trie finds no key that is a prefix
    of the text from there. The analysis is kept cheap (it runs on the first encode), so it only
    proves what a few trie reads show, and anything it cannot prove goes to the byte loop:
    - ASCII characters one by one. One whose byte leaves the trie at once is inert whatever
      follows; one that is a proper prefix of some key (but no key itself) is inert unless the
      next byte continues such a key (`cond`: byte -> those continuation bytes).
    - Multi-byte characters by lead byte: a lead byte the trie never enters makes all its
      characters inert (`leads`); otherwise, when the lead byte alone is no key, so are the
      characters whose second byte the trie does not enter from there (`seconds`).
    - Surrogates (U+FFFD per byte in the byte loop) are never inert.
    Without a charsmap every character is inert except those starting a user-defined symbol.
    """

    def __init__(self, charsmap: "CharsMap | None", user: set[bytes]):
        user_first = {u[0] for u in user if u}
        self.ascii: set[int] = set()
        self.cond: dict[int, tuple[int, ...]] = {}
        self.leads: set[int] = set()
        self.seconds: dict[int, set[int]] = {}
        root = charsmap.children(charsmap.walk(b"")[1]) if charsmap is not None else []
        for b in range(0x80):
            if b in user_first:
                continue
            if b not in root:
                self.ascii.add(b)
                continue
            hit, node = charsmap.walk(bytes([b]))
            if not hit:
                kids = tuple(charsmap.children(node))
                if kids:
                    self.cond[b] = kids
                else:
                    self.ascii.add(b)
        for lead in range(0xC2, 0xF5):
            if lead in user_first:
                continue
            if lead not in root:
                taken = set()
            else:
                hit, node = charsmap.walk(bytes([lead]))
                if hit:
                    continue
                taken = set(charsmap.children(node))
            if lead == 0xED:  # its second bytes A0-BF make surrogates
                self.seconds[lead] = set(range(0x80, 0xA0)) - taken
            elif taken:
                self.seconds[lead] = set(range(0x80, 0xC0)) - taken
            else:
                self.leads.add(lead)

    def free_ranges(self) -> list[tuple[int, int]]:
        """The code points inert whatever follows, as sorted disjoint (first, last) ranges."""
        ranges = [(b, b) for b in self.ascii]
        ranges += [_lead_range(lead) for lead in self.leads]
        for lead, seconds in self.seconds.items():
            size = 1 if lead < 0xE0 else 0x40 if lead < 0xF0 else 0x1000
            for s2 in seconds:
                lo = _block_start(lead, s2)
                if lo is not None:
                    ranges.append((lo, min(lo + size - 1, 0x10FFFF)))
        return _merge(ranges)

    def str_parts(self, exclude: str = "", free: list | None = None, extra=()):
        """One inert character, as data for str regexes: (the ranges of those inert whatever
        follows, with the code points in extra, without the characters in exclude; [(code points,
        the ranges that spoil them)] for those inert unless a character of some ranges follows:
        ASCII characters spoiled by the same continuation bytes, in one group)."""
        ranges = _merge((self.free_ranges() if free is None else list(free)) + [(c, c) for c in extra])
        ranges = _minus(ranges, [ord(c) for c in exclude])
        groups: dict[tuple[int, ...], list[int]] = {}
        for b, kids in self.cond.items():
            if chr(b) not in exclude:
                groups.setdefault(kids, []).append(b)
        out = []
        for kids, chars in sorted(groups.items(), key=lambda g: -len(g[1])):
            out.append((sorted(chars), _merge([r for r in map(_lead_range, kids) if r[0] is not None])))
        return ranges, out

    def bytes_pattern(self, exclude: bytes = b"") -> bytes:
        """One inert character, as a bytes regex over valid UTF-8 (surrogates excluded), without
        the ASCII bytes in `exclude`."""
        alts = []
        ascii_ = sorted(self.ascii - set(exclude))
        if ascii_:
            alts.append(_bytes_class(ascii_))
        groups: dict[tuple[int, ...], list[int]] = {}
        for b, kids in self.cond.items():
            if b not in exclude:
                groups.setdefault(kids, []).append(b)
        for kids, chars in sorted(groups.items()):
            alts.append(_bytes_class(chars) + b"(?!" + _bytes_class(kids) + b")")
        for k, (lo, hi) in enumerate(((0xC2, 0xDF), (0xE0, 0xEF), (0xF0, 0xF4))):
            leads = [x for x in sorted(self.leads) if lo <= x <= hi]
            if leads:
                alts.append(_bytes_class(leads) + b"[\x80-\xbf]" * (k + 1))
            for lead in range(lo, hi + 1):
                seconds = sorted(self.seconds.get(lead, ()))
                if seconds:
                    alts.append(re.escape(bytes([lead])) + _bytes_class(seconds) + b"[\x80-\xbf]" * k)
        return b"(?:" + b"|".join(alts) + b")" if alts else b"(?!)"


def _lead_range(b: int):
    """The code points whose UTF-8 form starts with byte b: (first, last), or (None, None)."""
    if b < 0x80:
        return b, b
    if 0xC2 <= b < 0xE0:
        return (b & 0x1F) << 6, ((b & 0x1F) << 6) | 0x3F
    if 0xE0 <= b < 0xF0:
        return max((b & 0x0F) << 12, 0x800), ((b & 0x0F) << 12) | 0xFFF
    if 0xF0 <= b < 0xF5:
        return max((b & 0x07) << 18, 0x10000), min(((b & 0x07) << 18) | 0x3FFFF, 0x10FFFF)
    return None, None


def _block_start(lead: int, s2: int):
    """First code point of the characters starting with bytes lead, s2 (None if none are valid)."""
    if lead < 0xE0:
        cp = ((lead & 0x1F) << 6) | (s2 & 0x3F)
        return cp if cp >= 0x80 else None
    if lead < 0xF0:
        cp = ((lead & 0x0F) << 12) | ((s2 & 0x3F) << 6)
        return cp if cp >= 0x800 and not 0xD800 <= cp < 0xE000 else None
    cp = ((lead & 0x07) << 18) | ((s2 & 0x3F) << 12)
    return cp if 0x10000 <= cp <= 0x10FFFF else None


def _merge(ranges):
    out: list[list[int]] = []
    for a, z in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], z)
        else:
            out.append([a, z])
    return [(a, z) for a, z in out]


def _minus(ranges, cps):
    out = list(ranges)
    for c in cps:
        nxt = []
        for a, z in out:
            if a <= c <= z:
                if a < c:
                    nxt.append((a, c - 1))
                if c < z:
                    nxt.append((c + 1, z))
            else:
                nxt.append((a, z))
        out = nxt
    return out


def _str_set(ranges, lo: int = 0) -> str:
    """A class matching exactly the code points from `lo` on that are in `ranges` (sorted,
    disjoint, none below lo), written negated when that lists fewer BMP code points: sre's
    compiler visits each BMP code point of a class in Python, and the inert sets cover most of
    the BMP (this runs on the first encode). The negated form also excludes 0 .. lo-1."""
    comp = [(0, lo - 1)] if lo else []
    for a, z in ranges:
        if a > lo:
            comp.append((lo, a - 1))
        lo = z + 1
    if lo <= 0x10FFFF:
        comp.append((lo, 0x10FFFF))

    def bmp(rs):
        return sum(min(z, 0xFFFF) - a + 1 for a, z in rs if a <= 0xFFFF)

    if bmp(ranges) <= bmp(comp):
        return "[" + _str_class(ranges) + "]"
    return "[^" + _str_class(comp) + "]" if comp else "[\\s\\S]"


def _str_class(ranges) -> str:
    return "".join(re.escape(chr(a)) if a == z else f"{re.escape(chr(a))}-{re.escape(chr(z))}" for a, z in ranges)


def _bytes_class(values) -> bytes:
    return b"[" + b"".join(re.escape(bytes([v])) for v in values) + b"]"


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
        # (their ids found by one bytes scan of the type column: a Python test of each of Mistral's
        # 32K types cost ~1 ms of every first encode)
        user_ids = [m.start() for m in _USER_TYPE.finditer(bytes(types))]
        self.user = {bytes(tb[off[i] : off[i + 1]]) for i in user_ids}
        self.user_lens = sorted({len(u) for u in self.user}, reverse=True)
        self._full = None  # the inert-text regexes, built on first use (Inert walks the trie)
        self._piece_texts = None  # (general, plain) run patterns' texts, once _build_mixed ran
        self._learned = 0  # characters _learn added to the inert ones
        self.plain_run = None
        self.ws = "\u2581" if self.escape else " "

    def _build(self):
        """The whole-text test: `_full` matches a text of inert characters and of characters
        inert unless a continuation byte follows (Inert.cond), and `_spoil` finds any character
        whose first byte is such a continuation byte; a text `_full` matches and `_spoil` finds
        nothing in needs no charsmap or symbol work. (Two plain scans: a per-character lookahead
        made the one regex several times slower.) With remove_extra_whitespaces a literal U+2581
        is kept out, since the byte loop trims it from the end like an escaped space. Built on
        the first normalize; the regexes for other text wait for the first such text
        (_build_mixed), so that an encode-once process compiles only these."""
        inert = self._inert = Inert(self.charsmap, self.user)
        self._free = inert.free_ranges()
        chars = _merge(self._free + [(b, b) for b in inert.cond])
        self._full = re.compile(_str_set(_minus(chars, [0x2581] if self.remove_extra else [])) + "*")
        spoil = _merge([r for kids in inert.cond.values() for r in map(_lead_range, kids) if r[0] is not None])
        self._spoil = re.compile(_str_set(spoil)) if spoil else None
        self._spoil_ascii = any(a < 0x80 for a, _z in spoil)
        return self._full

    def _build_mixed(self):
        """The run patterns for _by_pieces (a run of inert characters other than ' ', or any one
        character: _compile_pieces) and `plain_run` for the byte loop (a run of inert bytes other
        than ' ')."""
        if self._full is None:
            self._build()
        self.plain_run = re.compile(self._inert.bytes_pattern(b" ") + b"+")
        self._single: dict[str, str | tuple | None] = {}
        self._misses = 0  # _alone's misses in the current _by_pieces call
        self._user_first = {u[0] for u in self.user if u}
        self._plain_chars: set[int] = set()  # learned (_learn): BMP chars left unchanged
        self._ctx_chars: set[int] = set()  # ... and those left unchanged unless one of these follows
        self._ctx_next: set[str] = set()
        self._rejected: set[str] = set()  # chars _learn found it cannot add
        self._compile_pieces()

    def _compile_pieces(self) -> None:
        """The run patterns' texts: a run of inert characters (when a space stays a space, with the
        spaces before and between them, and a run of spaces is one piece: the whitespace steps
        treat them alike wherever they stand, _by_pieces says how), or any one character. Inert:
        Inert's and those _learn added, plain or unless one of their followers comes next."""
        free, groups = self._inert.str_parts(" ", self._free, self._plain_chars)
        if self._ctx_chars:  # (one lookahead for all: any of their followers ends the run)
            groups = groups + [(sorted(self._ctx_chars), _merge([(ord(c), ord(c)) for c in self._ctx_next]))]
        # A run: the free chars by one class (sre's tight loop over one charset), and each group's
        # chars where no spoiling char follows, never an alternation tried at each char (Mistral's
        # ASCII and non-ASCII classes as two alternatives: ~160 against ~15 ms a million chars).
        # Possessive throughout: nothing after a run needs part of it back, and a long run
        # (spaces inside) would otherwise stack a backtracking state per word.
        alts = ["[" + _str_class([(c, c) for c in chars]) + "]" + ("(?!" + _str_set(spoil) + ")" if spoil else "")
                for chars, spoil in groups]
        cls = _str_set(free) if free else None
        if cls is not None and alts:
            run = "(?:" + cls + "++|" + "|".join(alts) + ")++"
        elif cls is not None:
            run = cls + "++"
        else:
            run = "(?:" + "|".join(alts) + ")++" if alts else "(?!)"
        # ... and for a text where no group's char has a spoiling one after it (_spoiled finds
        # none: English under nmt_nfkc, whose "e" + U+0301 keys make most letters such chars), one
        # class of them all.
        spoilers = ["[" + _str_class([(c, c) for c in chars]) + "](?=" + _str_set(spoil) + ")"
                    for chars, spoil in groups if spoil]
        self._spoiled = re.compile("|".join(spoilers)) if spoilers else None
        plain = _merge(free + [(c, c) for chars, _spoil in groups for c in chars])
        plain_run = _str_set(plain) + "++" if plain else "(?!)"
        self._space_like = None
        if self._alone(" ") == " ":
            # Characters the charsmap makes a plain space wherever they stand (nmt_nfkc: "\n", "\t",
            # U+3000) go where spaces go, and become spaces in the parts: the whitespace steps see
            # only what each character becomes, so they cannot tell them apart (code.txt's 30K
            # newlines under botchan_en_bpe_1000 had been single-character pieces, a Python step each).
            like = "".join(c for c in SPACE_LIKE if self._alone(c) == " ")
            if like:  # (re.sub: a charset scan in C; str.translate looks each char up in a dict)
                self._space_like = re.compile("[" + _str_class(_merge([(ord(c), ord(c)) for c in like])) + "]")
            sp = "[" + _str_class(_merge([(ord(c), ord(c)) for c in " " + like])) + "]" if like else " "

            def pattern(run):  # (spaces that no inert char follows are one piece, matched once)
                return "(" + sp + "*+" + run + "(?:" + sp + "++" + run + ")*+)|" + sp + "+|."
        else:
            def pattern(run):
                return "(" + run + ")|."
        general = pattern(run)
        self._piece_texts = (general, pattern(plain_run) if self._spoiled is not None else general)
        self._piece_rx = {}  # pattern text -> compiled, at its first use (_run_pattern)

    def _run_pattern(self, plain: bool):
        """The compiled general run pattern, or the plain one (for a text _spoiled finds nothing
        in), compiled when first used: each costs ~0.5-1 ms to compile, and English under
        nmt_nfkc never needs the general one."""
        text = self._piece_texts[plain]
        rx = self._piece_rx.get(text)
        if rx is None:
            rx = self._piece_rx[text] = re.compile(text, re.S)
        return rx

    def _learn(self, chars: set) -> bool:
        """Add the BMP characters (chars: a text's, or those met as single pieces in one that holds
        more than LEARN_CHARS: utf8seq.txt holds 235K) that _alone leaves unchanged wherever they
        stand (a plain str equal to them: no key starts or goes on from them, no user-defined
        symbol starts with them), or unless one of some characters follows, to the inert ones of
        the runs _by_pieces matches, when there are LEARN_MIN new ones or more; True when its patterns
        were rebuilt. Inert's analysis proves characters by lead and second byte, which leaves out
        whole alphabets that share their blocks with keys (Cyrillic, Greek, kana): multi.txt
        under nmt_nfkc took 1.65M single-character pieces, a Python step each."""
        plain, ctx, nexts = set(), set(), set()
        starts = [a for a, _z in self._free]
        known = self._ctx_chars | self._plain_chars
        rejected = self._rejected
        todo = []
        for c in chars - {" ", "\u2581"}:
            cp = ord(c)
            k = bisect_right(starts, cp) - 1
            if not ((k >= 0 and cp <= self._free[k][1]) or cp in known or c in rejected):
                todo.append(c)
        for c in todo:
            # (an astral char in a class makes sre test its ranges one by one)
            got = self._alone(c) if ord(c) <= 0xFFFF else None  # (_alone: _single is bounded)
            if got == c:
                plain.add(ord(c))
            elif type(got) is tuple and got[0] == c:
                ctx.add(ord(c))
                nexts |= got[1]
            elif len(rejected) < LEARN_MAX:
                rejected.add(c)
        if len(plain) + len(ctx) < LEARN_MIN:
            return False
        self._learned += len(plain) + len(ctx)
        self._plain_chars |= plain
        self._ctx_chars |= ctx
        self._ctx_next |= nexts
        self._compile_pieces()
        return True

    def _alone(self, c: str):
        """What NormalizePrefix makes of character c wherever it stands (a str); (that str, the
        characters after which it does not hold) when some charsmap key goes on from c into the
        next character (a kana and a combining voiced mark: NFKC composes them), which costs the
        whole text the byte loop only where such a character follows; or None when it cannot be
        told: a user-defined symbol may start with c, a key goes on into a character it cannot
        enumerate, or the match ends inside c (memoised, bounded)."""
        got = self._single.get(c, 0)
        if got != 0:
            return got
        self._misses += 1
        data = c.encode("utf-8", "surrogatepass")
        res = None
        if data[0] not in self._user_first and not 0xD800 <= ord(c) < 0xE000:
            nexts = frozenset()
            if self.charsmap is not None:
                _hit, node = self.charsmap.walk(data)
                if node is not None and self.charsmap.children(node):
                    nexts = self.charsmap.next_chars(node)
            if nexts is not None:
                sp, ln = self.prefix(data, 0)
                if ln == len(data):
                    try:
                        res = sp.decode("utf-8")
                    except UnicodeDecodeError:
                        res = None
                    if res is not None and nexts:
                        res = (res, nexts)
        if len(self._single) >= 1 << 16:
            self._single.clear()
        self._single[c] = res
        return res

    def _by_pieces(self, text: str, learn: bool = True) -> str | None:
        """normalize_bytes over str: inert runs copied, every other character replaced by what
        _alone says, with the same whitespace steps; None (use the byte loop) when some character
        is not context-free."""
        alone = self._alone
        parts = []
        if self._piece_texts is None:
            self._build_mixed()
        # (plain: no char here that a following one would change)
        pieces = self._run_pattern(self._spoiled is not None and self._spoiled.search(text) is None)
        skip = 0  # where the text goes on after a charsmap key that spanned several characters
        same: list[str] | None = [] if learn and self._learned < LEARN_MAX and len(text) >= LEARN_TEXT else None
        late = False
        self._misses, budget = 0, ALONE_MIN + len(text) // ALONE_SHARE
        spaces = self._space_like  # (the space-like chars a run or a run of spaces may hold: a regex)
        for m in pieces.finditer(text):
            run = m.group(1)
            if m.start() < skip:
                if m.end() > skip:  # (only a run can reach past it: a tail of inert characters)
                    tail = text[skip:m.end()]  # (may start with one space, as a run)
                    parts.append((True, tail if spaces is None else spaces.sub(" ", tail)))
                continue
            if run is not None:
                parts.append((True, run if spaces is None else spaces.sub(" ", run)))
            elif len(m.group()) > 1:  # spaces (one each, collapsed to one by remove_extra_whitespaces)
                parts.append((False, " " if self.remove_extra else
                              m.group() if spaces is None else spaces.sub(" ", m.group())))
            else:
                sp = alone(m.group())
                if self._misses > budget:  # (a char _alone has not met costs a trie analysis)
                    return None
                if type(sp) is tuple:  # (what c becomes, unless one of these chars follows)
                    if text[m.end():m.end() + 1] in sp[1]:
                        got = self._key_at(text, m.start())
                        if got is None:
                            return None
                        sp, skip = got
                    else:
                        sp = sp[0]
                elif sp is None:  # (a user-defined symbol may start here, or c's key may not end in it)
                    got = self._prefix_at(text, m.start())
                    if got is None:
                        return None
                    sp, skip = got
                if same is not None and sp == m.group() and sp != " ":
                    same.append(sp)
                    if len(same) == LEARN_AFTER and not late:
                        chars = set(text)
                        if len(chars) > LEARN_CHARS:  # (then those met in this text, at its end)
                            late = True
                        elif self._learn(chars):  # (all of the text's chars at once, and again)
                            return self._by_pieces(text, learn=False)
                        else:
                            same = None
                parts.append((False, sp))
        if late:
            self._learn(set(same))
        ws, remove = self.ws, self.remove_extra
        k = 0
        if remove:
            while k < len(parts) and parts[k] == (False, " "):
                k += 1
        if k >= len(parts):
            return ""
        out = [ws] if self.add_dummy_prefix and not self.suffix else []
        prev_space = remove
        for is_run, sp in parts[k:]:
            if is_run:  # (spaces, then inert chars and spaces, not at its end)
                if remove:  # (each space alone would have been dropped after a space)
                    if "  " in sp:
                        sp = _SPACES.sub(" ", sp)
                    if prev_space and sp[0] == " ":
                        sp = sp[1:]
                out.append(sp.replace(" ", ws))
                prev_space = False
                continue
            if prev_space:
                sp = sp.lstrip(" ")
            if sp:
                prev_space = sp.endswith(" ")
                out.append(sp.replace(" ", ws) if self.escape else sp)
            if not remove:
                prev_space = False
        res = "".join(out)
        if remove:
            res = res.rstrip(ws)
        if self.add_dummy_prefix and self.suffix:
            res += ws
        return res

    def _prefix_at(self, text: str, i: int):
        """prefix() at text[i] over str, for a character _alone cannot tell about: (what it
        becomes, where the text goes on), or None when only the byte loop can say (a surrogate,
        a key that ends inside a character). Where a user-defined symbol may start, the longest
        one there is kept as it is; else the charsmap's longest key (_key_at). Before, such a
        character sent the whole text to the byte loop: Mistral's 20 "[REFERENCE_DOC_n]" symbols
        made any text with a "[" take it (multi.txt's first 1M chars: 1.2 s of a 1.5 s call)."""
        c = text[i]
        if 0xD800 <= ord(c) < 0xE000:
            return None
        try:
            if c.encode("utf-8")[0] in self._user_first:
                data = text[i:i + self.user_lens[0]].encode("utf-8", "surrogatepass")
                for ln in self.user_lens:  # (longest first, as prefix() tries them)
                    if data[:ln] in self.user:
                        sym = data[:ln].decode("utf-8")
                        return sym, i + len(sym)
            if self.charsmap is None:
                return c, i + 1
            return self._key_at(text, i)
        except UnicodeError:  # (a surrogate in the window a key walks)
            return None

    def _key_at(self, text: str, i: int):
        """(what the charsmap's longest key at text[i] becomes, where the text goes on after it),
        for a character _alone says a key may go on from (no user-defined symbol starts with it);
        None when the key ends inside a character or its value is no UTF-8. Walks a window of
        the text that grows until the trie walk ends inside it (NFD text: "e" + U+0301 -> "é")."""
        width = 8
        while True:
            data = text[i:i + width].encode("utf-8")
            ln, v, open_end = self.charsmap.longest(data, 0)
            if not open_end or i + width >= len(text):
                break
            width *= 4
        if not ln:  # no key: the character stays as it is
            return text[i], i + 1
        try:
            return self.charsmap.value(v).decode("utf-8"), i + len(data[:ln].decode("utf-8"))
        except UnicodeDecodeError:
            return None

    def prefix(self, data, pos: int) -> tuple[bytes, int]:
        """SentencePiece's NormalizePrefix: (normalized bytes, input bytes consumed)."""
        for ln in self.user_lens:
            if data[pos : pos + ln] in self.user:
                return data[pos : pos + ln], ln
        if self.charsmap is not None:
            ln, v, _open = self.charsmap.longest(data, pos)
            if ln:
                return self.charsmap.value(v), ln
        ok, ln = char_len(data, pos)
        return (data[pos : pos + ln], ln) if ok else (_FFFD, 1)

    def normalize(self, text: str, want_align: bool = False):
        full = self._full if self._full is not None else self._build()
        if full.fullmatch(text) is not None and (self._spoil is None or (text.isascii() and not self._spoil_ascii)
                                                 or self._spoil.search(text) is None):
            # Every character is inert, so normalize_bytes would copy each one and only handle
            # the spaces: drop leading, trailing and repeated ones (remove_extra_whitespaces),
            # escape them, add the dummy prefix.
            ws = self.ws
            if self.remove_extra:
                body = ws.join(filter(None, text.split(" ")))
            else:
                body = text.replace(" ", ws) if self.escape else text
            if not body:
                return "", None
            if self.add_dummy_prefix:
                body = body + ws if self.suffix else ws + body
            return body, None
        res = self._by_pieces(text)
        if res is None:
            res = self.normalize_bytes(text.encode("utf-8", "surrogatepass")).decode("utf-8")
        return res, None

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
        if self._piece_texts is None:
            self._build_mixed()
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
