"""Added tokens: find them in text the way tokenizers' AddedVocabulary does.

Leftmost-longest matching (a stdlib regex alternation ordered longest first gives exactly that),
`single_word` rejection without a shorter fallback, and `lstrip`/`rstrip` swallowing neighbouring
whitespace that never reaches back into the previous match.
"""

from __future__ import annotations

import re

# Rust's char::is_whitespace (Unicode White_Space), fixed since Unicode 6.
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                        "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


class AddedToken:
    __slots__ = ("id", "content", "special", "normalized", "lstrip", "rstrip", "single_word")

    def __init__(self, id, content, special, normalized, lstrip, rstrip, single_word):
        self.id, self.content, self.special, self.normalized = id, content, special, normalized
        self.lstrip, self.rstrip, self.single_word = lstrip, rstrip, single_word


def parse(items) -> list[AddedToken]:
    out = []
    for it in items:
        if not (isinstance(it, list) and len(it) == 7 and isinstance(it[0], int) and isinstance(it[1], str)):
            raise ValueError(f"bad added-token entry {str(it)[:60]}")
        out.append(AddedToken(*it))
    return out


class Matcher:
    """Finds a set of tokens (content -> AddedToken) in text."""

    def __init__(self, tokens: dict[str, AddedToken], is_word_char):
        self.tokens = tokens
        self.is_word_char = is_word_char
        alts = sorted(tokens, key=lambda s: (-len(s), s))
        self.regex = re.compile("|".join(map(re.escape, alts))) if alts else None

    def split(self, text: str) -> list[tuple[AddedToken | None, int, int]]:
        """Cover text with (token or None, start, end) in order."""
        if self.regex is None or not text:
            return [(None, 0, len(text))]
        out, start_offset = [], 0
        n = len(text)
        for m in self.regex.finditer(text):
            start, stop = m.span()
            tok = self.tokens[m.group()]
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
