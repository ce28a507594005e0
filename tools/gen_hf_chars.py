"""Generate tokmap/exporter/data/hf_chars.json: the per-character tables of tokenizers' BERT-family
normalizers and pre-tokenizers (Lowercase, BertNormalizer, StripAccents, Strip, BertPreTokenizer,
Punctuation, WhitespaceSplit).

Those components read several different Unicode versions at once (Rust std 17.0 for lowercase and
White_Space, the `unicode_categories` crate's ~8.0 for Cc/Cf/Co, Mn and P*), and no single
`unicodedata2` release reproduces that mix.  So the tables are measured from the reference itself:
every code point (surrogates excepted) is run through the pinned `tokenizers` wheel's component,
one character at a time, and the observed behaviour is recorded.  Generated once and committed; the
exporter embeds the tables a tokenizer needs, and the runtime never consults the running Python's
Unicode data.

Output (JSON):
    "tokenizers": version measured
    "lowercase":   [[cp, "lowercased"], ...]        code points Lowercase changes
    "bert_clean":  {"drop": ranges, "space": ranges} BertNormalizer clean_text
    "bert_cjk":    ranges                            chars handle_chinese_chars pads with spaces
    "bert_mn":     ranges                            removed by BertNormalizer strip_accents (after NFD)
    "marks":       ranges                            removed by StripAccents (Mn/Mc/Me)
    "strip_ws":    ranges                            trimmed by Strip
    "bert_ws":     ranges                            BertPreTokenizer's whitespace (removed)
    "bert_punct":  ranges                            BertPreTokenizer / Punctuation's punctuation
    "split_ws":    ranges                            WhitespaceSplit's whitespace
where ranges are [[start, end_exclusive], ...].   Usage: python tools/gen_hf_chars.py [output-path]
"""

import json
import os
import sys

import tokenizers
from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P


def _ranges(cps):
    out = []
    for c in cps:
        if out and out[-1][1] == c:
            out[-1][1] = c + 1
        else:
            out.append([c, c + 1])
    return out


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tokmap", "exporter", "data", "hf_chars.json")
    lower = N.Lowercase()
    clean = N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    cjk = N.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)
    bmn = N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    marks = N.StripAccents()
    strip = N.Strip(left=True, right=False)
    bert_pre = P.BertPreTokenizer()
    wsplit = P.WhitespaceSplit()
    t = {k: [] for k in ("lowercase", "drop", "space", "bert_cjk", "bert_mn", "marks", "strip_ws", "bert_ws",
                         "bert_punct", "split_ws")}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        lc = lower.normalize_str(c)
        if lc != c:
            t["lowercase"].append([cp, lc])
        r = clean.normalize_str(c)
        if r == "":
            t["drop"].append(cp)
        elif r == " " and c != " ":
            t["space"].append(cp)
        if cjk.normalize_str(c) != c:
            t["bert_cjk"].append(cp)
        if bmn.normalize_str(c) == "":
            t["bert_mn"].append(cp)
        if marks.normalize_str(c) == "":
            t["marks"].append(cp)
        if strip.normalize_str(c + "x") == "x":
            t["strip_ws"].append(cp)
        parts = [p for p, _ in bert_pre.pre_tokenize_str("x" + c + "y")]
        if parts == ["x", "y"]:
            t["bert_ws"].append(cp)
        elif parts == ["x", c, "y"]:
            t["bert_punct"].append(cp)
        if [p for p, _ in wsplit.pre_tokenize_str("x" + c + "y")] == ["x", "y"]:
            t["split_ws"].append(cp)
    doc = {"tokenizers": tokenizers.__version__, "lowercase": t["lowercase"],
           "bert_clean": {"drop": _ranges(t["drop"]), "space": _ranges(t["space"])}}
    for k in ("bert_cjk", "bert_mn", "marks", "strip_ws", "bert_ws", "bert_punct", "split_ws"):
        doc[k] = _ranges(t[k])
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {out}: {os.path.getsize(out)} bytes, " + ", ".join(f"{k} {len(v)}" for k, v in t.items()))


if __name__ == "__main__":
    main()
