"""Normalizer steps, dispatched by their "type" in META.

Every step object has `normalize(text, want_align) -> (new_text, align)`: `new_text is text` when
nothing changed (then align is None); otherwise align gives, per output char, the (start, end)
range of input chars it came from (only when want_align). Tables live in the file's blobs.
"""

from __future__ import annotations

import re  # (already imported by `import tokmap`)

from .. import mtok
from ..errors import FormatError


class UnicodeForm:
    """NFC / NFD / NFKC / NFKD with the Unicode 9.0 tables tokenizers uses."""

    def __init__(self, f, step):
        from .normalize_unicode import UnicodeNormalizer

        self.form = step["form"]
        patterns = step.get("patterns")
        stored = None if patterns is None else \
            lambda form: _stored_patterns(f, patterns) if form == self.form else None
        self.norm = UnicodeNormalizer(f.view(mtok.BLOB_BASE + step["tables"], mtok.U8), stored)

    def normalize(self, text: str, want_align: bool):
        return self.norm.normalize(text, self.form, want_alignments=want_align)


# What UnicodeNormalizer.pattern_texts writes: one class of \U code points and ranges, repeated.
_CLASS_RUN = re.compile(r"\[(?:\\U[0-9a-f]{8}(?:-\\U[0-9a-f]{8})?)+\]\+")


def _stored_patterns(f, patterns: dict):
    """The step's (scan, exact) patterns from their stored texts, each from its stored engine code
    when this engine made it (runtime/sre_load.py), else compiled from the text."""
    from . import sre_load

    out = []
    for k in ("scan", "exact"):
        sid = mtok.BLOB_BASE + patterns[k]
        if not f.has(sid):
            raise FormatError(f.path, f"normalizer patterns.{k} names no blob of the file", section="meta")
        f.verify_section(sid)
        text = bytes(f.view(sid, mtok.U8)).decode("latin-1")
        if not _CLASS_RUN.fullmatch(text):  # (a crafted file's pattern could otherwise backtrack for ever)
            raise FormatError(f.path, f"normalizer patterns.{k} is not a run of one character class",
                              section=mtok.section_name(sid), offset=f.sections[sid][1])
        rx = sre_load.load(f, patterns.get(k + "_code"), text, k + "_code", what="normalizer patterns")
        if rx is None:
            try:
                rx = re.compile(text)
            except re.error as e:
                raise FormatError(f.path, f"normalizer patterns.{k} does not compile ({e})",
                                  section=mtok.section_name(sid), offset=f.sections[sid][1]) from None
        out.append(rx)
    return tuple(out)


def _spm(f, step):
    from .spm_normalizer import SpmNormalizer

    return SpmNormalizer(f, step)


# type -> factory(f, step). Components register here; each is built only if a file uses it.
STEPS = {
    "unicode": UnicodeForm,
    "spm": _spm,
}

from .sp_normalizers import STEPS as _SP_STEPS  # noqa: E402  (Prepend, Replace)

STEPS.update(_SP_STEPS)


def _bert_step(name):
    def factory(f, step):
        from . import bert

        return getattr(bert, name)(f, step)

    return factory


# Table-driven per-char steps (Lowercase, BertNormalizer, StripAccents) and Strip: runtime/bert.py.
STEPS.update({"char_map": _bert_step("CharMap"), "strip": _bert_step("Strip")})


def _precompiled_step(name):
    def factory(f, step):
        from . import precompiled

        return getattr(precompiled, name)(f, step)

    return factory


# tokenizers' Precompiled (SentencePiece charsmap over grapheme clusters) and Nmt: runtime/precompiled.py.
STEPS.update({"precompiled": _precompiled_step("Precompiled"), "nmt": _precompiled_step("Nmt")})


def build(f, steps: list[dict]) -> list:
    out = []
    for s in steps:
        factory = STEPS.get(s["type"])
        if factory is None:
            raise ValueError(f"unknown normalizer step {s['type']!r}")
        out.append(factory(f, s))
    return out


def text_chain(steps: list):
    """text -> run(steps, text)[0], bound once: with no step passing char sets on
    (normalize_chars), each step's normalize in turn, without run's per-step look-ups (a short
    encode under botchan-unigram's three steps: ~0.4 us)."""
    if any(getattr(s, "normalize_chars", None) is not None for s in steps):
        return lambda text: run(steps, text)[0]
    fns = [s.normalize for s in steps]
    if len(fns) == 1:
        (one,) = fns
        return lambda text: one(text, False)[0]

    def chain(text: str) -> str:
        for fn in fns:
            text = fn(text, False)[0]
        return text
    return chain


def run(steps: list, text: str, want_align: bool = False):
    """Apply the steps in order; compose their alignments into ranges of the original text."""
    if not want_align:
        # Steps with normalize_chars pass the text's char set on, so each computes it at most once.
        chars = None
        for step in steps:
            nc = getattr(step, "normalize_chars", None)
            if nc is not None:
                text, chars = nc(text, chars)
            else:
                new, _ = step.normalize(text, False)
                if new is not text:  # (a text of too many distinct chars to count still has them: NFD)
                    text, chars = new, (False if chars is False else None)
        return text, None
    align = None
    for step in steps:
        new, al = step.normalize(text, want_align)
        if new is text:
            continue
        if want_align:
            if al is None:
                al = [(i, i + 1) for i in range(len(new))]
            if align is not None:
                al = [(align[a][0], align[b - 1][1]) if b > a else
                      ((align[a][0],) * 2 if a < len(align) else (align[-1][1],) * 2 if align else (0, 0))
                      for a, b in al]
            align = al
        text = new
    return text, align
