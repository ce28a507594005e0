"""WordPiece over the mapped vocabulary (tokenizers' models::wordpiece).

A piece longer than max_input_chars_per_word code points is one unk. Otherwise, from the start,
the longest vocabulary entry is taken (continuing_subword_prefix + text for every later position);
if some position has no entry at all, the whole piece becomes one unk spanning it.
Vocabulary lookups binary-search the mapped file until a str -> id dict pays for itself: building
it costs ~5 ms for BERT's 30K tokens from the token_text section (~9 ms a token at a time without
one), more than a whole short encode, so it is built after DICT_AFTER lookups. A call with many
distinct new words (a document) splits them in numpy instead (wordpiece_batch.py), through the
file's hash tables, and needs no dict, once numpy is imported; otherwise such a call builds the dict.
Results are memoised per piece.
"""

from __future__ import annotations

import sys
from itertools import compress, repeat
from operator import is_

from ... import mtok
from ...errors import FormatError
from . import WORD_CACHE_LEN, cached_ids, cached_parts
from .vocab import VocabFile

DICT_AFTER = 2048  # binary-search lookups (~8 us each) after which the str -> id dict is built
DICT_WORDS = 256  # pieces in one call from which the dict is built up front (files without hash tables)
BATCH_WORDS = 64  # distinct new words in one call from which they are split in numpy (once imported)
BATCH_MEMO_MAX = 1 << 20  # words the batch remembers (up to WORD_CACHE_LEN chars); emptied past this


class WordPiece(VocabFile):
    def __init__(self, f, meta: dict):
        super().__init__(f)
        self._f = f
        m = meta["model"]
        self.unk_id = m["unk_id"]
        self.prefix = m["prefix"]
        self.max_chars = m["max_input_chars_per_word"]
        self.cache: dict[str, tuple] = {}
        self.ids_cache: dict[str, tuple[int, ...]] = {}
        self._vocab: dict[str, int] | None = None
        self._searches = 0
        self.find = self._search  # text -> id | None: binary search, then the dict's get
        self._tables = None  # wordpiece_batch.Tables, once loaded (False: the file has none)
        self.batch_ids: dict[str, tuple[int, ...]] = {}  # the batch's words (_encode_batch)

    def _words(self) -> dict[str, int]:
        """Token text -> id, built once a call or the searches before it show it pays (see the
        module docstring): a WordPiece word costs several lookups, and a binary search over the
        mapped ids is microseconds each. Keyed by str so that a slice of
        the word is looked up without encoding it (surrogatepass both ways keeps every key that an
        encoded slice could equal; bytes no slice encodes to are left out)."""
        if self._vocab is None:
            v = self._words_from_text()
            if v is None:  # (a file without the section: a token at a time)
                tb, off = bytes(self.tb), self.off.tolist()
                v = {}
                for i in reversed(self.sorted_ids.tolist()):  # equal strings: the first in sorted order wins
                    try:
                        v[tb[off[i] : off[i + 1]].decode("utf-8", "surrogatepass")] = i
                    except UnicodeDecodeError:
                        pass
            self._vocab = v
            self.find = v.get
        return self._vocab

    def _words_from_text(self) -> dict[str, int] | None:
        """_words from the token_text section (mtok.SECTION_TOKEN_TEXT), None without one. It is
        checksummed first, and must hold one distinct text per sorted id: a damaged one would
        map words to wrong ids, so it is refused naming the section."""
        f, sid = self._f, mtok.SECTION_TOKEN_TEXT
        if sid not in f.sections:
            return None
        f.verify_section(sid)
        ids = self.sorted_ids.tolist()
        try:
            texts = bytes(f.view(sid, mtok.U8)).decode("utf-8", "surrogatepass").split("\n")
        except UnicodeDecodeError:
            texts = None
        v = None if texts is None or len(texts) != len(ids) + 1 or texts[-1] else dict(zip(texts, ids))
        if v is None or len(v) != len(ids):
            raise FormatError(f.path, f"inconsistent file: not one distinct text per sorted id ({len(ids)})",
                              section=mtok.section_name(sid), offset=f.sections[sid][1])
        return v

    def _search(self, text: str) -> int | None:
        """find() before the dict exists: the mapped vocabulary's binary search, which gives the
        first of equal byte strings in sorted order as the dict does (text always encodes, so a
        token whose bytes do not decode, left out of the dict, is never found here either)."""
        self._searches += 1
        if self._searches > DICT_AFTER:
            return self._words().get(text)
        return self.lookup(text.encode("utf-8", "surrogatepass"))

    def _split(self, text: str):
        """(ids, [(start_char, end_char)]) or None when some position has no token. The candidates
        at a position are the prefixes of one string (the rest of the text, after the prefix past
        the start), sliced from it longest first: one slice a lookup, no concatenation."""
        n = len(text)
        if n > self.max_chars:
            return None
        ids, spans, get, prefix = [], [], self.find, self.prefix
        start, rest, base = 0, text, 0  # rest[:base] is the prefix, rest[base:] the text from start
        while start < n:
            k = len(rest)
            while k > base:
                i = get(rest[:k])
                if i is not None:
                    break
                k -= 1
            else:
                return None
            end = start + k - base
            ids.append(i)
            spans.append((start, end))
            start, rest, base = end, prefix + text[end:], len(prefix)
        return ids, spans

    def _encode(self, text: str):
        hit = self.cache.get(text)
        if hit is None:
            got = self._split(text)
            hit = ((self.unk_id,), ((0, len(text)),)) if got is None else (tuple(got[0]), tuple(got[1]))
            if len(text) <= 64:
                self.cache[text] = hit
        return hit

    def encode_piece(self, text: str) -> tuple[int, ...]:
        i = self.find(text)  # most words are one token
        if i is not None and len(text) <= self.max_chars:
            return (i,)
        return self._encode(text)[0]

    def piece_offsets(self, text: str, ids) -> list[tuple[int, int]]:
        return list(self._encode(text)[1])

    def encode_words(self, words: list[str]) -> list[int]:
        """Ids of many pieces at once: one C-level pass of cache lookups, misses filled after."""
        self._dict_first(words)
        return cached_ids(self.ids_cache, words, encode_many=self._encode_many)

    def word_parts(self, words: list[str]) -> list[tuple[int, ...]]:
        """encode_words' ids of each piece, a tuple per piece."""
        self._dict_first(words)
        return cached_parts(self.ids_cache, words, encode_many=self._encode_many)

    def _dict_first(self, words: list[str]) -> None:
        """The str -> id dict built before a call with many pieces that the numpy batch will not take."""
        if self._vocab is None and len(words) >= DICT_WORDS and not self._batch_pays(len(words)):
            self._words()

    def _encode_many(self, words: list[str]) -> list[tuple[int, ...]]:
        """encode_piece of many distinct words: in numpy when they are many and the file has the
        tables, else those that are one token from one C-level pass of dict lookups (most are),
        the rest split."""
        if "" not in words and self._batch_pays(len(words)):
            return self._encode_batch(words)
        got = list(map(self.find, words))
        out = list(zip(got))
        limit = self.max_chars
        for k in [k for k, i in enumerate(got) if i is None]:
            out[k] = self._encode(words[k])[0]
        if max(map(len, words), default=0) > limit:
            for k, w in enumerate(words):
                if len(w) > limit:
                    out[k] = (self.unk_id,)
        return out

    def _encode_batch(self, words: list[str]) -> list[tuple[int, ...]]:
        """_encode_many in numpy, for the words batch_ids does not hold. (The word cache of
        cached_parts empties once a call brings more than WORD_CACHE_MAX new words, as a
        multilingual document does: the words it forgot are not split again on the next call.)"""
        from .wordpiece_batch import TableError, encode

        memo = self.batch_ids
        got = list(map(memo.get, words))
        if None not in got:
            return got
        todo = list(compress(words, map(is_, got, repeat(None))))
        try:
            fresh = dict(zip(todo, encode(todo, self._tables, self.unk_id, self.max_chars)))
        except TableError as e:
            self._refuse(e)
        if len(memo) + len(fresh) > BATCH_MEMO_MAX:
            memo.clear()
        memo.update(compress(fresh.items(), map(WORD_CACHE_LEN.__ge__, map(len, fresh))))
        return list(map(fresh.get, words, got))  # a new word's ids, else the memo's

    def _batch_pays(self, n: int) -> bool:
        """Whether n distinct new words go to the numpy batch: they are many, the file has its
        tables, and numpy is imported already (its import, ~110 ms, is more than the dict costs:
        the batch only spares a first call the dict's ~5 ms)."""
        return n >= BATCH_WORDS and "numpy" in sys.modules and bool(self._batch_tables())

    def _batch_tables(self):
        """The file's wordpiece_batch.Tables, checksummed and loaded on first use; False when it
        has none (files from before them, or a vocabulary the exporter left them out for)."""
        if self._tables is None:
            f, whole, cont = self._f, mtok.SECTION_PIECE_HASH, mtok.SECTION_WORDPIECE_CONT
            if not (f.has(whole) and f.has(cont)):
                self._tables = False
            else:
                import numpy as np

                from .wordpiece_batch import TableError, Tables

                for sid in (whole, cont):  # (a damaged table would split words wrong, not fail)
                    f.verify_section(sid)
                try:
                    self._tables = Tables(np.frombuffer(f.view(whole, mtok.U64), dtype="<u8"),
                                          np.frombuffer(f.view(cont, mtok.U64), dtype="<u8"),
                                          np.frombuffer(self.tb, dtype=np.uint8), np.frombuffer(self.off, dtype="<u4"),
                                          self.prefix.encode("utf-8", "surrogatepass"))
                except TableError as e:
                    self._refuse(e)
        return self._tables

    def _refuse(self, e) -> None:
        """Raise a wordpiece_batch.TableError as the FormatError naming the file and table."""
        f, sid = self._f, mtok.SECTION_WORDPIECE_CONT if e.cont else mtok.SECTION_PIECE_HASH
        raise FormatError(f.path, f"inconsistent file: {e}", section=mtok.section_name(sid),
                          offset=f.sections[sid][1]) from None
