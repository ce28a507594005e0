"""The parts of long pieces, at once (numpy; imported by the model modules that use it).

The models that cut long pieces where no merge crosses (charcut.py, and BPE._segmented) make
tens of thousands of parts, most of them repeats. Each step here is a few C-level passes where a
slice, a lookup or a tuple per part costs Python: the parts as strings (part_strings), the
distinct ones (dedupe, each then encoded once), and every occurrence's ids (spread, ranges).
"""

from __future__ import annotations

import numpy as np

SENTINELS = "\x00\uffff\U0010ffff\x01"  # chars to join parts with, the first one the text lacks


def part_strings(text: str, cps: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[str]:
    """text[starts[k]:ends[k]] for every k (cps: text's code points, uint32). The parts are
    gathered back to back with a sentinel char after each, decoded once and split: C-level,
    where a slice each costs ~230 ns of Python (Gemma 3 over wagahai.txt: 77K parts, 18 -> 7
    ms). Slices when the text holds every sentinel."""
    sep = next((c for c in SENTINELS if c not in text), None)
    if sep is None or not len(starts):
        return list(map(text.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    lens = ends - starts
    lens += 1  # each part and its sentinel
    at = np.cumsum(lens)  # where each part's sentinel goes, + 1
    src = np.repeat(starts - (at - lens), lens)
    src += np.arange(len(src))
    buf = np.take(cps, src, mode="clip")  # (a sentinel slot's source is the next char: overwritten)
    buf[at - 1] = ord(sep)
    out = buf.tobytes().decode("utf-32-le", "surrogatepass").split(sep)
    out.pop()  # (after the last sentinel)
    return out


def dedupe(parts: list[str]):
    """(the distinct parts, in first-occurrence order; each part's index among them, int64)."""
    distinct = list(dict.fromkeys(parts))
    index = dict(zip(distinct, range(len(distinct))))
    return distinct, np.fromiter(map(index.__getitem__, parts), np.int64, len(parts))


def spread(flat: np.ndarray, begin: np.ndarray, length: np.ndarray, inv: np.ndarray):
    """(every occurrence's ids back to back, how many each): occurrence k of distinct part
    d = inv[k] takes flat[begin[d]:begin[d] + length[d]]. Gathers, where a lookup, a tuple and
    a chain per occurrence cost ~300 ns of Python (tens of thousands of parts in a long text)."""
    olen = length[inv]
    return flat[ranges(begin[inv], olen)], olen


def ranges(begin: np.ndarray, length: np.ndarray) -> np.ndarray:
    """begin[k], begin[k] + 1, ..., begin[k] + length[k] - 1 for every k, back to back (int64):
    where each part's ids go, or come from, in a flat array."""
    first = np.cumsum(length, dtype=np.int64)
    first -= length  # where range k starts in the result
    out = np.repeat(begin - first, length)
    out += np.arange(len(out))
    return out
