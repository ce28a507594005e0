"""Generate tokmap/exporter/data/scripts_hf.txt: the script of every code point as tokenizers'
UnicodeScripts pre-tokenizer sees it.

tokenizers 0.23 carries its own table (generated long ago from SentencePiece's, about Unicode 9),
in src/pre_tokenizers/unicode_scripts/scripts.rs; code points it does not list are "Any". This
script reads only that table's data (the `0xA..=0xB => Script::Name` arms) and writes one line per
run of code points with the same script:

    @source tokenizers v0.23.1 src/pre_tokenizers/unicode_scripts/scripts.rs
    <start-hex> <Script name>

a run lasting until the next line's start, the last to U+10FFFF. The pre-tokenizer's own fixes
(U+30FC, Hiragana and Katakana as Han, ' ' as Any) are applied by the exporter, not here.

Usage: python tools/gen_scripts9.py [path/to/scripts.rs] [output-path]
"""

import os
import re
import subprocess
import sys

# A git clone of huggingface/tokenizers (read at the pinned tag).
MIRROR = os.environ.get("TOKENIZERS_GIT", "/work/.mirror/huggingface+tokenizers/repo")
TAG = "v0.23.1"
REL = "tokenizers/src/pre_tokenizers/unicode_scripts/scripts.rs"
ARM = re.compile(r"^\s*0x([0-9A-Fa-f]+)(?:\.\.=0x([0-9A-Fa-f]+))?\s*=>\s*Script::(\w+)\s*,")


def main():
    if len(sys.argv) > 1 and sys.argv[1] != "-":
        src = open(sys.argv[1], encoding="utf-8").read()
    else:
        src = subprocess.run(["git", "-C", MIRROR, "show", f"{TAG}:{REL}"], check=True, capture_output=True,
                             text=True).stdout
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tokmap", "exporter",
                                                                "data", "scripts_hf.txt")
    table = ["Any"] * 0x110000
    n = 0
    for line in src.splitlines():
        m = ARM.match(line)
        if m:
            a = int(m.group(1), 16)
            b = int(m.group(2), 16) if m.group(2) else a
            for cp in range(a, b + 1):
                table[cp] = m.group(3)
            n += 1
    assert n > 1000, "scripts.rs table not found"
    lines = [f"@source tokenizers {TAG} {REL.split('tokenizers/', 1)[1]}"]
    prev = None
    for cp, s in enumerate(table):
        if s != prev:
            lines.append(f"{cp:x} {s}")
            prev = s
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{out}: {len(lines) - 1} runs from {n} table arms")


if __name__ == "__main__":
    main()
