"""Runtime side of the compiled pre-tokenizer regex: map text onto the pattern's class alphabet.

The exporter (tokmap.exporter.regex_compile) partitions all code points by the character classes
of a pattern.  ASCII stays itself; every other code point becomes chr(128 + k) for its class k.
The translated string has the same length as the input, so stdlib `re` spans over it are code
point spans of the original text, and no Unicode tables of the running Python are consulted.

Tables (both little-endian, straight from the .mtok file):
  class_index   0x1100 uint16: for block b = cp >> 8, the number of its 256-entry block
  class_blocks  256 bytes per unique block: the translated char for cp & 0xFF

Only the standard library is imported here; numpy is imported inside translate_np.
"""

from __future__ import annotations

import codecs
import sys

__all__ = ["translate_py", "translate_np", "TranslationMemo"]

_CHUNK = 1 << 18  # code points per numpy pass in translate_np


class TranslationMemo(dict):
    """str.translate mapping that looks each new code point up in the tables once.

    Reusing one memo across calls (per tokenizer) makes repeated non-ASCII chars a plain C-level
    dict hit inside str.translate.
    """

    __slots__ = ("_index", "_blocks")

    def __init__(self, class_index, class_blocks):
        super().__init__()
        index = memoryview(class_index)
        if index.format != "H":
            index = index.cast("B").cast("H")
        if sys.byteorder == "big":
            # The table is little-endian on disk; 'H' views are native, so swap once here. (array is
            # imported only here: it is an extension module, a dlopen on every little-endian cold start.)
            from array import array

            swapped = array("H", index.tobytes())
            swapped.byteswap()
            index = memoryview(swapped)
        self._index = index
        self._blocks = memoryview(class_blocks).cast("B")

    def __missing__(self, cp: int) -> int:
        value = self._blocks[(self._index[cp >> 8] << 8) | (cp & 0xFF)]
        self[cp] = value
        return value


def translate_py(text: str, class_index, class_blocks, memo: TranslationMemo | None = None) -> str:
    """Translate text without numpy.

    class_index: memoryview cast to 'H' (or any buffer of little-endian uint16); class_blocks: a
    bytes-like object.  Pass a TranslationMemo built from the same tables to amortise lookups.
    Lone surrogates are translated like any other code point.
    """
    if text.isascii():
        return text  # ASCII maps to itself
    if memo is None:
        memo = TranslationMemo(class_index, class_blocks)
    return text.translate(memo)


def translate_np(text: str, index_arr, blocks_arr) -> str:
    """Translate text with numpy; for long texts.

    index_arr: uint16 array of 0x1100 entries; blocks_arr: uint8 array (256 per block).  Buffers
    (bytes, memoryview) are accepted too and wrapped without copying.
    """
    if text.isascii():
        return text
    import numpy as np

    if not isinstance(index_arr, np.ndarray):
        index_arr = np.frombuffer(index_arr, dtype="<u2")
    if not isinstance(blocks_arr, np.ndarray):
        blocks_arr = np.frombuffer(blocks_arr, dtype=np.uint8)
    parts = []
    # Chunks keep the uint32 temporaries in cache; measured ~2x faster than one pass on 7 MB.
    for start in range(0, len(text), _CHUNK):
        # surrogatepass: a lone surrogate (e.g. from surrogateescape input) translates, not raises.
        cps = np.frombuffer(text[start:start + _CHUNK].encode("utf-32-le", "surrogatepass"), dtype="<u4")
        parts.append(codecs.latin_1_decode(classes_np(cps, index_arr, blocks_arr))[0])
    return parts[0] if len(parts) == 1 else "".join(parts)


def classes_np(cps, index_arr, blocks_arr):
    """Each code point's translated char (uint8; ASCII is itself), cps a uint32 array, the tables
    numpy arrays: the row offset of each char's block plus its low byte, two gathers."""
    import numpy as np

    pos = index_arr[cps >> 8].astype(np.uint32)
    pos <<= 8
    pos |= cps & 0xFF
    return blocks_arr[pos]
