"""HF tokenizers' Metaspace pre-tokenizer and decoder.

Pre-tokenizer, per piece: every ASCII ' ' becomes the replacement char (keeping the space's range);
the replacement is prepended when the piece does not start with it (`always`: every piece; `first`:
only a piece whose original start offset is 0; `never`), the inserted char taking the range of the
char it precedes; then, with `split`, the piece is cut before every replacement char
(MergedWithNext). Decoder: the replacement becomes ' ', except that in the first token every
replacement is deleted unless the prepend scheme is `never`.
"""

from __future__ import annotations

import re

from .pretokenizers import apply_behavior, expand, slice_offs


class MetaspaceStep:
    def __init__(self, f, step):
        self.rep = step["replacement"]
        self.scheme = step["prepend_scheme"]
        self.split = bool(step["split"])
        # Whole-text cutting without offsets (runtime/fastpath.py), for the schemes that do not
        # depend on where the piece started: the same pieces as _one, found by one findall.
        self.words = None
        if self.scheme in ("always", "never"):
            rx = re.compile(f"{re.escape(self.rep)}[^{re.escape(self.rep)}]*|[^{re.escape(self.rep)}]+")
            self.words = self._words
            self._findall = rx.findall

    def _words(self, text: str) -> list[str]:
        rep = self.rep
        if " " in text:
            text = text.replace(" ", rep)
        if text and self.scheme == "always" and not text.startswith(rep):
            text = rep + text
        if not self.split:
            return [text] if text else []
        return self._findall(text)

    def _one(self, text, offs):
        rep = self.rep
        if " " in text:
            text = text.replace(" ", rep)
        if text and not text.startswith(rep):
            if self.scheme == "always" or (self.scheme == "first" and
                                           (offs == 0 if isinstance(offs, int) else offs[0][0] == 0)):
                o = expand(offs, len(text))
                text = rep + text
                offs = [o[0]] + o
        if not self.split or not text:
            return [(text, offs)] if text else []
        if text.count(rep) <= 1 and text.startswith(rep):
            return [(text, offs)]
        spans, prev = [], 0
        i = text.find(rep)
        while i >= 0:
            if i > prev:
                spans.append((prev, i, False))
            spans.append((i, i + 1, True))
            prev = i + 1
            i = text.find(rep, prev)
        if prev < len(text):
            spans.append((prev, len(text), False))
        return [(text[s:e], slice_offs(offs, s, e)) for s, e in apply_behavior(spans, "merged_with_next")]

    def __call__(self, pieces):
        out = []
        for text, offs in pieces:
            out.extend(self._one(text, offs))
        return out


def decoder(step):
    rep = step["replacement"]
    strip_first = step["prepend_scheme"] != "never"

    def run(tokens: list[str]) -> list[str]:
        out = []
        for i, t in enumerate(tokens):
            out.append(t.replace(rep, "") if i == 0 and strip_first else t.replace(rep, " "))
        return out

    return run
