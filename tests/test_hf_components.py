"""tokenizer.json components beyond the three real files, checked against tokenizers itself.

Each case edits the real llama3 tokenizer.json (one component at a time), exports it, and compares
ids, offsets and decoded text with tokenizers on generated strings: every Split behaviour with and
without invert, String patterns, ByteLevel with its own regex and add_prefix_space, added tokens
with single_word / lstrip / rstrip / normalized, TemplateProcessing, truncation and padding.
"""

from __future__ import annotations

import json

import pytest

import tokmap

from conftest import export_variant, model_source
from gen_strings import generated

N = 600
# tokenizers signals refusal with exceptions, or with pyo3's PanicException (a BaseException).
# The module defining PanicException exists only after the first panic, hence BaseException.
_REFUSED = BaseException
LLAMA_SPLIT = json.dumps({"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"})


@pytest.fixture(scope="module")
def base(testdata):
    return json.loads(model_source(testdata, "llama3").read_text(encoding="utf-8"))


def _check(doc, tmp_path, texts, pairs=False, batch=False):
    ref, tok = export_variant(doc, tmp_path)
    bad = []
    for t in texts:
        for special in (True, False):
            try:
                e = ref.encode(t, add_special_tokens=special)
            except _REFUSED:  # tokenizers refuses (e.g. truncation impossible, or panics): so must tokmap
                with pytest.raises(tokmap.EncodeError):
                    tok.encode_full(t, add_special_tokens=special)
                continue
            g = tok.encode_full(t, add_special_tokens=special)
            if (e.ids, e.offsets, e.type_ids, e.attention_mask, e.special_tokens_mask) != \
                    (g.ids, g.offsets, g.type_ids, g.attention_mask, g.special_tokens_mask):
                bad.append((special, t[:60], e.ids[:12], g.ids[:12], e.offsets[:6], g.offsets[:6]))
            elif [o.ids for o in e.overflowing] != [o.ids for o in g.overflowing]:
                bad.append(("overflow", t[:60]))
            if tok.encode(t, add_special_tokens=special) != e.ids:
                bad.append(("encode", t[:60]))
            if ref.decode(e.ids) != tok.decode(e.ids) or ref.decode(e.ids, skip_special_tokens=False) != \
                    tok.decode(e.ids, skip_special_tokens=False):
                bad.append(("decode", t[:60]))
    if pairs:
        for a, b in zip(texts[::2], texts[1::2]):
            try:
                e = ref.encode(a, b)
            except _REFUSED:
                with pytest.raises(tokmap.EncodeError):
                    tok.encode_full(a, b)
                continue
            g = tok.encode_full(a, b)
            if (e.ids, e.type_ids, e.offsets) != (g.ids, g.type_ids, g.offsets):
                bad.append(("pair", a[:30], b[:30], e.ids[:10], g.ids[:10]))
            elif [(o.ids, o.type_ids) for o in e.overflowing] != [(o.ids, o.type_ids) for o in g.overflowing]:
                bad.append(("pair overflow", a[:30], b[:30]))
    if batch:
        try:
            exp = [e.ids for e in ref.encode_batch(texts[:50])]
        except _REFUSED:
            exp = None
        if exp is None:
            with pytest.raises(tokmap.EncodeError):
                tok.encode_batch(texts[:50])
        elif exp != tok.encode_batch(texts[:50]):
            bad.append(("batch",))
    assert not bad, f"{len(bad)} differences, first: {bad[:3]}"


@pytest.mark.parametrize("behavior", ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"])
@pytest.mark.parametrize("invert", [False, True])
def test_split_behaviors(base, tmp_path, behavior, invert):
    doc = dict(base)
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+|[\\p{P}]"}, "behavior": behavior, "invert": invert},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    _check(doc, tmp_path, generated(N, ["<|begin_of_text|>"], seed=7) + ["the-final--countdown-", "-a-", "--"])


@pytest.mark.parametrize("pattern", ["-", " ", "ab", "é"])
def test_split_string_pattern(base, tmp_path, pattern):
    doc = dict(base)
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": pattern}, "behavior": "MergedWithNext", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    _check(doc, tmp_path, generated(N, [], seed=8) + ["the-final--countdown-", "abab cab é-é"])


@pytest.mark.parametrize("add_prefix_space", [False, True])
@pytest.mark.parametrize("trim_offsets", [False, True])
def test_byte_level_with_regex(base, tmp_path, add_prefix_space, trim_offsets):
    doc = dict(base)
    doc["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True,
                            "use_regex": True}
    doc["post_processor"] = {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
                             "trim_offsets": trim_offsets, "use_regex": True}
    _check(doc, tmp_path, generated(N, ["<|begin_of_text|>", "<|eot_id|>"], seed=9) + ["  hello  world  ", " x"])


def test_added_token_flags(base, tmp_path):
    doc = dict(base)
    extra = [
        {"id": 0, "content": "<sw>", "single_word": True, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True},
        {"id": 0, "content": "<ls>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False,
         "special": True},
        {"id": 0, "content": "<rs>", "single_word": False, "lstrip": False, "rstrip": True, "normalized": False,
         "special": False},
        {"id": 0, "content": "hello", "single_word": True, "lstrip": True, "rstrip": True, "normalized": True,
         "special": False},
        {"id": 0, "content": "<|begin_of_text|>x", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
    ]
    doc["added_tokens"] = base["added_tokens"] + extra
    specials = ["<sw>", "<ls>", "<rs>", "hello", "<|begin_of_text|>", "<|begin_of_text|>x", "a<sw>b", " <ls> ",
                "x<rs>  y", "ü<sw>", "<sw>_", "<sw>²"]
    _check(doc, tmp_path, generated(N * 2, specials, seed=10) + specials)


def test_template_processing_pairs(base, tmp_path):
    doc = dict(base)
    doc["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|eot_id|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]},
                            "<|eot_id|>": {"id": "<|eot_id|>", "ids": [128009], "tokens": ["<|eot_id|>"]}}}]}
    _check(doc, tmp_path, generated(N, ["<|eot_id|>"], seed=11), pairs=True)


@pytest.mark.parametrize("direction", ["Right", "Left"])
@pytest.mark.parametrize("stride", [0, 3])
@pytest.mark.parametrize("strategy", ["LongestFirst", "OnlyFirst", "OnlySecond"])
def test_truncation_and_padding(base, tmp_path, direction, stride, strategy):
    doc = dict(base)
    doc["truncation"] = {"direction": direction, "max_length": 12, "strategy": strategy, "stride": stride}
    doc["padding"] = {"strategy": {"Fixed": 16}, "direction": "Left" if direction == "Right" else "Right",
                      "pad_to_multiple_of": None, "pad_id": 128001, "pad_type_id": 0, "pad_token": "<|end_of_text|>"}
    doc["post_processor"] = {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                                      "tokens": ["<|begin_of_text|>"]}}}
    _check(doc, tmp_path, generated(N, [], seed=12), pairs=True, batch=True)


def test_added_token_at_end_keeps_its_length():
    """A longer token sharing the first char must not match a shorter one cut off by the end."""
    from tokmap.runtime.added import AddedToken, Matcher

    toks = {c: AddedToken(i, c, True, False, False, False, False) for i, c in enumerate(["</s>", "</s>x", "<s>"])}
    m = Matcher(toks, lambda c: False)
    assert [(t.content if t else None, s, e) for t, s, e in m.split("a </s>")] == \
        [(None, 0, 2), ("</s>", 2, 6)]
    assert [(t.content if t else None, s, e) for t, s, e in m.split("</s>x<s>")] == \
        [("</s>x", 0, 5), ("<s>", 5, 8)]


def _leftmost_longest(contents, text):
    """The definition: scanning left to right, the longest token starting at a position is taken,
    and the scan goes on after it; the text between tokens is one stretch."""
    out, pos, start = [], 0, 0
    while pos < len(text):
        best = max((t for t in contents if text.startswith(t, pos)), key=len, default=None)
        if best is None:
            pos += 1
            continue
        if start < pos:
            out.append((None, start, pos))
        out.append((best, pos, pos + len(best)))
        pos = start = pos + len(best)
    if start < len(text):
        out.append((None, start, len(text)))
    return out


@pytest.mark.parametrize("case", ["gemma3", "runs_and_others", "gapped_run", "run_char_starts_more",
                                  "other_holds_run", "many_others"])
def test_matcher_is_leftmost_longest(case, testdata, monkeypatch):
    """Matcher.split against the definition, on token sets that take each of its search regexes:
    runs matched whole by the regex (Gemma 3's 6,415 tokens: runs of newlines, tabs and spaces,
    plus markup), a run with a missing length or sharing its char with another token (checked as
    any token), a token whose end holds a run's char (the scan goes on inside it), and more first
    chars than the literal alternatives allow (one class)."""
    import random

    from tokmap.runtime.added import MAX_LITERAL_FIRSTS, AddedToken, Matcher

    rng = random.Random(case)
    if case == "gemma3":
        doc = json.loads((testdata / "models" / "gemma3" / "tokenizer.json").read_text(encoding="utf-8"))
        contents = [a["content"] for a in doc["added_tokens"]]
    else:
        contents = ["\n" * n for n in range(1, 9)] + ["\u2581" * n for n in range(2, 6)] + ["<s>", "</s>", "<s>x"]
        if case == "gapped_run":
            contents.remove("\n" * 4)
        elif case == "run_char_starts_more":
            contents.append("\n<")
        elif case == "other_holds_run":
            contents += ["<s\n", "</s\n\n"]
        elif case == "many_others":
            contents += [chr(0x4E00 + k) + "x" for k in range(MAX_LITERAL_FIRSTS + 1)]
    toks = {c: AddedToken(i, c, False, False, False, False, False) for i, c in enumerate(contents)}
    m = Matcher(toks, lambda c: False)
    assert bool(m.runs) == (case != "many_others")
    alphabet = ["\n", "\t", " ", "\u2581", "<", ">", "s", "/", "x", "a", "\u4e00", "[", "]"]
    pieces = alphabet + sorted(contents, key=len)[:200] + rng.sample(contents, min(200, len(contents)))
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 60))) for _ in range(1500)]
    texts += ["\n" * 70, "\u2581" * 33 + "\n" * 3, "\u2581", "a\u2581b", "\t" * 31 + "\t"]
    for text in texts:
        got = [(t.content if t else None, s, e) for t, s, e in m.split(text)]
        assert got == _leftmost_longest(contents, text), repr(text)
    # Long texts (runs split at once, other tokens found first): as the definition, or for Gemma
    # 3's 6.4K tokens (the definition tries each at every char) as the short texts' scan.
    from tokmap.runtime import added

    for k in range(4):
        text = "".join(rng.sample(texts, 400))
        assert len(text) >= added.RUNS_SPLIT_TEXT
        got = [(t.content if t else None, s, e) for t, s, e in m.split(text)]
        if case == "gemma3":
            with monkeypatch.context() as mp:
                mp.setattr(added, "RUNS_SPLIT_TEXT", 1 << 60)
                assert got == [(t.content if t else None, s, e) for t, s, e in m.split(text)]
        else:
            assert got == _leftmost_longest(contents, text), k


@pytest.mark.parametrize("flag,flagged", [(None, None), (4, "\n\n"), (5, "\n\n"), (6, "\n\n"),
                                          (4, "<s>"), (5, "</s>"), (6, "<s>")])
def test_matcher_long_texts_of_runs(flag, flagged, monkeypatch):
    """Long texts whose only candidates are run tokens go by str.split at the run char (one such
    char in the text) or re.split over the runs (several); a text also holding another token's
    first char, or run tokens with a flag to check (lstrip, rstrip, single_word), by the scan,
    whose regex passes over an other token's first char where no token's second char follows.
    Each equals the short texts' scan, which the test above checks against the definition;
    with other tokens flagged too."""
    import random

    from tokmap.runtime import added
    from tokmap.runtime.added import AddedToken, Matcher

    contents = ["\n" * n for n in range(1, 9)] + ["\u2581" * n for n in range(2, 6)] + ["\t" * n for n in range(1, 4)]
    contents += ["<s>", "</s>"]
    flags = [False] * 5
    toks = {}
    for i, c in enumerate(contents):
        f = list(flags)
        if flag is not None and c == flagged:
            f[flag - 2] = True
        toks[c] = AddedToken(i, c, *f)
    m = Matcher(toks, lambda c: c.isalnum())
    rng = random.Random(flag)
    taken = []
    real = Matcher._split_at

    def split_at(self, text, c):
        taken.append(c)
        return real(self, text, c)

    monkeypatch.setattr(Matcher, "_split_at", split_at)
    for alphabet in (["\n", "a", "\u4e00", " "], ["\n", "\u2581", "\t", "a", " "], ["\u2581", "b"],
                     ["\n", "a", "<s>", "<"], ["\t", "x"], ["\n", "<", "<<", "</s>", "<s>", "\t", "s>"],
                     ["\u2581", "</s>\n\n", "<", "a"]):
        for _ in range(20):
            text = "".join(rng.choice(alphabet) * rng.choice([1, 1, 2, 3, 9, 20]) for _ in range(3000))
            assert len(text) >= added.RUNS_SPLIT_TEXT
            got = m.split(text)
            with monkeypatch.context() as mp:
                mp.setattr(added, "RUNS_SPLIT_TEXT", 1 << 60)
                assert got == m.split(text)
    if flag is None or flagged != "\n\n":
        assert set(taken) == {"\n", "\t"}  # (the runs of "\u2581" start at two: not by str.split)
    else:
        assert taken == []


def test_added_tokens_made_as_met(exported, testdata):
    """A fresh tokenizer's first encode makes only the AddedTokens its text holds (Gemma 3 has
    6,415: making them all, and the dicts by id, was ~4 ms of every first call); the ones made on
    a match are the very objects `added_tokens` lists, and decoding (by-id lookups, the special
    set) gives tokenizers' strings."""
    import tokenizers

    import tokmap

    tok = tokmap.load(exported("gemma3"))
    ref = tokenizers.Tokenizer.from_file(str(testdata / "models" / "gemma3" / "tokenizer.json"))
    text = "Hello world, nothing added here."
    assert tok.encode(text) == ref.encode(text, add_special_tokens=True).ids
    cols = tok._added
    assert cols._all is None and not cols._made
    text = "a\n\nb\tc<start_of_turn>user\n"
    ids = tok.encode(text)
    assert ids == ref.encode(text, add_special_tokens=True).ids
    made = {cols.contents[k] for k in cols._made}
    assert made == {"\n\n", "\t", "<start_of_turn>", "\n"} and cols._all is None
    by_content = {t.content: t for t in tok.added_tokens}
    assert all(by_content[cols.contents[k]] is t for k, t in cols._made.items())
    dec = ref.get_added_tokens_decoder()
    assert sorted(t.id for t in tok.added_tokens) == sorted(dec)
    assert all((t.content, t.special, t.normalized, t.lstrip, t.rstrip, t.single_word) == (
        dec[t.id].content, dec[t.id].special, dec[t.id].normalized, dec[t.id].lstrip, dec[t.id].rstrip,
        dec[t.id].single_word) for t in tok.added_tokens)
    for skip in (False, True):
        assert tok.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip)
    assert tok.token_to_id("<start_of_turn>") == ref.token_to_id("<start_of_turn>")
