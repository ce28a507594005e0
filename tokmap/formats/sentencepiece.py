"""Read a SentencePiece .model file (a serialized ModelProto) into a TokenizerDef.

The protobuf wire format is parsed by hand (varints, fixed32, length-delimited fields) so the
exporter needs no protobuf package. Only the fields that change encoding or decoding are kept:
pieces (piece, score, type), trainer_spec (model_type, byte_fallback, treat_whitespace_as_suffix,
unk_surface, bos_id) and normalizer_spec (precompiled_charsmap, add_dummy_prefix,
remove_extra_whitespaces, escape_whitespaces). What tokmap cannot reproduce exactly (WORD/CHAR
models, a denormalizer, a normalization_rule_tsv without its compiled charsmap) is refused.
"""

from __future__ import annotations

import hashlib
import os
import struct

from ..definition import SentencePieceModel, TokenizerDef
from ..errors import SourceError, UnsupportedError

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
DEFAULT_UNK_SURFACE = " \u2047 "


class _Proto:
    """Iterates over the (field number, wire type, value) of one message, checking every bound."""

    def __init__(self, path, data, base, what):
        self.path, self.data, self.base, self.what = path, data, base, what

    def fail(self, msg, pos):
        raise SourceError(self.path, f"malformed protobuf at byte {self.base + pos}: {msg}", field=self.what)

    def varint(self, pos):
        data, shift, val = self.data, 0, 0
        while True:
            if pos >= len(data):
                self.fail("truncated varint", pos)
            b = data[pos]
            pos += 1
            val |= (b & 0x7F) << shift
            if not b & 0x80:
                return val, pos
            shift += 7
            if shift >= 70:
                self.fail("varint longer than 10 bytes", pos)

    def fields(self):
        pos, n = 0, len(self.data)
        while pos < n:
            start = pos
            key, pos = self.varint(pos)
            num, wt = key >> 3, key & 7
            if num == 0:
                self.fail("field number 0", start)
            if wt == 0:
                val, pos = self.varint(pos)
            elif wt == 1:
                if pos + 8 > n:
                    self.fail(f"truncated fixed64 field {num}", start)
                val, pos = self.data[pos:pos + 8], pos + 8
            elif wt == 2:
                ln, pos = self.varint(pos)
                if pos + ln > n:
                    self.fail(f"field {num} claims {ln} bytes but only {n - pos} remain", start)
                val, pos = (self.data[pos:pos + ln], pos), pos + ln
            elif wt == 5:
                if pos + 4 > n:
                    self.fail(f"truncated fixed32 field {num}", start)
                val, pos = self.data[pos:pos + 4], pos + 4
            else:
                self.fail(f"unsupported wire type {wt} for field {num}", start)
            yield num, wt, val, start

    def sub(self, val, what):
        payload, at = val
        return _Proto(self.path, payload, self.base + at, what)

    def want(self, num, wt, expected, start, name):
        if wt != expected:
            self.fail(f"field {name} (#{num}) has wire type {wt}, expected {expected}", start)


def _text(p, val, start, name):
    try:
        return bytes(val[0]).decode("utf-8")
    except UnicodeDecodeError:
        p.fail(f"{name} is not valid UTF-8", start)


def read(path, data: bytes | None = None) -> TokenizerDef:
    path = os.fspath(path)
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    mv = memoryview(data)
    top = _Proto(path, mv, 0, "ModelProto")
    pieces: list[bytes] = []
    scores: list[float] = []
    types: list[int] = []
    trainer = {"model_type": 1, "byte_fallback": False, "treat_whitespace_as_suffix": False,
               "unk_surface": DEFAULT_UNK_SURFACE, "bos_id": 1}
    norm = {"charsmap": b"", "add_dummy_prefix": True, "remove_extra_whitespaces": True,
            "escape_whitespaces": True, "rule_tsv": ""}
    denorm_seen = False
    for num, wt, val, start in top.fields():
        if num == 1:
            top.want(num, wt, 2, start, "pieces")
            p = top.sub(val, f"pieces[{len(pieces)}]")
            piece, score, typ = None, 0.0, NORMAL
            for n2, w2, v2, s2 in p.fields():
                if n2 == 1:
                    p.want(n2, w2, 2, s2, "piece")
                    piece = _text(p, v2, s2, "piece").encode("utf-8")
                elif n2 == 2:
                    p.want(n2, w2, 5, s2, "score")
                    score = struct.unpack("<f", v2)[0]
                elif n2 == 3:
                    p.want(n2, w2, 0, s2, "type")
                    if v2 not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
                        p.fail(f"unknown piece type {v2}", s2)
                    typ = v2
            if not piece:
                p.fail("piece is missing or empty", 0)
            pieces.append(piece)
            scores.append(score)
            types.append(typ)
        elif num == 2:
            top.want(num, wt, 2, start, "trainer_spec")
            p = top.sub(val, "trainer_spec")
            for n2, w2, v2, s2 in p.fields():
                if n2 == 3:
                    p.want(n2, w2, 0, s2, "model_type")
                    trainer["model_type"] = v2
                elif n2 in (35, 24):
                    name = "byte_fallback" if n2 == 35 else "treat_whitespace_as_suffix"
                    p.want(n2, w2, 0, s2, name)
                    trainer[name] = bool(v2)
                elif n2 == 44:
                    p.want(n2, w2, 2, s2, "unk_surface")
                    trainer["unk_surface"] = _text(p, v2, s2, "unk_surface")
                elif n2 == 41:
                    p.want(n2, w2, 0, s2, "bos_id")
                    trainer["bos_id"] = v2 - (1 << 64) if v2 >= 1 << 63 else v2
        elif num in (3, 5):
            top.want(num, wt, 2, start, "normalizer_spec" if num == 3 else "denormalizer_spec")
            p = top.sub(val, "normalizer_spec" if num == 3 else "denormalizer_spec")
            spec = {"charsmap": b"", "rule_tsv": ""} if num == 5 else norm
            for n2, w2, v2, s2 in p.fields():
                if n2 == 2:
                    p.want(n2, w2, 2, s2, "precompiled_charsmap")
                    spec["charsmap"] = bytes(v2[0])
                elif n2 in (3, 4, 5):
                    name = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}[n2]
                    p.want(n2, w2, 0, s2, name)
                    spec[name] = bool(v2)
                elif n2 == 6:
                    p.want(n2, w2, 2, s2, "normalization_rule_tsv")
                    spec["rule_tsv"] = _text(p, v2, s2, "normalization_rule_tsv")
            if num == 5:
                denorm_seen = bool(spec["charsmap"] or spec["rule_tsv"])
    if not pieces:
        raise SourceError(path, "no pieces: not a SentencePiece model", field="pieces")
    kind = _MODEL_TYPES.get(trainer["model_type"])
    if kind not in ("bpe", "unigram"):
        raise UnsupportedError(path, f"model_type {kind or trainer['model_type']} is not supported "
                               "(only BPE and UNIGRAM)", field="trainer_spec.model_type")
    if denorm_seen:
        raise UnsupportedError(path, "a denormalizer is not supported", field="denormalizer_spec")
    if norm["rule_tsv"] and not norm["charsmap"]:
        raise UnsupportedError(path, "normalization_rule_tsv without a precompiled_charsmap is not supported",
                               field="normalizer_spec.normalization_rule_tsv")
    # The checks SentencePieceProcessor makes at load: one unk, byte pieces only with byte_fallback.
    unk = [i for i, t in enumerate(types) if t == UNKNOWN]
    if not unk and trainer["byte_fallback"]:
        raise UnsupportedError(path, "a byte_fallback model with no UNKNOWN piece is not supported", field="pieces")
    if len(unk) != 1:
        raise SourceError(path, f"expected exactly one UNKNOWN piece, found {len(unk)}", field="pieces")
    for i, (pc, sc) in enumerate(zip(pieces, scores)):
        if b"\0" in pc:
            raise SourceError(path, "piece contains a NUL character", field=f"pieces[{i}].piece")
        if len(pc) >= 8000:
            raise SourceError(path, f"piece of {len(pc)} bytes (SentencePiece's limit is 8000)", field=f"pieces[{i}].piece")
        if kind == "unigram" and (sc != sc or sc in (float("inf"), float("-inf"))):
            raise SourceError(path, f"score {sc} is NaN or infinite", field=f"pieces[{i}].score")
    seen_normal, seen_reserved = set(), set()
    byte_found = set()
    for i, (pc, t) in enumerate(zip(pieces, types)):
        table = seen_normal if t in (NORMAL, USER_DEFINED, UNUSED) else seen_reserved
        if pc in table:
            raise SourceError(path, f"piece {pc.decode()!r} is defined twice", field=f"pieces[{i}]")
        table.add(pc)
        if t == BYTE:
            if not trainer["byte_fallback"]:
                raise SourceError(path, "byte piece although byte_fallback is false", field=f"pieces[{i}]")
            s = pc.decode()
            if len(s) != 6 or not s.startswith("<0x") or not s.endswith(">"):
                raise SourceError(path, f"invalid byte piece {s!r}", field=f"pieces[{i}]")
            try:
                byte_found.add(int(s[3:5], 16))
            except ValueError:
                raise SourceError(path, f"invalid byte piece {s!r}", field=f"pieces[{i}]") from None
    if seen_normal & seen_reserved:
        # The two lookup tables of SentencePiece may share a string; tokmap's one sorted vocabulary cannot.
        raise UnsupportedError(path, "a piece is both a control/byte piece and a normal piece", field="pieces")
    if trainer["byte_fallback"] and len(byte_found) != 256:
        raise SourceError(path, "byte_fallback is true but there are not 256 byte pieces", field="pieces")
    if norm["charsmap"]:
        _check_charsmap(path, norm["charsmap"])
    bos = trainer["bos_id"]
    bos_id = bos if 0 <= bos < len(pieces) and types[bos] == CONTROL else None
    model = SentencePieceModel(
        vocab=pieces, scores=scores, types=types, kind=kind, unk_id=unk[0], bos_id=bos_id,
        byte_fallback=trainer["byte_fallback"], charsmap=norm["charsmap"],
        add_dummy_prefix=norm["add_dummy_prefix"], remove_extra_whitespaces=norm["remove_extra_whitespaces"],
        escape_whitespaces=norm["escape_whitespaces"],
        treat_whitespace_as_suffix=trainer["treat_whitespace_as_suffix"], unk_surface=trainer["unk_surface"])
    return TokenizerDef(
        source_format="sentencepiece",
        source_path=path,
        source_sha256=hashlib.sha256(data).hexdigest(),
        api="sentencepiece",
        model=model,
        normalizer=[{"type": "spm", "charsmap": bool(norm["charsmap"]), "add_dummy_prefix": norm["add_dummy_prefix"],
                     "remove_extra_whitespaces": norm["remove_extra_whitespaces"],
                     "escape_whitespaces": norm["escape_whitespaces"],
                     "treat_whitespace_as_suffix": trainer["treat_whitespace_as_suffix"]}],
    )


def _check_charsmap(path, blob: bytes):
    """The precompiled charsmap is u32 trie size, a Darts double array of that many bytes, then the
    NUL-terminated replacement strings; the runtime walks it in place, so its frame is checked here."""
    field = "normalizer_spec.precompiled_charsmap"
    if len(blob) < 4:
        raise SourceError(path, "charsmap shorter than its 4-byte header", field=field)
    size = int.from_bytes(blob[:4], "little")
    if size % 4 or size == 0 or 4 + size > len(blob):
        raise SourceError(path, f"charsmap trie size {size} does not fit the {len(blob)}-byte blob", field=field)
