"""Added tokens: find them in text the way tokenizers' AddedVocabulary does.

Leftmost-longest matching (a stdlib regex alternation ordered longest first gives exactly that),
`single_word` rejection without a shorter fallback, and `lstrip`/`rstrip` swallowing neighbouring
whitespace that never reaches back into the previous match.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import partial
from itertools import accumulate, compress
from operator import itemgetter, lt

from .. import mtok

# Rust's char::is_whitespace (Unicode White_Space), fixed since Unicode 6.
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                        "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


MAX_LITERAL_FIRSTS = 32  # first chars of non-run tokens beside runs in Matcher's search regex
RUNS_SPLIT_TEXT = 4096  # chars from which Matcher.split tries one re.split over runs (_split_runs)


class AddedToken(tuple):
    """(id, content, special, normalized, lstrip, rstrip, single_word), fields by name.

    A tuple, so that parse() makes thousands (Gemma 3: 6,415, on the first encode) from the parsed
    JSON lists by C-level calls, and reads its fields by C-level getters."""

    __slots__ = ()

    def __new__(cls, id, content, special, normalized, lstrip, rstrip, single_word):
        return tuple.__new__(cls, (id, content, special, normalized, lstrip, rstrip, single_word))

    id = property(itemgetter(0))
    content = property(itemgetter(1))
    special = property(itemgetter(2))
    normalized = property(itemgetter(3))
    lstrip = property(itemgetter(4))
    rstrip = property(itemgetter(5))
    single_word = property(itemgetter(6))


_FIELD_TYPES = (int, str, bool, bool, bool, bool, bool)


def parse(items) -> list[AddedToken]:
    """The added_tokens section's JSON list of [id, content, special, normalized, lstrip, rstrip,
    single_word] entries as AddedTokens; ValueError naming the first bad entry."""
    if type(items) is not list:
        raise ValueError("added tokens: not a list")
    # Every check is a C-level pass over a column (exact types: bool is no int id, int no flag).
    ok = set(map(type, items)) <= {list} and set(map(len, items)) <= {7}
    if ok and items:
        cols = list(zip(*items))
        ok = all(set(map(type, col)) == {t} for col, t in zip(cols, _FIELD_TYPES)) and all(cols[1])
    if not ok:
        for it in items:
            if type(it) is not list or len(it) != 7 or not it[1] \
                    or any(type(v) is not t for v, t in zip(it, _FIELD_TYPES)):
                raise ValueError(f"bad added-token entry {str(it)[:60]}")
    return list(map(partial(tuple.__new__, AddedToken), items))


_BITS = [bytes((b >> k) & 1 for b in range(256)) for k in range(len(mtok.ADDED_FLAGS))]  # byte -> its bit k


class AddedColumns:
    """Added tokens as columns: ids, contents, and a flags byte each (bit k: mtok.ADDED_FLAGS[k]).

    An AddedToken is made when one is asked for (a match in text, a decode): making Gemma 3's
    6,415 of them, and the dicts keyed by them, cost ~4 of the ~7 ms of a fresh tokenizer's first
    encode, and a text meets a handful of them (its newline runs)."""

    __slots__ = ("ids", "contents", "flags", "_made", "_all")

    def __init__(self, ids: list[int], contents: list[str], flags: bytes):
        self.ids, self.contents, self.flags = ids, contents, flags
        self._made: dict[int, AddedToken] = {}
        self._all: list[AddedToken] | None = None

    @classmethod
    def of(cls, tokens: list[AddedToken]) -> "AddedColumns":
        flags = bytes(sum(bool(t[2 + k]) << k for k in range(len(mtok.ADDED_FLAGS))) for t in tokens)
        out = cls([t[0] for t in tokens], [t[1] for t in tokens], flags)
        out._all = list(tokens)
        return out

    def __len__(self) -> int:
        return len(self.ids)

    def token(self, k: int) -> AddedToken:
        """The k-th token (one object per k)."""
        if self._all is not None:
            return self._all[k]
        t = self._made.get(k)
        if t is None:
            f = self.flags[k]
            t = self._made[k] = tuple.__new__(AddedToken, (self.ids[k], self.contents[k],
                                                           *[bool(f >> b & 1) for b in range(len(_BITS))]))
        return t

    def tokens(self) -> list[AddedToken]:
        """All of them, in order (the same objects token() gives)."""
        if self._all is None:
            cols = [self.ids, self.contents] + [list(map(bool, self.flags.translate(bit))) for bit in _BITS]
            made = list(map(partial(tuple.__new__, AddedToken), zip(*cols)))
            for k, t in self._made.items():
                made[k] = t
            self._all = made
        return self._all

    def having(self, field: str) -> list[int]:
        """The indices of the tokens whose flag `field` is set."""
        return list(compress(range(len(self.ids)), self.flags.translate(_BITS[mtok.ADDED_FLAGS.index(field)])))


def parse_columns(data, vocab_size: int) -> AddedColumns:
    """The added_columns section (mtok.ADDED_COLUMNS: a memoryview) as AddedColumns; ValueError
    naming the field that is inconsistent, or an id outside the vocabulary. Each column is one
    C-level pass: the ids a cast, the contents one decode and a slice each."""
    head = mtok.ADDED_COLUMNS
    if len(data) < head.size:
        raise ValueError("added columns: shorter than their header")
    n, nbytes = head.unpack_from(data)
    at = head.size
    if len(data) != at + 9 * n + nbytes:
        raise ValueError(f"added columns: {len(data)} bytes, where the header's counts ({n} tokens, "
                         f"{nbytes} content bytes) need {at + 9 * n + nbytes}")
    ids = data[at:at + 4 * n].cast("I").tolist()
    if n and max(ids) >= vocab_size:
        raise ValueError(f"added token id {next(i for i in ids if i >= vocab_size)} outside the vocabulary")
    ends = data[at + 4 * n:at + 8 * n].cast("I").tolist()
    flags = bytes(data[at + 8 * n:at + 9 * n])
    try:
        text = bytes(data[at + 9 * n:]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"added columns: contents are not UTF-8 ({e.reason} at byte {e.start})") from None
    starts = [0, *ends[:-1]]
    if n and (ends[-1] != len(text) or not all(map(lt, starts, ends))):
        raise ValueError("added columns: content ends do not rise to the contents' length (each content non-empty)")
    if flags.translate(None, bytes(range(1 << len(mtok.ADDED_FLAGS)))):
        raise ValueError("added columns: a flag byte with a bit past the five fields")
    return AddedColumns(ids, list(map(text.__getitem__, map(slice, starts, ends))), flags)


class Matcher:
    """Finds a set of tokens (content -> AddedToken) in text, leftmost-longest.

    No regex alternation: compiling one over hundreds of tokens costs tens of milliseconds in
    Python's sre compiler, on the cold-start path. Instead a one-class regex finds the next
    position where some token could start; there a two-char prefix set rejects most occurrences
    at once, and the distinct lengths of the tokens starting with that char are tried longest
    first, each by one dict lookup of the slice (Llama 3 has 256 tokens starting with "<", Gemma 3
    hundreds of whitespace and markup tokens sharing a first char).
    """

    def __init__(self, tokens: dict[str, AddedToken], is_word_char):
        self._setup(dict(tokens), None, is_word_char)

    @classmethod
    def of_columns(cls, cols: AddedColumns, which: list[int] | None, is_word_char) -> "Matcher":
        """A Matcher of the tokens cols.token(k) for k in which (None: all), made as they match."""
        index = dict(zip(cols.contents, range(len(cols)))) if which is None else \
            dict(zip(map(cols.contents.__getitem__, which), which))
        m = cls.__new__(cls)
        m._setup(index, cols.token, is_word_char)
        return m

    def _setup(self, index: dict, make, is_word_char) -> None:
        # index: content -> its AddedToken, or an int that make(int) turns into it on its first
        # match (and that the dict then holds instead).
        self.index, self.make = index, make
        self.is_word_char = is_word_char
        keys = sorted(index)
        firsts = sorted(set(map(itemgetter(0), keys)))
        # Per first char, made on its first candidate in text (a Gemma 3 text without "<" never
        # groups its 6,322 "<" tokens): the distinct token lengths, longest first (one slice + dict
        # lookup each, not a startswith per token: Llama 3 has 256 tokens starting with "<"), and
        # the two-char prefixes, which reject most occurrences of the char in text at once.
        # A char that is itself a token is answered at once where the next char starts no longer
        # token (Gemma 3: "\n" and runs of up to 31 "\n"s, so each lone newline in text would
        # otherwise cost 31 slices).
        self.lengths = _ByFirst(keys, lambda group: sorted(set(map(len, group)), reverse=True))
        # (a one-char token's "prefix" is itself: it equals text[p:p + 2] only at the text's end,
        # where the lengths loop finds it all the same)
        self.prefix2 = _ByFirst(keys, lambda group: frozenset(map(itemgetter(slice(0, 2)), group)))
        # A first char whose tokens are all the runs c * a .. c * b, every length between (Gemma 3:
        # newlines, tabs, spaces), is matched whole by c c{a-1,b-1} in the search regex itself:
        # greedy, so the longest run token where one starts. Every alternative starts with its
        # literal char, which lets sre skip ahead to the next candidate as a one-class regex
        # does; the other first chars are literal alternatives, checked as above -- when there
        # are few (each costs a test at every candidate), else all go by the class.
        runs = {}
        for c in firsts:
            group = self.lengths.group(c)
            if all(t == c * len(t) for t in group):  # (stops at the first other token: "<" groups)
                lens = sorted(map(len, group))
                if lens == list(range(lens[0], lens[-1] + 1)):
                    e = re.escape(c)
                    runs[c] = e + (f"{e}{{{lens[0] - 1},{lens[-1] - 1}}}" if lens[-1] > 1 else "")
        others = [c for c in firsts if c not in runs]
        self._runs_only = None  # (split_runs: the run tokens' regex, when it may serve; made on first use)
        self._narrowed = None  # (_narrow_first: the search regex for long texts; made on first use)
        if runs and len(others) <= MAX_LITERAL_FIRSTS:
            self.runs = frozenset(runs)
            self.first = re.compile("|".join([runs[c] for c in sorted(runs)] + list(map(re.escape, others))))
            self._run_alts, self._others = [runs[c] for c in sorted(runs)], others
        else:
            self.runs = frozenset()
            self.first = re.compile("[" + "".join(map(_class_escape, firsts)) + "]") if firsts else None

    def _token(self, content: str):
        """The token of this content, or None."""
        v = self.index.get(content)
        if type(v) is int:
            v = self.index[content] = self.make(v)
        return v

    def split(self, text: str) -> list[tuple[AddedToken | None, int, int]]:
        """Cover text with (token or None, start, end) in order.

        One finditer over the candidates, not a search call per match: Gemma 3's code.txt has
        26.5K added tokens (newline and tab runs), 33 -> 28 ms. Scanning resumes where a match
        ends (also a rejected single_word one; not after an rstrip's whitespace), so candidates
        starting inside the last match are passed over; one that starts inside it and runs past
        its end (a run) restarts the scan at that end, where a search from there would begin."""
        first = self.first
        if first is None or not text:
            return [(None, 0, len(text))]
        m = first.search(text)
        if m is None:  # (most short texts: one search, as before the scan's set-up)
            return [(None, 0, len(text))]
        if self.runs and len(text) >= RUNS_SPLIT_TEXT:
            got = self._split_runs(text)
            if got is not None:
                return got
            first = self._narrow_first()
            m = first.search(text)
            if m is None:
                return [(None, 0, len(text))]
        out: list = []
        append = out.append
        runs, index, token, prefix2, lengths = self.runs, self.index, self._token, self.prefix2, self.lengths
        n = len(text)
        pos = start_offset = 0
        found = first.finditer(text, m.start())
        while found is not None:
            restart, found = found, None
            for m in restart:
                p = m.start()
                if p < pos:
                    if m.end() > pos:  # a run candidate across the last match's end: search again there
                        found = first.finditer(text, pos)
                        break
                    continue
                c = text[p]
                if c in runs:
                    stop = m.end()
                    tok = index[m.group()]
                elif text[p:p + 2] in prefix2[c]:
                    room = n - p
                    for k in lengths[c]:
                        if k <= room:
                            tok = index.get(text[p:p + k])  # (index first: most candidates are no token)
                            if tok is not None:
                                stop = p + k
                                break
                    else:
                        continue
                else:
                    tok = index.get(c)  # no longer token can start here
                    if tok is None:
                        continue
                    stop = p + 1
                if type(tok) is int:  # (made on its first match)
                    tok = token(text[p:stop])
                pos = stop  # matches never overlap: scanning resumes after this one, even if rejected
                start = p
                if tok[6]:  # single_word
                    if start > 0 and self.is_word_char(text[start - 1]):
                        continue
                    if stop < n and self.is_word_char(text[stop]):
                        continue
                if tok[4]:  # lstrip
                    s = start
                    while s > 0 and text[s - 1] in WHITE_SPACE:
                        s -= 1
                    start = max(s, start_offset)
                if tok[5]:  # rstrip
                    while stop < n and text[stop] in WHITE_SPACE:
                        stop += 1
                if start_offset < start:
                    append((None, start_offset, start))
                append((tok, start, stop))
                start_offset = stop
        if start_offset < n:
            append((None, start_offset, n))
        return out

    def _narrow_first(self):
        """The search regex for long texts beside runs: each other first char c only where the next
        char can follow it in a token, c(?=[...]) (or c alone, where c is itself a token). The
        loop below rejects any other occurrence without a change of state, so it finds the same
        matches, while sre passes over those occurrences (Gemma 3 over code.txt: 1.2K of its 8.8K
        "<" and "[" are left; 10^5 "<": the split 30 -> 2.6 ms, the encode 62 -> 23, tokenizers
        36). Built on the first long text (it groups the tokens of each such char: Gemma 3's
        6.3K "<" tokens), never on the short-text path."""
        rx = self._narrowed
        if rx is None:
            alts = list(self._run_alts)
            for c in self._others:
                seconds = sorted({t[1] for t in self.lengths.group(c) if len(t) > 1})
                if c in self.index or not seconds:
                    alts.append(re.escape(c))
                else:
                    alts.append(re.escape(c) + "(?=[" + "".join(map(_class_escape, seconds)) + "])")
            rx = self._narrowed = re.compile("|".join(alts))
        return rx

    def _split_runs(self, text: str):
        """split(text) by C-level calls when every candidate in text is a run token that takes
        every run it starts (lengths a .. b, greedy) and has no flag to check (lstrip, rstrip,
        single_word: Gemma 3's newline, tab and space runs), and no other token's first char is
        in text; else None. The loop costs ~2 us a match: Gemma 3 over wagahai.txt, 2.3K newline
        runs, 6.4-8.8 ms for the split; by re.split over the runs 4.5 ms (the scan for their
        first chars is most of it); where one run char alone is in the text, and its runs start
        at one char, by str.split at it (_split_at) 3.0 ms, 2.0 of them _split_at's."""
        plain = self._runs_only
        if plain is None:
            toks = [self._token(t) for c in sorted(self.runs) for t in self.lengths.group(c)]
            ok = not any(t[4] or t[5] or t[6] for t in toks)
            plain = self._runs_only = re.compile("(" + "|".join(self._run_alts) + ")") if ok else False
        if not plain or any(map(text.__contains__, self._others)):
            return None
        present = [c for c in self.runs if c in text]
        if len(present) == 1 and self.lengths.group(present[0])[0] == present[0]:
            return self._split_at(text, present[0])
        parts = plain.split(text)  # text, run, text, run, ..., text
        vals: list = [None] * len(parts)
        vals[1::2] = map(self.index.__getitem__, parts[1::2])  # (each run a token: made above)
        ends = list(accumulate(map(len, parts)))
        return [u for u in zip(vals, [0, *ends[:-1]], ends) if u[1] < u[2]]  # (runs are never empty)

    def _split_at(self, text: str, c: str) -> list:
        """_split_runs where c's runs are the only candidates and every length from 1 to the
        longest, b, is a token: the text cut at each c, and each run of c taken greedily, b
        chars at a time, as the search regex does."""
        group = self.lengths.group(c)  # (sorted: c, cc, ...)
        index = self.index
        tok = [None, *map(index.__getitem__, group)]  # tok[k]: the token of k c's
        b = len(group)
        out: list = []
        append = out.append
        pieces = text.split(c)
        last = len(pieces) - 1
        pos = run = 0
        for i, p in enumerate(pieces):
            if i:
                run += 1  # (a c stood before this piece)
            if p or i == last:
                while run:
                    k = run if run < b else b
                    append((tok[k], pos, pos + k))
                    pos += k
                    run -= k
                if p:
                    append((None, pos, pos + len(p)))
                    pos += len(p)
        return out


class _ByFirst(dict):
    """first char -> build(the sorted keys starting with it), made on first use."""

    def __init__(self, keys: list[str], build):
        super().__init__()
        self.keys, self.build = keys, build

    def group(self, c: str) -> list[str]:
        keys = self.keys
        lo = bisect_left(keys, c)
        return keys[lo:bisect_left(keys, chr(ord(c) + 1), lo) if c < "\U0010ffff" else len(keys)]

    def __missing__(self, c: str):
        v = self[c] = self.build(self.group(c))
        return v


def _class_escape(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c
