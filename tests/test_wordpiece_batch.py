"""WordPiece's numpy batch (runtime/models/wordpiece_batch.py) and its two hash tables.

The batch claims each word's pieces equal the scalar greedy longest-match loop's; these tests
compare it with that loop on the real minilm vocabulary, and with tokenizers on toy vocabularies
built so that tokens share hashes and buckets, under several continuing_subword_prefix values.
Damaged tables are refused naming the file, the section and its offset.
"""

from __future__ import annotations

import json
import pathlib
import random

import pytest

import tokmap
from tokmap import mtok
from tokmap.runtime.models import wordpiece, wordpiece_batch

from conftest import export_variant, model_source
from test_hostile_files import check_error, with_section, write


def _scalar(path):
    """A model of the file that never takes the batch (its dict path)."""
    model = tokmap.load(path).model
    model._tables = False
    return model


def test_batch_equals_scalar_on_minilm(exported):
    path = exported("minilm")
    model = tokmap.load(path).model
    tables = model._batch_tables()
    assert tables
    rng = random.Random(5)
    vocab = list(_scalar(path)._words())
    words = vocab[::5]
    words += [w + rng.choice(vocab).removeprefix("##") for w in rng.sample(vocab, 3000)]  # two or more pieces
    words += ["unbelievably", "tokenization", "中文", "été", "\u0301x", "##a", "##", "#", "x" * 100, "x" * 101,
              "\ud800a", "a\U0001f44db", "ü" * 40, "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"]
    chars = "abcdefghijklmnopqrstuvwxyzéü中文ж\u0301#"
    words += ["".join(rng.choice(chars) for _ in range(rng.randrange(1, 120))) for _ in range(2000)]
    words = list(dict.fromkeys(w for w in words if w))
    got = wordpiece_batch.encode(words, tables, model.unk_id, model.max_chars)
    assert got == _scalar(path)._encode_many(words)
    assert sum(len(t) > 2 for t in got) > 1000 and any(t == (model.unk_id,) for t in got)


def _toy_doc(prefix: str, rng) -> dict:
    """A WordPiece tokenizer.json over a few chars (some multi-byte), whose tokens include groups
    of equal edge bytes and length (one piece hash each) and continuation tokens."""
    alphabet = "abcdeü中\U0001f600"
    tokens = {"[UNK]"} | set(alphabet) | {prefix + c for c in alphabet}
    while len(tokens) < 400:
        w = "".join(rng.choice(alphabet) for _ in range(rng.randrange(2, 7)))
        tokens.add(prefix + w if rng.random() < 0.5 else w)
    for mid in "abcde":  # same first and last four bytes, same length: one hash
        tokens |= {f"abcd{mid}abcd", f"{prefix}abcd{mid}abcd"}
    vocab = {t: i for i, t in enumerate(sorted(tokens))}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": prefix,
                  "max_input_chars_per_word": 20, "vocab": vocab},
    }


@pytest.mark.parametrize("prefix", ["##", "", "ü_", "a"])
def test_toy_vocabularies_equal_tokenizers(tmp_path, monkeypatch, prefix):
    rng = random.Random(len(prefix) * 7 + 1)
    ref, tok = export_variant(_toy_doc(prefix, rng), tmp_path, "toy")
    tables = tok.model._batch_tables()
    assert tables and len(tables.cont)
    counts = [int(x) for x in __import__("numpy").diff(tables._whole_first)]
    assert max(counts) >= 5  # a bucket of several entries: the equal-edge group at least
    served = []
    real = wordpiece_batch.encode
    monkeypatch.setattr(wordpiece_batch, "encode", lambda *a: served.append(len(a[0])) or real(*a))
    alphabet = "abcdeü中\U0001f600xz"
    for n in (300, 2000):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 26))) for _ in range(n)]
        words += [f"abcd{m}abcd" + rng.choice(alphabet) for m in "abcdex"]
        text = " ".join(words)
        assert tokmap.load(tok._f.path).encode(text) == ref.encode(text).ids, (prefix, n)
    assert served and min(served) >= wordpiece.BATCH_WORDS


def test_crowded_buckets_leave_the_tables_out(tmp_path, monkeypatch):
    """An exporter that finds a bucket over MAX_BUCKET writes no tables; the dict path serves."""
    rng = random.Random(2)
    doc = _toy_doc("##", rng)
    monkeypatch.setattr(wordpiece_batch, "MAX_BUCKET", 2)
    ref, tok = export_variant(doc, tmp_path, "crowded")
    assert mtok.SECTION_WORDPIECE_CONT not in tok._f.sections and mtok.SECTION_PIECE_HASH not in tok._f.sections
    text = " ".join("".join(rng.choice("abcdeü中") for _ in range(rng.randrange(1, 12))) for _ in range(500))
    assert tok.encode(text) == ref.encode(text).ids
    assert tok.model._vocab is not None


def _table(path, sid):
    import numpy as np

    return np.frombuffer(tokmap.load(path)._f.view(sid, mtok.U64), dtype="<u8").copy()


def test_damaged_tables_are_refused(testdata, tmp_path):
    """(The file without truncation: a document takes the whole-stretch path, with its batch.)"""
    import numpy as np

    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    path = pathlib.Path(export_variant(doc, tmp_path, "minilm-whole")[1]._f.path)
    text = " ".join(f"w{k}q" for k in range(400))  # 400 distinct new words: the batch runs
    whole, cont = mtok.SECTION_PIECE_HASH, mtok.SECTION_WORDPIECE_CONT
    n_tokens = len(tokmap.load(path)._f.view(mtok.SECTION_SORTED_IDS, mtok.U32))
    cases = []
    t = _table(path, cont)
    t[3] = (t[3] & np.uint64(0xFFFFFFFF << 32)) | np.uint64(n_tokens + 5)
    cases.append((cont, t.tobytes(), "outside the vocabulary"))
    t = _table(path, whole)
    t[[10, 20]] = t[[20, 10]]
    cases.append((whole, t.tobytes(), "sorted hash table"))
    t = _table(path, whole)
    t[:100] = np.arange(100, dtype=np.uint64)  # a hundred entries of hash 0: one bucket
    cases.append((whole, np.sort(t).tobytes(), "at most 64 entries a bucket"))
    for k, (sid, payload, match) in enumerate(cases):
        bad = write(tmp_path, with_section(path, sid, payload, mtok.U64), f"bad{k}.mtok")
        with pytest.raises(tokmap.FormatError) as ei:
            tokmap.load(bad).encode(text)
        check_error(ei.value, bad, mtok.section_name(sid), tokmap.load(bad)._f.sections[sid][1], match)
    for sid in (whole, cont):  # a flipped bit: the checksum
        good = tokmap.load(path)._f
        data = bytearray(path.read_bytes())
        data[good.sections[sid][1] + 17] ^= 0x04
        bad = write(tmp_path, bytes(data), f"flip{sid}.mtok")
        with pytest.raises(tokmap.FormatError) as ei:
            tokmap.load(bad).encode(text)
        check_error(ei.value, bad, mtok.section_name(sid), good.sections[sid][1], "checksum")
    assert json.loads(bytes(tokmap.load(path)._f.view(mtok.SECTION_META)))["model"]["type"] == "wordpiece"


def test_no_numpy_import_for_the_batch(testdata, tmp_path):
    """A process that has not imported numpy splits a document's words with the dict: importing
    numpy (~110 ms) would cost more than the dict (~5 ms) that the batch spares. (The file without
    truncation: a document takes the whole-stretch path.)"""
    import subprocess
    import sys

    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    path = export_variant(doc, tmp_path, "minilm-whole")[1]._f.path

    code = ("import sys, tokmap; t = tokmap.load(sys.argv[1]); "
            "ids = t.encode(' '.join(f'w{k}q unbelievably{k}' for k in range(600))); "
            "print('numpy' in sys.modules, t.model._vocab is not None, len(ids))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         check=True, cwd=pathlib.Path(__file__).parent.parent).stdout.split()
    assert out[:2] == ["False", "True"] and int(out[2]) > 1200


def test_batch_words_are_not_split_again(exported, monkeypatch):
    """A call with more new words than the word cache holds empties it; the batch's own memo
    keeps their ids, so the next call splits none of them again (a multilingual document
    encoded twice: 120K words), and both calls give the same ids."""
    from tokmap.runtime import models

    monkeypatch.setattr(models, "WORD_CACHE_MAX", 100)
    monkeypatch.setattr(wordpiece, "BATCH_MEMO_MAX", 10_000)
    model = tokmap.load(exported("minilm")).model
    sent = []
    real = wordpiece_batch.encode
    monkeypatch.setattr(wordpiece_batch, "encode", lambda words, *a: sent.append(len(words)) or real(words, *a))
    words = [f"w{k}q" for k in range(3000)] + ["x" * 80]
    first = model.word_parts(words)
    assert not model.ids_cache and sent == [len(words)]
    assert model.word_parts(words) == first and sent == [len(words), 1]  # (only the 80-char word: too long to keep)
    assert first == _scalar(exported("minilm"))._encode_many(words)
    model.word_parts([f"v{k}z" for k in range(9000)])  # past BATCH_MEMO_MAX: emptied, then these kept
    assert len(model.batch_ids) == 9000


def test_batch_still_serves_once_the_dict_exists(exported, monkeypatch):
    """Short calls that build the dict (DICT_AFTER searches) do not turn the batch off: a later
    call's many new words still go to it, and its memo (test above) keeps serving them."""
    model = tokmap.load(exported("minilm")).model
    model._words()  # as DICT_AFTER searches would
    sent = []
    real = wordpiece_batch.encode
    monkeypatch.setattr(wordpiece_batch, "encode", lambda words, *a: sent.append(len(words)) or real(words, *a))
    words = [f"w{k}q" for k in range(500)]
    assert model.word_parts(words) == _scalar(exported("minilm"))._encode_many(words) and sent == [500]
