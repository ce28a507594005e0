"""Unigram, Precompiled, Nmt and Metaspace against tokenizers itself.

The real botchan-unigram tokenizer.json (Unigram + Precompiled/Strip/Replace + Metaspace) on 10,000
normalization stressors, then edited variants, one option at a time: every Metaspace prepend
scheme with and without split, the legacy add_prefix_space, the Precompiled grapheme-cluster
quirks, Nmt, and Unigram ties, unk handling (null unk_id, fused runs, matched <unk>), byte_fallback
and repeated pieces. Each compares ids, offsets, type ids and decoded text.
"""

from __future__ import annotations

import json
import random
import unicodedata

import pytest

import tokmap

from conftest import export_variant, require
from gen_strings import generated

_REFUSED = BaseException  # tokenizers raises exceptions or pyo3 PanicException

STRESS = ["ﬁ\u0301ne", "ｶ\u3099", "ｶﾞ", "\r\n", "™\x1eg", "\x01abc", "ﬀ", "ﬃx", "①②", "²³", "¼", "Ⅻ", "㍿", "㌀",
          "ｆｕｌｌ", "ＡＢＣ", "１２３", "\u200b", "\u200d", "\ufeff", "\u00ad", "\x00", "\x7f", "\x85", "\t", "\x0b",
          "<unk>", "<s>", "</s>", "<unk><unk>", "▁", "▁▁x", "  ", "   ", "日本語", "中文", "한국어", "カタカナ",
          "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "🇫🇷🇩🇪", "🇫🇷🇩", "1️⃣", "क्\u200dष", "क्षि", "\u1100\u1161\u11a8",
          "e\u0301", "Å", "é", "\u0301", "a\u0308\u0301", "Ω", "ﾊﾟﾝ", "ｧ", "\u3000", "…", "‥", "—", "’", "“x”",
          "Straße", "İ", "ǅ", "𝔘𝔫", "\U0001d7d8", "\uff5e", "\u2581", "\u00a0", "\u2028", "\ud7ff", "\U0010fffd"]


def stress_strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    base = generated(n // 2, ["<unk>", "<s>", "</s>"], seed=seed)
    out = []
    for _ in range(n - len(base)):
        parts = []
        for _ in range(rng.randint(1, 10)):
            k = rng.random()
            if k < 0.5:
                parts.append(rng.choice(STRESS))
            elif k < 0.7:
                parts.append(rng.choice(["hello", "World", "the", "naïve", "café", "Botchan", "I'm", "don't"]))
            elif k < 0.8:
                parts.append(" " * rng.randint(1, 4))
            else:
                parts.append(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x33ff),
                                             rng.randint(0xff00, 0xffef), rng.randint(0x1f000, 0x1faff)])))
        s = rng.choice(["", " "]).join(parts)
        if rng.random() < 0.3:
            s = unicodedata.normalize(rng.choice(["NFD", "NFKD"]), s)
        out.append(s)
    return base + out


@pytest.fixture(scope="module")
def botchan(testdata):
    return json.loads(require(testdata / "models" / "botchan-unigram" / "tokenizer.json").read_text(encoding="utf-8"))


def _check(doc, tmp_path, texts, name="t"):
    ref, tok = export_variant(doc, tmp_path, name)
    bad = []
    for t in texts:
        for special in (True, False):
            try:
                e = ref.encode(t, add_special_tokens=special)
            except _REFUSED:
                with pytest.raises(tokmap.EncodeError):
                    tok.encode_full(t, add_special_tokens=special)
                continue
            g = tok.encode_full(t, add_special_tokens=special)
            if (e.ids, e.offsets, e.type_ids) != (g.ids, g.offsets, g.type_ids):
                bad.append((special, t[:60], e.ids[:12], g.ids[:12], e.offsets[:6], g.offsets[:6]))
            if tok.encode(t, add_special_tokens=special) != e.ids:
                bad.append(("encode", t[:60]))
            for skip in (True, False):
                if ref.decode(e.ids, skip_special_tokens=skip) != tok.decode(e.ids, skip_special_tokens=skip):
                    bad.append(("decode", skip, t[:60], ref.decode(e.ids, skip_special_tokens=skip)[:60],
                                tok.decode(e.ids, skip_special_tokens=skip)[:60]))
    assert not bad, f"{len(bad)} differences, first: {bad[:3]}"
    return tok


def test_botchan_stressors(botchan, tmp_path):
    texts = stress_strings(10_000, seed=31)
    assert len(texts) >= 10_000
    _check(botchan, tmp_path, texts)


@pytest.mark.parametrize("scheme", ["always", "first", "never"])
@pytest.mark.parametrize("split", [True, False])
def test_metaspace_options(botchan, tmp_path, scheme, split):
    doc = json.loads(json.dumps(botchan))
    for key in ("pre_tokenizer", "decoder"):
        doc[key] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
    # Added tokens in the middle and at the start exercise `first` (original offset 0 only).
    doc["added_tokens"].append({"id": 1000, "content": "[X]", "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": False})
    texts = generated(300, ["[X]", "<s>", "<unk>"], seed=7) + ["[X]hello world", "[X] hello", "a[X]b", "  x  y",
                                                               "▁x", "x▁▁y", ""]
    _check(doc, tmp_path, texts)


def test_metaspace_legacy_and_replacement(botchan, tmp_path):
    import tokenizers

    doc = json.loads(json.dumps(botchan))
    ms = {"type": "Metaspace", "replacement": "_", "add_prefix_space": False, "prepend_scheme": "never"}
    doc["pre_tokenizer"] = dict(ms)
    doc["decoder"] = {"type": "Metaspace", "replacement": "_", "add_prefix_space": True}
    _check(doc, tmp_path, generated(200, ["<s>"], seed=3) + ["a_b c", "_x", " x"])
    # add_prefix_space false without prepend_scheme never: tokenizers refuses to load, so must tokmap.
    doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": "_", "add_prefix_space": False}
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(_REFUSED):
        tokenizers.Tokenizer.from_file(str(src))
    with pytest.raises(tokmap.SourceError):
        tokmap.export(src, tmp_path / "bad.mtok")


def test_precompiled_cluster_quirks(botchan, tmp_path):
    """Whole-cluster replacement (shortest key), >= 6-byte clusters per code point, removals charged to
    the previous char (or shifting offsets at the start), GB9c conjuncts, RI pairs, Hangul, ZWJ."""
    doc = json.loads(json.dumps(botchan))
    doc["normalizer"] = doc["normalizer"]["normalizers"][0]  # Precompiled alone: its raw alignments
    doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False}
    texts = ["ﬁ\u0301", "ﬁ\u0301x", "ｶ\u3099", "ｶ\u3099x", "\r\n", "a\r\nb", "™\x1eg", "\x01abc", "\x01\x02ab",
             "ab\x01", "a\x01\x02b", "①\u0301", "ﬃ\u0308\u0301", "ｶﾞﾊﾟ", "क्षि", "क्\u200dष", "क\u094d\u094dष",
             "🇫🇷🇩🇪🇮", "\u1100\u1161\u11a8\u11a8", "👨\u200d👩\u200d👧", "👍🏽\u200d", "e\u0301\u0301\u0301",
             "\u0301x", "x\u200bx", "\ufeffx", "ﾞ", "¼½", "㍿x", "a\u0600b", "\u0600\u0915"]
    # Plain ASCII runs between busy regions (the runtime's fast path), after a leading removal's shift.
    texts += ["\x01ab cd\x02ef ﬁ\u0301 gh ij", "abc\x01\x02 def ｶ\u3099 ghi ™ jk", "hello \u0600world again",
              "x" * 50 + "\x01" + "y" * 50 + "e\u0301" + "z" * 10, "\x01\x01\x01" + "plain text " * 5 + "①"]
    texts += stress_strings(1500, seed=5)
    _check(doc, tmp_path, texts)


def test_nmt(botchan, tmp_path):
    doc = json.loads(json.dumps(botchan))
    doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Nmt"}, doc["normalizer"]["normalizers"][0]]}
    texts = ["\x01a\tb\x0bc\u200bd\u2581e\ufffd", "\x1f\x1f", "\x7fx\x8fy\x9f"] + stress_strings(600, seed=9)
    _check(doc, tmp_path, texts)


def _toy(vocab, unk_id=0, byte_fallback=False):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                              "split": True},
            "post_processor": None,
            "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
            "model": {"type": "Unigram", "unk_id": unk_id, "vocab": vocab, "byte_fallback": byte_fallback}}


def test_unigram_ties(tmp_path):
    # "ab" ties a+b, "abc" ties ab+c and a+bc: tokenizers keeps the first best, so the longest final piece.
    vocab = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["b", -1.0], ["c", -1.0], ["ab", -2.0], ["bc", -2.0],
             ["abc", -3.0], ["\u2581a", -2.0], ["ca", -2.0], ["cab", -3.5]]
    texts = ["ab", "abc", "abcab", "cabc", "a b c", "bca", "aaabbbccc", "x", "axb", "cccc"]
    rng = random.Random(1)
    texts += ["".join(rng.choice("abc x") for _ in range(rng.randint(1, 12))) for _ in range(300)]
    _check(_toy(vocab), tmp_path, texts)


def test_unigram_unk(tmp_path):
    vocab = [["a", -1.0], ["\u2581", -1.0], ["<unk>", -0.5], ["b", -2.0], ["xy", -1.0]]
    texts = ["a", "zzz", "azzb", "xy", "x", "y", "xz", "<unk>", "a<unk>z", "日本", "a 日 b", "zxy"]
    _check(_toy(vocab, unk_id=2), tmp_path, texts)
    # unk_id null: tokenizers raises when an unknown char needs the unk node; so must tokmap.
    _check(_toy(vocab, unk_id=None), tmp_path, texts, name="nounk")


def test_unigram_byte_fallback(tmp_path):
    vocab = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["b", -1.5]]
    vocab += [[f"<0x{b:02X}>", -10.0] for b in range(256) if b not in (0xE6,)]
    texts = ["a", "ab", "é", "aéb", "日本", "本", "ζζ", "😀", "a b\u00e9", "<0x41>", "<unk>x"]
    texts += generated(200, ["<unk>"], seed=11)
    _check(_toy(vocab, byte_fallback=True), tmp_path, texts)


def test_unigram_duplicate_pieces(tmp_path):
    vocab = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["ab", -5.0], ["b", -1.0], ["ab", -1.5], ["a", -3.0]]
    texts = ["ab", "a", "b", "aab", "ba b", "abab", "c"]
    tok = _check(_toy(vocab), tmp_path, texts)
    assert tok.token_to_id("ab") == 5 and tok.token_to_id("a") == 6
    assert tok.id_to_token(3) == "ab" and tok.id_to_token(2) == "a"
