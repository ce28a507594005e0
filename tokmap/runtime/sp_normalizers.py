"""Prepend and Replace normalizer steps, with tokenizers' alignments (CONFORMANCE.md sections 1, 3).

Interface as in normalizers.py: normalize(text, want_align) -> (new_text, align | None), align
giving each output char the (start, end) range of input chars it came from.

- Prepend: nothing on an empty string; the prepended chars and the first char all take the first
  char's range.
- Replace: non-overlapping leftmost matches (a String pattern is an escaped Oniguruma regex), every
  char of the replacement takes the range of the last matched char ((0, 0) for an empty match at
  the start). Empty matches follow rust-onig's iterator: one is skipped right where the previous
  match ended, so "x*" over "ab" gives "-a-b-".
"""

from __future__ import annotations


class Prepend:
    def __init__(self, f, step):
        self.prepend = step["prepend"]

    def normalize(self, text: str, want_align: bool):
        if not text or not self.prepend:
            return text, None
        new = self.prepend + text
        if not want_align:
            return new, None
        return new, [(0, 1)] * (len(self.prepend) + 1) + [(i, i + 1) for i in range(1, len(text))]


class Replace:
    def __init__(self, f, step):
        self.content = step["content"]
        self.literal = step.get("literal")
        self.split = None
        if self.literal is None:
            from .pretokenizers import SplitStep

            self.split = SplitStep(f, {"behavior": "isolated", "invert": False, "regex": step["regex"],
                                       "class_index": step["class_index"], "class_blocks": step["class_blocks"]})

    def _matches(self, text: str):
        lit = self.literal
        if lit:
            out, pos, n = [], 0, len(lit)
            while True:
                k = text.find(lit, pos)
                if k < 0:
                    return out
                out.append((k, k + n))
                pos = k + n
        if not text:  # tokenizers hands an empty haystack back as one non-match
            return []
        if lit is not None:
            return [(k, k) for k in range(len(text) + 1)]
        t = self.split.translate(text)
        search = self.split.regex.search
        out, pos, last_end, n = [], 0, None, len(t)
        while pos <= n:
            m = search(t, pos)
            if m is None:
                break
            s, e = m.span()
            if s == e and last_end == e:
                pos += 1  # rust-onig: no empty match where the previous one ended; step one char
                continue
            out.append((s, e))
            pos = last_end = e
        return out

    def normalize(self, text: str, want_align: bool):
        lit = self.literal
        if lit and not want_align:
            # str.replace takes the same non-overlapping leftmost matches, in C.
            return (text.replace(lit, self.content), None) if lit in text else (text, None)
        if lit is None and not want_align and text:
            # (most texts hold no match: one search says so, before the match loop)
            if self.split.regex.search(self.split.translate(text)) is None:
                return text, None
        matches = self._matches(text)
        if not matches:
            return text, None
        content = self.content
        parts, align, prev = [], [] if want_align else None, 0
        for s, e in matches:
            parts.append(text[prev:s])
            parts.append(content)
            if want_align:
                align.extend((i, i + 1) for i in range(prev, s))
                align.extend([(e - 1, e) if e > 0 else (0, 0)] * len(content))
            prev = e
        parts.append(text[prev:])
        if want_align:
            align.extend((i, i + 1) for i in range(prev, len(text)))
        return "".join(parts), align


STEPS = {
    "prepend": Prepend,
    "replace": Replace,
}
