"""Generate tokmap/exporter/data/numeric_hf.txt: the code points tokenizers' Digits pre-tokenizer
treats as numeric (Rust std's char::is_numeric, General_Category Nd | Nl | No).

Rust std's Unicode version depends on the toolchain the wheel was built with, and the running
Python's unicodedata is another version again, so the class is measured from the pinned
tokenizers wheel itself: Digits(individual_digits=True) over every code point, each followed by
'a', isolates exactly the numeric ones. (Unicode 17 data would wrongly count U+1246F.) Output:
`@unicode tokenizers-<version>`, then one `<start-hex> <end-hex>` line per range (inclusive).

Usage: python tools/gen_numeric_hf.py [output-path]   (needs the pinned `tokenizers`)
"""

import os
import sys

import tokenizers
from tokenizers.pre_tokenizers import Digits


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tokmap", "exporter",
                                                                "data", "numeric_hf.txt")
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000 and c != ord("a")]
    pieces = Digits(individual_digits=True).pre_tokenize_str("a".join(map(chr, cps)) + "a")
    numeric = sorted(ord(p) for p, _ in pieces if len(p) == 1 and p != "a")
    assert numeric[:10] == list(range(0x30, 0x3A)), "unexpected Digits behaviour"
    ranges = []
    for c in numeric:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    with open(out, "w", encoding="utf-8") as f:
        f.write(f"@unicode tokenizers-{tokenizers.__version__}\n" + "".join(f"{a:x} {b:x}\n" for a, b in ranges))
    print(f"{out}: {len(numeric)} code points in {len(ranges)} ranges")


if __name__ == "__main__":
    main()
