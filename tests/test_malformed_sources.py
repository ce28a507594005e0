"""Malformed source files are refused by the exporter with SourceError (UnsupportedError for components
tokmap cannot reproduce) naming the file and the JSON field or the line: never a bare KeyError,
TypeError or a silently different tokenizer.

The files are the real llama3 tokenizer.json, gpt2.tiktoken and Tekken json, loaded, modified and
written to tmp_path. Most tokenizer.json cases use "mini llama3" (the real file with its vocabulary
cut to the first few thousand ids and the merges among them), so the reader gets past the model in
milliseconds; the cases about the merges use the full file.
"""

from __future__ import annotations

import base64
import json
import pathlib
import re

import pytest
from click.testing import CliRunner

import tokmap
from tokmap import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
MINI_VOCAB = 3000


from conftest import testdata_file as _require  # noqa: E402


# -- sources ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llama3_doc() -> dict:
    """The real llama3 tokenizer.json, parsed. Shared: tests copy what they change (see `derive`)."""
    return json.loads(_require("models/llama3/tokenizer.json").read_bytes())


@pytest.fixture(scope="module")
def mini_doc(llama3_doc) -> dict:
    model = llama3_doc["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < MINI_VOCAB}
    merges = []
    for m in model["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    assert len(merges) > 1000
    return {**llama3_doc, "model": {**model, "vocab": vocab, "merges": merges}}


@pytest.fixture(scope="module")
def gpt2_ranks() -> bytes:
    return _require("models/tiktoken/gpt2.tiktoken").read_bytes()


@pytest.fixture(scope="module")
def tekken_doc() -> dict:
    """The real Tekken file with its vocabulary cut to 2,000 ranks (config adjusted to match)."""
    doc = json.loads(_require("models/tekken/tekken_240718.json").read_bytes())
    n = 2000
    cfg = dict(doc["config"])
    cfg["default_vocab_size"] = n + cfg["default_num_special_tokens"]
    cfg["num_vocab_tokens"] = n
    return {**doc, "config": cfg, "vocab": doc["vocab"][:n]}


def derive(doc: dict, path: str, value=None, delete: bool = False) -> dict:
    """A copy of doc with one value at a dotted path set (or deleted); only the path is copied."""
    keys = [int(k) if k.lstrip("-").isdigit() else k for k in path.split(".")]
    out = dict(doc)
    node = out
    for k in keys[:-1]:
        child = node[k]
        child = list(child) if isinstance(child, list) else dict(child)
        node[k] = child
        node = child
    if delete:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return out


def write_json(tmp_path, doc, name="tokenizer.json", **dump) -> pathlib.Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc, ensure_ascii=False, **dump), encoding="utf-8")
    return p


def refused(src, field=None, line=None, match=None, cls=tokmap.SourceError, **kwargs) -> tokmap.SourceError:
    """Export src, expect cls naming the file, the field and the line (None: must be absent)."""
    __tracebackhide__ = True
    dst = pathlib.Path(src).with_suffix(".mtok")
    with pytest.raises(tokmap.TokmapError) as ei:
        tokmap.export(src, dst, **kwargs)
    e = ei.value
    assert isinstance(e, cls), f"{type(e).__name__}, expected {cls.__name__}: {e}"
    assert e.path == str(src), e.path
    msg = str(e)
    assert msg.startswith(str(src)), msg
    assert e.field == field, f"field {e.field!r}, expected {field!r}: {msg}"
    assert e.line == line, f"line {e.line!r}, expected {line!r}: {msg}"
    if field is not None:
        assert f"field {field}" in msg, msg
    if line is not None:
        assert f"line {line}" in msg, msg
    if match is not None:
        assert re.search(match, msg), msg
    assert not dst.exists(), "a refused source must not leave an output file"
    return e


# -- the unmodified (cut) sources export: every failure below is the modification's -----------------------
def test_mini_sources_export(tmp_path, mini_doc, tekken_doc):
    tok = tokmap.load(tokmap.export(write_json(tmp_path, mini_doc), tmp_path / "mini.mtok"))
    assert tok.encode("hello world", add_special_tokens=False)
    tok = tokmap.load(tokmap.export(write_json(tmp_path, tekken_doc, "tekken.json"), tmp_path / "tekken.mtok"))
    assert tok.encode("hello world")


# -- bad JSON ------------------------------------------------------------------------------------------------
def test_bad_json_reports_the_line(tmp_path, llama3_doc):
    text = json.dumps(llama3_doc, ensure_ascii=False, indent=1)
    lines = text.split("\n")
    k = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].rstrip().endswith('",'))
    lines[k] = lines[k].rstrip()[:-1] + " @,"  # a stray token after a string value
    src = tmp_path / "tokenizer.json"
    src.write_text("\n".join(lines), encoding="utf-8")
    refused(src, line=k + 1, match=r"invalid JSON: Expecting ',' delimiter \(column \d+\)")


def test_truncated_json_reports_the_last_line(tmp_path, mini_doc):
    text = json.dumps(mini_doc, ensure_ascii=False, indent=2)
    lines = text.split("\n")
    k = len(lines) * 2 // 3
    while '"' not in lines[k]:
        k += 1
    cut = sum(len(ln) + 1 for ln in lines[:k]) + lines[k].index('"') + 1  # just after an opening quote
    src = tmp_path / "tokenizer.json"
    src.write_text(text[:cut], encoding="utf-8")  # ends inside the first string of line k + 1
    refused(src, line=k + 1, match="invalid JSON: Unterminated string")


def test_not_utf8_reports_the_line(tmp_path, mini_doc):
    data = json.dumps(mini_doc, ensure_ascii=True, indent=1).encode()
    lines = data.split(b"\n")
    k = len(lines) // 3
    lines[k] = lines[k].replace(b'"', b'"\xff', 1)
    src = tmp_path / "tokenizer.json"
    src.write_bytes(b"\n".join(lines))
    refused(src, line=k + 1, match="not UTF-8")


def test_json_top_level_not_an_object(tmp_path, mini_doc):
    src = write_json(tmp_path, [mini_doc])
    refused(src, line=1, match="unrecognised tokenizer file")  # detection refuses it
    refused(src, field="(top level)", match="expected a JSON object", fmt="hf_json")
    refused(src, field="(top level)", match="not a Tekken file", fmt="tekken")


# -- lone surrogate escapes: Python's json takes "\\ud800", tokenizers (serde_json) refuses the file ---------------
@pytest.mark.parametrize("code", ["d800", "dfff"])
def test_lone_surrogate_escape_reports_the_line(tmp_path, mini_doc, code):
    doc = derive(mini_doc, "added_tokens.0.content", f"<x{chr(int(code, 16))}y>")
    lines = json.dumps(doc, ensure_ascii=True, indent=1).split("\n")
    k = next(i for i, ln in enumerate(lines) if "<x\\ud" in ln)
    src = tmp_path / "tokenizer.json"
    src.write_text("\n".join(lines), encoding="ascii")
    col = lines[k].index("\\ud") + 1
    refused(src, line=k + 1, match=rf"lone surrogate escape \\u{code} \(column {col}\)")
    tokenizers = pytest.importorskip("tokenizers")
    with pytest.raises(Exception, match="surrogate|hex escape"):  # the reference refuses it as well
        tokenizers.Tokenizer.from_file(str(src))


def test_surrogate_pair_escapes_export(tmp_path, mini_doc):
    # A pair is one character (an emoji here): exported, and the added token matches it as in tokenizers.
    doc = derive(mini_doc, "added_tokens.0.content", "<\U0001F600>")
    src = tmp_path / "tokenizer.json"
    src.write_text(json.dumps(doc, ensure_ascii=True), encoding="ascii")
    assert "\\ud83d\\ude00" in src.read_text()
    tok = tokmap.load(tokmap.export(src, tmp_path / "pair.mtok"))
    tokenizers = pytest.importorskip("tokenizers")
    text = "a<\U0001F600>b <\U0001F600"
    ids = tokenizers.Tokenizer.from_file(str(src)).encode(text, add_special_tokens=False).ids
    assert tok.encode(text, add_special_tokens=False) == ids
    assert tok.token_to_id("<\U0001F600>") == ids[1]


@pytest.mark.parametrize("data,at", [
    (b'"\\ud800"', 1), (b'"\\udc00"', 1), (b'"\\ud83d\\ude00"', None), (b'"\\uD83D\\uDE00"', None),
    (b'"\\\\ud800"', None),  # an escaped backslash, then the text "ud800"
    (b'"\\\\\\ud800"', 3), (b'"\\u005cud800"', None), (b'"a\\ud83dx"', 2), (b'"\\ud83d\\u0041"', 1),
    (b'"\\ud83d\\ud83d\\ude00"', 1), (b'"\\ud83d\\ude00\\udc00"', 13), (b'"\\ud83d"', 1), (b'"x"', None),
])
def test_lone_surrogate_scan(data, at):
    from tokmap.formats.jsondoc import lone_surrogate

    assert lone_surrogate(data) == at


# -- unknown component types ---------------------------------------------------------------------------------
FOO = {"type": "Foo"}


@pytest.mark.parametrize("path,value,field", [
    ("normalizer", FOO, "normalizer.type"),
    ("normalizer", {"type": "Sequence", "normalizers": [{"type": "NFC"}, FOO]}, "normalizer.normalizers[1].type"),
    ("pre_tokenizer", FOO, "pre_tokenizer.type"),
    ("pre_tokenizer.pretokenizers.0", FOO, "pre_tokenizer.pretokenizers[0].type"),
    ("pre_tokenizer.pretokenizers.1", FOO, "pre_tokenizer.pretokenizers[1].type"),
    ("post_processor", FOO, "post_processor.type"),
    ("post_processor", {"type": "Sequence", "processors": [FOO]}, "post_processor.processors[0].type"),
    ("decoder", FOO, "decoder.type"),
    ("decoder", {"type": "Sequence", "decoders": [{"type": "ByteLevel"}, FOO]}, "decoder.decoders[1].type"),
    ("model.type", "Foo", "model.type"),
    ("decoder", {"no_type": 1}, "decoder.type"),
])
def test_unknown_component_type(tmp_path, mini_doc, path, value, field):
    e = refused(write_json(tmp_path, derive(mini_doc, path, value)), field=field, cls=tokmap.UnsupportedError)
    assert "not supported" in str(e) and ("'Foo'" in str(e) or "None" in str(e))


@pytest.mark.parametrize("path,value,field", [
    ("version", "2.0", "version"),
    ("model.dropout", 0.1, "model.dropout"),
    ("model.byte_fallback", True, "model.byte_fallback"),
    ("model.continuing_subword_prefix", "##", "model.continuing_subword_prefix"),
    ("model.end_of_word_suffix", "</w>", "model.end_of_word_suffix"),
])
def test_unsupported_options(tmp_path, mini_doc, path, value, field):
    refused(write_json(tmp_path, derive(mini_doc, path, value)), field=field, cls=tokmap.UnsupportedError)


def test_no_byte_level_pre_tokenizer(tmp_path, mini_doc):
    # Without a ByteLevel pre-tokenizer the BPE is character-level; a ByteLevel decoder over it is refused.
    doc = derive(mini_doc, "pre_tokenizer", mini_doc["pre_tokenizer"]["pretokenizers"][0])
    refused(write_json(tmp_path, doc), field="decoder", cls=tokmap.UnsupportedError, match="ByteLevel")


# -- merges (the full real file) ---------------------------------------------------------------------------------
def _merge_parts(m):
    return tuple(m.split(" ")) if isinstance(m, str) else tuple(m)


def test_merge_naming_a_missing_token(tmp_path, llama3_doc):
    i = 5000
    a, _b = _merge_parts(llama3_doc["model"]["merges"][i])
    doc = derive(llama3_doc, f"model.merges.{i}", f"{a} NOPE_NOT_A_TOKEN")
    refused(write_json(tmp_path, doc), field=f"model.merges[{i}]", match="'NOPE_NOT_A_TOKEN' is not in model.vocab")


def test_merge_result_missing(tmp_path, llama3_doc):
    merges = llama3_doc["model"]["merges"]
    i = 20000
    a, b = _merge_parts(merges[i])
    gone = a + b
    doc = derive(llama3_doc, f"model.vocab.{gone}", delete=True)
    assert gone not in doc["model"]["vocab"] and gone in llama3_doc["model"]["vocab"]
    # The first merge that mentions the removed token is the one reported (computed here, not assumed).
    k = next(j for j, m in enumerate(merges) if gone in _merge_parts(m) or "".join(_merge_parts(m)) == gone)
    as_side = gone in _merge_parts(merges[k])
    what = "token" if as_side else "result"
    refused(write_json(tmp_path, doc), field=f"model.merges[{k}]",
            match=re.escape(f"{what} {gone!r} is not in model.vocab"))


@pytest.mark.parametrize("value,match", [
    ("a b c", "two tokens separated by one space"),
    ("ab", "two tokens separated by one space"),
    (["a"], "merge must be"),
    ([1, 2], "merge must be"),
    (5, "merge must be"),
    (None, "merge must be"),
])
def test_malformed_merge_entry(tmp_path, mini_doc, value, match):
    i = 123
    doc = derive(mini_doc, f"model.merges.{i}", value)
    refused(write_json(tmp_path, doc), field=f"model.merges[{i}]", match=match)


# -- wrong field types ------------------------------------------------------------------------------------------
def _first_vocab_token(doc):
    return next(iter(doc["model"]["vocab"]))


WRONG_TYPES = [
    ("model", [], "model", "expected dict"),
    ("model.vocab", [], "model.vocab", "expected dict"),
    ("model.merges", {}, "model.merges", "expected list"),
    ("model.unk_token", "<not-in-vocab>", "model.unk_token", "not in model.vocab"),
    ("model.unk_token", ["<unk>"], "model.unk_token", "expected str"),
    ("added_tokens", {}, "added_tokens", "expected a list"),
    ("added_tokens.3", "<|x|>", "added_tokens[3]", "expected an object"),
    ("added_tokens.3.special", "yes", "added_tokens[3].special", "expected bool, got str"),
    ("added_tokens.0.content", 7, "added_tokens[0].content", "expected str, got int"),
    ("added_tokens.0.id", "128000", "added_tokens[0].id", "expected int, got str"),
    ("pre_tokenizer", "ByteLevel", "pre_tokenizer", "expected an object"),
    ("pre_tokenizer.pretokenizers", {}, "pre_tokenizer.pretokenizers", "expected list"),
    ("pre_tokenizer.pretokenizers.1.add_prefix_space", "false", "pre_tokenizer.pretokenizers[1].add_prefix_space",
     "expected bool"),
    ("pre_tokenizer.pretokenizers.0.pattern", {"Glob": "*"}, "pre_tokenizer.pretokenizers[0].pattern",
     "Regex"),
    ("pre_tokenizer.pretokenizers.0.behavior", "Sideways", "pre_tokenizer.pretokenizers[0].behavior",
     "unknown behavior"),
    ("pre_tokenizer.pretokenizers.0.invert", "no", "pre_tokenizer.pretokenizers[0].invert", "expected bool"),
    ("post_processor.trim_offsets", 0, "post_processor.trim_offsets", "expected bool, got int"),
    ("normalizer", [], "normalizer", "expected an object"),
    ("decoder", 3, "decoder", "expected an object"),
    ("padding", "yes", "padding", "expected an object"),
    ("padding", {"strategy": "Longest"}, "padding.strategy", "BatchLongest"),
    ("padding", {"strategy": {"Fixed": "8"}}, "padding.strategy.Fixed", "expected int"),
    ("padding", {"strategy": {"Fixed": -8}}, "padding.strategy.Fixed", "non-negative"),
    ("padding", {"pad_id": "x"}, "padding.pad_id", "expected int"),
    ("padding", {"pad_to_multiple_of": 2.5}, "padding.pad_to_multiple_of", "expected int"),
    ("padding", {"pad_token": 0}, "padding.pad_token", "expected str"),
    ("padding", {"direction": "Up"}, "padding.direction", "Left or Right"),
    ("truncation", [], "truncation", "expected an object"),
    ("truncation", {"max_length": "512"}, "truncation.max_length", "expected int"),
    ("truncation", {"max_length": -1}, "truncation.max_length", "non-negative"),
    ("truncation", {"max_length": 512, "stride": "x"}, "truncation.stride", "expected int"),
    ("truncation", {"max_length": 8, "stride": 8}, "truncation.stride", "smaller than max_length"),
    ("truncation", {"max_length": 8, "strategy": "Middle"}, "truncation.strategy", "unknown strategy"),
]


@pytest.mark.parametrize("path,value,field,match", WRONG_TYPES, ids=[f"{p}={v!r}"[:60] for p, v, _f, _m in WRONG_TYPES])
def test_wrong_field_types(tmp_path, mini_doc, path, value, field, match):
    refused(write_json(tmp_path, derive(mini_doc, path, value)), field=field, match=match)


def test_bad_vocab_entries(tmp_path, mini_doc):
    tok = _first_vocab_token(mini_doc)
    for value in ("7", -1, 1.5, None, True, 2**40):
        refused(write_json(tmp_path, derive(mini_doc, f"model.vocab.{tok}", value)), field=f"model.vocab[{tok!r}]",
                match="non-negative integer")
    dup = derive(mini_doc, "model.vocab.<dup>", mini_doc["model"]["vocab"][tok])
    refused(write_json(tmp_path, dup), field="model.vocab['<dup>']", match=f"also used by {tok!r}")


def test_template_processing_fields(tmp_path, mini_doc):
    good = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A",
                                                                                             "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                     "tokens": ["<|begin_of_text|>"]}}}
    tokmap.export(write_json(tmp_path, derive(mini_doc, "post_processor", good)), tmp_path / "ok.mtok")
    cases = [
        ("special_tokens.<|begin_of_text|>.ids", ["128000"], "post_processor.special_tokens['<|begin_of_text|>']"),
        ("special_tokens.<|begin_of_text|>.ids", [-1], "post_processor.special_tokens['<|begin_of_text|>']"),
        ("special_tokens.<|begin_of_text|>.tokens", [], "post_processor.special_tokens['<|begin_of_text|>']"),
        ("single.0", {"SpecialToken": {"id": "<nope>", "type_id": 0}}, "post_processor.single[0]"),
        ("single.1", {"Sequence": {"id": "C", "type_id": 0}}, "post_processor.single[1]"),
        ("single.1", {"Sequence": {"id": "A", "type_id": "0"}}, "post_processor.single[1].type_id"),
        ("pair.1", {"Sequence": {"id": "B", "type_id": -1}}, "post_processor.pair[1].type_id"),
        ("pair.0", {"Nonsense": {}}, "post_processor.pair[0]"),
        ("single", "$A", "post_processor.single"),
    ]
    for path, value, field in cases:
        doc = derive(mini_doc, "post_processor", derive(good, path, value))
        refused(write_json(tmp_path, doc), field=field)


# -- .tiktoken ------------------------------------------------------------------------------------------------------
def _tiktoken_with(tmp_path, ranks: bytes, k: int, new_line: bytes, name="custom.tiktoken") -> pathlib.Path:
    lines = ranks.split(b"\n")
    lines[k - 1] = new_line
    p = tmp_path / name
    p.write_bytes(b"\n".join(lines))
    return p


@pytest.mark.parametrize("k", [2, 1000, 50000])
def test_tiktoken_bad_base64_line(tmp_path, gpt2_ranks, k):
    rank = gpt2_ranks.split(b"\n")[k - 1].split()[1]
    p = _tiktoken_with(tmp_path, gpt2_ranks, k, b"@@not*base64@@ " + rank)
    refused(p, line=k, match="bad base64", encoding="gpt2")
    p = _tiktoken_with(tmp_path, gpt2_ranks, k, b"QUJ " + rank)  # padding missing
    refused(p, line=k, match="bad base64", encoding="gpt2")


@pytest.mark.parametrize("rank", [b"abc", b"-5", b"1.5", b"12a", b"\xd9\xa3"])
def test_tiktoken_bad_rank(tmp_path, gpt2_ranks, rank):
    k = 777
    tok = gpt2_ranks.split(b"\n")[k - 1].split()[0]
    refused(_tiktoken_with(tmp_path, gpt2_ranks, k, tok + b" " + rank), line=k, match="bad rank", encoding="gpt2")


def test_tiktoken_other_bad_lines(tmp_path, gpt2_ranks):
    lines = gpt2_ranks.split(b"\n")
    k = 4321
    tok, rank = lines[k - 1].split()
    cases = [
        (tok + b" " + str(2**31).encode(), "too large"),
        (tok + b" " + rank + b" extra", "expected 'base64 rank'"),
        (tok, "expected 'base64 rank'"),
        (lines[9].split()[0] + b" " + rank, "appears twice"),       # a token given twice
        (base64.b64encode(b"\x00new token") + b" " + lines[9].split()[1], "rank 9 is also given on line 10"),
    ]
    for new, match in cases:
        refused(_tiktoken_with(tmp_path, gpt2_ranks, k, new), line=k, match=match, encoding="gpt2")


def test_tiktoken_unknown_file_needs_an_encoding_name(tmp_path, gpt2_ranks):
    lines = gpt2_ranks.split(b"\n")
    p = tmp_path / "custom.tiktoken"
    p.write_bytes(b"\n".join(lines[:-2] + lines[-1:]))  # the last rank dropped: not the published file
    e = refused(p, match=r"not a published encoding")
    msg = str(e)
    assert "--encoding" in msg and "pass the encoding name" in msg
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        assert name in msg
    # The fix the message gives works.
    tok = tokmap.load(tokmap.export(p, tmp_path / "fixed.mtok", encoding="gpt2"))
    assert tok.meta["extra"]["encoding"] == "r50k_base"
    refused(p, match=r"unknown tiktoken encoding 'gpt5'.*r50k_base", encoding="gpt5")


def test_tiktoken_missing_byte_and_empty(tmp_path, gpt2_ranks):
    lines = gpt2_ranks.split(b"\n")
    a = next(i for i, ln in enumerate(lines) if ln.split()[0] == base64.b64encode(b"A"))
    p = tmp_path / "nobyte.tiktoken"
    p.write_bytes(b"\n".join(lines[:a] + lines[a + 1:]))
    refused(p, match="byte 0x41 has no rank", encoding="gpt2")
    p = tmp_path / "empty.tiktoken"
    p.write_bytes(b"\n\n")
    refused(p, line=1, match="no ranks", fmt="tiktoken", encoding="gpt2")


# -- Tekken -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["pattern", "default_vocab_size", "default_num_special_tokens"])
def test_tekken_missing_config_fields(tmp_path, tekken_doc, key):
    refused(write_json(tmp_path, derive(tekken_doc, f"config.{key}", delete=True), "tekken.json"),
            field=f"config.{key}", match="missing or not")


@pytest.mark.parametrize("key,value,field,cls", [
    ("config.pattern", 5, "config.pattern", tokmap.SourceError),
    ("config.default_vocab_size", "131072", "config.default_vocab_size", tokmap.SourceError),
    ("config.default_vocab_size", 10**9, "config.default_vocab_size", tokmap.SourceError),
    ("config.default_vocab_size", 1100, "config.default_vocab_size", tokmap.SourceError),
    ("config.default_num_special_tokens", 1.5, "config.default_num_special_tokens", tokmap.SourceError),
    ("config.version", "v99", "config.version", tokmap.UnsupportedError),
    ("config.version", None, "config.version", tokmap.UnsupportedError),
    ("config", [], "(top level)", tokmap.SourceError),
    ("vocab", {}, "(top level)", tokmap.SourceError),
    ("vocab.10", "AAA=", "vocab[10]", tokmap.SourceError),
    ("vocab.10", {"rank": 11, "token_bytes": "Cg=="}, "vocab[10]", tokmap.SourceError),
    ("vocab.10", {"rank": 10}, "vocab[10]", tokmap.SourceError),
    ("vocab.10.token_bytes", "@@@", "vocab[10].token_bytes", tokmap.SourceError),
    ("vocab.1500.token_bytes", "QUJ", "vocab[1500].token_bytes", tokmap.SourceError),
    ("vocab.1500.token_bytes", "AA==", "vocab[1500]", tokmap.SourceError),  # byte 0 again
    ("special_tokens", {}, "special_tokens", tokmap.SourceError),
    ("special_tokens", [{"rank": 1, "token_str": "<s>"}], "special_tokens[0]", tokmap.SourceError),
    ("special_tokens", [{"rank": 0, "token_str": "<s>"}, {"rank": 1, "token_str": "<s>"}], "special_tokens",
     tokmap.SourceError),
])
def test_tekken_bad_fields(tmp_path, tekken_doc, key, value, field, cls):
    refused(write_json(tmp_path, derive(tekken_doc, key, value), "tekken.json"), field=field, cls=cls, fmt="tekken")


def test_tekken_new_version_must_list_specials(tmp_path, tekken_doc):
    doc = derive(tekken_doc, "config.version", "v13")
    refused(write_json(tmp_path, doc, "tekken.json"), field="special_tokens", match="must list its special tokens")


@pytest.mark.parametrize("key,value,field", [
    ("config.pattern", "[\ud800]+", "config.pattern"),
    ("special_tokens", [{"rank": 0, "token_str": "<unk>"}, {"rank": 1, "token_str": "<s>"},
                        {"rank": 2, "token_str": "<\udc00>"}], "special_tokens[2].token_str"),
])
def test_tekken_lone_surrogate_in_a_string_it_keeps(tmp_path, tekken_doc, key, value, field):
    # mistral-common reads the file with Python's json, which lets the escape through; tokmap keeps
    # these strings as UTF-8, which cannot hold it: refused by name, not a UnicodeEncodeError.
    src = tmp_path / "tekken.json"
    src.write_text(json.dumps(derive(tekken_doc, key, value), ensure_ascii=True), encoding="ascii")
    refused(src, field=field, match="lone surrogate", fmt="tekken")


def test_chat_template_with_a_lone_surrogate(tmp_path, mini_doc):
    src = write_json(tmp_path, mini_doc)
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"chat_template": "{{ '\udc00' }}"}), encoding="ascii")
    with pytest.raises(tokmap.SourceError) as ei:
        tokmap.export(src, tmp_path / "t.mtok")
    assert ei.value.path == str(cfg) and ei.value.field == "chat_template", str(ei.value)
    assert "lone surrogate" in str(ei.value)


def test_tekken_bad_json_line(tmp_path, tekken_doc):
    text = json.dumps(tekken_doc, indent=1)
    lines = text.split("\n")
    k = 500
    while not lines[k].rstrip().endswith(","):
        k += 1
    lines[k] = lines[k].rstrip()[:-1] + " ,,"
    src = tmp_path / "tekken.json"
    src.write_text("\n".join(lines))
    refused(src, line=k + 1, match="invalid JSON")


# -- detection and the command line -----------------------------------------------------------------------------------
def test_unrecognised_and_missing_sources(tmp_path):
    p = tmp_path / "blob.bin"
    p.write_bytes(bytes(range(256)) * 4)
    refused(p, line=1, match="unrecognised tokenizer file")
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"name": "not a tokenizer", "items": [1, 2, 3]}))
    refused(p, match="neither a tokenizer.json")
    refused(tmp_path / "missing.json", match="cannot read")
    refused(p, match="unknown format 'protobuf'", fmt="protobuf")  # ("sentencepiece" is a format now)


def test_cli_export_reports_field(tmp_path, mini_doc):
    src = write_json(tmp_path, derive(mini_doc, "decoder", FOO))
    r = CliRunner().invoke(cli.export_main, [str(src), "-o", str(tmp_path / "out.mtok")])
    assert r.exit_code == 1, r.output
    assert f"error: {src} (field decoder.type): decoder 'Foo' is not supported yet" in r.output, r.output
    assert not (tmp_path / "out.mtok").exists()
