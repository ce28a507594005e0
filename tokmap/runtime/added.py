"""Added tokens: find them in text the way tokenizers' AddedVocabulary does.

Leftmost-longest matching (a stdlib regex alternation ordered longest first gives exactly that),
`single_word` rejection without a shorter fallback, and `lstrip`/`rstrip` swallowing neighbouring
whitespace that never reaches back into the previous match.
"""

from __future__ import annotations

import re
from functools import partial
from itertools import groupby
from operator import itemgetter, lt

from .. import mtok

# Rust's char::is_whitespace (Unicode White_Space), fixed since Unicode 6.
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                        "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


MAX_LITERAL_FIRSTS = 32  # first chars of non-run tokens beside runs in Matcher's search regex


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


def parse_columns(data, vocab_size: int) -> list[AddedToken]:
    """The added_columns section (mtok.ADDED_COLUMNS: a memoryview) as AddedTokens; ValueError
    naming the field that is inconsistent, or an id outside the vocabulary. Each column is one
    C-level pass: the contents one decode and a slice each, every flag field one translate."""
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
    cols = [ids, list(map(text.__getitem__, map(slice, starts, ends)))]
    cols += [list(map(bool, flags.translate(bit))) for bit in _BITS]
    return list(map(partial(tuple.__new__, AddedToken), zip(*cols)))


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
        self.tokens = tokens
        self.is_word_char = is_word_char
        by_first = {c: list(group) for c, group in groupby(sorted(tokens), itemgetter(0))}
        # Per first char: the distinct token lengths, longest first (one slice + dict lookup each,
        # not a startswith per token: Llama 3 has 256 tokens starting with "<"), and the two-char
        # prefixes, which reject most occurrences of the char in text at once.
        # A char that is itself a token is answered at once where the next char starts no longer
        # token (Gemma 3: "\n" and runs of up to 31 "\n"s, so each lone newline in text would
        # otherwise cost 31 slices).
        self.lengths = {c: sorted(set(map(len, group)), reverse=True) for c, group in by_first.items()}
        # (a one-char token's "prefix" is itself: it equals text[p:p + 2] only at the text's end,
        # where the lengths loop finds it all the same)
        self.prefix2 = {c: frozenset(map(itemgetter(slice(0, 2)), group)) for c, group in by_first.items()}
        self.by_first = by_first
        # A first char whose tokens are all the runs c * a .. c * b, every length between (Gemma 3:
        # newlines, tabs, spaces), is matched whole by c c{a-1,b-1} in the search regex itself:
        # greedy, so the longest run token where one starts. Every alternative starts with its
        # literal char, which lets sre skip ahead to the next candidate as a one-class regex
        # does; the other first chars are literal alternatives, checked as above -- when there
        # are few (each costs a test at every candidate), else all go by the class.
        runs = {}
        for c, group in by_first.items():
            lens = sorted(map(len, group))
            if all(t == c * len(t) for t in group) and lens == list(range(lens[0], lens[-1] + 1)):
                e = re.escape(c)
                runs[c] = e + (f"{e}{{{lens[0] - 1},{lens[-1] - 1}}}" if lens[-1] > 1 else "")
        others = sorted(set(by_first) - set(runs))
        if runs and len(others) <= MAX_LITERAL_FIRSTS:
            self.runs = frozenset(runs)
            self.first = re.compile("|".join([runs[c] for c in sorted(runs)] + list(map(re.escape, others))))
        else:
            self.runs = frozenset()
            self.first = re.compile("[" + "".join(map(_class_escape, sorted(by_first))) + "]") if by_first else None

    def _next(self, text: str, pos: int):
        """(start, end, token) of the leftmost-longest match at or after pos, or None."""
        search, runs, tokens = self.first.search, self.runs, self.tokens
        while True:
            m = search(text, pos)
            if m is None:
                return None
            p = m.start()
            c = text[p]
            if c in runs:
                return p, m.end(), tokens[m.group()]
            if text[p:p + 2] in self.prefix2[c]:
                room = len(text) - p
                for n in self.lengths[c]:
                    if n <= room:
                        tok = tokens.get(text[p:p + n])
                        if tok is not None:
                            return p, p + n, tok
            else:
                tok = tokens.get(c)  # no longer token can start here
                if tok is not None:
                    return p, p + 1, tok
            pos = p + 1

    def split(self, text: str) -> list[tuple[AddedToken | None, int, int]]:
        """Cover text with (token or None, start, end) in order."""
        if self.first is None or not text:
            return [(None, 0, len(text))]
        out, start_offset = [], 0
        n = len(text)
        pos = 0
        while True:
            hit = self._next(text, pos)
            if hit is None:
                break
            start, stop, tok = hit
            pos = stop  # matches never overlap: scanning resumes after this one, even if rejected
            if tok.single_word:
                if start > 0 and self.is_word_char(text[start - 1]):
                    continue
                if stop < n and self.is_word_char(text[stop]):
                    continue
            if tok.lstrip:
                s = start
                while s > 0 and text[s - 1] in WHITE_SPACE:
                    s -= 1
                start = max(s, start_offset)
            if tok.rstrip:
                while stop < n and text[stop] in WHITE_SPACE:
                    stop += 1
            if start_offset < start:
                out.append((None, start_offset, start))
            out.append((tok, start, stop))
            start_offset = stop
        if start_offset < n:
            out.append((None, start_offset, n))
        return out


def _class_escape(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c
