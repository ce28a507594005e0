"""Unigram (tokenizers' rules) for many distinct words at once, with numpy: the miss path of a
long call (unigram.py walks one word's lattice at a time, ~7 us a word of Python).

The same lattice as Unigram._viterbi, built for every word together:
- Candidates: every substring that is a piece, found by rounds over its length. A substring's
  hash (a polynomial over its code points, mod 2^64) grows by one char a round; one probe of an
  open-addressing table of the pieces' and their proper prefixes' hashes says whether it is a
  piece (then its chars are compared with the piece's, so a hash collision can never give a
  wrong piece) and whether it is a prefix of one: a start goes on to the next length only then
  (the scalar loop's `break`; a collision there only costs a probe more), within the longest
  piece and its word. A char that no one-char piece matches gets an unk node (unk score).
- Viterbi: the start positions in order, all words at once, each candidate relaxing its end
  node. A node's best is replaced only by a strictly greater best[start] + score (f64, the same
  sums as the scalar loop), so of equal ones the smallest start stays, as in the scalar loop,
  which visits starts in ascending order and keeps the first best.
- The best paths are read back from every word's end at once, and each run of unk nodes (a
  matched unk piece among them) becomes one token: its text looked up again, else the unk id.

Left to the scalar lattice (None in the result): words that need an unk node when the model has
no unk id (it raises), words whose fused unk run is no piece under byte_fallback (their paths are
returned for the caller to finish), and words longer than the Viterbi steps take that have a
candidate of two chars or more. A vocabulary whose hashes collide between two different pieces,
or with a score that is not finite (a damaged file: the exporter refuses them), gets no Lattice
(Unusable) and keeps the scalar path.
"""

from __future__ import annotations

import numpy as np

from .textparts import ranges, tuples

MULT = np.uint64(0x9E3779B97F4A7C15)  # odd: the hash's multiplier (wraps mod 2^64)
SPREAD = np.uint64(0xD6E8FEB86659FD93)  # odd: a hash times this has well-mixed top bits, the table's slot
# (a one-char string's hash is its code point + 1: its own top bits are all zero)
LOOKED_MAX = 1 << 14  # texts whose lookup Lattice.lookup remembers


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (np.unique imports numpy.ma, ~6 ms of a first cold encode)."""
    s = np.sort(values)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s


def backtrack(from_node, head, end, live, known_w=None, known_node=None):
    """(word, node) for every node on the best paths of the words `live` (indices into head and
    end, each word's first and last node), followed back from their ends at once, and the pairs
    known_w / known_node given; sorted by word, then node: each word's nodes from its start."""
    path_w, path_node = ([known_w], [known_node]) if known_w is not None else ([], [])
    cur = end[live]
    while len(live):
        path_w.append(live)
        path_node.append(cur)
        cur = from_node[cur]
        more = cur != head[live]
        live, cur = live[more], cur[more]
    pw = np.concatenate(path_w) if path_w else np.zeros(0, dtype=np.int64)
    pn = np.concatenate(path_node) if path_node else np.zeros(0, dtype=np.int64)
    order = np.lexsort((pn, pw))
    return pw[order], pn[order]


class Unusable(ValueError):
    """The vocabulary cannot be hashed without ambiguity (the scalar path serves it)."""


def _hash_rounds(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
    """Each string's hash (cps[starts[k]:starts[k] + lengths[k]], lengths >= 1), and the hashes of
    its proper prefixes (all strings' together), by rounds over the char index."""
    h = np.zeros(len(starts), dtype=np.uint64)
    prefixes = []
    live = np.arange(len(starts))
    k = 0
    while len(live):
        h[live] = h[live] * MULT + (cps[starts[live] + k].astype(np.uint64) + np.uint64(1))
        k += 1
        more = lengths[live] > k
        prefixes.append(h[live[more]])
        live = live[more]
    return h, np.concatenate(prefixes) if prefixes else np.zeros(0, dtype=np.uint64)


class Lattice:
    """The pieces hashed for lookup (_table: the id each hash stands for, the last id of a
    repeated piece as in tokenizers' token_to_id, and whether it is a proper prefix of a piece),
    each piece's code points, and the scores."""

    def __init__(self, cps: np.ndarray, cstart: np.ndarray, lens: np.ndarray, scores: np.ndarray,
                 max_len: int | None = None):
        """Piece i is cps[cstart[i]:cstart[i] + lens[i]] (a piece of length 0 is none: the scalar
        loop's substrings are not empty), scored scores[i]; max_len: the longest substring tried
        (the longest piece unless given)."""
        self.scores = scores
        if not np.isfinite(scores).all():
            raise Unusable("a score is not finite")
        keep = np.flatnonzero(lens > 0)
        if not len(keep):
            raise Unusable("no pieces")
        h, pre = _hash_rounds(cps, cstart[keep], lens[keep])
        order = np.lexsort((keep, h))  # by hash, then id: a hash's last entry is its last id
        hs, ids = h[order], keep[order]
        last = np.append(hs[1:] != hs[:-1], True)
        # Every entry must be the same string as its hash's last entry (a repeated piece), else two
        # pieces collide and a lookup could not tell them apart.
        owner = self._group_last(ids, last)
        if (lens[ids] != lens[owner]).any() or not self._same(cps, cstart, ids, owner, lens):
            raise Unusable("two pieces share a hash")
        self._table(hs[last], ids[last], _distinct(pre))
        self.cps, self.cstart, self.lens = cps, cstart, lens
        self.max_len = int(lens.max()) if max_len is None else max_len
        self._looked: dict[str, int | None] = {}

    @classmethod
    def from_file(cls, tb, off, scores, n: int) -> "Lattice":
        """The first n pieces of a file's vocabulary (tb, off: its token bytes and offsets) with
        their f64 scores (a buffer)."""
        if n == 0:
            raise Unusable("no pieces")
        off_np = np.frombuffer(off, dtype=np.uint32)[:n + 1].astype(np.int64)
        rel = off_np - off_np[0]
        if (np.diff(off_np) < 0).any() or int(off_np[-1]) > len(tb):
            raise Unusable("token offsets out of order")  # (the scalar path names the damage)
        blob = bytes(tb[int(off_np[0]):int(off_np[-1])])
        raw = np.frombuffer(blob, dtype=np.uint8)
        try:  # Each piece's code points: the blob decoded whole, cut where each piece's bytes start.
            text = blob.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise Unusable("a piece is not UTF-8") from None
        if ((raw[rel[:-1][rel[:-1] < len(raw)]] & 0xC0) == 0x80).any():
            raise Unusable("a piece starts inside a char")  # (each piece must decode alone, as the scalar path's)
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        char_before = np.concatenate(([0], np.cumsum((raw & 0xC0) != 0x80)))
        cstart = char_before[rel]
        return cls(cps, cstart[:-1], np.diff(cstart), np.frombuffer(scores, dtype=np.float64)[:n])

    @classmethod
    def from_strings(cls, strings: list[str], scores: np.ndarray, max_len: int) -> "Lattice":
        """Piece i is strings[i] ("" for an id that is no piece), scored scores[i]."""
        lens = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
        cps = np.frombuffer("".join(strings).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        return cls(cps, np.cumsum(lens) - lens, lens, scores, max_len)

    @staticmethod
    def _group_last(ids: np.ndarray, last: np.ndarray) -> np.ndarray:
        """For each entry, the id of the last entry of its run of equal hashes."""
        ends = np.flatnonzero(last)
        return ids[ends[np.searchsorted(ends, np.arange(len(ids)))]]

    @staticmethod
    def _same(cps, cstart, a, b, lens) -> bool:
        """Whether pieces a[k] and b[k] (of equal lengths) have the same code points, for every k."""
        diff = np.flatnonzero(a != b)
        if not len(diff):
            return True
        a, b = a[diff], b[diff]
        n = lens[a]
        first = np.cumsum(n) - n
        k = np.arange(int(n.sum())) - np.repeat(first, n)
        return bool((cps[np.repeat(cstart[a], n) + k] == cps[np.repeat(cstart[b], n) + k]).all())

    def _table(self, hashes: np.ndarray, ids: np.ndarray, prefixes: np.ndarray) -> None:
        """One open-addressing table of every piece's and proper prefix's hash (linear probing from
        the top bits of the hash times SPREAD, at most half full): each slot's hash, and (id + 1) << 1 | is-prefix,
        0 for an empty slot. One lookup a candidate answers both questions of a round, where two
        binary searches took two thirds of a batch (20K words of pride.txt: 21 of 30 ms)."""
        keys = _distinct(np.concatenate((hashes, prefixes)))
        val = np.zeros(len(keys), dtype=np.int64)
        val[np.searchsorted(keys, hashes)] = (ids + 1) << 1
        val[np.searchsorted(keys, prefixes)] |= 1
        bits = max(int(len(keys)).bit_length() + 1, 4)
        self.shift, self.mask = np.uint64(64 - bits), (1 << bits) - 1
        self.keys = np.zeros(1 << bits, dtype=np.uint64)
        self.vals = np.zeros(1 << bits, dtype=np.int64)
        slot = ((keys * SPREAD) >> self.shift).astype(np.int64)
        todo = np.arange(len(keys))
        while len(todo):  # each round: the first key of each free slot wanted takes it; the rest probe on
            at = slot[todo]
            free = self.vals[at] == 0
            cand, at = todo[free], at[free]
            order = np.argsort(at, kind="stable")
            at, cand = at[order], cand[order]
            first = np.ones(len(at), dtype=bool)
            first[1:] = at[1:] != at[:-1]
            taken, won = at[first], cand[first]  # (of each free slot wanted, its first asker)
            self.keys[taken], self.vals[taken] = keys[won], val[won]
            placed = np.zeros(len(keys), dtype=bool)
            placed[won] = True
            todo = todo[~placed[todo]]
            slot[todo] = (slot[todo] + 1) & self.mask

    def probe(self, h: np.ndarray) -> np.ndarray:
        """Each hash's table value: (id + 1) << 1 | is-prefix, 0 for none of them."""
        slot = ((h * SPREAD) >> self.shift).astype(np.int64)
        val = self.vals[slot]
        out = np.where(self.keys[slot] == h, val, 0)
        todo = np.flatnonzero((val != 0) & (out == 0))  # (an occupied slot of another key: probe on)
        while len(todo):
            slot[todo] = (slot[todo] + 1) & self.mask
            at = slot[todo]
            val = self.vals[at]
            hit = self.keys[at] == h[todo]
            out[todo[hit]] = val[hit]
            todo = todo[(val != 0) & ~hit]
        return out

    def lookup(self, text: str) -> int | None:
        """The id of the piece that is exactly text (the last of a repeated one), else None
        (remembered: the unk runs of a text are mostly the same few chars, newlines, digits)."""
        try:
            return self._looked[text]
        except KeyError:
            pass
        i = self._lookup(text)
        if len(self._looked) < LOOKED_MAX:
            self._looked[text] = i
        return i

    def _lookup(self, text: str) -> int | None:
        if not text:
            return None
        h = 0
        for c in text:
            h = (h * int(MULT) + ord(c) + 1) & 0xFFFFFFFFFFFFFFFF
        i = int(self.probe(np.array([h], dtype=np.uint64))[0] >> 1) - 1
        if i < 0:
            return None
        a = int(self.cstart[i])
        same = len(text) == int(self.lens[i]) and \
            self.cps[a:a + len(text)].tobytes() == text.encode("utf-32-le", "surrogatepass")
        return i if same else None

    def encode(self, words: list[str], unk_id: int | None, unk_score: float, byte_fallback: bool,
               dp_chars: int):
        """(each word's ids as a tuple, or None for a word left to the scalar lattice; {word index:
        best path [(start, end, id), ...]} for the words whose path holds unk nodes, whose runs
        the caller fuses). Words are non-empty. The Viterbi steps run over words of up to dp_chars
        chars (a step a char of the longest); a longer word is taken only when it has no candidate
        of two chars or more (a foreign script: Japanese under an English model), its path then
        being its chars one by one; see the module docstring."""
        nw = len(words)
        joined, nch, wstart, bad, (cs, cl, cid, cw, score) = self.candidates(words, unk_id, unk_score)
        long = nch > dp_chars
        if long.any():
            multi = np.zeros(nw, dtype=bool)
            multi[cw[cl > 1]] = True
            bad |= long & multi  # (the scalar lattice: a Viterbi step a char would cost more)
        keep = np.flatnonzero(~bad[cw] & ~long[cw])
        total = int(nch.sum()) + nw
        node_id, from_node = self._viterbi(cs[keep], cl[keep], cid[keep], cw[keep], score[keep], wstart, total)
        single = np.flatnonzero(long[cw] & ~bad[cw])  # (each char of such a word: one candidate, one node)
        node_id[cs[single] + cw[single] + 1] = cid[single]
        from_node[cs[single] + cw[single] + 1] = cs[single] + cw[single]
        return self._paths(node_id, from_node, joined, wstart, nch, bad, long, unk_id, byte_fallback)

    def candidates(self, words: list[str], unk_id: int | None, unk_score: float):
        """(the words joined, each one's length and first char, whether each needs an unk node
        when there is no unk id, and every lattice candidate as arrays: its start (a char of the
        joined words), length, id, word and score, the unk nodes among them (id unk_id, score
        unk_score)). Word w's positions 0..len are the lattice nodes wstart[w] + w + 0..len."""
        nw = len(words)
        joined = "".join(words)
        cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        nch = np.fromiter(map(len, words), dtype=np.int64, count=nw)
        wstart = np.cumsum(nch) - nch  # each word's first char
        word_of = np.repeat(np.arange(nw), nch)
        bad = np.zeros(nw, dtype=bool)
        cs, cl, cid, score = self._candidates(cps, word_of, nch[word_of] - (np.arange(len(cps)) - wstart[word_of]),
                                              unk_id, unk_score, bad)
        return joined, nch, wstart, bad, (cs, cl, cid, word_of[cs], score)

    def _candidates(self, cps, word_of, left, unk_id, unk_score, bad):
        """candidates() of the words' code points back to back (word_of and left: each char's word
        and the chars from it to its word's end): start, length, id and score of each. A word
        that would need an unk node when there is no unk id is marked in bad."""
        got_s, got_l, got_id, got_score = [], [], [], []
        live = np.arange(len(cps))
        h = np.zeros(len(cps), dtype=np.uint64)
        l = 0
        while len(live):
            h = h * MULT + (cps[live + l].astype(np.uint64) + np.uint64(1))
            l += 1
            v = self.probe(h)
            i = (v >> 1) - 1
            hit = np.flatnonzero(i >= 0)
            s, pid = live[hit], i[hit]
            ok = self.lens[pid] == l
            for k in range(l):  # (the piece's own chars: a hash collision never passes)
                ok &= cps[s + k] == self.cps[self.cstart[pid] + k]
            s, pid = s[ok], pid[ok]
            got_s.append(s)
            got_id.append(pid)
            got_l.append(np.full(len(s), l, dtype=np.int64))
            got_score.append(self.scores[pid])
            if l == 1:  # a char that no one-char piece matches: an unk node of its own
                single = np.zeros(len(cps), dtype=bool)
                single[s] = True
                unk = np.flatnonzero(~single)
                if len(unk) and unk_id is None:
                    bad[word_of[unk]] = True  # (the scalar path raises: the model has no unk id)
                elif len(unk):
                    got_s.append(unk)
                    got_id.append(np.full(len(unk), unk_id, dtype=np.int64))
                    got_l.append(np.ones(len(unk), dtype=np.int64))
                    got_score.append(np.full(len(unk), unk_score, dtype=np.float64))
            go = (left[live] > l) & (v & 1).astype(bool) if l < self.max_len else np.zeros(len(live), dtype=bool)
            live, h = live[go], h[go]
        if not got_s:  # (no chars at all)
            return (np.zeros(0, dtype=np.int64),) * 3 + (np.zeros(0, dtype=np.float64),)
        return (np.concatenate(got_s), np.concatenate(got_l), np.concatenate(got_id),
                np.concatenate(got_score))

    @staticmethod
    def _viterbi(cs, cl, cid, cw, score, wstart, total: int):
        """Each node's best id and the node it comes from. Word w's positions 0..nch[w] are nodes
        wstart[w] + w + 0..nch[w]. The starts are taken in order, all words at once, each one's
        candidates relaxing their end nodes: a node's best is replaced only by a strictly greater
        sum (f64, the scalar loop's score + best[start]), so of equal ones the smallest start
        stays, as in the scalar loop. The candidates of one start end at distinct nodes."""
        start_node = cs + cw
        local_start = cs - wstart[cw]
        top = int(local_start.max(initial=0))
        key = local_start.astype(np.uint8 if top < 256 else np.uint16 if top < 65536 else np.int64)
        order = np.argsort(key, kind="stable")  # (a radix sort for 8- and 16-bit keys)
        start_node, cid, score = start_node[order], cid[order], score[order]
        end_node = start_node + cl[order]
        best = np.full(total, -np.inf)
        best[wstart + np.arange(len(wstart))] = 0.0  # each word's first node
        from_node = np.zeros(total, dtype=np.int64)
        node_id = np.zeros(total, dtype=np.int64)
        bounds = np.concatenate(([0], np.cumsum(np.bincount(key, minlength=top + 1)))).tolist()
        for a, b in zip(bounds[:-1], bounds[1:]):
            if a == b:
                continue
            tn = end_node[a:b]
            val = best[start_node[a:b]] + score[a:b]
            up = np.flatnonzero(val > best[tn])
            t = tn[up]
            best[t] = val[up]
            from_node[t] = start_node[a:b][up]
            node_id[t] = cid[a:b][up]
        return node_id, from_node

    def _paths(self, node_id, from_node, joined: str, wstart, nch, bad, long, unk_id, byte_fallback: bool):
        """encode()'s result from the best paths, read back from every word's end at once (a long
        word's, every node of it). Each run of unk nodes becomes one node of the run's text looked
        up again (the scalar path's fusing), the unk id where that text is no piece; with
        byte_fallback a run whose text is no piece is left to the caller (its word's path)."""
        nw = len(nch)
        out: list = [None] * nw
        good = np.flatnonzero(~bad)
        if not len(good):
            return out, {}
        head = wstart[good] + good
        whole = np.flatnonzero(long[good])
        n = nch[good[whole]]
        pw, pn = backtrack(from_node, head, head + nch[good], np.flatnonzero(~long[good]),
                           np.repeat(whole, n), ranges(head[whole] + 1, n))
        pid = node_id[pn]
        paths = {}
        if unk_id is not None and (pid == unk_id).any():
            pw, pid, paths = self._fuse(pw, pn, pid, good, head, joined, unk_id, byte_fallback)
        counts = np.bincount(pw, minlength=len(good))
        parts = tuples(pid, np.cumsum(counts) - counts, counts)
        for slot, val in zip(good.tolist(), parts):
            out[slot] = val
        for w in paths:
            out[w] = None
        return out, paths

    def _fuse(self, pw, pn, pid, good, head, joined: str, unk_id: int, byte_fallback: bool):
        """_paths' fusing of unk runs: (pw, pid) with each run one node, and the paths of the
        words left to the caller."""
        u = pid == unk_id
        same_word = np.concatenate(([False], pw[1:] == pw[:-1]))  # a node after one of its own word
        prev = np.concatenate(([0], pn[:-1]))
        prev[~same_word] = head[pw[~same_word]]  # (each node's start node)
        cont = np.concatenate(([False], u[:-1])) & same_word & u  # an unk node continuing a run
        first = np.flatnonzero(u & ~cont)
        last = np.flatnonzero(u & ~np.append(cont[1:], False))
        w_of = good[pw]
        texts = map(joined.__getitem__, map(slice, (prev[first] - w_of[first]).tolist(),
                                             (pn[last] - w_of[last]).tolist()))  # (node n of word w: char n - w)
        got = list(map(self.lookup, texts))
        paths = {}
        if None in got:
            if byte_fallback:  # runs that are no piece: their words go to the caller whole
                words = sorted({int(pw[first[k]]) for k, i in enumerate(got) if i is None})
                a = np.searchsorted(pw, words).tolist()  # (pw is sorted: each word's nodes together)
                b = np.searchsorted(pw, words, side="right").tolist()
                for j, lo, hi in zip(words, a, b):
                    e = (pn[lo:hi] - head[j]).tolist()
                    paths[int(good[j])] = list(zip([0, *e[:-1]], e, pid[lo:hi].tolist()))
            got = [unk_id if i is None else i for i in got]
        pid = pid.copy()
        pid[first] = got
        keep = ~cont
        return pw[keep], pid[keep], paths
