"""Whole-stretch encoding, when no offsets are asked for, for pipelines whose pre-tokenizer is
plain string work and whose model takes many pieces at once (`encode_words`).

Pipeline.encode_sequence otherwise walks one (piece, offsets) unit at a time, about a microsecond
of Python per word before the model is even asked. Here the text is cut at added tokens as
Pipeline.units does (raw pass; files with normalized added tokens take the general path),
normalized, cut into words by C-level string methods (`bert.segmenter`, `metaspace.words`), and
the model maps the whole word list through its cache. The ids are those of the general path.
"""

from __future__ import annotations


def build(pipe):
    """A callable text -> ids, or None when this pipeline needs the general path."""
    if pipe.api != "hf" or pipe.norm_matcher is not None:
        return None
    enc = getattr(pipe.model, "encode_words", None)
    if enc is None or not pipe.pre:
        return None
    kind = type(pipe.pre[0]).__name__
    if kind == "CharSplit":
        from . import bert

        seg = bert.segmenter(pipe.pre)
        if seg is None:
            return None

        def words(ntext):
            return list(filter(None, bert.apply_memo(ntext, seg)[0].split(" ")))

        chain = bert.chain_memo(pipe.normalizers, seg)
        if chain is not None:
            return _run(pipe, _chained(pipe, chain, words), enc)
    elif kind == "MetaspaceStep" and len(pipe.pre) == 1:
        words = pipe.pre[0].words
        if words is None:
            return None
    else:
        return None
    if not pipe.normalizers:
        return _run(pipe, words, enc)
    return _run(pipe, lambda stretch: words(pipe.normalize(stretch)[0]), enc)


def _chained(pipe, chain, words):
    """stretch -> words when the normalizers and the pre-tokenizer fold into one translate table
    (ChainMemo): one C pass; a stretch holding a char that needs its neighbours takes the steps."""
    from .bert import NeedsContext

    def stretch_words(stretch: str) -> list[str]:
        try:
            return list(filter(None, stretch.translate(chain).split(" ")))
        except NeedsContext:
            return words(pipe.normalize(stretch)[0])

    return stretch_words


def _run(pipe, stretch_words, enc):
    """text -> ids: raw-pass added tokens cut the text, stretch_words(stretch) (normalized and
    pre-tokenized) feeds the model's encode_words."""
    raw = pipe.raw_matcher

    def run(text: str) -> list[int]:
        spans = [(None, 0, len(text))] if raw is None else raw.split(text)
        ids: list[int] = []
        for tok, s, e in spans:
            if tok is not None:
                ids.append(tok.id)
            elif e > s:
                ids.extend(enc(stretch_words(text[s:e])))
        return ids

    return run
