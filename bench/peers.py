"""One adapter per tokenizer library: how to convert a source file, load it, and encode a text.

Every adapter answers the same four questions so the runner can treat them alike:
`unsupported(model)` (a reason, or None), `prepare(model, td)` (the file that load() reads, plus the
one-time conversion seconds if there is a conversion), `load(path, model)` and `encode(obj, model, text)`.
Library imports happen inside the methods, so a missing library turns into an "n/a" row instead of
an import error, and so that `common.pin_threads()` has run before any of them is imported.

What "encode" means per source kind, chosen to match tokmap's contract:
  hf        tokenizers `encode(text).ids` (added tokens matched, post-processor applied);
  tiktoken  tiktoken `encode_ordinary(text)` (no special tokens);
  tekken    mistral-common `Tekkenizer.encode(text, bos=False, eos=False)`;
  spm       sentencepiece `SentencePieceProcessor(model_file=...).encode(text)` (no BOS/EOS), tokmap
            `encode(text, add_special_tokens=False)`.
"""

from __future__ import annotations

import time
from pathlib import Path

from common import OUT, Model


class Adapter:
    name = "?"
    dist = "?"  # distribution name for the version column

    def unsupported(self, model: Model) -> str | None:
        return None

    def prepare(self, model: Model, td: Path) -> tuple[Path, float | None]:
        """Return (file to load, seconds spent converting or None when the source is loaded as is)."""
        return model.source(td), None

    def load(self, path: Path, model: Model):
        raise NotImplementedError

    def encode(self, obj, model: Model, text: str) -> list[int]:
        raise NotImplementedError


def _out() -> Path:
    """bench/out/, made on first use: a fresh clone has none, and every prepare() converts into it."""
    OUT.mkdir(parents=True, exist_ok=True)
    return OUT


class Tokmap(Adapter):
    name, dist = "tokmap", "tokmap"

    def prepare(self, model, td):
        import tokmap
        dst = _out() / f"{model.name}.mtok"
        t0 = time.perf_counter()
        tokmap.export(model.source(td), dst, encoding=model.encoding)
        return dst, time.perf_counter() - t0

    def load(self, path, model):
        import tokmap
        return tokmap.load(path)

    def encode(self, obj, model, text):
        if model.kind == "tiktoken":
            return obj.encode_ordinary(text)
        if model.kind in ("tekken", "spm"):
            return obj.encode(text, add_special_tokens=False)
        return obj.encode(text)


class Tokenizers(Adapter):
    name, dist = "tokenizers", "tokenizers"

    def unsupported(self, model):
        return None if model.kind == "hf" else "reads tokenizer.json only"

    def load(self, path, model):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(path))
        tok.no_truncation()
        tok.no_padding()
        return tok

    def encode(self, obj, model, text):
        return obj.encode(text).ids


class Tiktoken(Adapter):
    """tiktoken.Encoding built from the .tiktoken file plus the named encoding's pattern and specials."""
    name, dist = "tiktoken", "tiktoken"

    def unsupported(self, model):
        return None if model.kind == "tiktoken" else "reads .tiktoken rank files only"

    def load(self, path, model):
        import tiktoken
        import tiktoken.load
        from tokmap.formats.tiktoken import ENCODINGS
        _sha, pattern, specials = ENCODINGS[model.encoding]
        return tiktoken.Encoding(name=model.encoding, pat_str=pattern,
                                 mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
                                 special_tokens=specials)

    def encode(self, obj, model, text):
        return obj.encode_ordinary(text)


class MistralCommon(Adapter):
    """mistral-common's Tekkenizer (tiktoken inside, ids shifted past the special tokens)."""
    name, dist = "mistral-common", "mistral-common"

    def unsupported(self, model):
        return None if model.kind == "tekken" else "reads Tekken json only"

    def load(self, path, model):
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
        return Tekkenizer.from_file(str(path))

    def encode(self, obj, model, text):
        return obj.encode(text, bos=False, eos=False)


class SentencePiece(Adapter):
    """sentencepiece's SentencePieceProcessor on the .model file (no BOS/EOS: encode(text))."""
    name, dist = "sentencepiece", "sentencepiece"

    def unsupported(self, model):
        return None if model.kind == "spm" else "reads SentencePiece .model only"

    def load(self, path, model):
        import sentencepiece as spm
        return spm.SentencePieceProcessor(model_file=str(path))

    def encode(self, obj, model, text):
        return obj.encode(text)


class Kitoken(Adapter):
    """kitoken, converted once from the source and then loaded from its own binary .kit file."""
    name, dist = "kitoken", "kitoken"

    def prepare(self, model, td):
        from kitoken import Kitoken as K
        convert = {"hf": K.from_tokenizers_file, "tiktoken": K.from_tiktoken_file,
                   "tekken": K.from_tekken_file, "spm": K.from_sentencepiece_file}[model.kind]
        dst = _out() / f"{model.name}.kit"
        t0 = time.perf_counter()
        convert(str(model.source(td))).to_file(str(dst))
        return dst, time.perf_counter() - t0

    def load(self, path, model):
        from kitoken import Kitoken as K
        return K.from_file(str(path))

    def encode(self, obj, model, text):
        # tokenizer.json: tokenizers matches added/special tokens in the text, so let kitoken do too;
        # tiktoken encode_ordinary, Tekken and sentencepiece encode(text) never do.
        return obj.encode(text, model.kind == "hf")


class Tokie(Adapter):
    """tokie, converted once from tokenizer.json and then loaded from its own binary .tkz file."""
    name, dist = "tokie", "tokie"

    def unsupported(self, model):
        if model.kind != "hf":
            return ("tokie's Python API reads tokenizer.json and .tkz only "
                    "(no .tiktoken / Tekken / SentencePiece .model loader)")
        return None

    def prepare(self, model, td):
        import tokie
        dst = _out() / f"{model.name}.tkz"
        t0 = time.perf_counter()
        tokie.Tokenizer.from_json(str(model.source(td))).save(str(dst))
        return dst, time.perf_counter() - t0

    def load(self, path, model):
        import tokie
        tok = tokie.Tokenizer.from_file(str(path))
        tok.no_truncation()
        tok.no_padding()
        return tok

    def encode(self, obj, model, text):
        return obj.encode(text).ids


# Column order in every table: tokmap, then the format's reference library, then the other peers.
ADAPTERS = [Tokmap(), Tokenizers(), Tiktoken(), MistralCommon(), SentencePiece(), Kitoken(), Tokie()]
REFERENCE = {"hf": "tokenizers", "tiktoken": "tiktoken", "tekken": "mistral-common", "spm": "sentencepiece"}


def adapters_for(model: Model) -> list[Adapter]:
    """tokmap first, the reference library second, then kitoken and tokie (even when n/a, for the table)."""
    ref = REFERENCE[model.kind]
    by_name = {a.name: a for a in ADAPTERS}
    return [by_name["tokmap"], by_name[ref], by_name["kitoken"], by_name["tokie"]]
