"""Whole-stretch encoding, when no offsets are asked for, for pipelines whose pre-tokenizer is
plain string work and whose model takes many pieces at once (`encode_words`).

Pipeline.encode_sequence otherwise walks one (piece, offsets) unit at a time, about a microsecond
of Python per word before the model is even asked. Here the text is cut at added tokens as
Pipeline.units does (raw pass; files with normalized added tokens take the general path),
normalized, cut into words by C-level string methods (`bert.segmenter`, `metaspace.words`; a
stretch is one word when there is no pre-tokenizer or its Split can never cut), and the model maps
the whole word list through its cache. A model with `encode_word_parts` (char-level BPE) gets the
words of all stretches in one call, so that its misses merge in one batch. The ids are those of
the general path.
"""

from __future__ import annotations

from functools import partial
from itertools import chain, compress, islice
from operator import sub

from .repeats import TextMemory, mostly_cached

_ASCII_BYTES = bytes(range(128))  # (_wide_chars deletes them to find the other chars)


def build(pipe):
    """A callable text -> ids, or None when this pipeline needs the general path."""
    if pipe.api != "hf" or pipe.norm_matcher is not None:
        return None
    enc = getattr(pipe.model, "encode_words", None)
    if enc is None:
        return None
    kind = type(pipe.pre[0]).__name__ if pipe.pre else None
    if kind is None or (kind == "SplitStep" and len(pipe.pre) == 1 and _split_is_void(pipe)):

        def words(ntext):  # no pre-tokenizer (Llama 2), or one that never cuts (Gemma 3)
            return [ntext] if ntext else []

    elif kind == "CharSplit":
        from . import bert

        seg = bert.segmenter(pipe.pre)
        if seg is None:
            return None

        def words(ntext):
            return list(filter(None, bert.apply_memo(ntext, seg)[0].split(" ")))

        memo = bert.chain_memo(pipe.normalizers, seg)
        if memo is not None:
            stretch_words = _chained(pipe, memo, words)
            parts = getattr(pipe.model, "word_parts", None)
            chunks = None if parts is None else Chunks(memo, stretch_words, enc, parts).ids
            return _run(pipe, stretch_words, enc, stretch_ids=chunks)
    elif kind == "MetaspaceStep" and len(pipe.pre) == 1:
        words = pipe.pre[0].words
        if words is None:
            return None
    else:
        return None
    one_word = kind != "MetaspaceStep" and kind != "CharSplit"  # (words: a stretch is one word)
    if not pipe.normalizers:
        return _run(pipe, words, enc, one_word=one_word)
    from .normalizers import text_chain

    normalize = text_chain(pipe.normalizers)
    if _char_for_char(pipe.normalizers):
        return _run(pipe, words, enc, whole=normalize, one_word=one_word)
    return _run(pipe, lambda stretch: words(normalize(stretch)), enc)


def _char_for_char(steps) -> bool:
    """True when every normalizer replaces one literal char by one char (Gemma's " " -> "\u2581"):
    then normalizing a whole text and cutting it equals normalizing each cut, so a text with
    thousands of added-token stretches (each newline in Gemma 3) is normalized in one C call."""
    from .sp_normalizers import Replace

    return all(type(s) is Replace and s.literal is not None and len(s.literal) == 1 and len(s.content) == 1
               for s in steps)


def _split_is_void(pipe) -> bool:
    """True when the only pre-tokenizer, a Split on one literal char, can never match: the last
    normalizer replaces every occurrence of that char with text not holding it (Gemma's
    Replace(" ", "\u2581") then Split(" ")), so each stretch is one piece."""
    from .sp_normalizers import Replace

    step = pipe.pre[0]
    lit = getattr(step, "literal", None)
    if not lit or len(lit) != 1 or step.invert or not pipe.normalizers:
        return False
    last = pipe.normalizers[-1]
    return isinstance(last, Replace) and last.literal == lit and lit not in last.content


def _chained(pipe, memo, words):
    """stretch -> words when the normalizers and the pre-tokenizer fold into one translate table
    (ChainMemo): one C pass; a stretch holding a char that needs its neighbours takes the steps."""
    from .bert import NeedsContext

    def stretch_words(stretch: str) -> list[str]:
        try:
            return list(filter(None, memo.translate(stretch, True).split(" ")))
        except NeedsContext:
            return words(pipe.normalize(stretch)[0])

    return stretch_words


def _run(pipe, stretch_words, enc, whole=None, stretch_ids=None, one_word=False):
    """text -> ids: raw-pass added tokens cut the text, stretch_words(stretch) (normalized and
    pre-tokenized) feeds the model's encode_words. whole(text): the normalized text, of the same
    length, when stretches may be cut from it (_char_for_char); stretch_words then only splits.
    stretch_ids(stretch): a stretch's ids some quicker way (Chunks), in place of both.
    one_word: stretch_words(s) is [s] for every non-empty s (no pre-tokenizer, or one that never
    cuts), so the stretches themselves are the model's words."""
    from .models import concat

    raw = pipe.raw_matcher
    parts_of = getattr(pipe.model, "encode_word_parts", None)
    if stretch_ids is None:
        def stretch_ids(stretch):
            return enc(stretch_words(stretch))

    def run(text: str) -> list[int]:
        spans = [(None, 0, len(text))] if raw is None else raw.split(text)
        ids: list[int] = []
        src = text if whole is None else whole(text)
        if parts_of is not None and one_word and len(spans) > 2:
            # Each stretch one word (Matcher's stretches are never empty): its parts, in span order,
            # with the added tokens' ids between. Gemma 3 over code.txt: 26.5K newline and tab
            # tokens, each a span: two C-level passes rather than a units list and a loop.
            part = iter(parts_of([src[s:e] for tok, s, e in spans if tok is None])).__next__
            return concat([part() if tok is None else (tok[0],) for tok, s, e in spans])
        if parts_of is not None and len(spans) > 2:
            # One model call for the words of every stretch, so that its misses merge in one
            # batch (Gemma 3: each newline is an added token, each line a stretch).
            units = [(tok, None if tok is not None or e <= s else stretch_words(src[s:e])) for tok, s, e in spans]
            parts = iter(parts_of(list(chain.from_iterable(w for _, w in units if w))))
            for tok, words in units:
                if tok is not None:
                    ids.append(tok.id)
                elif len(words) == 1:  # (extend's list/tuple fast path: Gemma 3's long lines)
                    ids.extend(next(parts))
                elif words:
                    any(map(ids.extend, islice(parts, len(words))))  # (models.concat's idiom)
            return ids
        if len(spans) == 1 and spans[0][0] is None and text:  # one stretch: its ids as they come
            got = stretch_ids(src)
            return got if type(got) is list else list(got)  # (a list is the model's fresh one)
        for tok, s, e in spans:
            if tok is not None:
                ids.append(tok.id)
            elif e > s:
                ids.extend(stretch_ids(src[s:e]))
        return ids

    return run


# The chars str.split() cuts at (Python's whitespace; tests/test_wordpiece_chunks.py checks it).
SPLIT_SPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
               "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
CHUNK_MIN = 256  # chars; a shorter stretch takes the word path (one call: nothing to remember)
CHUNK_CHARS = 24  # chars per chunk on average above which a stretch takes the word path (Japanese: ~150)
NEW_WIDE_SHARE = 256  # a new stretch with more than 1/this of its chars non-ASCII goes by chunks all the same
NEW_WINDOWS, NEW_WINDOW = 8, 1024  # where new_words samples that share first: that many windows of that many chars


class Chunks:
    """A stretch's ids cut at whitespace by str.split (C) and remembered per chunk, when the
    normalizers and pre-tokenizer fold into one translate table (bert.ChainMemo) that turns every
    char str.split cuts at into removed delimiters only: then the stretch's words are its chunks'
    words in order, and a chunk's ids (\"word,\" -> word, comma) are one dict lookup. The words
    of a stretch with punctuation number ~1.3x its chunks, and each costs a translate through
    the table besides (BERT on en.txt, warm: 17 -> ~8 ms).

    The chunks a call has not met are translated and split all at once: joined with a separator
    char that the table keeps as a word of its own, their words are cut back apart where it
    stands (the first of a few candidates that the stretch does not hold). A stretch holding all
    of them, or a char str.split cuts at that the table deletes or keeps (BERT drops the
    \\x1c-\\x1f controls: "a\\x1cb" is one word), takes the word path. ASCII chunks go through
    bytes operations equal to the table (ascii_plan) where it allows them.

    Only a stretch that repeats (repeats.py: met twice before, or most of its chunks cached)
    goes by chunks: filling the chunk cache costs more than the words of a text do. A new
    stretch, when nearly all ASCII, goes by its words, made by bytes operations (new_words); met
    again, by its words too (their cache warm); the third time by chunks, filled then (the same
    as SpaceCuts does for BPE). minilm over en.txt, a fresh tokenizer, alternated runs: first
    call 32.5-34.1 -> 26.6-26.7 ms with new_words (pride.txt and code.txt after it within the
    noise: they have too many other chars, or marks needing their neighbours). Filling the
    chunks on the second meeting, as was done then, made the second call 21.6-21.7 ms against
    8.1-8.8 by the words; the call after the fill took 8.3-8.8 ms."""

    def __init__(self, memo, stretch_words, enc, word_parts):
        self.memo, self.stretch_words, self.enc, self.word_parts = memo, stretch_words, enc, word_parts
        self.bad = self.seps = None  # found on the first long stretch (one ChainMemo.fill)
        self.cache: dict[str, tuple[int, ...]] = {}
        self.plan = None  # ascii_plan(memo), on the first batch: False where it cannot serve
        self._met = TextMemory()

    def _find_chars(self) -> None:
        """bad: the chars str.split cuts at that the table does not make delimiters only; seps:
        the separator candidates that the table keeps as themselves."""
        from .bert import SEPARATOR_CANDIDATES, NeedsContext

        def value(c):
            try:
                v = self.memo[ord(c)]
            except NeedsContext:
                return None
            return chr(v) if isinstance(v, int) else v

        # All of them worked out in one pass through the steps: one at a time, BERT's ~40 cost
        # ~7 us each on a first encode (ChainMemo.fill)
        self.memo.fill(map(ord, SPLIT_SPACE + SEPARATOR_CANDIDATES))
        self.bad = "".join(c for c in SPLIT_SPACE if not (value(c) and not value(c).strip(" ")))
        self.seps = "".join(c for c in SEPARATOR_CANDIDATES if value(c) == c)

    def ids(self, stretch: str):
        if len(stretch) < CHUNK_MIN:
            return self.enc(self.stretch_words(stretch))
        if not (self._met.met(stretch) or mostly_cached(stretch, self.cache, None)):
            words = self.new_words(stretch)
            if words is not None:
                return self.enc(words)
        if self.seps is None:
            self._find_chars()
        sep = next((c for c in self.seps if c not in stretch), None)
        if sep is None or any(map(stretch.__contains__, self.bad)):
            return self.enc(self.stretch_words(stretch))
        chunks = stretch.split()
        if not chunks:  # whitespace the table makes delimiters only
            return []
        if len(chunks) * CHUNK_CHARS < len(stretch):  # unspaced text: long chunks that seldom repeat
            return self.enc(self.stretch_words(stretch))
        from .models import cached_ids

        # (the separator goes with the call, not on self: another thread's text may hold it)
        return cached_ids(self.cache, chunks, encode_many=partial(self._fill, sep=sep))

    def new_words(self, stretch: str) -> list[str] | None:
        """stretch_words(stretch) by bytes operations over its UTF-8: the ASCII chars as ascii_plan
        has them (which never touch the bytes of the other chars, all 0x80 or above), then each
        distinct other char's bytes replaced by the UTF-8 of what the table makes of it. (UTF-8
        is self-synchronising: a char's bytes occur nowhere but at that char.) None when the plan
        cannot serve, a char needs its neighbours (NeedsContext), what the table makes of one
        char holds another of them (a later replace would take it again), or more than
        1/NEW_WIDE_SHARE of the chars are not ASCII (the table's str.translate costs ~45 ns a
        char, and chunks pass each distinct chunk through it once)."""
        from .bert import NeedsContext

        if self.plan is None:
            self.plan = ascii_plan(self.memo) or False
        if not self.plan:
            return None
        table, delete, expand, _seps = self.plan
        if stretch.isascii():
            data = _bytes_translate(stretch.encode("ascii"), table, delete, expand)
            return list(filter(None, data.decode("ascii").split(" ")))
        # (judged first on a few windows spread over the stretch, so that one with too many such
        # chars is turned away before the whole of it is encoded for nothing)
        step = len(stretch) // NEW_WINDOWS
        if step > NEW_WINDOW:
            sample = "".join(stretch[k * step:k * step + NEW_WINDOW] for k in range(NEW_WINDOWS))
            if len(_wide_chars(sample)) * NEW_WIDE_SHARE > len(sample):
                return None
        data = stretch.encode("utf-8", "surrogatepass")
        wide = _wide_chars(data)
        if len(wide) * NEW_WIDE_SHARE > len(stretch):
            return None
        chars = dict.fromkeys(wide)
        try:
            made = list(map(self.memo.translate, chars))
        except NeedsContext:
            return None
        keys = set(chars)
        if any(c != m and not keys.isdisjoint(m.replace(c, "")) for c, m in zip(chars, made)):
            return None
        data = _bytes_translate(data, table, delete, expand)
        for c, m in zip(chars, made):
            if m != c:
                data = data.replace(c.encode("utf-8", "surrogatepass"), m.encode("utf-8", "surrogatepass"))
        return list(filter(None, data.decode("utf-8", "surrogatepass").split(" ")))

    def _fill(self, chunks: list[str], sep: str) -> list[tuple[int, ...]]:
        """The ids of each chunk, all of their words looked up in one model call. A chunk holding a
        char whose result needs its neighbours (the table raises NeedsContext and remembers the
        char) takes the word path alone; the others are tried again in one batch."""
        from .bert import NeedsContext

        alone: list[int] = []
        while True:
            skip = set(alone)
            batch = [c for k, c in enumerate(chunks) if k not in skip] if skip else chunks
            try:
                got = self._fill_batch(batch, sep)
                break
            except NeedsContext:
                ctx = "".join(map(chr, self.memo.contextual))
                alone = [k for k, c in enumerate(chunks) if any(map(c.__contains__, ctx))]
        if not alone:
            return got
        out: list = [None] * len(chunks)
        for k in alone:
            out[k] = self._alone(chunks[k])
        it = iter(got)
        return [next(it) if v is None else v for v in out]

    def _alone(self, chunk: str) -> tuple[int, ...]:
        """One chunk's ids by the word path."""
        return tuple(self.enc(self.stretch_words(chunk)))

    def _fill_batch(self, chunks: list[str], sep: str) -> list[tuple[int, ...]]:
        if self.plan is None:
            self.plan = ascii_plan(self.memo) or False
        if self.plan:
            ascii_ = list(map(str.isascii, chunks))
            if all(ascii_):
                got = ascii_words(chunks, self.plan)
                if got is not None:
                    return self._chunk_ids(*got, chunks)
            elif any(ascii_):  # the ASCII chunks through bytes, the others through the memo
                # (the others first: the memo raises NeedsContext before their model call, and
                # _fill's retry then has not encoded the ASCII chunks for nothing)
                other = iter(self._fill_batch([c for c, a in zip(chunks, ascii_) if not a], sep))
                got = iter(self._fill_batch(list(compress(chunks, ascii_)), sep))
                return [next(got) if a else next(other) for a in ascii_]
        words = list(filter(None, self.memo.translate(f" {sep} ".join(chunks)).split(" ")))
        return self._chunk_ids(words, sep, chunks)

    def _chunk_ids(self, words: list[str], sep: str, chunks: list[str]) -> list[tuple[int, ...]]:
        """Each chunk's ids from the words of the chunks joined by sep (sep a word of its own)."""
        at = list(compress(range(len(words)), map(sep.__eq__, words)))  # the separators
        if len(at) != len(chunks) - 1:  # (a char the table turned into the separator: one by one)
            return list(map(self._alone, chunks))
        parts = self.word_parts(words)
        # Each chunk's first word's tuple, in C; then the chunks not of one word joined: several
        # ("word,"), or none (a chunk the table deletes whole; the () appended keeps a last such
        # chunk's start in range).
        starts, ends = [0, *map((1).__add__, at)], [*at, len(words)]
        parts.append(())
        out = list(map(parts.__getitem__, starts))
        for k in compress(range(len(out)), map((1).__ne__, map(sub, ends, starts))):
            s, e = starts[k], ends[k]  # (two words, "word,", the most common: one tuple sum)
            out[k] = parts[s] + parts[s + 1] if e - s == 2 else tuple(chain.from_iterable(parts[s:e]))
        return out


def ascii_plan(memo):
    """What a ChainMemo does to ASCII text, as bytes operations: (256-byte translate table, bytes
    to delete, [(byte, bytes it becomes)], the control chars ascii_words may take as separator),
    or None when that cannot be exact. str.translate through the memo costs ~45 ns a char (a dict
    lookup each; BERT on pride.txt's new chunks: 6-7 ms); bytes.translate and one bytes.replace
    per expanding char present cost a few hundredths of that. Exact when every ASCII char becomes
    ASCII and no output char is itself an expanding char (other than the one expanding: BERT's
    "," -> " , "), since the replacements run on the translated bytes, where the memo's outputs
    are final."""
    from .bert import NeedsContext

    table, delete, expand = bytearray(range(256)), bytearray(), []
    memo.fill(range(128))  # (in one pass through the steps: one char at a time, ~0.5 ms for BERT)
    try:
        values = [memo[c] for c in range(128)]
    except NeedsContext:
        return None
    values = [chr(v) if isinstance(v, int) else v for v in values]
    if not all(v.isascii() for v in values):
        return None
    keys = {c for c, v in enumerate(values) if len(v) > 1}
    for c, v in enumerate(values):
        if not v:
            delete.append(c)
        elif len(v) == 1:
            if ord(v) in keys:
                return None
            table[c] = ord(v)
        else:
            if any(ord(x) in keys and ord(x) != c for x in v):
                return None
            expand.append((bytes([c]), v.encode("ascii")))
    seps = "".join(chr(c) for c in range(1, 32) if c not in keys and chr(c) not in SPLIT_SPACE)
    return bytes(table), bytes(delete), expand, seps


def _wide_chars(text) -> str:
    """The chars of a text (str, or its UTF-8) that are not ASCII, in order: its UTF-8 with the
    ASCII bytes deleted is theirs, back to back."""
    data = text.encode("utf-8", "surrogatepass") if type(text) is str else text
    return data.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")


def _bytes_translate(data: bytes, table: bytes, delete: bytes, expand) -> bytes:
    """UTF-8 text with its ASCII chars as the table makes them, by ascii_plan's bytes operations
    (which leave the bytes of every other char as they are: all of those are 0x80 or above)."""
    data = data.translate(table, delete)
    for key, rep in expand:
        if key in data:
            data = data.replace(key, rep)
    return data


def ascii_words(chunks: list[str], plan):
    """(the words of the ASCII chunks joined by a separator, as the memo would make them; that
    separator: a control char none of the chunks holds, mapped to itself), or None when they hold
    every candidate."""
    table, delete, expand, seps = plan
    joined = " ".join(chunks)
    sep = next((c for c in seps if c not in joined), None)
    if sep is None:
        return None
    b = ord(sep)
    t = bytearray(table)
    t[b] = b
    data = _bytes_translate(f" {sep} ".join(chunks).encode("ascii"), bytes(t), delete.replace(bytes([b]), b""), expand)
    return list(filter(None, data.decode("ascii").split(" "))), sep
