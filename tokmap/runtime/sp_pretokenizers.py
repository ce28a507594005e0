"""The UnicodeScripts pre-tokenizer: cut a piece where the script changes (CONFORMANCE.md section 4).

The script of each code point comes from the file (tokenizers' own ~Unicode 9 table, with its
fixes baked in at export: 0 means "Any"). A cut goes before every char whose script is not Any and
differs from the last non-Any script seen; chars before the first cut (leading Any chars) are
dropped, as tokenizers drops them.
"""

from __future__ import annotations

from .. import mtok
from ..errors import FormatError
from .charclass import TranslationMemo
from .pretokenizers import slice_offs


class ScriptsStep:
    def __init__(self, f, step: dict):
        index = f.view(mtok.BLOB_BASE + step["class_index"], mtok.U16)
        blocks = f.view(mtok.BLOB_BASE + step["class_blocks"], mtok.U8)
        if len(index) != 0x1100 or len(blocks) % 256:
            raise FormatError(f.path, "script table has the wrong size", section="meta",
                              offset=f.sections[mtok.SECTION_META][1])
        self.memo = TranslationMemo(index, blocks)

    def cuts(self, text: str) -> list[int]:
        codes = text.translate(self.memo)
        cuts, last = [], None
        for k, sc in enumerate(codes):
            if sc != "\x00" and sc != last:
                cuts.append(k)
                last = sc
        return cuts

    def __call__(self, pieces):
        out = []
        for text, offs in pieces:
            cuts = self.cuts(text)
            if not cuts:
                continue
            cuts.append(len(text))
            for s, e in zip(cuts, cuts[1:]):
                out.append((text[s:e], slice_offs(offs, s, e)))
        return out
