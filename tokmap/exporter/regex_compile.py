"""Export-time compiler: pre-tokenizer regex (Oniguruma / fancy-regex) -> stdlib `re` pattern.

The reference tokenizers split text with Oniguruma (HF `tokenizers`, flavor "onig") or fancy-regex
(tiktoken, flavor "fancy"), both with Unicode 16.0 tables.  At runtime tokmap uses only the
standard library `re`, whose Unicode support is neither complete (no `\\p{..}`) nor pinned.

So we never let `re` see Unicode properties.  Every character class of the pattern (an *atom*) is
resolved here to an exact code point set using the pinned Unicode 16.0 General Category table.
The code points are then partitioned by which atoms contain them: ASCII code points each stand for
themselves, every other code point is replaced by a representative char chr(128 + k) for its
partition class k.  The pattern is re-emitted over that translated alphabet (0..255) with every
atom spelled as an explicit positive class.  Translation preserves string length, so the spans
that `re.finditer(py_pattern, translate(text))` yields are the reference's code point spans.

Only constructs whose semantics we have checked to agree across the reference engine and `re` are
accepted; anything else raises PatternError naming the construct and its position.
"""

from __future__ import annotations

import bisect
import functools
import os
from dataclasses import dataclass

__all__ = ["CompiledPattern", "PatternError", "compile_pattern", "UNICODE_VERSION"]

UNICODE_VERSION = "16.0.0"
_NCP = 0x110000  # number of code points
_MAX_CLASSES = 128  # non-ASCII classes must fit in chr(128)..chr(255)
_DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ucd16_gc.txt")


class PatternError(ValueError):
    """The pattern uses a construct we cannot translate with proven-identical semantics."""


@dataclass(frozen=True)
class CompiledPattern:
    """Result of compile_pattern; the runtime needs nothing else to split like the reference.

    class_index: 0x1100 little-endian uint16, for block b = cp >> 8 the index of its block
    in class_blocks.  class_blocks: 256 bytes per unique block, each byte the translated char
    (ASCII code points map to themselves, others to 128 + class number).

    py_pattern_bmp: the same pattern over the original code points, exact for text with no
    code point above U+FFFF: every atom is spelled as its BMP code point ranges (or as the negated
    ranges of its complement, when those are fewer code points: `re` builds a class's bitmap one
    code point at a time at compile time).  It needs no translation and no re-slicing of the
    pieces; astral code points would make `re` scan a class's ranges one by one, so text holding
    any takes py_pattern.

    py_pattern_full: the same over all code points, exact for any text, each atom spelled as its
    ranges (or negated, as above, by its BMP size). Plain `re` runs it slowly: a BMP code point
    outside a class's bitmap is then compared with every astral range of the class. The exporter
    stores it only as engine code whose classes first send BMP code points away
    (exporter/sre_code.py: `compile_code(..., guard_astral=True)`).
    """

    py_pattern: str
    class_index: bytes
    class_blocks: bytes
    unicode_version: str
    py_pattern_bmp: str = ""
    py_pattern_full: str = ""
    tiles: bool = False  # its matches always cover the text back to back (tiles())
    runs_pattern: str = ""  # py_pattern with its D{1,k} alternative as D++ (_run_branch), or ""
    run_set: str = ""  # ... D as py_pattern spells it
    run_k: int = 0  # ... and k
    space_cut: bytes | None = None  # space_cut_bitmap over the translated alphabet, or None


# --------------------------------------------------------------------------------------------
# Code point sets.  A set is a tuple of sorted breakpoints (a0, b0, a1, b1, ...) meaning the
# union of half-open intervals [a_i, b_i).  This keeps Unicode-property sets (thousands of
# runs) cheap to combine; membership is one bisect.
# --------------------------------------------------------------------------------------------


def _cs_from_ranges(ranges) -> tuple:
    """Normalise an iterable of inclusive (lo, hi) ranges into a breakpoint tuple."""
    out: list[int] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1]:
            out[-1] = max(out[-1], hi + 1)
        else:
            out += [lo, hi + 1]
    return tuple(out)


def _cs_union(*sets) -> tuple:
    ranges = []
    for s in sets:
        ranges += [(s[i], s[i + 1] - 1) for i in range(0, len(s), 2)]
    return _cs_from_ranges(ranges)


def _cs_complement(s) -> tuple:
    pts = list(s)
    # Toggling the presence of 0 and _NCP at the ends flips inside/outside.
    if pts and pts[0] == 0:
        pts.pop(0)
    else:
        pts.insert(0, 0)
    if pts and pts[-1] == _NCP:
        pts.pop()
    else:
        pts.append(_NCP)
    return tuple(pts)


def _cs_contains(s, cp: int) -> bool:
    return bisect.bisect_right(s, cp) % 2 == 1


def _cs_single(cp: int) -> tuple:
    return (cp, cp + 1)


# --------------------------------------------------------------------------------------------
# Unicode 16.0 data
# --------------------------------------------------------------------------------------------

_GC_LONG = {
    # long name (loose-matched) -> list of two-letter categories
    "letter": ["Lu", "Ll", "Lt", "Lm", "Lo"],
    "casedletter": ["Lu", "Ll", "Lt"],
    "uppercaseletter": ["Lu"],
    "lowercaseletter": ["Ll"],
    "titlecaseletter": ["Lt"],
    "modifierletter": ["Lm"],
    "otherletter": ["Lo"],
    "mark": ["Mn", "Mc", "Me"],
    "combiningmark": ["Mn", "Mc", "Me"],
    "nonspacingmark": ["Mn"],
    "spacingmark": ["Mc"],
    "enclosingmark": ["Me"],
    "number": ["Nd", "Nl", "No"],
    "decimalnumber": ["Nd"],
    "letternumber": ["Nl"],
    "othernumber": ["No"],
    "punctuation": ["Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"],
    "connectorpunctuation": ["Pc"],
    "dashpunctuation": ["Pd"],
    "openpunctuation": ["Ps"],
    "closepunctuation": ["Pe"],
    "initialpunctuation": ["Pi"],
    "finalpunctuation": ["Pf"],
    "otherpunctuation": ["Po"],
    "symbol": ["Sm", "Sc", "Sk", "So"],
    "mathsymbol": ["Sm"],
    "currencysymbol": ["Sc"],
    "modifiersymbol": ["Sk"],
    "othersymbol": ["So"],
    "separator": ["Zs", "Zl", "Zp"],
    "spaceseparator": ["Zs"],
    "lineseparator": ["Zl"],
    "paragraphseparator": ["Zp"],
    "other": ["Cc", "Cf", "Cs", "Co", "Cn"],
    "control": ["Cc"],
    "format": ["Cf"],
    "surrogate": ["Cs"],
    "privateuse": ["Co"],
    "unassigned": ["Cn"],
}

# Unicode White_Space (PropList.txt, unchanged since 6.3).  Both engines use it for \s; stdlib
# re's \s differs (it adds \x1c-\x1f), which is one reason we never emit \s.
_WHITE_SPACE = _cs_from_ranges(
    [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
     (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]
)

# Alphabetic = L + Nl + Other_Alphabetic.  Other_Alphabetic is all marks except these So
# ranges (circled / squared / negative-squared Latin letters), stable since Unicode 6.1, so we
# hard-code them instead of shipping PropList.txt.  Marks are in \w anyway.
_OTHER_ALPHABETIC_SO = _cs_from_ranges(
    [(0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189)]
)

# Oniguruma classifies the Latin-1 digits/fractions ¹²³¼½¾ (gc No) as word characters: for code
# points < 256 it uses its own ctype table.  Measured against tokenizers 0.23.2 on every code point.
_ONIG_WORD_LATIN1_EXTRA = _cs_from_ranges([(0xB2, 0xB3), (0xB9, 0xB9), (0xBC, 0xBE)])

_JOIN_CONTROL = _cs_from_ranges([(0x200C, 0x200D)])

# Simple case folding partners of ASCII letters outside ASCII (CaseFolding.txt status C/S):
# U+017F LATIN SMALL LETTER LONG S ~ s, U+212A KELVIN SIGN ~ k.  Both engines apply them (checked).
_ASCII_FOLD_EXTRA = {"s": 0x017F, "k": 0x212A}

# Multi-char full case foldings whose target is pure ASCII (ß->ss, ﬅ/ﬆ->st, ﬀ->ff, ﬁ->fi,
# ﬂ->fl, ﬃ->ffi, ﬄ->ffl).  Oniguruma applies them to string literals under (?i) (e.g. (?i:ss)
# matches "ß"); rather than emulate that, we refuse such literals.
_ONIG_MULTIFOLD_PAIRS = ("ss", "st", "ff", "fi", "fl")


@functools.lru_cache(maxsize=1)
def _gc_table() -> dict:
    """Parse the pinned table into {two-letter GC: breakpoint tuple}."""
    starts: list[int] = []
    cats: list[str] = []
    version = None
    with open(_DATA_FILE, encoding="ascii") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("@unicode"):
                version = line.split()[1]
                continue
            hx, cat = line.split()
            starts.append(int(hx, 16))
            cats.append(cat)
    if version != UNICODE_VERSION:
        raise RuntimeError(f"{_DATA_FILE}: expected Unicode {UNICODE_VERSION}, found {version}")
    ranges: dict[str, list] = {}
    ends = starts[1:] + [_NCP]
    for s, e, c in zip(starts, ends, cats):
        ranges.setdefault(c, []).append((s, e - 1))
    return {c: _cs_from_ranges(r) for c, r in ranges.items()}


def _gc_set(cats) -> tuple:
    table = _gc_table()
    return _cs_union(*(table.get(c, ()) for c in cats))


def _property_set(name: str):
    """General Category property by short or long name (loose matching), or None if unknown."""
    loose = name.replace("_", "").replace("-", "").replace(" ", "").lower()
    table = _gc_table()
    for short in table:
        if loose == short.lower():
            return table[short]
    groups = {"l": "L", "m": "M", "n": "N", "p": "P", "s": "S", "z": "Z", "c": "C", "lc": "LC"}
    if loose in groups:
        g = groups[loose]
        if g == "LC":
            return _gc_set(["Lu", "Ll", "Lt"])
        return _gc_set([c for c in table if c[0] == g])
    if loose in _GC_LONG:
        return _gc_set(_GC_LONG[loose])
    return None


def _word_set(flavor: str) -> tuple:
    base = _cs_union(_gc_set(["Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Mn", "Mc", "Me", "Nd", "Pc"]),
                     _OTHER_ALPHABETIC_SO)
    if flavor == "onig":
        return _cs_union(base, _ONIG_WORD_LATIN1_EXTRA)
    # Rust regex (UTS#18): Alphabetic + Mark + Decimal_Number + Connector_Punctuation + Join_Control
    return _cs_union(base, _JOIN_CONTROL)


# --------------------------------------------------------------------------------------------
# AST.  Nodes are tuples:
#   ("set", cs)                      one code point from set cs
#   ("seq", [nodes])                 concatenation
#   ("alt", [nodes])                 ordered alternation
#   ("look", op, node)               op in "=", "!", "<=", "<!"
#   ("atomic", node)
#   ("repeat", node, lo, hi, mode)   hi None = unbounded; mode "greedy" / "lazy" / "possessive"
#   ("anchor", kind)                 kind in "bol", "eol", "bot", "eot", "eot_nl"
# Capturing groups become plain grouping: only overall match spans matter.
# --------------------------------------------------------------------------------------------

_SIMPLE_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07}


class _Parser:
    def __init__(self, pattern: str, flavor: str):
        self.p = pattern
        self.i = 0
        self.flavor = flavor

    # -- helpers ----------------------------------------------------------------------------
    def error(self, what: str, pos=None):
        pos = self.i if pos is None else pos
        raise PatternError(f"unsupported regex construct: {what} at position {pos} in pattern {self.p!r}")

    def peek(self, k: int = 0):
        j = self.i + k
        return self.p[j] if j < len(self.p) else None

    def startswith(self, s: str) -> bool:
        return self.p.startswith(s, self.i)

    # -- grammar ----------------------------------------------------------------------------
    def parse(self):
        node = self.parse_alt(icase=False)
        if self.i != len(self.p):
            self.error("unbalanced ')'")
        return node

    def parse_alt(self, icase: bool):
        # A leading "(?i)" / "(?-i)" switches case folding for the rest of this group.  Elsewhere
        # it is refused: Oniguruma and Perl-style engines scope it differently across '|'.
        if self.startswith("(?i)"):
            self.i += 4
            icase = True
        elif self.startswith("(?-i)"):
            self.i += 5
            icase = False
        branches = [self.parse_seq(icase)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.parse_seq(icase))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def parse_seq(self, icase: bool):
        items = []
        while True:
            c = self.peek()
            if c is None or c == "|" or c == ")":
                break
            start = self.i
            atom = self.parse_atom(icase)
            atom = self.parse_quantifiers(atom, start)
            items.append(atom)
        if not items:
            return ("seq", [])
        return items[0] if len(items) == 1 else ("seq", items)

    def parse_quantifiers(self, atom, start):
        quantified = False
        while True:
            c = self.peek()
            pos = self.i
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                interval = False
            elif c == "{":
                q = self.parse_interval()
                if q is None:
                    self.error("'{' that is not a {n}, {n,} or {n,m} quantifier (escape it)")
                lo, hi = q
                interval = True
            else:
                return atom
            if quantified:
                self.error("quantifier applied to a quantifier", pos)
            if atom[0] in ("anchor", "look"):
                self.error("quantified anchor or lookaround", pos)
            mode = "greedy"
            nxt = self.peek()
            if interval and self.flavor == "onig":
                # Oniguruma (Ruby syntax): X{n,m}+ is (X{n,m})+, X{n}? is (X{n})?, while
                # X{n,m}? / X{n,}? are lazy.  Measured with tokenizers 0.23.2.
                if nxt == "+":
                    self.i += 1
                    atom = ("repeat", ("repeat", atom, lo, hi, "greedy"), 1, None, "greedy")
                    quantified = True
                    continue
                if nxt == "?" and lo == hi:
                    self.i += 1
                    atom = ("repeat", ("repeat", atom, lo, hi, "greedy"), 0, 1, "greedy")
                    quantified = True
                    continue
            if nxt == "?":
                self.i += 1
                mode = "lazy"
            elif nxt == "+":
                self.i += 1
                mode = "possessive"
            if hi is not None and lo > hi:
                self.error("quantifier {n,m} with n > m", pos)
            atom = ("repeat", atom, lo, hi, mode)
            quantified = True

    def parse_interval(self):
        """Parse {n}, {n,}, {n,m} at self.i; return (lo, hi) or None without moving if not one."""
        j = self.i + 1
        p = self.p

        def digits(k):
            e = k
            while e < len(p) and p[e].isascii() and p[e].isdigit():
                e += 1
            return e

        e = digits(j)
        if e == j:
            return None
        lo = int(p[j:e])
        if e < len(p) and p[e] == "}":
            self.i = e + 1
            return lo, lo
        if e < len(p) and p[e] == ",":
            f = digits(e + 1)
            if f < len(p) and p[f] == "}":
                hi = int(p[e + 1:f]) if f > e + 1 else None
                self.i = f + 1
                return lo, hi
        return None

    def parse_atom(self, icase: bool):
        """Parse one atom.  Literal letters under (?i) become ("set", cs, letter) so the
        Oniguruma multi-char fold check can see them."""
        c = self.peek()
        pos = self.i
        if c == "(":
            return self.parse_group(icase)
        if c == "[":
            cs = self.parse_class(icase)
            return ("set", cs)
        if c == "\\":
            return self.parse_escape(icase, in_class=False)
        if c == ".":
            self.i += 1
            # Both engines: any char except \n (no dotall flag supported).
            return ("set", _cs_complement(_cs_single(0x0A)))
        if c == "^":
            self.i += 1
            return ("anchor", "bol" if self.flavor == "onig" else "bot")
        if c == "$":
            self.i += 1
            return ("anchor", "eol" if self.flavor == "onig" else "eot")
        if c in "*+?":
            self.error(f"quantifier {c!r} with nothing to repeat")
        if c in "{}]":
            self.error(f"unescaped {c!r}")
        self.i += 1
        return self.literal_node(ord(c), icase, pos)

    def literal_node(self, cp: int, icase: bool, pos: int):
        cs = self.literal_set(cp, icase, pos)
        if icase and chr(cp).isascii() and chr(cp).isalpha():
            return ("set", cs, chr(cp).lower(), pos)
        return ("set", cs)

    def literal_set(self, cp: int, icase: bool, pos: int):
        if not icase:
            return _cs_single(cp)
        ch = chr(cp)
        if cp >= 0x80:
            self.error("non-ASCII literal under (?i)", pos)
        if not ch.isalpha():
            return _cs_single(cp)
        low = ch.lower()
        cps = [ord(low), ord(ch.upper())]
        if low in _ASCII_FOLD_EXTRA:
            cps.append(_ASCII_FOLD_EXTRA[low])
        return _cs_from_ranges((c, c) for c in cps)

    def parse_group(self, icase: bool):
        start = self.i
        self.i += 1  # '('
        kind = "group"
        if self.startswith("?"):
            rest = self.p[self.i:]
            for prefix, k in (("?:", "group"), ("?>", "atomic"), ("?=", "="), ("?!", "!"),
                              ("?<=", "<="), ("?<!", "<!"), ("?i:", "icase"), ("?-i:", "noicase")):
                if rest.startswith(prefix):
                    self.i += len(prefix)
                    kind = k
                    break
            else:
                if rest.startswith("?P<") or (rest.startswith("?<") and not rest.startswith("?<=")):
                    # Named capture: just grouping for us.
                    close = self.p.find(">", self.i)
                    name = self.p[self.i + (3 if rest.startswith("?P<") else 2):close] if close > 0 else ""
                    if close < 0 or not name.isidentifier():
                        self.error("malformed named group", start)
                    self.i = close + 1
                elif rest.startswith("?i)") or rest.startswith("?-i)"):
                    self.error("inline flag group '(?i)' not at the start of a group", start)
                else:
                    self.error("group syntax '(" + rest[:3] + "'", start)
        if kind == "icase":
            icase = True
        elif kind == "noicase":
            icase = False
        body = self.parse_alt(icase)
        if self.peek() != ")":
            self.error("missing ')'", start)
        self.i += 1
        if kind in ("group", "icase", "noicase"):
            return body
        if kind == "atomic":
            return ("atomic", body)
        if kind in ("<=", "<!"):
            # Python needs fixed-width lookbehind; different fixed widths per top-level branch
            # are fine (the emitter splits them), anything else is refused here.
            branches = body[1] if body[0] == "alt" else [body]
            if any(_fixed_width(b) is None for b in branches):
                self.error("variable-width lookbehind", start)
        return ("look", kind, body)

    # -- escapes ----------------------------------------------------------------------------
    def parse_hex(self, ndigits: int):
        """After '\\x' (ndigits 2) or '\\u' (4): {H..} or exactly ndigits hex digits."""
        p = self.p
        pos = self.i
        if self.peek() == "{":
            if ndigits == 4 and self.flavor == "onig":
                self.error("\\u{...} (Oniguruma rejects it)", pos - 2)
            close = p.find("}", self.i)
            body = p[self.i + 1:close] if close > 0 else ""
            if not body or len(body) > 6 or any(ch not in "0123456789abcdefABCDEF" for ch in body):
                self.error("malformed \\x{...} / \\u{...} escape", pos)
            self.i = close + 1
        else:
            body = p[self.i:self.i + ndigits]
            if len(body) != ndigits or any(ch not in "0123456789abcdefABCDEF" for ch in body):
                self.error("malformed hex escape", pos)
            self.i += ndigits
        cp = int(body, 16)
        if cp >= _NCP or 0xD800 <= cp < 0xE000:
            self.error("escape of a surrogate or out-of-range code point", pos)
        return cp

    def parse_property(self, neg: bool, pos: int):
        if self.peek() == "{":
            close = self.p.find("}", self.i)
            if close < 0:
                self.error("unterminated \\p{", pos)
            name = self.p[self.i + 1:close]
            self.i = close + 1
            if name.startswith("^"):
                neg, name = not neg, name[1:]
        elif self.flavor == "onig":
            # Oniguruma reads \pL as the literal "pL" (measured); Rust regex as \p{L}.
            self.error("\\p without braces", pos)
        else:
            name = self.peek() or ""
            self.i += 1
        cs = _property_set(name)
        if cs is None:
            self.error(f"unknown or unsupported Unicode property {name!r}", pos)
        return _cs_complement(cs) if neg else cs

    def parse_escape(self, icase: bool, in_class: bool):
        """Parse an escape at self.i (the backslash).  Returns an AST node outside a class,
        a code point set inside one."""
        pos = self.i
        self.i += 1
        c = self.peek()
        if c is None:
            self.error("trailing backslash", pos)
        self.i += 1
        cs = None
        literal_cp = None
        if c in _SIMPLE_ESCAPES:
            literal_cp = _SIMPLE_ESCAPES[c]
        elif c == "x":
            literal_cp = self.parse_hex(2)
        elif c == "u":
            literal_cp = self.parse_hex(4)
        elif c in "sS":
            cs = _WHITE_SPACE
        elif c in "dD":
            cs = _gc_set(["Nd"])
        elif c in "wW":
            if icase:
                self.error("\\w/\\W under (?i)", pos)
            cs = _word_set(self.flavor)
        elif c in "pP":
            if icase:
                self.error("\\p/\\P under (?i)", pos)
            cs = self.parse_property(c == "P", pos)
            return cs if in_class else ("set", cs)
        elif c in "hH" and self.flavor == "onig":
            cs = _cs_from_ranges([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])  # Oniguruma \h = hex digit
        elif not in_class and c == "A":
            return ("anchor", "bot")
        elif not in_class and c == "z":
            return ("anchor", "eot")
        elif not in_class and c == "Z" and self.flavor == "onig":
            return ("anchor", "eot_nl")
        elif c.isascii() and not c.isalnum():
            literal_cp = ord(c)  # escaped punctuation / space is literal in both engines
        else:
            self.error(f"escape '\\{c}'", pos)
        if cs is not None:
            if c.isupper():
                cs = _cs_complement(cs)
            return cs if in_class else ("set", cs)
        if in_class:
            return self.literal_set(literal_cp, icase, pos)
        # Escaped chars are still literals for the (?i) multi-fold check (\x73 is 's').
        return self.literal_node(literal_cp, icase, pos)

    # -- character classes ------------------------------------------------------------------
    def parse_class(self, icase: bool):
        start = self.i
        self.i += 1  # '['
        neg = False
        if self.peek() == "^":
            neg = True
            self.i += 1
            if icase:
                self.error("negated class under (?i)", start)
        if self.peek() == "]":
            self.error("']' at the start of a class (ambiguous between engines)", self.i)
        parts = []
        while True:
            c = self.peek()
            if c is None:
                self.error("unterminated character class", start)
            if c == "]":
                self.i += 1
                break
            if c == "[":
                if self.startswith("[:"):
                    self.error("POSIX bracket expression", self.i)
                parts.append(self.parse_class(icase))
                continue
            if self.startswith("&&") or self.startswith("--") or self.startswith("~~"):
                self.error("class set operation", self.i)
            lo_pos = self.i
            lo = self.class_char(icase)
            if isinstance(lo, tuple):  # a set (\p, \s, ...) cannot start a range
                if self.peek() == "-" and self.peek(1) not in ("]", None):
                    self.error("range starting at a class escape", self.i)
                parts.append(lo)
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", None):
                self.i += 1
                hi_pos = self.i
                hi = self.class_char(icase)
                if isinstance(hi, tuple):
                    self.error("range ending at a class escape", hi_pos)
                if hi < lo:
                    self.error("reversed range in class", lo_pos)
                if icase and (lo < 0x80 or hi < 0x80):
                    if hi >= 0x80:
                        self.error("range crossing ASCII under (?i)", lo_pos)
                    parts.append(_cs_union(*(self.literal_set(x, True, lo_pos) for x in range(lo, hi + 1))))
                elif icase:
                    self.error("non-ASCII range under (?i)", lo_pos)
                else:
                    parts.append(_cs_from_ranges([(lo, hi)]))
                continue
            parts.append(self.literal_set(lo, icase, lo_pos))
        cs = _cs_union(*parts) if parts else ()
        return _cs_complement(cs) if neg else cs

    def class_char(self, icase: bool):
        """One class member: an int code point, or a tuple set for escapes like \\p{L}."""
        c = self.peek()
        if c == "\\":
            pos = self.i
            nxt = self.peek(1)
            if nxt in _SIMPLE_ESCAPES or nxt in ("x", "u") or (nxt and nxt.isascii() and not nxt.isalnum()):
                # Literal escapes: return the bare code point so it can be a range endpoint.
                self.i += 1
                c2 = self.peek()
                self.i += 1
                if c2 in _SIMPLE_ESCAPES:
                    return _SIMPLE_ESCAPES[c2]
                if c2 == "x":
                    return self.parse_hex(2)
                if c2 == "u":
                    return self.parse_hex(4)
                return ord(c2)
            self.i = pos
            return self.parse_escape(icase, in_class=True)
        self.i += 1
        return ord(c)


# --------------------------------------------------------------------------------------------
# Analysis and emission
# --------------------------------------------------------------------------------------------


def _collect_sets(node, out: list, lookarounds: bool = True) -> list:
    """The sets in node (lookarounds=False: only those it consumes chars with)."""
    kind = node[0]
    if kind == "set":
        out.append(node[1])
    elif kind in ("seq", "alt"):
        for n in node[1]:
            _collect_sets(n, out, lookarounds)
    elif kind == "look":
        if lookarounds:
            _collect_sets(node[2], out)
    elif kind in ("atomic", "repeat"):
        _collect_sets(node[1], out, lookarounds)
    return out


def _min_len(node) -> int:
    kind = node[0]
    if kind == "set":
        return 1
    if kind == "seq":
        return sum(_min_len(n) for n in node[1])
    if kind == "alt":
        return min(_min_len(n) for n in node[1])
    if kind == "atomic":
        return _min_len(node[1])
    if kind == "repeat":
        return node[2] * _min_len(node[1])
    return 0  # anchors, lookarounds


def _fixed_width(node):
    """Width if every match of node has the same length, else None."""
    kind = node[0]
    if kind == "set":
        return 1
    if kind in ("anchor", "look"):
        return 0
    if kind == "seq":
        ws = [_fixed_width(n) for n in node[1]]
        return None if None in ws else sum(ws)
    if kind == "alt":
        ws = {_fixed_width(n) for n in node[1]}
        return ws.pop() if len(ws) == 1 and None not in ws else None
    if kind == "atomic":
        return _fixed_width(node[1])
    if kind == "repeat":
        w = _fixed_width(node[1])
        return None if w is None or node[2] != node[3] else w * node[2]
    return None


def _fold_info(node, bad: list):
    """(first letters, last letters, nullable) of node for the Oniguruma multi-fold check.

    Only (?i) literal letters count; classes are barriers (measured: (?i:[s]s) does not match
    "ß").  Groups, repeat ends and lookarounds are treated as transparent, which is conservative
    (Oniguruma does merge literals across non-capturing groups: (?i:s(?:s)) matches "ß").
    Offending pairs are appended to bad.
    """
    kind = node[0]
    if kind == "set":
        if len(node) > 2:
            return {(node[2], node[3])}, {(node[2], node[3])}, False
        return set(), set(), False
    if kind == "anchor":
        return set(), set(), True
    if kind == "look":
        _fold_info(node[2], bad)
        return set(), set(), True
    if kind == "atomic":
        return _fold_info(node[1], bad)
    if kind == "repeat":
        # A repeat is not a string node: (?i:s+) and (?i:s{2}) do not match "ß" (measured), so
        # its iterations are not paired with each other; its ends still pair with neighbours.
        f, l, n = _fold_info(node[1], bad)
        return f, l, n or node[2] == 0
    if kind == "alt":
        infos = [_fold_info(b, bad) for b in node[1]]
        return (set().union(*(i[0] for i in infos)), set().union(*(i[1] for i in infos)),
                any(i[2] for i in infos))
    # seq
    first: set = set()
    prev_last: set = set()
    leading = True
    for item in node[1]:
        f, l, n = _fold_info(item, bad)
        _fold_pairs(prev_last, f, bad)
        if leading:
            first |= f
            leading = n
        prev_last = (prev_last | l) if n else l
    last: set = set()
    for item in reversed(node[1]):
        f, l, n = _fold_info(item, [])
        last |= l
        if not n:
            break
    return first, last, leading


def _fold_pairs(lasts, firsts, bad):
    # Elements are (letter, pattern position).
    for a, pos in lasts:
        for b, _ in firsts:
            if a + b in _ONIG_MULTIFOLD_PAIRS:
                bad.append((a + b, pos))


def _rebuild(node, fn):
    """node with fn applied to its children, for every kind but alt (the callers' own business);
    lookbehind bodies are left alone (Python needs their widths intact)."""
    kind = node[0]
    if kind == "seq":
        return ("seq", [fn(n) for n in node[1]])
    if kind == "look":
        return node if node[1] in ("<=", "<!") else ("look", node[1], fn(node[2]))
    if kind == "atomic":
        return ("atomic", fn(node[1]))
    if kind == "repeat":
        return ("repeat", fn(node[1])) + node[2:]
    return node


def _factor(node):
    """Hoist a shared leading single-char atom out of consecutive alternatives.

    A·X|A·Y == A(?:X|Y) under leftmost-first backtracking when A matches exactly one char (no
    choice points inside A), and stdlib re then tests A once instead of per branch: ~5% faster
    on the llama3 pattern.  Lookbehind bodies are left alone (Python needs their widths intact).
    """
    if node[0] != "alt":
        return _rebuild(node, _factor)

    def split(branch):
        items = branch[1] if branch[0] == "seq" else [branch]
        if items and items[0][0] == "set":
            return items[0][1], items
        return None, items

    branches = [_factor(b) for b in node[1]]
    out = []
    i = 0
    while i < len(branches):
        key, items = split(branches[i])
        j = i + 1
        while key is not None and j < len(branches) and split(branches[j])[0] == key:
            j += 1
        if j - i < 2:
            out.append(branches[i])
        else:
            rests = []
            for b in branches[i:j]:
                rest = split(b)[1][1:]
                rests.append(rest[0] if len(rest) == 1 else ("seq", rest))
            out.append(("seq", [items[0], _factor(("alt", rests))]))
        i = j
    return out[0] if len(out) == 1 else ("alt", out)


def _lead_with_sets(node):
    """Rewrite each alternative that opens with a greedy repeat of a one-char atom so that it opens
    with the atom itself, splitting an optional opening off into an alternative of its own:

        X?·R   ->  X·R | R            X*·R  ->  X·X*·R | R
        X+·R   ->  X·X*·R             X{a,b}·R  ->  X·X{a-1,b-1}·R   (a >= 1)

    Each holds under leftmost-first backtracking: a greedy X? tries one X and then none, which is
    the order of the two alternatives, and X+ / X{a,b} begin with one X either way. (R's own
    opening is rewritten again.) Why: CPython's engine tries an alternative of a BRANCH only
    after checking its first op when that op is a literal or a class (sre_lib.h, SRE_OP_BRANCH);
    one that opens with a repeat is entered, which costs a jump and a saved state per position.
    In o200k's pattern the first four alternatives open with X? or X*, so every digit, space and
    punctuation mark entered and left all four; a run of 10^6 digits splits ~1.2x faster after."""
    if node[0] != "alt":
        return _rebuild(node, _lead_with_sets)
    out = []
    for b in node[1]:
        out.extend(_open_with_set(_lead_with_sets(b)))
    return ("alt", out)


def _open_with_set(branch) -> list:
    """The alternatives that replace one branch (see _lead_with_sets)."""
    items = branch[1] if branch[0] == "seq" else [branch]
    if not items or items[0][0] != "repeat":
        return [branch]
    _, child, lo, hi, mode = items[0]
    rest = items[1:]
    if child[0] != "set" or mode != "greedy" or hi == 0 or (lo == 0 and not rest):
        return [branch]
    more = [] if hi == 1 else [("repeat", child, max(lo - 1, 0), None if hi is None else hi - 1, "greedy")]
    first = [child] + more + rest
    one = ("seq", first) if len(first) > 1 else first[0]
    if lo >= 1:
        return [one]
    return [one] + _open_with_set(("seq", rest) if len(rest) > 1 else rest[0])


def _run_branch(ast):
    """(index, set, k) of the top-level alternative D{1,k} (greedy or possessive; or D alone, k=1)
    that alone can consume a char of D, when every other alternative consumes at least one char;
    else None. Then every maximal run of D chars is matched as consecutive k-char pieces from
    its start (the last shorter): no other alternative matches at a D char, none runs into one,
    and findall resumes at the run's first char. The same pattern with D+ there (runs_variant)
    matches each run whole, which the runtime cuts into those pieces itself (cl100k's and
    o200k's digits: 10^6 of them are one match instead of 333,334)."""
    if ast[0] != "alt":
        return None
    for i, b in enumerate(ast[1]):
        if b[0] == "set":
            d, k = b[1], 1
        elif b[0] == "repeat" and b[1][0] == "set" and b[2] == 1 and b[3] is not None and b[4] != "lazy":
            d, k = b[1][1], b[3]
        else:
            continue
        others = ast[1][:i] + ast[1][i + 1:]
        if all(_min_len(o) > 0 for o in others) and not any(
                _cs_intersects(d, c) for o in others for c in _collect_sets(o, [], lookarounds=False)):
            return i, d, k
    return None


def _sure(node) -> tuple:
    """The chars c at which node matches at least one char whatever follows (a set): where the
    match cannot fail. A set and a repeat of one with a minimum of 1 match there; a sequence
    where its first item that must consume does, unless an optional set before it could take
    c (counted out: a possessive one would keep it) and as long as every item after it can match
    empty (repeats with a minimum of 0: no lookaround, no anchor); an alternation where any
    branch does (an earlier branch that matches instead matches non-empty too, since the pattern
    never matches empty). Conservative: any other node contributes nothing."""
    kind = node[0]
    if kind == "set":
        return node[1]
    if kind == "atomic":
        return _sure(node[1])
    if kind == "repeat":
        return _sure(node[1]) if node[2] >= 1 else ()
    if kind == "alt":
        return _cs_union(*(_sure(b) for b in node[1]))
    if kind != "seq":
        return ()
    items, taken = node[1], ()
    for k, item in enumerate(items):
        if item[0] == "repeat" and item[2] == 0 and item[1][0] == "set":  # an optional set before it
            taken = _cs_union(taken, item[1][1])
            continue
        if not all(later[0] == "repeat" and later[2] == 0 for later in items[k + 1:]):
            return ()
        return _cs_complement(_cs_union(_cs_complement(_sure(item)), taken))  # (sure(item) - taken)
    return ()


def tiles(ast) -> bool:
    """Whether findall's matches always cover the text back to back: the pattern never matches
    empty and matches at every code point (_sure), so each search starts where the last match
    ended and matches there. The runtime then skips checking that the pieces cover the text."""
    return _min_len(ast) >= 1 and _sure(ast) == (0, _NCP)


class _Refused(Exception):
    """The pattern holds a construct space_cut_unsafe does not reason about."""


def space_cut_unsafe(ast):
    """The code point set U (a breakpoint tuple) such that cutting a text before any space whose
    preceding char is outside U, and splitting the two sides apart, gives the pieces of the whole
    text; None when the pattern holds a construct this does not reason about (lookbehind, a
    start anchor, a lookahead wider than one char).

    Why it holds: a match that spans such a cut would hold (c, ' ') as consecutive chars, c
    outside U; U holds every char that some path of the pattern can consume right before a space
    (Glushkov follow pairs, lookarounds counted as consuming nothing: more paths, a larger U).
    Every attempt that reaches the cut then either ends there or stops, unable to take the space,
    as it stops at the end of the left side alone -- unless it tests an assertion there, which
    sees a space in the whole text and the end in the left side: an end anchor, or a one-char
    lookahead whose set holds the space. The chars consumed right before such an assertion go
    into U too. The right side's matches look only forward (no lookbehind, no start anchor), so
    they are the same whether the text starts there or not. The pattern never matches empty
    (compile_pattern), so no match starts at the end of the left side."""
    unsafe: list = []
    space = 0x20

    def walk(node):  # (first chars, last chars, nullable, an end-sensitive assertion at its start)
        kind = node[0]
        if kind == "set":
            return node[1], node[1], False, False
        if kind == "anchor":
            if node[1] in ("bot", "bol"):
                raise _Refused
            if node[1] == "eot_nl":  # end, or before a final newline: the left side may end with one
                unsafe.append(_cs_single(0x0A))
            return (), (), True, True
        if kind == "look":
            if node[1] not in ("=", "!") or node[2][0] != "set":
                raise _Refused
            return (), (), True, _cs_contains(node[2][1], space)
        if kind == "atomic":
            return walk(node[1])
        if kind == "repeat":
            first, last, nullable, opens = walk(node[1])
            if node[3] is None or node[3] > 1:  # one iteration after another
                if _cs_contains(first, space) or opens:
                    unsafe.append(last)
            return first, last, nullable or node[2] == 0, opens
        if kind == "alt":
            got = [walk(b) for b in node[1]]
            return (_cs_union(*(g[0] for g in got)), _cs_union(*(g[1] for g in got)),
                    any(g[2] for g in got), any(g[3] for g in got))
        if kind == "seq":
            first, last, leading, opens = (), (), True, False
            for item in node[1]:
                f, l, n, o = walk(item)
                if _cs_contains(f, space) or o:  # what this seq consumed before it can precede it
                    unsafe.append(last)
                opens = opens or (o and leading)
                if leading:
                    first = _cs_union(first, f)
                last = _cs_union(l, last) if n else l
                leading = leading and n
            return first, last, leading, opens
        raise _Refused

    try:
        walk(ast)
    except _Refused:
        return None
    return _cs_union(*unsafe) if unsafe else ()


def space_cut_bitmap(asts, table) -> bytes | None:
    """32 bytes, bit c (little-endian) set when a cut before a space that follows translated char
    c is safe for every pattern in asts (space_cut_unsafe); table: the partition table, code point
    -> translated char (ASCII itself, others 128 + class). None when a pattern is refused."""
    bad = set()
    for ast in asts:
        u = space_cut_unsafe(ast)
        if u is None:
            return None
        for a, b in zip(u[::2], u[1::2]):
            bad.update(table[a:b])
    bits = bytearray(32)
    for c in range(256):
        if c not in bad:
            bits[c >> 3] |= 1 << (c & 7)
    return bytes(bits)


def _cs_intersects(a, b) -> bool:
    return _cs_union(_cs_complement(a), _cs_complement(b)) != (0, _NCP)


def _partition(sets: list):
    """Assign every code point a translated char.  Returns (table bytearray of 0x110000 entries,
    list of per-set member lists of translated chars)."""
    bounds = {0, 0x80, _NCP}
    for s in sets:
        bounds.update(s)
    bounds = sorted(b for b in bounds if b <= _NCP)
    table = bytearray(_NCP)
    table[0:0x80] = bytes(range(0x80))
    sig_to_class: dict = {}
    members: list[set] = [set() for _ in sets]
    for idx, s in enumerate(sets):
        for cp in range(0x80):
            if _cs_contains(s, cp):
                members[idx].add(cp)
    for a, b in zip(bounds, bounds[1:]):
        if a < 0x80:
            continue
        sig = tuple(_cs_contains(s, a) for s in sets)
        k = sig_to_class.get(sig)
        if k is None:
            k = len(sig_to_class)
            if k >= _MAX_CLASSES:
                raise PatternError(f"pattern needs more than {_MAX_CLASSES} non-ASCII character classes")
            sig_to_class[sig] = k
            for idx, inside in enumerate(sig):
                if inside:
                    members[idx].add(0x80 + k)
        table[a:b] = bytes([0x80 + k]) * (b - a)
    return table, members


def _class_char(cp: int) -> str:
    if cp < 0x80 and (cp == 0x5F or chr(cp).isalnum()):
        return chr(cp)
    return f"\\x{cp:02x}"


def _emit_set(members) -> str:
    cps = sorted(members)
    if not cps:
        return "(?!)"  # empty set: never matches
    if len(cps) == 1:
        return _class_char(cps[0])
    parts = []
    i = 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{_class_char(cps[i])}-{_class_char(cps[j])}")
        else:
            parts.extend(_class_char(cps[k]) for k in range(i, j + 1))
        i = j + 1
    return "[" + "".join(parts) + "]"


_BMP = 0x10000


def _bmp_char(cp: int) -> str:
    """A code point inside a class: itself where `re` reads it literally (parsing an escape costs
    several times more at compile time), else an escape: class syntax, control chars, and the
    surrogates (META is UTF-8)."""
    if cp < 0x80:
        return chr(cp) if chr(cp).isalnum() or cp == 0x5F else f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if 0xD800 <= cp < 0xE000 or cp < 0xA0 else chr(cp)


def _bmp_ranges(s, limit: int = _BMP) -> str:
    """The class body (no brackets) of a breakpoint set's ranges below `limit`."""
    parts = []
    for a, b in zip(s[0::2], s[1::2]):
        if a >= limit:
            break
        b = min(b, limit) - 1
        parts.append(_bmp_char(a) if a == b else f"{_bmp_char(a)}-{_bmp_char(b)}")
    return "".join(parts)


def _emit_bmp_set(s, limit: int = _BMP) -> str:
    """An atom over original code points below `limit` (U+10000: the BMP; _NCP: all): its own
    ranges or its complement's, negated, whichever covers fewer BMP code points (what `re`
    spends its compile time on)."""
    size = sum(min(b, _BMP) - a for a, b in zip(s[0::2], s[1::2]) if a < _BMP)
    if size * 2 <= _BMP:
        body = _bmp_ranges(s, limit)
        return f"[{body}]" if body else "(?!)"
    body = _bmp_ranges(_cs_complement(s), limit)
    if body:
        return f"[^{body}]"
    return "[\\u0000-\\uffff]" if limit == _BMP else "[\\u0000-\\U0010ffff]"


_ANCHORS = {
    "bol": r"(?<![^\n])",  # start of text or after any \n (Oniguruma ^)
    "eol": r"(?![^\n])",  # end of text or before any \n (Oniguruma $)
    "bot": r"\A",
    "eot": r"\Z",  # Python's \Z is end of text only (like \z elsewhere)
    "eot_nl": r"(?=\n?\Z)",  # Oniguruma \Z: end, or before a final \n
}


class _Emitter:
    def __init__(self, set_text: dict):
        self.set_text = set_text  # breakpoint tuple -> emitted class text

    def emit(self, node) -> str:
        kind = node[0]
        if kind == "set":
            return self.set_text[node[1]]
        if kind == "seq":
            return "".join(self.wrap_alt(n) for n in node[1])
        if kind == "alt":
            return "|".join(self.emit(n) for n in node[1])
        if kind == "anchor":
            return _ANCHORS[node[1]]
        if kind == "atomic":
            return "(?>" + self.emit(node[1]) + ")"
        if kind == "look":
            op, body = node[1], node[2]
            if op in ("<=", "<!"):
                return self.emit_lookbehind(op, body)
            return f"(?{op}" + self.emit(body) + ")"
        if kind == "repeat":
            _, child, lo, hi, mode = node
            inner = self.emit(child)
            if (lo, hi) == (0, 1) and child[0] != "set":
                # An optional group as a branch with an empty arm, which matches alike (greedy:
                # the group first, then nothing; lazy: the reverse; possessive: atomic): sre runs
                # X? over a group through its general repeat, a branch through a literal-or-set
                # check per arm. o200k's contraction suffix: findall on en.txt 12.2 -> 9.7 ms.
                return {"greedy": f"(?:{inner}|)", "lazy": f"(?:|{inner})", "possessive": f"(?>{inner}|)"}[mode]
            if not (child[0] == "set" or child[0] == "atomic" or child[0] == "look"):
                inner = "(?:" + inner + ")"
            elif child[0] == "set" and inner == "(?!)":
                inner = "(?:(?!))"
            if (lo, hi) == (0, None):
                q = "*"
            elif (lo, hi) == (1, None):
                q = "+"
            elif (lo, hi) == (0, 1):
                q = "?"
            elif hi is None:
                q = f"{{{lo},}}"
            elif lo == hi:
                q = f"{{{lo}}}"
            else:
                q = f"{{{lo},{hi}}}"
            return inner + q + {"greedy": "", "lazy": "?", "possessive": "+"}[mode]
        raise AssertionError(kind)

    def wrap_alt(self, node) -> str:
        text = self.emit(node)
        return "(?:" + text + ")" if node[0] == "alt" else text

    def emit_lookbehind(self, op, body) -> str:
        # Python needs a fixed width; an alternation of different fixed widths is split into
        # one lookbehind per branch (positive: any branch; negative: no branch).
        branches = body[1] if body[0] == "alt" else [body]
        widths = [_fixed_width(b) for b in branches]  # all fixed: checked by the parser
        if len(set(widths)) == 1:
            return f"(?{op}" + self.emit(body) + ")"
        parts = [f"(?{op}" + self.emit(b) + ")" for b in branches]
        return "(?:" + "|".join(parts) + ")" if op == "<=" else "".join(parts)


def compile_pattern(pattern: str, flavor: str, allow_empty: bool = False) -> CompiledPattern:
    """Translate a reference pre-tokenizer regex into a stdlib-`re` pattern plus class tables.

    flavor: "onig" (HF tokenizers / Oniguruma: ^ $ are line anchors) or "fancy" (tiktoken /
    fancy-regex: ^ $ are text anchors).  Raises PatternError for anything not provably equivalent.
    allow_empty: accept a pattern that can match empty, for a caller that runs its own match
    iterator with the reference engine's empty-match rule (the Replace normalizer).
    """
    if flavor not in ("onig", "fancy"):
        raise ValueError(f"unknown regex flavor {flavor!r}")
    parser = _Parser(pattern, flavor)
    ast = parser.parse()
    if flavor == "onig":
        bad: list = []
        _fold_info(ast, bad)
        if bad:
            pair, pos = bad[0]
            raise PatternError(f"unsupported regex construct: case-insensitive literal {pair!r} "
                               f"(Oniguruma multi-char case folding, e.g. (?i:ss) matches 'ß') "
                               f"at position {pos} in pattern {pattern!r}")
    if _min_len(ast) == 0 and not allow_empty:
        # Empty matches are handled differently by each engine's iterator; the real patterns
        # never match empty, so we refuse rather than emulate.
        raise PatternError(f"unsupported regex construct: pattern can match the empty string "
                           f"at position 0 in pattern {pattern!r}")
    sets: list = []
    _collect_sets(ast, sets)
    sets = list(dict.fromkeys(sets))  # dedupe, keep order
    table, members = _partition(sets)
    set_text = {s: _emit_set(m) for s, m in zip(sets, members)}
    runs = _run_branch(ast)
    whole_cover = tiles(ast)
    runs_pattern = run_set = ""
    cut_asts = [ast]
    if runs is not None:
        i, d, k = runs
        whole = ("repeat", ("set", d), 1, None, "possessive")
        cut_asts.append(("alt", ast[1][:i] + [whole] + ast[1][i + 1:]))
        runs_pattern = _Emitter(set_text).emit(_factor(_lead_with_sets(("alt", ast[1][:i] + [whole] + ast[1][i + 1:]))))
        run_set = set_text[d]
    ast = _factor(_lead_with_sets(ast))
    py_pattern = _Emitter(set_text).emit(ast)
    py_pattern_bmp = _Emitter({s: _emit_bmp_set(s) for s in sets}).emit(ast)
    py_pattern_full = _Emitter({s: _emit_bmp_set(s, _NCP) for s in sets}).emit(ast)

    index = bytearray()
    blocks = bytearray()
    seen: dict = {}
    for b in range(_NCP >> 8):
        blk = bytes(table[b << 8:(b + 1) << 8])
        n = seen.get(blk)
        if n is None:
            n = seen[blk] = len(seen)
            blocks += blk
        index += n.to_bytes(2, "little")
    return CompiledPattern(py_pattern=py_pattern, class_index=bytes(index),
                           class_blocks=bytes(blocks), unicode_version=UNICODE_VERSION,
                           py_pattern_bmp=py_pattern_bmp, py_pattern_full=py_pattern_full,
                           runs_pattern=runs_pattern, run_set=run_set, run_k=runs[2] if runs else 0,
                           tiles=whole_cover, space_cut=space_cut_bitmap(cut_asts, table))
