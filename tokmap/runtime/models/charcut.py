"""Cut points of a character-level BPE piece that no merge can cross (built with numpy, once).

With no continuing_subword_prefix or end_of_word_suffix, a char that has its own vocabulary token
starts as that token, and every merge result's string is its two parts' strings joined. A symbol
spanning the chars a|b is therefore a merge result whose string contains the bigram "ab". So when
both a and b have their own token and no merge result contains "ab", no merge ever joins across
a|b: each side merges on its own and the ids are those of the whole piece. (A pending unk is
flushed by the known char that ends the left side, so the initial symbols split the same way.)

The table holds, from the mapped vocabulary and merge results:
  char_id  int32 by code point: the char's own token id + 1, or 0 (as `VocabFile.lookup` finds it);
  keys     sorted uint64 bigrams (a << 21 | b) found inside merge results.
The exporter stores both (sections char_tokens, char_bigrams, computed by `char_tables` below);
for older files the runtime derives them on the first long piece (~70 ms for Gemma 3).
Pieces from 256 chars are cut with it in numpy (`split`); shorter pieces use `cut_regex`, which
finds the candidate cuts before the usual separators (space marks, whitespace) in C.
"""

from __future__ import annotations

import re
from itertools import chain, compress, repeat
from operator import is_

import numpy as np

from ... import mtok
from ...errors import FormatError
from ..idlist import IdLists
from .bpe_batch import hash_filter, key_slots
from .textparts import distinct_parts, ranges, spread

# Separators a cut may precede in the regex path (the numpy path considers every char pair).
CANDIDATES = "\u2581 \n\t\r"
ALPHABET = 2046  # chars; the bigram test's matrix holds their pairs (a byte each: at most 4 MiB)
PAIR_BLOCK = 1 << 16  # chars whose bigrams one pass tests (_no_bigram)
SEARCH = 2  # a matrix cell whose pairs are looked up in the sorted keys


def char_tables(tb: np.ndarray, off: np.ndarray, findable: np.ndarray, results: np.ndarray):
    """(code points, ids) of the findable tokens that are one char, and the ascending distinct
    bigrams a << 21 | b inside the merge results' strings. tb: all token bytes (uint8), off: the
    n + 1 offsets (int64). ValueError or UnicodeError when the tokens are not whole UTF-8 chars.
    (The exporter stores both, mtok.SECTION_CHAR_TOKENS / _BIGRAMS; older files get them here.)"""
    n_tok = len(off) - 1
    text = tb.tobytes().decode("utf-8", "surrogatepass")
    lead = (tb & 0xC0) != 0x80
    inner = off[(off < len(tb))]
    if not lead[inner].all():
        raise ValueError("a token boundary splits a UTF-8 sequence")
    coff = np.concatenate(([0], np.cumsum(lead)))[off]  # char offset of each token boundary
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    lens = np.diff(coff)
    is_findable = np.zeros(n_tok, bool)
    is_findable[findable] = True
    one = np.flatnonzero((lens == 1) & is_findable)
    is_res = np.zeros(n_tok, bool)
    is_res[results] = True
    tok = np.repeat(np.arange(n_tok), lens)  # token of each char of the joined vocabulary
    keep = (tok[:-1] == tok[1:]) & is_res[tok[:-1]]
    c64 = cps.astype(np.uint64)
    keys = np.sort(((c64[:-1] << np.uint64(21)) | c64[1:])[keep])
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
    return cps[coff[one]], one, keys


class CutTable:
    def __init__(self, model):
        n_tok = len(model.off) - 1
        f = model._f
        if f.has(mtok.SECTION_CHAR_TOKENS) and f.has(mtok.SECTION_CHAR_BIGRAMS):
            one_cp, one, keys = _stored(f, n_tok)
        else:  # (older files: derived from the vocabulary, whose offsets only this needs widened)
            off = np.frombuffer(model.off, np.uint32).astype(np.int64)
            one_cp, one, keys = char_tables(np.frombuffer(model.tb, np.uint8), off,
                                            np.frombuffer(model.sorted_ids, np.uint32),
                                            np.frombuffer(model.results, np.uint32))
        # Sized to the largest char with a token, one entry beyond it for every char above
        # (ids_of clips to it): Llama 2's table is 170 KB where all of Unicode took 4.4 MB to
        # fill and page in on a first encode. Each entry is the id + 1, 0 for none, so the
        # table starts as np.zeros rather than being filled with -1: Gemma 3's 18 chars past
        # U+30000 (up to U+10FC01) stretch its table to 4.4 MB, and this __init__ on a fresh
        # Gemma 3 tokenizer went 2.1-2.7 -> 1.4-1.6 ms (ids_of pays ~40 us a 375K-char call).
        self._top = int(one_cp.max()) + 1 if len(one_cp) else 0
        self.char_id = np.zeros(self._top + 1, np.int32)
        self.char_id[one_cp] = one + 1
        # (sort-based where np.unique/np.isin would import numpy.ma, ~6 ms, on a first encode;
        # stable, a timsort, which finds the stored table's code points already in order: O(n))
        sorted_cp = np.sort(one_cp, kind="stable")
        if (sorted_cp[1:] == sorted_cp[:-1]).any():  # duplicate strings: take lookup()'s choice
            for cp in set(one_cp.tolist()):
                i = model.lookup(chr(cp).encode("utf-8", "surrogatepass"))
                self.char_id[cp] = 0 if i is None else i + 1
        self.keys = keys
        self.lists = IdLists(n_tok)
        if not len(self.keys):
            self.keys = np.array([1 << 63], np.uint64)  # no real bigram has this value
        self._slot = self._matrix = None  # the bigram test's alphabet (_build_alphabet), on first use
        self._width, self._outside = 0, False
        self._filter = None  # a bit per hash of the keys (_has_keys), on first use
        # With byte fallback and all 256 byte tokens, no char is ever unk: a char without its own
        # token starts as its <0xHH> tokens, whose strings begin with "<" and end with ">", so the
        # bigram test uses those two chars for it. If no merge involves a byte token, such a char
        # alone is just its byte ids (`byte_id`); otherwise it goes through the model.
        self.byte_id = None
        self.byte_first = None
        self.fallback = False
        if model.byte_fallback:
            bt = model._bytes_tokens()
            if None not in bt:
                self.fallback = True
                merges = model.byte_tokens_merge  # from META; None in files before it was stored
                if merges is None:
                    mk = np.frombuffer(model.keys, np.uint64)
                    is_bt = np.zeros(n_tok, bool)
                    is_bt[bt] = True
                    top = np.uint64(n_tok - 1)  # (an id past the vocabulary is no byte token)
                    merges = (is_bt[np.minimum(mk >> np.uint64(32), top)].any()
                              or is_bt[np.minimum(mk & np.uint64(0xFFFFFFFF), top)].any())
                if not merges:
                    self.byte_id = np.array(bt, np.int64)
                    if bt == list(range(bt[0], bt[0] + 256)):
                        self.byte_first = bt[0]  # (the usual layout: byte b's token is byte_first + b)

    def cut_regex(self):
        """A regex matching each CANDIDATES char c (as its one group) whose left neighbour b has
        no "bc" inside a merge result: re.split(text) is then [piece, c, rest of the next piece,
        c, ...]. The caller glues each c to what follows it and still checks that b has its own
        token. The char is matched first and its left neighbour looked at after, `(c(?<=[^bs]c)|..)`,
        so the engine's search skips to candidate chars: a zero-width `(?<![bs])(?=c)` is tried
        at every position (Gemma 3 over en.txt's lines: 33 -> 19 ms). No match at a text's first
        char, which has no left neighbour (the zero-width form cut there, before nothing)."""
        alts = []
        low = self.keys & np.uint64(0x1FFFFF)
        for c in CANDIDATES:
            if self.id_of(ord(c)) < 0:
                continue
            bad = {chr(k) for k in (self.keys[low == ord(c)] >> np.uint64(21)).tolist()}
            bad.add(c)  # a run of c stays whole (and "cc" is usually a merge anyway)
            if len(bad) > 64:
                continue
            e = re.escape(c)
            alts.append(f"{e}(?<=[^{''.join(re.escape(x) for x in sorted(bad))}]{e})")
        return re.compile(f"({'|'.join(alts)})") if alts else None

    def split(self, text: str):
        """(bound, per-char ids, code points) of a long piece: bound is bool, one more than the
        chars, True at each cut and at both ends. (A mask rather than cut positions: its parts'
        starts are then one flatnonzero, and every full-size array is a byte a char.)"""
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
        ids = self.ids_of(cps)
        n = len(cps)
        bound = np.empty(n + 1, bool)
        bound[0] = bound[n] = True
        inner = bound[1:n]
        if self.byte_id is not None:
            # Byte tokens never merge: every cut next to a fallback char is safe.
            unknown = ids < 0
            self._no_bigram(cps, inner)
            inner |= unknown[:-1]
            inner |= unknown[1:]
        elif self.fallback:
            unknown = ids < 0
            last = np.where(unknown, np.uint32(ord(">")), cps)
            first = np.where(unknown, np.uint32(ord("<")), cps)
            np.logical_not(self._bigram(last[:-1], first[1:]), out=inner)
        else:
            known = ids >= 0
            self._no_bigram(cps, inner)
            inner &= known[:-1]
            inner &= known[1:]
        return bound, ids, cps

    def _bigram(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether each "ab" is inside some merge result. Each char has a row of a bool matrix:
        the chars in the most bigrams (at most ALPHABET of them: all 258 of Llama 2's) a row of
        their own, every other char one of two rows of False (in no bigram; in some bigram but
        outside the alphabet), so a pair is one gather, and only pairs with a char of the second
        kind are searched in the sorted keys. (Searching every candidate pair of English text cost
        ~90 ns a pair: 19 of Llama 2's 54 ms on en.txt, warm.)"""
        if self._slot is None:
            self._build_alphabet()
        return self._pairs(self.slots(a), self.slots(b), a, b)

    def _no_bigram(self, cps: np.ndarray, out: np.ndarray) -> None:
        """out[i] = not _bigram(cps[i], cps[i + 1]) for every char but the last, a block of
        PAIR_BLOCK pairs at a time: the temporaries of a block (its rows, cells and matrix bytes,
        7 bytes a char) stay in the caches and in memory the heap already holds, where the whole
        text's at once (2.6 MB for Llama 2 over wagahai.txt's 375K chars) were fresh pages on
        every call. That cold call, 4 alternated rounds: 28.4-30.0 -> 24.6-27.2 ms."""
        if self._slot is None:
            self._build_alphabet()
        for a in range(0, len(out), PAIR_BLOCK):
            b = min(a + PAIR_BLOCK, len(out))
            c = cps[a:b + 1]
            s = self.slots(c)
            np.logical_not(self._pairs(s[:-1], s[1:], c[:-1], c[1:]), out=out[a:b])

    def _pairs(self, sa, sb, a, b) -> np.ndarray:
        w = self._width
        cell = sa.astype(np.int32)
        cell *= w
        cell += sb
        found = np.take(self._matrix, cell)
        if self._outside:  # pairs with a char in some bigram outside the alphabet: SEARCH in the matrix
            q = np.flatnonzero(found == SEARCH)
            if len(q):
                k = (a[q].astype(np.uint64) << np.uint64(21)) | b[q].astype(np.uint64)
                found[q] = self._has_keys(k)
        return found.view(bool)  # (0 or 1 by now)

    def _has_keys(self, k: np.ndarray) -> np.ndarray:
        """Whether each packed bigram is in keys. bpe_batch.hash_filter of the keys, mixed (their
        top bits alone would be the first char's), answers most of them (no key has that hash), and only the rest are searched: Gemma 3 has
        33.7K keys, so ~3% of a 2^20 filter is set: of wagahai.txt's 83K pairs outside the alphabet,
        18% are searched, unsorted, where sorting and searching all took ~3.5 ms; ~2.4 ms on a first
        call, the filter built, ~1.7 ms after."""
        if self._filter is None:
            self._filter = hash_filter(self.keys, mixed=True)
        c = np.flatnonzero(self._filter[key_slots(k)])
        out = np.zeros(len(k), dtype=bool)
        if len(c):
            kc = k[c]
            j = np.searchsorted(self.keys, kc)
            np.minimum(j, len(self.keys) - 1, out=j)
            out[c] = self.keys[j] == kc
        return out

    def ids_of(self, cps: np.ndarray) -> np.ndarray:
        """Each code point's own token id (int32), or -1. (np.take: clipping sends every code point
        above the table to its last entry, 0 (no token), in the gather itself; a uint32 index given
        to [] is first converted, 1.35 against 0.65 ms for 375K chars.)"""
        ids = np.take(self.char_id, cps, mode="clip")
        ids -= 1
        return ids

    def id_of(self, cp: int) -> int:
        return int(self.char_id[min(cp, self._top)]) - 1

    def slots(self, cps: np.ndarray) -> np.ndarray:
        """Each code point's row of the bigram matrix (_build_alphabet first)."""
        return np.take(self._slot, cps, mode="clip")

    def _build_alphabet(self) -> None:
        """_slot: int16 per code point, the char's row (and column) in _matrix: its own for the
        alphabet's chars, then _width - 2 for a char in no bigram, _width - 1 for one in some
        bigram but outside the alphabet; _matrix: uint8, row * _width + column: 1 for a bigram of
        two alphabet chars, SEARCH for a pair with an outside char and no char of no bigram (the
        keys are searched for it: one cell test where five passes over the pairs had found them),
        else 0."""
        left = (self.keys >> np.uint64(21)).astype(np.int64) & 0x1FFFFF
        right = (self.keys & np.uint64(0x1FFFFF)).astype(np.int64)
        # Sort-based (np.unique would import numpy.ma). The keys ascend, so `left` does already:
        # only `right` is sorted, and the stable sort (a timsort) merges the two runs in one pass.
        # Gemma 3's 33.7K keys, the sorting alone (median of 50 in one process): 0.83 -> 0.39 ms.
        both = np.concatenate((left, np.sort(right)))
        both.sort(kind="stable")
        first = np.flatnonzero(np.concatenate(([True], both[1:] != both[:-1]))) if len(both) else both
        present = both[first]  # each char in some bigram, ascending, and how many it is in
        counts = np.diff(np.append(first, len(both)))
        chars = present
        if len(chars) > ALPHABET:  # the chars in the most bigrams (stable: lower code points first)
            chars = np.sort(chars[np.argsort(-counts, kind="stable")[:ALPHABET]])
        width = len(chars) + 2
        # (bigram chars are code points: _stored checks). Sized as char_id: one past the largest,
        # whose row ("no bigram") every char above it gets.
        top = int(present[-1]) + 1 if len(present) else 0
        slot = np.full(top + 1, width - 2, np.int16)
        slot[present] = width - 1
        slot[chars] = np.arange(len(chars), dtype=np.int16)
        matrix = np.zeros((width, width), np.uint8)
        sl, sr = slot[left].astype(np.int64), slot[right].astype(np.int64)
        inside = (sl < width - 2) & (sr < width - 2)
        matrix.ravel()[sl[inside] * width + sr[inside]] = 1
        self._outside = len(chars) < len(present)
        if self._outside:  # a pair with an outside char and no "no bigram" char is searched
            matrix[width - 1, :width - 2] = matrix[:width - 2, width - 1] = matrix[width - 1, width - 1] = SEARCH
        self._slot, self._matrix, self._width = slot, matrix.ravel(), width


def _stored(f, n_tok: int):
    """char_tables' three arrays from the file's sections, checked: ascending, in range."""
    ct = np.frombuffer(f.view(mtok.SECTION_CHAR_TOKENS, mtok.U64), "<u8")
    bg = np.frombuffer(f.view(mtok.SECTION_CHAR_BIGRAMS, mtok.U64), "<u8")
    for sid, a, top in ((mtok.SECTION_CHAR_TOKENS, ct, (0x10FFFF << 32) | 0xFFFFFFFF),
                        (mtok.SECTION_CHAR_BIGRAMS, bg, (0x10FFFF << 21) | 0x10FFFF)):
        if len(a) and (int(a[-1]) > top or not (a[1:] > a[:-1]).all()):
            raise FormatError(f.path, "inconsistent file: entries out of range or not ascending",
                              section=mtok.section_name(sid), offset=f.sections[sid][1])
    if len(bg) and int((bg & np.uint64(0x1FFFFF)).max()) > 0x10FFFF:  # a second char past the code points
        raise FormatError(f.path, "inconsistent file: entries out of range or not ascending",
                          section="char_bigrams", offset=f.sections[mtok.SECTION_CHAR_BIGRAMS][1])
    ids = (ct & np.uint64(0xFFFFFFFF)).astype(np.int64)
    if len(ids) and int(ids.max()) >= n_tok:
        raise FormatError(f.path, "inconsistent file: token id outside the vocabulary",
                          section="char_tokens", offset=f.sections[mtok.SECTION_CHAR_TOKENS][1])
    return (ct >> np.uint64(32)).astype(np.int64), ids, bg


def encode_long(text: str, table: CutTable, encode_many, cache: dict, bounds=None):
    """Ids of a long piece: one-char parts straight from the table, the others from the model's
    sub-piece cache or encode_many(distinct missing parts) (CharBPE._encode_subs: with flat=True
    it also hands back its ids as arrays).

    bounds (ascending char offsets, 0 first): text is several pieces joined, each starting at
    one; the text is also cut there, so each piece's ids are its own, and the result is then
    (ids, where each piece's ids start). Many long pieces (Gemma 3's paragraphs, each a stretch
    between newline tokens) thus cost one pass and one batch of missing parts, not one each."""
    bound, ids, cps = table.split(text)
    if bounds is not None:
        bound[np.asarray(bounds, np.int64)] = True
    n = len(text)
    starts = np.flatnonzero(bound[:-1])
    one = bound[1:][starts]  # the part is one char
    first = ids[starts]  # its first char's own token, or -1
    if table.byte_id is not None:
        fb = one & (first < 0)  # a lone char without its own token: its UTF-8 bytes' tokens
        multi = np.flatnonzero(~one)
    else:
        fb = None
        multi = np.flatnonzero(~(one & (first >= 0)))
    nxt = multi + 1  # each multi-char part's end: the next part's start, or n
    ends = starts[np.minimum(nxt, len(starts) - 1)]
    ends[nxt == len(starts)] = n
    # Each distinct part once: its ids from the cache, or encode_many (which remembers the
    # short ones) for those it lacks; then every occurrence's ids by numpy gathers, rather than
    # per-occurrence Python (Gemma 3 over wagahai.txt: 77K parts, 17K distinct).
    distinct, inv = distinct_parts(text, cps, starts[multi], ends)
    # (Each big array goes as soon as it is done with, so the arrays made after take its memory:
    # held to the end, they grew the heap by 8 MB more, pages that are fresh on every call since
    # glibc trims the heap after it. Llama 2 over wagahai.txt: tracemalloc's peak 24.2 -> 16.0
    # MB; the cold call, alternated rounds: 31.6-32.0 -> 28.4-30.0 ms, and 42.2 -> 38.7 in a slow one.)
    del bound, ends, nxt
    dparts = list(map(cache.get, distinct))
    dflat = None
    if dparts and dparts.count(None) == len(dparts):
        # None cached (a first call): the batch's own arrays serve, where taking its tuples apart
        # again cost a pass over every id (Gemma 3 over wagahai.txt: 17K parts, 52K ids)
        dparts, whole = encode_many(distinct, flat=True)
        if whole is not None:
            dflat, dlen = whole[0].astype(np.int64), whole[1].astype(np.int64)
    elif None in dparts:
        todo = list(compress(range(len(distinct)), map(is_, dparts, repeat(None))))
        for slot, val in zip(todo, encode_many([distinct[k] for k in todo])):
            dparts[slot] = val
    if dflat is None:
        dlen = np.fromiter(map(len, dparts), np.int64, len(dparts))
        dflat = np.fromiter(chain.from_iterable(dparts), np.int64, int(dlen.sum()))
    dbeg = np.cumsum(dlen)
    dbeg -= dlen
    part_ids, plens = spread(dflat, dbeg, dlen, inv)
    del dflat
    counts = np.ones(len(starts), np.int32)
    counts[multi] = plens
    has_fb = fb is not None and fb.any()
    if has_fb:
        fcp = cps[starts[fb]]
        flen = 1 + (fcp >= 0x80).astype(np.int32) + (fcp >= 0x800) + (fcp >= 0x10000)
        counts[fb] = flen
    del cps, ids
    pos = np.empty(len(starts) + 1, np.int64)  # where each part's ids start, then the total
    pos[0] = 0
    np.cumsum(counts, dtype=np.int64, out=pos[1:])
    out = np.empty(int(pos[-1]), table.lists.dtype)
    # Every part's first slot gets its first char's token: right for the one-char parts (most
    # of them), and overwritten below for the others -- when each has a slot of its own. A part
    # of no ids (chars without tokens, no unk and no byte fallback: dropped) has none.
    if not len(counts) or counts.min() > 0:
        out[pos[:-1]] = first
    else:
        single = one & (first >= 0)
        out[pos[:-1][single]] = first[single]
    if len(multi):
        mdest = ranges(pos[multi], plens)  # the multi-char parts' slots
        out[mdest] = part_ids
    if has_fb:
        # The fallback bytes fill the slots of the fallback parts, in order: one mask store, not
        # a destination per byte (Gemma 3 over utf8seq.txt: 830K). The mask is each part's flag
        # repeated over its slots. Marking the other parts' slots False in an all-True mask took
        # an index array of the parts, fresh memory each call: Llama 2 over wagahai.txt, cold,
        # 24.6-27.2 -> 25.1-25.8 ms in 4 alternated rounds (faster in 3).
        rest = np.repeat(fb, counts)
        b = utf8_bytes(fcp)
        first_byte = table.byte_first
        out[rest] = np.take(table.byte_id, b) if first_byte is None else np.add(b, first_byte, dtype=out.dtype)
    at = None if bounds is None else pos[np.searchsorted(starts, np.asarray(bounds, np.int64))].tolist()
    del starts, pos, counts, one, first, multi, fb
    got = table.lists.tolist(out)  # (a list: CharBPE.encode_piece makes it a tuple only if it remembers it)
    return got if at is None else (got, at)


def utf8_bytes(cp: np.ndarray) -> np.ndarray:
    """The UTF-8 bytes (surrogatepass) of code points cp, back to back (uint8): the few chars that
    need them, through the codecs in C, rather than encoding the whole text and finding their
    offsets (5 of Llama 2's 43 ms on wagahai)."""
    chars = cp.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
    return np.frombuffer(chars.encode("utf-8", "surrogatepass"), np.uint8)
