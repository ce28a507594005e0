"""Character-level BPE (tokenizers' BPE without ByteLevel: Llama 2, Gemma 3), with byte fallback.

A piece's initial symbols are its characters' vocabulary ids: continuing_subword_prefix on every
char but the first, end_of_word_suffix on the last. A char missing from the vocabulary becomes
its `<0xHH>` byte tokens when byte_fallback is on and all of them exist, otherwise the unk token
(adjacent unks fuse under fuse_unk; with no unk token the char is dropped). The merge loop itself
is the byte-level one (models/bpe.py: lowest rank first, ties leftmost), over the same packed
merge table; only the initial symbols and the offsets differ. Kept separate from the tokenizer.json
reader so a SentencePiece .model BPE can reuse it.

Offsets follow tokenizers: each symbol has a byte length in the piece (a char's UTF-8 length, 1
per fallback byte, the sum for fused unks); a token spans its symbols' bytes, mapped to code points.
"""

from __future__ import annotations

import re
from itertools import accumulate, chain, compress, repeat
from operator import add, is_, is_not, itemgetter

from . import bpe, concat
from .bpe import BPE, batch_pays

LONG_TEXT = 256  # chars; from here a piece is cut by the numpy bigram table (models/charcut.py)
PIECE_CHARS = 48  # chars; a longer piece is remembered within LongPieces' budget
MANY_PIECES = 64  # fresh pieces in one call from which all of them, short ones too, are cut in one pass
CHUNK_CHARS = 512  # chars; a sub-piece this long is merged as glued chunks (models/bpe_chunks.py)


class CharBPE(BPE):
    def __init__(self, f, meta: dict):
        self._unkept_subs = None
        super().__init__(f, meta)
        m = meta["model"]
        self.byte_fallback = bool(m.get("byte_fallback", False))
        self.fuse_unk = bool(m.get("fuse_unk", False))
        self.prefix = m.get("continuing_subword_prefix") or ""
        self.suffix = m.get("end_of_word_suffix") or ""
        self.byte_tokens_merge = m.get("byte_tokens_merge")  # see models/charcut.py ...
        self.byte_tokens_first = m.get("byte_tokens_first")  # ... and _bytes_tokens
        self.prefix_len = len(self.prefix.encode("utf-8"))
        boundaries = m.get("boundaries") or ""
        # Cut points of a piece: before a boundary char that follows a different char (see
        # exporter/sp_steps.char_bpe_meta for why no merge can cross them).
        self.cut = None
        if boundaries and not self.prefix and not self.suffix:
            cls = "".join(re.escape(c) for c in boundaries)
            self.cut = re.compile(f"(?s)(.)(?!\\1)(?=[{cls}])")
        self._byte_tok = None
        # The merge-bigram table (models/charcut.py) refines `cut` once a piece is long enough to
        # pay for numpy: None = not built yet, False = unusable (prefix/suffix or odd vocabulary).
        self._table = None if not self.prefix and not self.suffix else False
        self._cut_rx = None
        self.char_cache: dict[str, tuple | None] = {}
        self._own_chars: set[str] = set()  # chars seen to start as their own token (no fallback)
        self._char_tok: dict[str, int] = {}  # chars that are tokens of their own (the batch's start)
        self._subs: dict[str, tuple[int, ...]] = {}
        self._char_len = None  # every token's length in chars, for bpe_chunks (False: unusable)

    # -- the caches, filled late --------------------------------------------------------------
    # A first call over a long text (Gemma 3's lines, Llama 2's one piece) makes the ids of every
    # long piece and of every distinct part as flat arrays; the tuples that the caches hold are
    # made from them only when a later call reads a cache (BPE.piece_cache, which calls
    # _keep_waiting, and sub_cache), not in the call that merged them: the first call hands its
    # ids out straight from the arrays. A second call
    # over the same text then pays what the first one left. Gemma 3 over wagahai.txt, a fresh
    # tokenizer: ~19K tuples and dict entries (2.3K lines, 17K distinct parts) off the first call,
    # ~59 -> ~52 ms; the second call ~4 -> ~7 ms (it fills the lines' entries as it reads them).
    def _keep_waiting(self) -> None:
        pending, self._unkept = self._unkept, None  # (taken first, as BPE's own: see there)
        if pending is not None:
            self._keep_unkept(pending)
        super()._keep_waiting()

    @property
    def sub_cache(self) -> dict:
        self._keep_unkept_subs()
        return self._subs

    def _keep_unkept(self, pending) -> None:
        """Remember the long pieces of an encode_word_parts call: pending is (pieces, their ids
        back to back, where each piece starts)."""
        pieces, ids, at = pending
        cache = self._pieces
        for w, a, b in zip(pieces, at, at[1:] + [len(ids)]):
            if w not in cache:
                self._keep_piece(w, ids[a:b])

    def _keep_unkept_subs(self) -> None:
        """Remember the parts of the _encode_subs batch waiting, if any: (texts, ids back to back,
        count each), taken off the model first (as in piece_cache)."""
        pending = self._unkept_subs
        if pending is None:
            return
        self._unkept_subs = None
        import numpy as np

        from .textparts import tuples

        texts, final, counts = pending
        self._subs.update(zip(texts, tuples(final, np.cumsum(counts) - counts, counts)))

    # -- initial symbols ---------------------------------------------------------------------
    def _bytes_tokens(self):
        if self._byte_tok is None:
            names = [f"<0x{b:02X}>".encode() for b in range(256)]
            first = self.byte_tokens_first  # the exporter found the 256 at consecutive ids
            off = self.off
            # (checked at once: the 256 tokens' offsets 6 bytes apart, their bytes the names joined;
            # 256 token_bytes calls took ~0.5 ms of a fresh tokenizer's first long piece)
            if first is not None and 0 <= first and first + 256 < len(off) \
                    and off[first:first + 257].tolist() == list(range(off[first], off[first] + 1537, 6)) \
                    and self.tb[off[first]:off[first + 256]] == b"".join(names):
                self._byte_tok = list(range(first, first + 256))
            else:  # (older files) 256 binary searches
                self._byte_tok = list(map(self.lookup, names))
        return self._byte_tok

    def _resolve(self, s: str):
        """(ids,) of a symbol string: its own id, its fallback bytes, or None (unk). A char's id
        comes from the cut table when it is built (one index, where lookup binary-searches the
        vocabulary: ~14 us; Gemma 3 over wagahai.txt: 2,300 chars, 40 ms)."""
        table = self._table
        if table and len(s) == 1:
            i = table.id_of(ord(s))
            i = None if i < 0 else i
        else:
            i = self.lookup(s.encode("utf-8", "surrogatepass"))
        if i is not None:
            return (i,), False
        return self._no_token(s)

    def _no_token(self, s: str):
        """_resolve of a symbol string that is no token: its fallback bytes, or None (unk)."""
        if self.byte_fallback:
            bt = self._bytes_tokens()
            ids = tuple(bt[b] for b in s.encode("utf-8", "surrogatepass"))
            if None not in ids:
                return ids, True
        return None, False

    def _initial(self, text: str):
        """(ids, byte lengths) of the initial symbols, as tokenizers' merge_word builds them."""
        ids: list[int] = []
        lens: list[int] = []
        unk = None  # pending (unk id, byte length), as tokenizers keeps it
        cache = self.char_cache
        plain = not self.prefix and not self.suffix
        last = len(text) - 1
        unk_id = self.unk_id
        for k, c in enumerate(text):
            if plain:
                hit = cache.get(c)
                if hit is None:
                    hit = cache[c] = self._resolve(c)
            else:
                s = c
                if k > 0:
                    s = self.prefix + s
                if k == last:
                    s = s + self.suffix
                hit = self._resolve(s)
            toks, fallback = hit
            if toks is not None and not fallback:
                if unk is not None:
                    ids.append(unk[0])
                    lens.append(unk[1])
                    unk = None
                ids.append(toks[0])
                lens.append(len(c.encode("utf-8", "surrogatepass")) if c >= "\x80" else 1)
            elif toks is not None:
                # Fallback bytes do not flush a pending unk (tokenizers adds it later).
                ids.extend(toks)
                lens.extend([1] * len(toks))
            elif unk_id is not None:
                n = len(c.encode("utf-8", "surrogatepass"))
                if unk is not None and self.fuse_unk:
                    unk = (unk[0], unk[1] + n)
                else:
                    if unk is not None:
                        ids.append(unk[0])
                        lens.append(unk[1])
                    unk = (unk_id, n)
            # no unk token: the char is dropped
        if unk is not None:
            ids.append(unk[0])
            lens.append(unk[1])
        return ids, lens

    # -- encoding ----------------------------------------------------------------------------
    def _build_table(self):
        from .charcut import CutTable

        try:
            self._table = CutTable(self)
        except (ValueError, UnicodeError):
            self._table = False
            return
        self._cut_rx = self._table.cut_regex()

    def _subpieces(self, text: str):
        if len(text) < 16:
            return [text]
        rx = self._cut_rx
        if rx is not None:
            # Candidate cuts before separators; the left char must start as its own token. All
            # cuts at once (re.split, C), each distinct left char checked once; a left char that
            # is no token of its own (rare) takes the loop below, which skips that cut.
            out, cache = rx.split(text), self.char_cache
            if len(out) == 1:
                return out
            out[1:] = map(add, out[1::2], out[2::2])  # each cut char starts the piece after it
            lefts = set(map(itemgetter(-1), out[:-1]))
            if lefts <= self._own_chars:  # (one C-level subset test: a line's left chars are known)
                return out
            for c in lefts:
                hit = cache.get(c)
                if hit is None:
                    hit = cache[c] = self._resolve(c)
                if hit[0] is None or hit[1]:
                    break
                self._own_chars.add(c)
            else:
                return out
            out, prev = [], 0
            for m in rx.finditer(text):
                k = m.start()
                c = text[k - 1]
                hit = cache.get(c)
                if hit is None:
                    hit = cache[c] = self._resolve(c)
                if hit[0] is not None and not hit[1] and k > prev:
                    out.append(text[prev:k])
                    prev = k
            out.append(text[prev:])
            return out
        if self.cut is None:
            return [text]
        out, prev = [], 0
        for m in self.cut.finditer(text):
            out.append(text[prev : m.end()])
            prev = m.end()
        out.append(text[prev:])
        return out

    def _encode_sub(self, text: str) -> tuple[int, ...]:
        hit = self.sub_cache.get(text)
        if hit is not None:
            return hit
        out = tuple(self._merge(self._initial(text)[0]))
        if len(text) <= 160:  # code has long unbroken runs (paths, identifiers) that recur
            self.sub_cache[text] = out
        return out

    def _whole(self, text: str):
        if self.ignore_merges:
            return self.lookup(text.encode("utf-8", "surrogatepass"))
        return None

    def encode_piece(self, text: str) -> tuple[int, ...]:
        hit = self.piece_cache.get(text)
        if hit is not None:
            return hit
        if not text:
            return ()
        i = self._whole(text)
        if i is None and len(text) >= 64 and self._table is None:
            self._build_table()
        if i is not None:
            out = (i,)
        elif len(text) >= LONG_TEXT and self._table:
            from .charcut import encode_long

            out = encode_long(text, self._table, self._encode_subs, self.sub_cache)
        else:
            subs = self._subpieces(text)
            if len(subs) == 1:
                out = self._encode_sub(text)
            else:
                parts = list(map(self.sub_cache.get, subs))  # mostly hits: one C-level pass
                if None in parts:
                    parts = list(map(self._encode_sub, subs))
                out = tuple(chain.from_iterable(parts))
        return self._keep_piece(text, out)

    def _keep_piece(self, piece: str, ids):
        """Put piece -> ids in the piece cache (a long piece within LongPieces' budget); the ids to
        hand out (a tuple when remembered)."""
        if len(piece) <= PIECE_CHARS:
            ids = self.piece_cache[piece] = ids if type(ids) is tuple else tuple(ids)
            return ids
        return self._long.add(self.piece_cache, piece, ids)

    def encode_words(self, words: list[str]):
        """Ids of many pieces (the whole-stretch path, runtime/fastpath.py), a list or a tuple.
        (Llama 2 has one piece per text: its tuple as it is, not copied once more.)"""
        parts = self.encode_word_parts(words)
        return parts[0] if len(parts) == 1 else concat(parts)

    def cached_parts(self, words: list[str]) -> list | None:
        """encode_word_parts(words) when every word is cached (one C-level pass), else None."""
        parts = list(map(self.piece_cache.get, words))
        return None if None in parts else parts

    def encode_word_parts(self, words: list[str]) -> list[tuple[int, ...]]:
        """Each piece's ids. The pieces not remembered are cut into sub-pieces all at once, and
        those not remembered either are merged in one batch (_encode_subs)."""
        cache = self.piece_cache
        parts = list(map(cache.get, words))
        if None not in parts:
            return parts
        if self.ignore_merges:
            return list(map(self.encode_piece, words))
        fresh = dict.fromkeys(compress(words, map(is_, parts, repeat(None))))
        if len(cache) + len(fresh) > bpe.CACHE_MAX:  # (parts holds its hits already)
            cache.clear()
            self._long.reset()
        many = len(fresh) >= MANY_PIECES
        if self._table is None and (many or max(map(len, fresh)) >= 64):
            self._build_table()
        # Many fresh pieces (a document's lines, each a stretch between Gemma 3's newline tokens)
        # are cut in one encode_long pass below, short ones too: ~5 us of per-piece Python each
        # in _subpieces is more than their share of the pass (Gemma 3 cold code.txt 3.1 -> 4.3 MiB/s).
        one_pass = many and bool(self._table)
        short = [] if one_pass else [w for w in fresh if w and (len(w) < LONG_TEXT or not self._table)]
        split = list(map(self._subpieces, short))
        subs = list(chain.from_iterable(split))
        got = list(map(self.sub_cache.get, subs))
        if None in got:
            missing = list(dict.fromkeys(compress(subs, map(is_, got, repeat(None)))))
            new = dict(zip(missing, self._encode_subs(missing)))
            got = list(map(new.get, subs, got))  # a new sub-piece's ids, else the hit itself
        at = 0
        for w, sp in zip(short, split):
            ids = tuple(chain.from_iterable(got[at:at + len(sp)])) if len(sp) > 1 else got[at]
            at += len(sp)
            fresh[w] = self._keep_piece(w, ids)
        longs = [w for w, ids in fresh.items() if ids is None and w and (one_pass or len(w) >= LONG_TEXT)] \
            if self._table else []
        if len(longs) > 1:  # all of them cut in one pass, their missing parts merged in one batch
            from .charcut import encode_long

            bounds = [0, *accumulate(map(len, longs[:-1]))]
            flat, at = encode_long("".join(longs), self._table, self._encode_subs, self.sub_cache, bounds)
            for w, a, b in zip(longs, at, at[1:] + [len(flat)]):
                fresh[w] = flat[a:b]  # (a list of its own: remembered later, as a tuple, from flat)
        else:
            longs = None
        for w, ids in fresh.items():
            if ids is None:  # a long piece alone, ""
                fresh[w] = self.encode_piece(w)
        if longs:
            self._unkept = (longs, flat, at)  # (see piece_cache; set last: encode_piece reads the cache)
        return list(map(fresh.get, words, parts))  # a fresh piece's ids, else the hit itself

    def _encode_subs(self, texts: list[str], flat: bool = False):
        """_encode_sub of many distinct uncached sub-pieces: one numpy batch merge (models/bpe_batch.py,
        the merge the byte-level batch uses) of those whose chars are all tokens of their own,
        when there are enough of them; the rest one by one. With flat: (that list, (the batch's
        ids back to back, count per text) when every text came from it, in order, else None),
        so that a caller wanting the ids as an array need not take the tuples apart again; the
        list is then None, its tuples made only when the cache is next read (see sub_cache).
        (No lookup of whole tokens first, as the byte-level batch has: of Gemma 3's 16.7K distinct
        parts of wagahai.txt only 3.1K merge to one token, so such a lookup would spare the rounds
        a fifth of their words and cost a pass over all of them.)"""
        n_chars = sum(map(len, texts))
        if self.prefix or self.suffix or not batch_pays(n_chars):
            out = list(map(self._encode_sub, texts))
            return (out, None) if flat else out
        import numpy as np

        from .textparts import tuples

        joined = "".join(texts)
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        out: list = [None] * len(texts)
        fallback = None
        if self._table:  # each char's own token (or -1) in one gather from the cut table
            sym = self._table.ids_of(np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32))
            own = sym >= 0
            everyone = bool(own.all())
            sym = sym.astype(np.int64)
        else:
            tok = self._char_tok
            ids = list(map(tok.get, joined))
            if None in ids:
                self._learn_chars(set(compress(joined, map(is_, ids, repeat(None)))))
                ids = list(map(tok.get, joined))
            everyone = None not in ids
            if not everyone:
                own = np.fromiter(map(is_not, ids, repeat(None)), bool, len(ids))
                ids = [-1 if i is None else i for i in ids]
            sym = np.array(ids, np.int64)
        if everyone:
            which = range(len(texts))
        else:  # a char with no token of its own (unk, byte fallback)
            ok = np.logical_and.reduceat(own, np.cumsum(lengths) - lengths) & (lengths > 0)
            fallback = np.flatnonzero(~ok & (lengths > 0) & (lengths < CHUNK_CHARS)).tolist()
            sym = sym[np.repeat(ok, lengths)]
            lengths = lengths[ok]
            which = np.flatnonzero(ok).tolist()
        if len(which) or fallback:
            if self._batch is None:
                self._start_batch()
        if len(which) and int(lengths.max()) >= CHUNK_CHARS:  # long words: overlapping chunks (bpe_chunks.py)
            sym, lengths, which = self._chunked(sym, lengths, list(which), out)
        if fallback:  # words with byte-fallback chars join the batch as their initial symbols
            sym, lengths, which = self._with_fallback_words(texts, fallback, sym, lengths, list(which))
        whole = None  # (final, counts) when the batch made every text's ids, in order
        if len(which):
            final, counts = self._merge_batch(sym, lengths)
            if flat and type(which) is range and len(counts) == len(texts) and int(lengths.max()) <= 160:
                # Every text from the batch, in order, and the caller takes the arrays: the tuples
                # for the cache are made when it is next read (see sub_cache), not now.
                self._keep_unkept_subs()  # (one batch waits at a time: an earlier one's entries first)
                self._unkept_subs = (texts, final, counts)
                return None, (final, counts)
            # (C-level; with the one cache update below, 16.7K parts 6.7 -> 5.3 ms)
            got = tuples(final, np.cumsum(counts) - counts, counts)
            if type(which) is range:
                out = got
                if len(got) == len(texts):
                    whole = (final, counts)
            else:
                for slot, val in zip(which, got):
                    out[slot] = val
        cache = self.sub_cache
        if None not in out and max(map(len, texts)) <= 160:  # (the usual case: one C-level update)
            cache.update(zip(texts, out))
            return (out, whole) if flat else out
        for k, t in enumerate(texts):
            if out[k] is None:
                out[k] = self._encode_sub(t)
                whole = None
            elif len(t) <= 160:
                cache[t] = out[k]
        return (out, whole) if flat else out

    def _learn_chars(self, chars) -> None:
        """char_cache entries (and _char_tok, for chars that are tokens of their own) for many chars."""
        tok, cache = self._char_tok, self.char_cache
        for c in chars:
            hit = cache.get(c)
            if hit is None:
                hit = cache[c] = self._resolve(c)
            if hit[0] is not None and not hit[1]:
                tok[c] = hit[0][0]

    def _with_fallback_words(self, texts, idx, sym, lengths, which):
        """The batch (sym, lengths, which) with the words texts[k] (k in idx) added as their initial
        symbols, where each char that is no token of its own is its byte tokens (byte fallback);
        a word with a char that would be unk stays out (its pending unk follows rules of its own)."""
        import numpy as np

        cache = self.char_cache
        self._learn_chars(set(chain.from_iterable(texts[k] for k in idx)))
        add_sym, add_len, add_which = [], [], []
        for k in idx:
            syms = []
            for c in texts[k]:
                hit = cache[c]  # (every char learned above)
                if hit[0] is None:
                    break
                syms.extend(hit[0])
            else:
                add_sym.extend(syms)
                add_len.append(len(syms))
                add_which.append(k)
        if not add_which:
            return sym, lengths, which
        return (np.concatenate((sym, np.array(add_sym, np.int64))), np.concatenate((lengths, np.array(add_len, np.int64))),
                which + add_which)

    def _chunked(self, sym, lengths, which, out):
        """Merge each word of CHUNK_CHARS or more (symbols: one own-token id per char) as glued
        chunks into out[which[j]] (a run of one char: _merge_run); return (sym, lengths, which) of
        the words left for the batch."""
        import numpy as np

        from .bpe_chunks import merge_piece, worth_chunking

        tok_len = self._char_lengths()
        if tok_len is None:
            return sym, lengths, which
        first = np.cumsum(lengths) - lengths
        keep = np.ones(len(lengths), bool)
        for j in np.flatnonzero(lengths >= CHUNK_CHARS).tolist():
            piece = sym[first[j]:first[j] + lengths[j]]
            if not worth_chunking(piece):
                got = self._merge_run(piece, tok_len)
            else:
                got = merge_piece(len(piece), None, lambda starts, ends: self._merge_symbol_ranges(piece, starts, ends),
                                  tok_len)
            if got is not None:
                out[which[j]] = tuple(got.tolist())
                keep[j] = False
        if keep.all():
            return sym, lengths, which
        return sym[np.repeat(keep, lengths)], lengths[keep], list(compress(which, keep.tolist()))

    def _merge_batch(self, sym, lengths):
        """(final symbols, count per word) of the batch merge of these words, where each word of
        CHUNK_CHARS or more still here (a run whose chunks did not glue, or one with more than a
        few other chars) merges alone, its rounds going on while they merge in bulk (min_yield
        bpe.SLOW_ROUND, as BPE's long pieces do) and the heap taking the rest. In the batch, such
        a word went whole to the scalar heap as soon as it was among the last FINISH_WORDS words:
        Gemma 3 over 10^6 "a" took 1.9 s there, where rounds halve the run (its pair's merge is
        monotone); runs whose merges are not (spaces) go to the heap after one round either way."""
        import numpy as np

        from .textparts import ranges

        merge = self._batch.merge
        long = np.flatnonzero(lengths >= CHUNK_CHARS)
        if not len(long):
            return merge(sym, lengths, self._merge)
        first = np.cumsum(lengths) - lengths
        counts = np.zeros(len(lengths), np.int64)
        got = {}
        short = np.flatnonzero(lengths < CHUNK_CHARS)
        if len(short):
            got_s = merge(sym[ranges(first[short], lengths[short])], lengths[short], self._merge)
            counts[short] = got_s[1]
        for j in long.tolist():
            got[j] = merge(sym[first[j]:first[j] + lengths[j]], lengths[j:j + 1], self._merge, bpe.SLOW_ROUND)
            counts[j] = got[j][1][0]
        begin = np.cumsum(counts) - counts
        final = np.empty(int(counts.sum()), np.int64)
        if len(short):
            final[ranges(begin[short], got_s[1])] = got_s[0]
        for j, (f, c) in got.items():
            final[begin[j]:begin[j] + int(c[0])] = f
        return final, counts

    def _merge_run(self, piece, tok_len):
        """BPE ids of a run of one symbol (bpe_chunks.run_layout: up to RUN_EDGE others at either
        end) as glued chunks, each distinct chunk within the run merged once; None when it is no
        such run or its chunks do not glue (the caller then merges it as before). Rounds over a
        run whose pair merge is not monotone merge one pair a round (Gemma 3's spaces, Llama 2's
        "a"), and the heap then took 1.3-1.7 s for 10^6 chars."""
        import numpy as np

        from .bpe_chunks import RUN_EDGE, RUN_PROBE, merge_piece, run_layout
        from .textparts import ranges

        n = len(piece)
        s = int(piece[n // 2])
        same = piece == s
        head, tail = int(np.argmax(same)), int(np.argmax(same[::-1]))
        if head > RUN_EDGE or tail > RUN_EDGE or not same[head:n - tail].all():
            return None
        layout = run_layout(n, tok_len[self._merge(piece[:head + RUN_PROBE].tolist())].tolist())
        if layout is None:
            return None
        cache: dict[int, np.ndarray] = {}  # a chunk's length within the run -> its ids

        def merge_chunks(starts, ends):
            lengths = ends - starts
            inner = np.flatnonzero((starts >= head) & (ends <= n - tail))
            outer = np.flatnonzero((starts < head) | (ends > n - tail))
            counts = np.zeros(len(starts), np.int64)
            todo = sorted(set(lengths[inner].tolist()) - cache.keys())
            if todo:
                got, got_counts = self._merge_symbol_ranges(np.full(sum(todo), s, np.int64), np.cumsum(todo) - todo,
                                                            np.cumsum(todo))
                cache.update(zip(todo, np.split(got, np.cumsum(got_counts)[:-1])))
            known = np.array(sorted(cache), np.int64)
            part_len = np.array([len(cache[k]) for k in known.tolist()], np.int64)
            which = np.searchsorted(known, lengths[inner])
            counts[inner] = part_len[which]
            if len(outer):
                out_ids, counts[outer] = self._merge_symbol_ranges(piece, starts[outer], ends[outer])
            begin = np.cumsum(counts) - counts
            flat = np.empty(int(counts.sum()), np.int64)
            parts = np.concatenate([cache[k] for k in known.tolist()])
            flat[ranges(begin[inner], counts[inner])] = parts[ranges((np.cumsum(part_len) - part_len)[which],
                                                                     counts[inner])]
            if len(outer):
                flat[ranges(begin[outer], counts[outer])] = out_ids
            return flat, counts

        return merge_piece(n, layout[0], merge_chunks, tok_len, **layout[1])

    def _merge_symbol_ranges(self, sym, starts, ends):
        """(ids back to back, count per range) of merging each sym[starts[k]:ends[k]] as a word.
        (Not BPE._merge_ranges, which takes bytes: that one stays byte-level for BPE._encode_many.)"""
        import numpy as np

        lengths = ends - starts
        idx = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
        final, counts = self._batch.merge(sym[idx], lengths, self._merge)
        return final.astype(np.int64), counts

    def _char_lengths(self):
        """Every token's length in chars (numpy), or None when a token boundary splits a char."""
        if self._char_len is None:
            import numpy as np

            tb = np.frombuffer(self.tb, np.uint8)
            off = np.frombuffer(self.off, np.uint32).astype(np.int64)
            lead = (tb & 0xC0) != 0x80
            if not lead[off[off < len(tb)]].all():
                self._char_len = False
            else:
                # Each non-empty token's lead bytes summed in place (reduceat over their starts,
                # each segment running to the next one's): a running sum over every byte took
                # Gemma 3's 2.3 MB 12-14 ms, this 7. Empty tokens hold no byte and count 0.
                lead, starts = lead[:int(off[-1])], off[:-1]
                full = starts < off[1:]
                if len(lead) and full.all():
                    n = np.add.reduceat(lead, starts, dtype=np.int64)
                else:
                    n = np.zeros(len(starts), np.int64)
                    if full.any():
                        n[full] = np.add.reduceat(lead, starts[full], dtype=np.int64)
                self._char_len = n
        return self._char_len if self._char_len is not False else None

    def piece_offsets(self, text: str, toks) -> list[tuple[int, int]]:
        if not toks:
            return []
        if len(toks) == 1 and self._whole(text) == toks[0]:
            return [(0, len(text))]
        ids0, lens0 = self._initial(text)
        off, plen = self.off, self.prefix_len
        data_len = sum(len(c.encode("utf-8", "surrogatepass")) if c >= "\x80" else 1 for c in text)
        ascii_ = data_len == len(text)
        if not ascii_:
            char_of = []
            for ci, ch in enumerate(text):
                char_of.extend([ci] * len(ch.encode("utf-8", "surrogatepass")))
        out = []
        j, n0, pos = 0, len(ids0), 0
        n = data_len
        for t in toks:
            # A merged token's string is its symbols' strings joined (the prefix stripped from
            # every right side), so its symbols are found by adding up their lengths.
            target = off[t + 1] - off[t]
            b0 = pos
            if j < n0:
                acc = off[ids0[j] + 1] - off[ids0[j]]
                pos += lens0[j]
                j += 1
                while acc < target and j < n0:
                    acc += off[ids0[j] + 1] - off[ids0[j]] - plen
                    pos += lens0[j]
                    j += 1
            b1 = pos
            if n == 0:
                out.append((0, 0))
            elif ascii_:
                out.append((min(b0, n), min(b1, n)))
            else:
                out.append((char_of[min(b0, n - 1)], char_of[max(min(b1, n) - 1, 0)] + 1))
        return out
