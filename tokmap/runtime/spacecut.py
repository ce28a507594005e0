"""Long texts cut at the spaces no piece can cross, and a cache from chunk to ids.

For a one-regex split (GPT-2, cl100k, o200k, Llama 3, Qwen...) the exporter proves which chars a
space may follow where cutting the text there, and splitting each side alone, gives the same
pieces (exporter/regex_compile.space_cut_unsafe; for these patterns: any char but whitespace).
So a long text is cut at such spaces by C-level `str.split(' ')` and a few numpy passes that
find the spaces after whitespace (no cut there: those parts are joined again). Each chunk then
maps to its ids through one dict: a warm call is a split, a lookup per chunk and one concat,
with no regex at all (o200k over en.txt: 17.5 -> 9 ms). The chunks a call has not met yet are
split all at once: the distinct ones joined back to back (every joint a proven cut, so their
pieces are those each would have alone), so the regex runs over each distinct chunk once, not
over the whole text (pride.txt: 123K of 702K chars). Which texts go this way is repeats()'s
call: those met twice before, or most of whose chunks are; a new text goes by pieces.

Every chunk but the first is keyed without its leading space; the first, which has none (or
starts the text), takes the piece path alone. The last chunk may end in a char no cut
follows (a newline, a space): its pieces are then those it has at the end of a text, which is
the only place such a chunk can be met again (every other chunk ends before a cut), and it comes
last among the chunks a call joins, since keys keep the order they are first met in.
"""

from __future__ import annotations

from itertools import chain, compress, filterfalse, repeat

from .models import LongPieces, concat
from .models.bpe import CACHE_PIECE
from .repeats import TextMemory, mostly_cached

CHUNK_CACHE_CHARS = 128  # chars; longer chunks are remembered within a budget (models.LongPieces)
CHUNK_CACHE_MAX = 1 << 18  # chunks; the cache is emptied when it would grow past this
SUM_PIECES = 8  # a chunk of up to this many pieces gets its ids by sum(); more by a chain
MIN_SPACES = 32  # a text with fewer spaces than 1 in this many chars never goes by chunks (repeats())
COUNT_BLOCK = 1 << 16  # chars; repeats() counts the spaces this many at a time (see there)


class SpaceCuts:
    """ids(text) for a pipeline whose split step carries `space_cut` (docs/FORMAT.md)."""

    def __init__(self, pipe, step, bits: bytes):
        self.pipe = pipe
        self.step = step
        self.bits = bits  # 32 bytes: bit c set = a cut may follow translated char c
        self.cache: dict[str, tuple] = {}
        self._long = LongPieces()  # the chunks longer than CHUNK_CACHE_CHARS in cache
        self._ok = None  # the bits as 256 bools, made on first use
        self._met = TextMemory()  # the texts met (repeats())

    def repeats(self, text: str) -> bool:
        """Whether this long text should go by chunks: never when its spaces are few (chunks as
        long as lines share nothing: wagahai.txt) or more than the chunk cache holds (multi.txt's
        1.2M: the cache would be emptied on every call); else when it was met twice before, or
        most of its chunks are in the cache already (repeats.py). Otherwise it goes by pieces: splitting
        a new text by chunks costs about what the smaller findall saves (o200k, a fresh
        tokenizer: en.txt 32 -> 36 ms, code.txt 107 -> 114), and so it does for a new document
        after others (en.txt after pride.txt 32 -> 34 ms; code.txt after en.txt 108 -> 118). The
        second time a text comes it goes by pieces too, their cache warm (filling the chunks then
        made a second call cost what the first did: repeats.py); the third time it is split by
        chunks and the cache filled; from the fourth on it costs a split, a lookup per chunk and a
        concat (en.txt 17 -> 9 ms).
        Going by the distinct chunks without remembering them (findall over those only, each
        occurrence's ids gathered in numpy) lost too: a fresh o200k tokenizer, first / second call,
        min of 4, en.txt 31 / 15 -> 41 / 22 ms, code.txt 101 / 83 -> 126 / 100 ms. The findall
        shrinks (en: 10 -> 3 ms over its 11.5K distinct chunks), but numbering the 47K chunks (a
        hash and a dict probe each) and taking their and their pieces' lengths cost more."""
        n = len(text)
        # Counted a block at a time, and only as far as the answer needs: up to past the cap
        # (multi.txt's 5.9M chars: 3 ms, where one count of all took 14), or until the spaces are
        # enough and the chars left could not pass the cap (en.txt's 274K chars: 0.2 against 0.7).
        spaces = 0
        enough = -(-n // MIN_SPACES)
        for a in range(0, n, COUNT_BLOCK):
            spaces += text.count(" ", a, a + COUNT_BLOCK)
            if spaces > CHUNK_CACHE_MAX:
                return False  # more than the cache can hold
            if spaces >= enough and spaces + (n - a - COUNT_BLOCK) <= CHUNK_CACHE_MAX:
                break
        if spaces < enough:
            return False  # chunks as long as lines (Japanese)
        return self._met.met(text) or mostly_cached(text, self.cache)

    def _good(self, text: str):
        """(the positions of the text's spaces (at least one), whether the text may be cut before
        each)."""
        import numpy as np

        from .charclass import classes_np

        if self._ok is None:
            self._ok = np.unpackbits(np.frombuffer(self.bits, dtype=np.uint8), bitorder="little").astype(bool)
        ok = self._ok
        if text.isascii():  # (an ASCII char is its own class)
            a = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
            sp = np.flatnonzero(a == 32)
            cls = a[sp - 1]
        else:
            a = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
            sp = np.flatnonzero(a == 32)
            cls = classes_np(a[sp - 1], *self.step.np_tables())
        good = ok[cls]
        good[0] &= sp[0] > 0  # a space at the start follows nothing
        good[1:] &= np.diff(sp) > 1  # a space right after a space: an empty part
        return sp, good

    def ids(self, text: str) -> list[int]:
        whole = self.pipe._piece_ids
        parts = text.split(" ")
        n = len(parts)
        if n < 3:
            return whole(text)
        import numpy as np

        sp, good = self._good(text)
        cuts = np.flatnonzero(good)
        m = len(cuts)
        if m < 2:
            return whole(text)
        if m == n - 1:  # every space is a cut (most prose)
            head, keys = parts[0], parts[1:]
        else:  # a chunk from each cut to the next: its first part, or the text between when more
            head = text[:int(sp[cuts[0]])]
            keys = list(compress(parts[1:], good.tolist()))
            multi = np.flatnonzero(np.diff(cuts) > 1)  # (the last chunk is checked below)
            if cuts[-1] < n - 2:
                multi = np.append(multi, m - 1)
            if len(multi):
                a = sp[cuts[multi]] + 1
                b = np.append(sp, len(text))[np.append(cuts[1:], n - 1)[multi]]
                for slot, val in zip(multi.tolist(), map(text.__getitem__, map(slice, a.tolist(), b.tolist()))):
                    keys[slot] = val
        out = list(whole(head))
        cache = self.cache
        try:
            out += concat(map(cache.__getitem__, keys))
        except KeyError:
            out += self._fill(keys)
        return out

    def _fill(self, keys: list[str]) -> list[int]:
        """The ids of these chunks (each standing for ' ' + key), the ones not met yet split and
        encoded together, and remembered when short."""
        import numpy as np

        pipe, cache = self.pipe, self.cache
        distinct = dict.fromkeys(keys)
        if len(cache) + len(distinct) > CHUNK_CACHE_MAX:
            cache.clear()  # emptied before this call's chunks go in, never between them
            self._long.reset()
        miss = list(filterfalse(cache.__contains__, distinct)) if cache else list(distinct)
        pieces, runs = pipe._split_runs(" " + " ".join(miss), pipe.runs)
        per = list(pipe.model.piece_ids(pieces, runs))
        # The pieces tile the joined chunks, and none crosses a joint: chunk k ends where the
        # piece last[k] ends.
        plen = np.fromiter(map(len, pieces), np.int64, len(pieces))
        if plen.max() > CACHE_PIECE:  # (such a piece's ids come as a list: the chunks add tuples)
            per = list(map(tuple, per))
        pend = np.cumsum(plen)
        cend = np.cumsum(np.fromiter(map(len, miss), np.int64, len(miss)) + 1)
        last = np.searchsorted(pend, cend)
        if last[-1] >= len(pend) or not np.array_equal(pend[last], cend):  # (the exporter proved it never)
            from .. import mtok
            from ..errors import FormatError

            f = self.step._f
            raise FormatError(f.path, "split step's space_cut does not hold for its pattern: a piece "
                                      "crosses a cut", section="meta", offset=f.sections[mtok.SECTION_META][1])
        first = np.empty_like(last)
        first[0] = 0
        first[1:] = last[:-1] + 1
        vals = list(map(per.__getitem__, first.tolist()))
        count = last - first + 1
        few = np.flatnonzero((count > 1) & (count <= SUM_PIECES))
        if len(few):  # (sum adds tuples pairwise: fastest for a few, quadratic for many)
            got = map(sum, map(per.__getitem__, map(slice, first[few].tolist(), (last[few] + 1).tolist())), repeat(()))
            for slot, val in zip(few.tolist(), got):
                vals[slot] = val
        many = np.flatnonzero(count > SUM_PIECES)
        if len(many):
            got = map(tuple, map(chain.from_iterable, map(per.__getitem__, map(slice, first[many].tolist(),
                                                                                   (last[many] + 1).tolist()))))
            for slot, val in zip(many.tolist(), got):
                vals[slot] = val
        cache.update(zip(miss, vals))
        if max(map(len, miss)) > CHUNK_CACHE_CHARS:  # the long ones only within their budget
            long = self._long
            over = CHUNK_CACHE_CHARS.__lt__
            held = [(k, cache[k]) for k in compress(distinct, map(over, map(len, distinct))) if k in cache]
            for k in compress(miss, map(over, map(len, miss))):
                long.add(cache, k, cache.pop(k))
            try:
                return concat(map(cache.__getitem__, keys))
            except KeyError:  # a chunk too long to remember, or one the budget just let go
                new = dict(zip(miss, vals))
                new.update(held)
                return concat(new[k] if k in new else cache[k] for k in keys)
        return concat(map(cache.__getitem__, keys))
