"""SentencePiece's BPE and Unigram models and its decoder, over the mapped pieces, scores and types.

Encoding runs on the normalized text (runtime/spm_normalizer.py) with SentencePiece's rules, not
tokenizers' (CONFORMANCE §11):
- BPE has no merge list: repeatedly merge the adjacent pair whose concatenation is a piece with the
  highest score (ties: leftmost). User-defined symbols are frozen; a merged UNUSED piece is split
  back into the two symbols it came from.
- Unigram: Viterbi over NORMAL and USER_DEFINED pieces with float32 path scores (user-defined:
  0.1 x (bytes - 1); unknown char: min score - 10), each candidate sum rounded to float32 and winning
  only when strictly better, the sums rebased once they pass 1e5 in magnitude -- sentencepiece
  0.2.3's optimized encoder (its sources, not older releases', are the reference).
- Then unknown pieces become <0xHH> byte pieces with byte_fallback, else runs of unknowns collapse
  to one unk id.
Lookup tables (piece -> id) are built on the first encode, never at load.

Both models cut the text before every U+2581 that follows another character when no piece holds
such a pair, and remember the ids of each run between cuts (bounded word caches). For BPE that is
exact outright. For Unigram a remembered run is reused only where its Viterbi choices win by more
than float32 rounding could move them at the scores the text reaches (_unigram_word); another run
is decoded from the score carried in, which a text long enough for the lattice to rebase its
scores follows run by run (_unigram_follow).

BPE merges each distinct run of a call once. Once a text has many, the short ones merge in one
numpy batch over a merge table derived from the pieces (spm_chunks.py), and a long one as
overlapping chunks glued where they agree (bpe_chunks.py): a run of one char by the heap, each
distinct chunk once (_bpe_run), any other by that batch merge.
"""

from __future__ import annotations

import heapq
import math
import re
import struct
import sys
from itertools import chain, compress, repeat
from operator import is_, itemgetter

from ... import mtok
from ...errors import FormatError
from . import WORD_CACHE_LEN, WORD_CACHE_MAX, LongPieces, concat
from .vocab import VocabFile

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
WS = "\u2581"
_F32 = struct.Struct("<f")
MAX_RESEGMENT_DEPTH = 100
RESET = 100000.0  # |path score| above which the Unigram lattice rebases its scores (sentencepiece 0.2.3)
NO_REBASE = RESET / 1.001  # chars x largest |score| below this: the lattice cannot reach RESET
_DECODE = ((), -1.0, ())  # _unigram_cached's entry for a run always decoded from its X
BATCH_RUNS = 128  # distinct new Unigram runs in a call from which they are decoded in numpy (spm_unigram.words) ...
BATCH_IMPORT = 1 << 15  # ... once imported, or when they hold this many chars (the import, ~40-110 ms, then pays)
SURE_TEXT = 1024  # chars: a text up to this long may take its runs' ids from _sure (encode_normalized)
FOLLOW_RUNS = 256  # runs in a text from which _unigram_follow goes by numpy (spm_unigram.follow), once imported
RUN_CHARS = 512  # a BPE run this long of one char merges as glued chunks (_bpe_run)
CHUNK_CHARS = 2048  # ... and one this long of other chars, by numpy (spm_chunks.py)
# Runs up to this long merge in one numpy batch (spm_chunks.merge_words; its rounds take long words
# one merge a round) ... With 64 here, runs of 65-2047 chars took the heap (~1 us a char, at every
# call): Japanese, whose lines are runs, under botchan_en_bpe_1000 wagahai.txt cold 302-418 ->
# 90-153 ms, mistral-v3 227-257 -> 163-239 (3 rounds alternated, noisy VM).
BATCH_WORD_CHARS = CHUNK_CHARS - 1
BATCH_CHARS = 2048  # ... when a call's distinct new ones hold this many chars
# The numpy merges' table is built once the heap would have merged this many chars per piece: the
# table cost ~1.7 us a piece (mistral-v3's 32K: ~55 ms) when its splits were dict lookups, about
# two thirds of that since they come from numpy hashes (spm_chunks._splits); the heap ~1 us a char.
TABLE_CHARS_PER_PIECE = 2
# A merge can never cross the start of a "▁" that follows another character when no piece holds
# such a pair: the text then splits there into independent runs (memoised). findall of _RUNS
# gives those runs (each "▁"s then other chars, or a leading run of other chars), as a split at
# the zero-width cut would, in half the time.
_RUNS = re.compile("\u2581+[^\u2581]*|[^\u2581]+")
_NEEDS_WHOLE = re.compile("[^\u2581]\u2581")
# Why the cut is exact. BPE: a pair straddling the cut would merge into a piece holding
# "<char>▁" past its start, and none does, so each run merges alone, in the same order (highest
# score, then leftmost) as inside the whole text; user-defined symbols are matched left to right
# and one covering the cut would hold such a pair too. Unigram: every lattice node (a kept piece or
# a one-char unknown) lies inside one run for the same reason, so every path passes through each
# cut, and only float32 rounding ties a run's choices to the score the text reached before it.
# The same over pieces joined by NUL; led by the literal so that sre skips ahead to each "▁".
_NEEDS_WHOLE_JOINED = re.compile("\u2581(?<=[^\u2581\0]\u2581)")
_KEPT = frozenset((NORMAL, USER_DEFINED, UNUSED))  # the pieces SentencePiece's BPE and Viterbi may use
# Scans of the type column (one byte per id) for the few ids of the other types.
_NOT_KEPT = re.compile(b"[^" + re.escape(bytes(sorted(_KEPT))) + b"]")
_NOT_NORMAL = re.compile(b"[^%c]" % NORMAL)
_USER = re.compile(b"%c" % USER_DEFINED)


def f32(x: float) -> float:
    """Round a double to float32, as a C++ float store does (overflow goes to infinity)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


class SentencePiece(VocabFile):
    def __init__(self, f, meta: dict):
        super().__init__(f)
        self._f = f
        m = meta["model"]
        self.kind = m["kind"]
        self.unk_id = m["unk_id"]
        self.byte_fallback = bool(m["byte_fallback"])
        self.unk_surface = m["unk_surface"]
        self.add_dummy_prefix = bool(m["add_dummy_prefix"])
        self.remove_extra = bool(m["remove_extra_whitespaces"])
        self.scores = f.view(mtok.SECTION_SPM_SCORES, mtok.F32)
        self.types = f.view(mtok.SECTION_SPM_TYPES, mtok.U8)
        self.n = len(self.types)
        if len(self.scores) != self.n or len(self.off) != self.n + 1:
            raise ValueError("spm_scores / spm_types / token_offsets sizes disagree")
        self._ready = False
        self.cache: dict[str, list[int]] = {}  # BPE: run -> ids
        self._long = LongPieces()  # the runs in cache longer than WORD_CACHE_LEN, within a budget
        self._piece_len = None  # every piece's length in chars (numpy), for long runs (_piece_lengths)
        self._pairs = None  # spm_chunks.pair_table, once BPE runs need it (_table_for; False: none)
        self._heap_chars = 0  # chars of the runs the heap would have merged so far (_table_for)
        self.word_cache: dict[str, tuple] = {}  # Unigram: run -> (ids, slack, path scores)
        self._u: dict[int, float] = {}  # text length -> _rounding(length)
        # Short texts: word -> ids, for the runs "\u2581" + word (one "\u2581", none in word) of the
        # cache (BPE) or of word_cache whose choices hold in any text of up to _sure_len chars
        # (Unigram: slack above _rounding(_sure_len)); _sure_len set by _prepare
        self._sure: dict[str, tuple | list] = {}  # (Unigram: word_cache's tuples; BPE: cache's lists)
        self._sure_len, self._sure_u = 0, 0.0
        self._lattice = None  # Unigram: spm_unigram.lattice, on the first batch of runs (False: none)

    # -- vocabulary -------------------------------------------------------------------------
    def piece(self, i: int) -> str:
        return self.token_bytes(i).decode("utf-8")

    def _prepare(self):
        """Piece tables for encoding, built once on the first encode.

        C-level passes only (bytes/regex scans of the type column, one list comprehension to
        decode the pieces, dict(zip)): this runs on the first encode of every process, and a
        Python loop per piece cost ~70 ms for 32K pieces here. The few ids that are not NORMAL
        (control, byte, unknown, user-defined pieces) are found by a regex over the type bytes
        and handled one by one."""
        n, types_b = self.n, bytes(self.types)
        tb, off = self.tb.tobytes(), self.off.tolist()
        strs = [tb[a:b].decode("utf-8") for a, b in zip(off, off[1:])]
        if "" in strs:  # (SentencePiece and the exporter refuse one; a user-defined "" never advances)
            f, i = self._f, strs.index("")
            raise FormatError(f.path, f"inconsistent file: piece {i} is empty", section="token_offsets",
                              offset=f.sections[mtok.SECTION_TOKEN_OFFSETS][1] + 4 * (i + 1))
        other = [m.start() for m in _NOT_KEPT.finditer(types_b)]  # CONTROL, UNKNOWN, BYTE
        # The first id of a repeated piece wins (setdefault order): fill from the highest id down.
        pieces = dict(zip(reversed(strs), range(n - 1, -1, -1)))
        repeated = len(pieces) < n  # (the exporter refuses a string both reserved and kept)
        lost = {strs[i] for i in other if pieces.get(strs[i]) == i}
        for w in lost:  # its first id is reserved: the first kept id with that string, if any
            del pieces[w]
        if lost and repeated:
            is_other = set(other)
            for i in compress(range(n), map(lost.__contains__, strs)):
                if i not in is_other:
                    pieces.setdefault(strs[i], i)
        reserved = dict(zip(map(strs.__getitem__, reversed(other)), reversed(other)))
        user = {strs[m.start()] for m in _USER.finditer(types_b)}
        byte_ids = [self.unk_id] * 256
        for i in other:
            if types_b[i] == BYTE and len(strs[i]) == 6:
                byte_ids[int(strs[i][3:5], 16)] = i
        kept_strs = strs if not other else list(compress(strs, map(_KEPT.__contains__, types_b)))
        joined = "\0".join(kept_strs)
        if joined.count("\0") == max(len(kept_strs) - 1, 0):
            # NUL only between pieces: a match cannot span two of them.
            whole = _NEEDS_WHOLE_JOINED.search(joined) is not None
        else:
            whole = any(_NEEDS_WHOLE.search(p) for p in kept_strs)
        prefixes: set[str] = set()
        max_len = 1
        if self.kind == "unigram":
            prefixes = {p[:k] for p in kept_strs for k in range(1, len(p) + 1)}
            max_len = max(max_len, max(map(len, kept_strs), default=1))
        # min() keeps the current value unless a later one is smaller, as the per-piece loop did
        # (a NaN score never wins); scores of the pieces that are not NORMAL are left out as inf.
        scores = self.scores.tolist()
        not_normal = [m.start() for m in _NOT_NORMAL.finditer(types_b)]
        for i in not_normal:
            scores[i] = float("inf")
        lo = min(chain((float("inf"),), scores))
        self.pieces, self.reserved, self.user, self.byte_ids = pieces, reserved, user, byte_ids
        self.user_lens = sorted({len(u) for u in user}, reverse=True)
        self.prefixes, self.max_len = prefixes, max_len
        self.unk_score = f32(lo - 10.0) if lo != float("inf") else f32(3.4028234663852886e38 - 10.0)
        self.cut = not whole and UNUSED not in types_b
        # Unigram: the largest |score| a lattice node can add (NORMAL, USER_DEFINED, unknown)
        # bounds the path scores for the float32 rounding argument of _unigram_word (not finite:
        # no word cache). (The pieces that are not NORMAL count as 0.0, which changes neither.)
        self.max_abs_score = None
        if self.kind != "bpe":
            for i in not_normal:
                scores[i] = 0.0
            node_scores = scores + [self.unk_score] + [0.1 * len(u.encode("utf-8")) for u in user]
            if all(map(math.isfinite, node_scores)):
                self.max_abs_score = top = max(map(abs, node_scores))
                n = SURE_TEXT if not top else min(SURE_TEXT, int(NO_REBASE / top))
                while n > 0 and n * top >= NO_REBASE:  # (the no-rebase test of _unigram_cached holds)
                    n -= 1
                self._sure_len, self._sure_u = n, self._rounding(n)
        if self.kind == "bpe":
            self._sure_len = SURE_TEXT  # (a BPE run's ids hold in any text)
        if not self.cut:
            self._sure_len = 0  # (runs not cut apart: none is remembered)
        self._ready = True

    # -- encoding ---------------------------------------------------------------------------
    def encode_piece(self, text: str) -> tuple[int, ...]:
        return tuple(self.encode_normalized(text))

    def encode_normalized(self, text: str) -> list[int]:
        """Ids of already-normalized text, as SentencePieceProcessor.encode gives them."""
        if not text:
            return []
        if not self._ready:
            self._prepare()
        if len(text) <= self._sure_len and text[0] == "\u2581":
            # A short text of runs "\u2581" + word (as the normalizer makes them from single spaces),
            # each remembered in _sure: their ids, without the general way's passes (Unigram: the
            # slack test; both: the findall; str.split finds those runs ~3x quicker). No key is
            # empty: a "\u2581\u2581", or a "\u2581" at the end, splits off a "" that sends the text
            # the general way. (_sure_len is 0 where the runs are not cut apart.)
            parts = list(map(self._sure.get, text[1:].split("\u2581")))
            if None not in parts:
                return self._join(parts)
        if self.kind == "bpe":
            if self.cut:
                return self._bpe_runs(_RUNS.findall(text))
            return self._finish(self._bpe(text))
        if self.cut and self.max_abs_score is not None:
            return self._unigram_cached(text)
        return self._finish(self._unigram(text)[0])

    def _remember_sure(self, items) -> None:
        """_sure's entries for these (run, ids): the runs "\u2581" + a word with no "\u2581", short
        enough for the cache."""
        self._sure.update((w[1:], ids) for w, ids in items
                          if 1 < len(w) <= WORD_CACHE_LEN and w[0] == "\u2581" and w[1] != "\u2581")

    def _bpe_runs(self, runs: list[str]) -> list[int]:
        """BPE over each run apart (see _RUNS), each distinct one once, remembered when short."""
        cache = self.cache
        parts = list(map(cache.get, runs))
        if None in parts:
            if len(cache) >= WORD_CACHE_MAX:
                cache.clear()
                self._long.reset()
                self._sure.clear()
            fresh = dict.fromkeys(compress(runs, map(is_, parts, repeat(None))))
            fresh.update(zip(fresh, self._bpe_fresh(list(fresh))))
            parts = list(map(fresh.get, runs, parts))  # (a hit: not in fresh, its part as it was)
            cache.update(kv for kv in fresh.items() if len(kv[0]) <= WORD_CACHE_LEN)
            self._remember_sure(fresh.items())
            if max(map(len, fresh)) > WORD_CACHE_LEN:
                # The long runs within LongPieces' budget (unspaced lines: Japanese, minified
                # code), so that a text met again costs a lookup a run, as a BPE piece does.
                for run in compress(fresh, map(WORD_CACHE_LEN.__lt__, map(len, fresh))):
                    self._long.add(cache, run, fresh[run])
        return self._join(parts)

    def _bpe_fresh(self, words: list[str]) -> list:
        """The ids of each of these distinct runs: the short ones by one numpy batch merge over the
        pair table when they are many (spm_chunks.merge_words), long ones as glued chunks where
        they can be (_bpe_run, _bpe_chunked), the rest by the heap (_bpe). code.txt under
        mistral-v3, cold: its 98K runs, 18K distinct, took the heap 1.5 s, one merge per run."""
        n_chars = list(map(len, words))
        out: list = [None] * len(words)
        heap_chars = 0  # (the runs _bpe_run takes need no table)
        for k in compress(range(len(words)), map(RUN_CHARS.__le__, n_chars)):
            got = self._bpe_run(words[k])
            if got is None:
                heap_chars += n_chars[k]
            else:
                out[k] = self._finish_one(got, words[k])
        heap_chars += sum(n for n in n_chars if n < RUN_CHARS)
        table = self._table_for(heap_chars)
        if table is not None:
            short = [k for k, n in enumerate(n_chars) if n <= BATCH_WORD_CHARS]
            if sum(n_chars[k] for k in short) >= BATCH_CHARS:
                from .spm_chunks import merge_words

                if len(short) == len(words):  # (then no run was long)
                    out = merge_words(table, words, n_chars, self.pieces, self.unk_id, self._finish_words)
                else:
                    got = merge_words(table, [words[k] for k in short], [n_chars[k] for k in short], self.pieces,
                                      self.unk_id, self._finish_words)
                    for slot, val in zip(short, got):
                        out[slot] = val
        for k in compress(range(len(words)), map(is_, out, repeat(None))):
            w = words[k]
            out[k] = (n_chars[k] >= CHUNK_CHARS and self._bpe_chunked(w, table)) or self._finish(self._bpe(w))
        return out

    def _table_for(self, chars: int):
        """The pair table (spm_chunks.pair_table), or None. It is built once the runs the heap would
        have merged reach TABLE_CHARS_PER_PIECE chars a piece in all (chars: this call's), when
        the heap's time has matched the table's: a text of a few misses never pays for it, and
        none pays much more than twice what the heap alone would have cost."""
        if self._pairs is None:
            self._heap_chars += chars
            if self._heap_chars >= TABLE_CHARS_PER_PIECE * len(self.pieces):
                from .spm_chunks import pair_table

                self._pairs = pair_table(self.pieces, self.scores, self.user,
                                         heap=lambda text: [i for _p, i in self._bpe(text)]) or False
        return self._pairs or None

    def _bpe_chunked(self, w: str, table) -> list[int] | None:
        """_finish(_bpe(w)) of a long run that is no run of one char, as glued chunks merged by numpy
        over table (spm_chunks.merge_run), or None."""
        if table is None:
            return None
        from .spm_chunks import merge_run

        got = merge_run(table, w, self.pieces, self.unk_id, self._piece_lengths())
        return None if got is None else self._finish_one(got, w)

    def _finish_one(self, ids, w: str) -> list[int]:
        """_finish of one run merged as glued chunks (ids: numpy)."""
        import numpy as np

        return self._finish_words(ids, np.array([len(ids)]), w)[0].tolist()

    def _finish_words(self, ids, counts, text: str):
        """_finish of runs merged by numpy (spm_chunks.finish_words)."""
        from .spm_chunks import finish_words

        return finish_words(ids, counts, text, self._piece_lengths(), self.unk_id, self.byte_fallback, self.byte_ids)

    def _piece_lengths(self):
        """Every piece's length in chars (numpy), an unknown char's (unk_id) one."""
        if self._piece_len is None:
            import numpy as np

            self._piece_len = np.ones(self.n, np.int64)
            self._piece_len[list(self.pieces.values())] = list(map(len, self.pieces))
            self._piece_len[self.unk_id] = 1
        return self._piece_len

    def _bpe_run(self, w: str):
        """BPE ids (numpy, before _finish) of a long run of one char (up to RUN_EDGE other chars at
        either end: the leading U+2581), as glued chunks (models/bpe_chunks.py), each distinct one
        merged once; None when w is no such run, holds a user-defined symbol, or its chunks do not glue.
        SentencePiece's BPE is sequential BPE with the best score first, leftmost on ties, so
        the chunk glue's properties hold; and where runs are cut (self.cut) no piece is UNUSED,
        so there is nothing to resegment. The chunks are laid out as bpe_chunks.run_layout says.
        The heap merge of a 10^6-char run took 2.3-4 s (mistral-v3; sentencepiece: 0.2 s)."""
        import numpy as np

        from .bpe_chunks import RUN_EDGE, RUN_PROBE, merge_piece, run_layout

        n, pieces = len(w), self.pieces
        c = w[n // 2]
        head, tail = w.find(c), n - 1 - w.rfind(c)
        if head > RUN_EDGE or tail > RUN_EDGE or w.count(c, head, n - tail) != n - head - tail \
                or c not in pieces or any(u in w for u in self.user):
            return None
        tok_len = self._piece_lengths()
        layout = run_layout(n, [len(p) for p, _i in self._bpe(w[:head + RUN_PROBE])])
        if layout is None:
            return None
        merged: dict = {}  # (start, end), or the length of a chunk within the run -> its ids

        def merge_chunks(starts, ends):
            out, counts = [], []
            for a, b in zip(starts.tolist(), ends.tolist()):
                key = b - a if a >= head and b <= n - tail else (a, b)
                ids = merged.get(key)
                if ids is None:
                    ids = merged[key] = [i for _p, i in self._bpe(w[a:b])]
                out += ids
                counts.append(len(ids))
            return np.array(out, np.int64), np.array(counts, np.int64)

        return merge_piece(n, layout[0], merge_chunks, tok_len, **layout[1])

    def _join(self, parts: list) -> list[int]:
        """The runs' ids in order. Without byte fallback a run of unknowns spanning two runs
        collapses to one unk id, as it would in one run (one C-level scan finds whether any does)."""
        out = concat(parts)
        if self.byte_fallback or self.unk_id not in out:
            return out
        out = []
        unk = self.unk_id
        for ids in parts:
            if ids and out and out[-1] == unk and ids[0] == unk:
                out.extend(ids[1:])
            else:
                out.extend(ids)
        return out

    def _unigram_cached(self, text: str) -> list[int]:
        """Unigram run by run, each distinct run decoded once (_unigram_word) and remembered.

        Each run's lattice only sees the score X the text reached at its start (every path passes
        through the cut), so the whole-text Viterbi is the runs' Viterbis in turn, each started
        from the X the previous one ended with. A run whose remembered choices hold whatever X is
        (_unigram_word) gives its ids from the cache, and its end score is X summed along its
        path in float32, since the lattice keeps exactly those nodes; any other run is decoded
        from its X. A text too short for the lattice ever to rebase its scores needs no X when
        every run's choices hold at the largest score it can reach; else X is followed run by
        run (_unigram_follow)."""
        cache = self.word_cache
        segs = _RUNS.findall(text)
        parts = list(map(cache.get, segs))
        if None in parts:
            if len(cache) >= WORD_CACHE_MAX:
                cache.clear()
                self._sure.clear()
            fresh = dict.fromkeys(compress(segs, map(is_, parts, repeat(None))))
            # (a run too long for its scores ever to stay within RESET is decoded in place, always)
            longest = RESET / (1.001 * self.max_abs_score) if self.max_abs_score else float("inf")
            if len(fresh) >= BATCH_RUNS and ("numpy" in sys.modules or sum(map(len, fresh)) >= BATCH_IMPORT) \
                    and self._lattice_ready():
                # (many at once: one numpy lattice for the short ones)
                from .spm_unigram import DP_CHARS, words

                todo = [w for w in fresh if len(w) < longest and len(w) <= DP_CHARS]
                fresh.update(zip(todo, words(self, self._lattice, todo)))
            fresh = {w: _DECODE if len(w) >= longest else self._unigram_word(w) if got is None else got
                     for w, got in fresh.items()}
            parts = list(map(fresh.get, segs, parts))
            cache.update(kv for kv in fresh.items() if len(kv[0]) <= WORD_CACHE_LEN)
            u = self._sure_u
            self._remember_sure((w, got[0]) for w, got in fresh.items() if got[1] > u)
        if len(text) * self.max_abs_score < NO_REBASE:
            u = self._u.get(len(text))
            if u is None:
                u = self._u[len(text)] = self._rounding(len(text))
            if min(map(itemgetter(1), parts)) > u:
                return self._join(list(map(itemgetter(0), parts)))
        return self._unigram_follow(segs, parts)

    def _lattice_ready(self) -> bool:
        """Whether spm_unigram.words serves this model (its Lattice built on first use)."""
        if self._lattice is None:
            from .spm_unigram import lattice

            self._lattice = lattice(self)
        return bool(self._lattice)

    def _unigram_follow(self, segs: list[str], parts: list) -> list[int]:
        """_unigram_cached with X followed run by run. At a cut nothing else is open, so a rebase
        there (|X| > RESET) sets X to 0; a run whose scores stay within RESET from X (no rebase
        inside it) and whose choices win by more than the float32 rounding at the magnitude it
        reaches gives its remembered ids, any other is decoded from X. (A text long enough to
        rebase went whole through the per-char lattice: en.txt under botchan_en_unigram_1000,
        warm, 352 ms; so 65.)"""
        if len(segs) >= FOLLOW_RUNS and "numpy" in sys.modules:
            from .spm_unigram import follow

            return self._join(follow(self, segs, parts, RESET))
        x = 0.0
        out = []
        width = 1.001 * self.max_abs_score  # (the most a node moves the score, with its rounding)
        ldexp, frexp = math.ldexp, math.frexp
        for w, (ids, slack, path) in zip(segs, parts):
            if x < -RESET or x > RESET:
                x = 0.0  # (f32(x - x): the rebase at the cut)
            reach = 1.001 * abs(x) + len(w) * width
            if reach < RESET and slack > ldexp(1.0, frexp(reach)[1] - 24):
                for sc in path:
                    x = f32(x + sc)
            else:
                pieces, x = self._unigram(w, x)
                ids = self._finish(pieces)
            out.append(ids)
        return self._join(out)

    def _rounding(self, n: int) -> float:
        """u for a text of n chars (n S < RESET, S the largest |node score|): twice the largest
        rounding error of one float32 operation of its lattice. A path holds at most n nodes, so
        every score there stays below n S (a little more, for the roundings themselves), and
        rounding a value under 2^e errs by at most 2^(e-25) = u / 2; the other half covers the
        double arithmetic of _unigram_word."""
        v = 1.001 * n * self.max_abs_score
        return math.ldexp(1.0, math.frexp(v)[1] - 24) if v > 0 else 0.0

    def _unigram_word(self, text: str) -> tuple[tuple[int, ...], float, tuple[float, ...]]:
        """(ids, slack, node scores along the path) of one run between cuts, by Viterbi in exact
        (double) arithmetic.

        Inside a whole text with no rebase, the lattice reaches this run's first position with
        some float32 score X, and each candidate score at the run's position j is X + its exact
        score within the run + an error below j u / 2 (one rounding per node of its path); so
        is the score kept there, whichever candidate won, being the largest of such values. So
        where the exact winner beats every other candidate by more than L u (L positions in the
        run), the float32 lattice keeps the same node whatever X is. Only the positions the
        backtrack visits decide the ids, so slack = (the smallest winning margin over those) / 2L:
        the ids hold within a text whose u (_rounding) is below it. An exact tie gives slack 0.
        """
        n = len(text)
        inf = float("inf")
        # The node loop below repeats _unigram's on purpose: sharing it through a helper call per
        # position cost whole documents 20% (measured), and the two keep different sums.
        best = [0.0] * (n + 1)
        second = [-inf] * (n + 1)
        start = [-1] * (n + 1)
        best_id = [0] * (n + 1)
        best_sc = [0.0] * (n + 1)  # the kept node's own (float32) score
        pieces, prefixes, types, scores = self.pieces, self.prefixes, self.types, self.scores
        max_len, unk_score, unk = self.max_len, self.unk_score, self.unk_id
        for i in range(n):
            here = best[i]
            single = False
            for ln in range(1, min(max_len, n - i) + 1):
                sub = text[i : i + ln]
                if sub not in prefixes:
                    break
                pid = pieces.get(sub)
                if pid is None:
                    continue
                t = types[pid]
                if t == UNUSED:
                    continue
                sc = f32(0.1 * (len(sub.encode("utf-8")) - 1)) if t == USER_DEFINED else scores[pid]
                j = i + ln
                cand = sc + here
                if start[j] == -1:
                    best[j], start[j], best_id[j], best_sc[j] = cand, i, pid, sc
                elif cand > best[j]:
                    second[j] = best[j]
                    best[j], start[j], best_id[j], best_sc[j] = cand, i, pid, sc
                elif cand > second[j]:
                    second[j] = cand
                if ln == 1:
                    single = True
            if not single:
                j = i + 1
                cand = unk_score + here
                if start[j] == -1:
                    best[j], start[j], best_id[j], best_sc[j] = cand, i, unk, unk_score
                elif cand > best[j]:
                    second[j] = best[j]
                    best[j], start[j], best_id[j], best_sc[j] = cand, i, unk, unk_score
                elif cand > second[j]:
                    second[j] = cand
        margin = inf
        out = []
        path = []
        e = n
        while e > 0:
            s = start[e]
            out.append((text[s:e], best_id[e]))
            path.append(best_sc[e])
            if best[e] - second[e] < margin:
                margin = best[e] - second[e]
            e = s
        out.reverse()
        path.reverse()
        return tuple(self._finish(out)), margin / (2 * n), tuple(path)

    def _finish(self, result: list[tuple[str, int]]) -> list[int]:
        """Byte fallback for unknown pieces, else collapse runs of unknowns (PopulateSentencePieceText)."""
        out: list[int] = []
        prev_unk = False
        unk = self.unk_id
        for w, i in result:
            is_unk = i == unk
            if is_unk and self.byte_fallback:
                out.extend(self.byte_ids[b] for b in w.encode("utf-8"))
            elif not (is_unk and prev_unk):
                out.append(i)
            prev_unk = is_unk
        return out

    def _symbols(self, text: str) -> tuple[list[str], list[bool]]:
        """Initial symbols: the longest user-defined symbol (frozen) or one character."""
        user, lens = self.user, self.user_lens
        syms, frozen = [], []
        i, n = 0, len(text)
        while i < n:
            for ln in lens:
                if text[i : i + ln] in user:
                    syms.append(text[i : i + ln])
                    frozen.append(True)
                    i += ln
                    break
            else:
                syms.append(text[i])
                frozen.append(False)
                i += 1
        return syms, frozen

    def _bpe(self, text: str) -> list[tuple[str, int]]:
        syms, frozen = self._symbols(text)
        n = len(syms)
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        pieces, scores, types = self.pieces, self.scores, self.types
        heap: list = []
        rev: dict[str, tuple[str, str]] = {}

        def add(left, right):
            if left == -1 or right == -1 or frozen[left] or frozen[right]:
                return
            p = syms[left] + syms[right]
            i = pieces.get(p)
            if i is None:
                return
            heapq.heappush(heap, (-scores[i], left, right, len(p)))
            if types[i] == UNUSED:
                rev[p] = (syms[left], syms[right])

        for k in range(1, n):
            add(k - 1, k)
        while heap:
            _s, left, right, size = heapq.heappop(heap)
            a, b = syms[left], syms[right]
            if not a or not b or len(a) + len(b) != size:
                continue
            syms[left] = a + b
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            syms[right] = ""
            add(prev[left], left)
            add(left, nxt[left])
        out: list[tuple[str, int]] = []

        unk = self.unk_id

        def resegment(w, depth):
            # A merged UNUSED piece goes back to the two symbols it was made of (at most 100 deep);
            # an UNUSED piece never made by a merge, or a reserved one, is unknown.
            i = pieces.get(w, unk)
            if depth > MAX_RESEGMENT_DEPTH or i == unk or types[i] != UNUSED:
                out.append((w, i))
            elif w not in rev:
                out.append((w, unk))
            else:
                resegment(rev[w][0], depth + 1)
                resegment(rev[w][1], depth + 1)

        k = 0
        while k != -1:
            resegment(syms[k], 0)
            k = nxt[k]
        return out

    def _unigram(self, text: str, base: float = 0.0) -> tuple[list[tuple[str, int]], float]:
        """SentencePiece's Viterbi over text, its lattice starting from score `base` (the score a
        longer text reached where this run of it starts): the pieces and the score at the end."""
        n = len(text)
        best = [0.0] * (n + 1)
        best[0] = base
        start = [-1] * (n + 1)
        best_id = [0] * (n + 1)
        pieces, prefixes, types, scores = self.pieces, self.prefixes, self.types, self.scores
        max_len, unk_score, unk = self.max_len, self.unk_score, self.unk_id
        node_score: dict[int, float] = {}
        frontier = 0
        for i in range(n):
            here = best[i]
            if here < -RESET or here > RESET:
                # Keep float32 sums precise on long texts: SentencePiece rebases every score from here
                # to the frontier on the score at this position (in float32), as below.
                for k in range(i, frontier + 1):
                    if k == i or start[k] != -1:
                        best[k] = f32(best[k] - here)
                here = 0.0
            single = False
            for ln in range(1, min(max_len, n - i) + 1):
                sub = text[i : i + ln]
                if sub not in prefixes:
                    break
                pid = pieces.get(sub)
                if pid is None:
                    continue
                t = types[pid]
                if t == UNUSED:
                    continue
                j = i + ln
                if j > frontier:
                    frontier = j
                sc = node_score.get(pid)
                if sc is None:
                    # User-defined symbols: 0.1 x (bytes - 1), computed in double, stored as float.
                    sc = f32(0.1 * (len(sub.encode("utf-8")) - 1)) if t == USER_DEFINED else scores[pid]
                    node_score[pid] = sc
                cand = f32(sc + here)
                if start[j] == -1 or cand > best[j]:
                    best[j] = cand
                    start[j] = i
                    best_id[j] = pid
                if ln == 1:
                    single = True
            if not single:
                j = i + 1
                if j > frontier:
                    frontier = j
                cand = f32(unk_score + here)
                if start[j] == -1 or cand > best[j]:
                    best[j] = cand
                    start[j] = i
                    best_id[j] = unk
        out = []
        e = n
        while e > 0:
            s = start[e]
            out.append((text[s:e], best_id[e]))
            e = s
        out.reverse()
        return out, best[n]

    # -- decoding ---------------------------------------------------------------------------
    def decode(self, ids: list[int]) -> str:
        """SentencePieceProcessor.decode (0.2.3's DecodeOptimized): CONTROL pieces vanish, the unk
        piece gives unk_surface, U+2581 becomes ' ', the first visible piece loses one leading
        U+2581 (with remove_extra_whitespaces, every piece does until some text is out), and runs of
        byte pieces are decoded character by character with one U+FFFD per invalid byte."""
        from ..pipeline import UnknownTokenError
        from ..spm_normalizer import char_len

        types, n = self.types, self.n
        out: list[str] = []
        nonempty = False
        run = bytearray()
        is_bos_ws = True
        strip_first = self.add_dummy_prefix or self.remove_extra

        def flush():
            if not run:
                return False
            parts, k = [], 0
            while k < len(run):
                ok, ln = char_len(run, k)
                parts.append(run[k : k + ln].decode("utf-8") if ok else "\ufffd")
                k += ln
            run.clear()
            out.append("".join(parts))
            return True

        for i in ids:
            if not 0 <= i < n:
                raise UnknownTokenError(f"Invalid id: {i} (vocabulary of {n})")
            t = types[i]
            if t == BYTE:
                run.append(int(self.piece(i)[3:5], 16))
                continue
            nonempty = flush() or nonempty
            if nonempty:
                is_bos_ws = False
            if t == CONTROL:
                continue
            p = self.piece(i)
            has_ws = False
            if is_bos_ws and strip_first:
                if p.startswith(WS):
                    p = p[1:]
                    has_ws = not self.remove_extra
            s = self.unk_surface if t == UNKNOWN else p.replace(WS, " ")
            if s:
                out.append(s)
                nonempty = True
            if has_ws or nonempty:
                is_bos_ws = False
        flush()
        return "".join(out)
