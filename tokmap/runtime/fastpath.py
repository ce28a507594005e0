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

from itertools import chain, islice


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
            return _run(pipe, _chained(pipe, memo, words), enc)
    elif kind == "MetaspaceStep" and len(pipe.pre) == 1:
        words = pipe.pre[0].words
        if words is None:
            return None
    else:
        return None
    if not pipe.normalizers:
        return _run(pipe, words, enc)
    if _char_for_char(pipe.normalizers):
        return _run(pipe, words, enc, whole=lambda text: pipe.normalize(text)[0])
    return _run(pipe, lambda stretch: words(pipe.normalize(stretch)[0]), enc)


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
            return list(filter(None, stretch.translate(memo).split(" ")))
        except NeedsContext:
            return words(pipe.normalize(stretch)[0])

    return stretch_words


def _run(pipe, stretch_words, enc, whole=None):
    """text -> ids: raw-pass added tokens cut the text, stretch_words(stretch) (normalized and
    pre-tokenized) feeds the model's encode_words. whole(text): the normalized text, of the same
    length, when stretches may be cut from it (_char_for_char); stretch_words then only splits."""
    raw = pipe.raw_matcher
    parts_of = getattr(pipe.model, "encode_word_parts", None)

    def run(text: str) -> list[int]:
        spans = [(None, 0, len(text))] if raw is None else raw.split(text)
        ids: list[int] = []
        src = text if whole is None else whole(text)
        if parts_of is not None and len(spans) > 2:
            # One model call for the words of every stretch, so that its misses merge in one
            # batch (Gemma 3: each newline is an added token, each line a stretch).
            units = [(tok, None if tok is not None or e <= s else stretch_words(src[s:e])) for tok, s, e in spans]
            parts = iter(parts_of(list(chain.from_iterable(w for _, w in units if w))))
            for tok, words in units:
                if tok is not None:
                    ids.append(tok.id)
                elif words:
                    ids.extend(chain.from_iterable(islice(parts, len(words))))
            return ids
        if len(spans) == 1 and spans[0][0] is None and text:  # one stretch: its ids as they come
            got = enc(stretch_words(src))
            return got if type(got) is list else list(got)  # (a list is the model's fresh one)
        for tok, s, e in spans:
            if tok is not None:
                ids.append(tok.id)
            elif e > s:
                ids.extend(enc(stretch_words(src[s:e])))
        return ids

    return run
