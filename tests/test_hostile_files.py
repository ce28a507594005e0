"""Hostile .mtok files: every damaged or crafted container is refused with a FormatError that names
the file, the section and (where there is one) the offset; nothing else ever escapes, nothing hangs.

Every file here is built from a real export by re-packing it with the struct layouts and constants of
tokmap/mtok.py (HEADER, ENTRY, MAGIC, ALIGN, section ids): no layout is written out by hand, so the
tests follow the spec if it moves.

    hand-made hostile files   truncations, wrong magic/version/size, table damage, overlapping,
                              out-of-range, misaligned, duplicate, mistyped and missing sections,
                              META and added-token garbage (checksums recomputed to get past them)
    bit flips                 one byte in every section: verify (load, method, CLI) names it
    random mutations          4,000 gpt2 + 800 llama3 seeded mutations, each under a watchdog
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pathlib
import random
import re
import signal
import struct
import time
import zlib

import pytest
from click.testing import CliRunner

import tokmap
from tokmap import cli, mtok
from tokmap.runtime.reader import MtokFile

ROOT = pathlib.Path(__file__).resolve().parent.parent

N_GPT2_MUTATIONS = 4000
N_LLAMA3_MUTATIONS = 800
N_OTHER_MUTATIONS = 1500  # each of the other model kinds (test_random_mutations_of_other_kinds)
WATCHDOG_SECONDS = 10


# -- real data ------------------------------------------------------------------------------------
from conftest import testdata_file as _require  # noqa: E402


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("hostile") / "gpt2.mtok"
    tokmap.export(_require("models/tiktoken/gpt2.tiktoken"), out)
    return out


@pytest.fixture(scope="module")
def llama3(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("hostile") / "llama3.mtok"
    tokmap.export(_require("models/llama3/tokenizer.json"), out)
    return out


@pytest.fixture(scope="module")
def gpt2_ranked(gpt2, tmp_path_factory) -> pathlib.Path:
    """gpt2 in the layout written before model.ranks_from_results: a merge_ranks section (the same
    values as merge_results, as gpt2's ranks are) and no flag in META."""
    c = Container(gpt2.read_bytes())
    secs = c.sections()
    meta = json.loads(c.payload(mtok.SECTION_META))
    assert meta["model"].pop("ranks_from_results") is True
    secs[mtok.SECTION_META] = (mtok.U8, json.dumps(meta).encode("utf-8"))
    secs[mtok.SECTION_MERGE_RANKS] = secs[mtok.SECTION_MERGE_RESULTS]
    out = tmp_path_factory.mktemp("hostile") / "gpt2-ranked.mtok"
    out.write_bytes(layout(secs))
    return out


def _with_ranks(sid, gpt2, gpt2_ranked):
    """The file to damage for `sid`: only the legacy layout has a merge_ranks section."""
    return gpt2_ranked if sid == mtok.SECTION_MERGE_RANKS else gpt2


SPECIAL = {"tiktoken": "<|endoftext|>", "hf": "<|begin_of_text|>"}


# -- the container, from mtok.py's own structs ----------------------------------------------------------
def _field_offsets(st: struct.Struct, names: tuple[str, ...]) -> dict[str, int]:
    """Byte offset of each named field of a struct, computed from its format string."""
    order, body = st.format[0], st.format[1:]
    codes = re.findall(r"\d*[a-zA-Z?]", body)
    assert order in "<=!>" and len(codes) == len(names), f"mtok layout changed: {st.format} vs {names}"
    return {n: struct.calcsize(order + "".join(codes[:i])) for i, n in enumerate(names)}


# Field names as documented in mtok.py's docstring.
HEADER_FIELDS = ("magic", "version", "flags", "n_sections", "file_size", "table_crc", "reserved")
ENTRY_FIELDS = ("id", "dtype", "offset", "length", "crc32", "reserved")
H_OFF = _field_offsets(mtok.HEADER, HEADER_FIELDS)
E_OFF = _field_offsets(mtok.ENTRY, ENTRY_FIELDS)
H_END = dict(zip(HEADER_FIELDS, [H_OFF[f] for f in HEADER_FIELDS[1:]] + [mtok.HEADER.size]))
E_SIZE = dict(zip(ENTRY_FIELDS, [b - a for a, b in zip([E_OFF[f] for f in ENTRY_FIELDS],
                                                         [E_OFF[f] for f in ENTRY_FIELDS[1:]] + [mtok.ENTRY.size])]))
SID = {name: sid for sid, name in mtok.SECTION_NAMES.items()}
CHECKED_HEADER_FIELDS = ("magic", "version", "n_sections", "file_size", "table_crc")  # not flags, reserved
TABLE = mtok.HEADER.size  # the section table follows the header


def entry_pos(i: int) -> int:
    return TABLE + i * mtok.ENTRY.size


class Container:
    """A parsed .mtok: header fields, table entries (dicts) and the raw bytes."""

    def __init__(self, data: bytes):
        self.data = bytearray(data)
        self.header = dict(zip(HEADER_FIELDS, mtok.HEADER.unpack_from(data, 0)))
        self.entries = [dict(zip(ENTRY_FIELDS, mtok.ENTRY.unpack_from(data, entry_pos(i))))
                        for i in range(self.header["n_sections"])]

    def index(self, sid: int) -> int:
        return next(i for i, e in enumerate(self.entries) if e["id"] == sid)

    def entry(self, sid: int) -> dict:
        return self.entries[self.index(sid)]

    def payload(self, sid: int) -> bytes:
        e = self.entry(sid)
        return bytes(self.data[e["offset"]: e["offset"] + e["length"]])

    def sections(self) -> dict[int, tuple[int, bytes]]:
        return {e["id"]: (e["dtype"], self.payload(e["id"])) for e in self.entries}

    def pack(self, fix_table_crc: bool = True) -> bytes:
        """The bytes with the (edited) header and table written back; table crc recomputed."""
        data = bytearray(self.data)
        table = b"".join(mtok.ENTRY.pack(*(e[f] for f in ENTRY_FIELDS)) for e in self.entries)
        data[TABLE: TABLE + len(table)] = table
        hdr = dict(self.header)
        if fix_table_crc:
            hdr["table_crc"] = zlib.crc32(table)
        data[: mtok.HEADER.size] = mtok.HEADER.pack(*(hdr[f] for f in HEADER_FIELDS))
        return bytes(data)


def layout(sections: dict[int, tuple[int, bytes]], order=None) -> bytes:
    """A well-formed container holding exactly `sections` (id -> (dtype, payload)), per mtok.py."""
    ids = list(order) if order is not None else sorted(sections)
    pos = mtok.align_up(TABLE + mtok.ENTRY.size * len(ids))
    entries, placed = [], []
    for sid in ids:
        dtype, payload = sections[sid]
        entries.append(mtok.ENTRY.pack(sid, dtype, pos, len(payload), zlib.crc32(payload), 0))
        placed.append((pos, payload))
        pos = mtok.align_up(pos + len(payload))
    table = b"".join(entries)
    out = bytearray(pos)
    out[: mtok.HEADER.size] = mtok.HEADER.pack(mtok.MAGIC, mtok.FORMAT_VERSION, 0, len(ids), pos, zlib.crc32(table),
                                               b"")
    out[TABLE: TABLE + len(table)] = table
    for off, payload in placed:
        out[off: off + len(payload)] = payload
    return bytes(out)


def with_section(path: pathlib.Path, sid: int, payload: bytes | None, dtype: int | None = None) -> bytes:
    """The file re-laid out with one section replaced (or dropped when payload is None)."""
    secs = Container(path.read_bytes()).sections()
    if payload is None:
        del secs[sid]
    else:
        secs[sid] = (dtype if dtype is not None else secs.get(sid, (mtok.U8,))[0], payload)
    return layout(secs)


def with_meta(path: pathlib.Path, edit) -> bytes:
    """The file with META rewritten by `edit(meta_dict)` (which may also return a new value)."""
    meta = json.loads(Container(path.read_bytes()).payload(mtok.SECTION_META))
    new = edit(meta)
    meta = meta if new is None else new
    return with_section(path, mtok.SECTION_META, json.dumps(meta).encode("utf-8"))


# -- exercising a loaded file ---------------------------------------------------------------------
LONG = ("The year 2024 was 日本語のテキスト with emoji 🎉👩‍👩‍👧 and numbers 3.14159; " * 40 + "x" * 1200)[:3000]


def exercise(path, strict: bool = False, errors: list | None = None) -> list:
    """Load and run the API over a handful of inputs. Each step's result, or the TokmapError class
    name it raised (strict: a FormatError propagates; `errors` collects them); any other exception
    propagates."""
    results = []

    def step(fn):
        try:
            results.append(fn())
        except tokmap.TokmapError as e:
            if strict and isinstance(e, tokmap.FormatError):
                raise
            if errors is not None and isinstance(e, tokmap.FormatError):
                errors.append(e)
            assert not isinstance(e, tokmap.FormatError) or e.path == str(path), (e.path, str(path))
            results.append(type(e).__name__)

    tok = tokmap.load(path)
    special = SPECIAL.get(tok.api, "<s>")
    texts = ["Hello, world! The quick brown fox.", "你好，世界。日本語のテキストです。", "emoji 🎉👩‍👩‍👧 ok 🇯🇵",
             special, LONG]
    encoded = []
    for t in texts:
        if tok.api == "tiktoken":
            step(lambda t=t: tok.encode(t, allowed_special="all"))
        else:
            step(lambda t=t: tok.encode(t))
        if isinstance(results[-1], list):
            encoded.append(results[-1])
    step(lambda: tok.decode(list(range(0, tok.vocab_size, 997))))
    for ids in encoded:
        step(lambda ids=ids: tok.decode(ids))
    step(lambda: tok.encode_full("Hello 你好 world").ids)
    step(lambda: tok.token_to_id(special))
    step(lambda: tok.id_to_token(min(5, tok.vocab_size - 1)))
    return results


def first_format_error(path) -> tokmap.FormatError | None:
    """The FormatError the file raises at load or on first use (None if it never raises one)."""
    try:
        exercise(path, strict=True)
    except tokmap.FormatError as e:
        return e
    return None


def check_error(e: tokmap.FormatError, path, section, offset, match=None):
    __tracebackhide__ = True
    assert isinstance(e, tokmap.FormatError), repr(e)
    assert e.path == str(path), e.path
    assert e.section == section, f"section {e.section!r}, expected {section!r}: {e}"
    assert e.offset == offset, f"offset {e.offset!r}, expected {offset!r}: {e}"
    msg = str(e)
    assert msg.startswith(str(path)), msg
    assert f"section {section}" in msg, msg
    if offset is not None:
        assert f"offset {offset}" in msg, msg
    if match is not None:
        assert re.search(match, msg), msg


def load_error(path, section, offset, match=None):
    __tracebackhide__ = True
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(path)
    check_error(ei.value, path, section, offset, match)
    return ei.value


def write(tmp_path, data: bytes, name="hostile.mtok") -> pathlib.Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def without_split_field(path: pathlib.Path, tmp_path, field: str) -> pathlib.Path:
    """The file as one written before the split steps' optional `field` was: without it."""

    def drop(meta):
        for step in meta["pre_tokenizer"]:
            step.pop(field, None)

    return write(tmp_path, with_meta(path, drop), f"no_{field}.mtok")


# -- sanity: the helpers reproduce the real file ------------------------------------------------------
def test_helpers_round_trip(gpt2, llama3):
    for path in (gpt2, llama3):
        data = path.read_bytes()
        c = Container(data)
        assert c.header["magic"] == mtok.MAGIC and c.header["file_size"] == len(data)
        assert c.pack() == data
        assert layout(c.sections()) == data  # the writer and this spec-derived layout agree byte for byte
        assert H_OFF["magic"] == 0 and E_OFF["id"] == 0
        exercise(path)  # and the unmodified file runs
        assert "FormatError" not in exercise(path)


# -- truncation and size ------------------------------------------------------------------------------
def _cut_points(data: bytes) -> list[int]:
    c = Container(data)
    n = len(c.entries)
    cuts = {0, 1, len(mtok.MAGIC) - 1, len(mtok.MAGIC), H_OFF["file_size"], mtok.HEADER.size - 1, mtok.HEADER.size,
            entry_pos(0) + E_OFF["offset"], entry_pos(n // 2) + 3, entry_pos(n) - 1, entry_pos(n),
            len(data) - 1, len(data) // 2}
    for e in c.entries:
        cuts |= {e["offset"], e["offset"] + 1, e["offset"] + e["length"] // 2, e["offset"] + e["length"] - 1}
    return sorted(x for x in cuts if 0 <= x < len(data))


@pytest.mark.parametrize("model", ["gpt2", "llama3"])
def test_truncated_at_many_points(model, request, tmp_path):
    path = request.getfixturevalue(model)
    data = path.read_bytes()
    cuts = _cut_points(data)
    assert len(cuts) > 40
    for cut in cuts:
        p = write(tmp_path, data[:cut], f"cut{cut}.mtok")
        if cut < mtok.HEADER.size:
            load_error(p, "header", cut, r"shorter than the \d+-byte header")
        else:
            load_error(p, "header", H_OFF["file_size"], rf"header says {len(data)} bytes but the file has {cut}")


def test_truncated_with_patched_size_is_still_refused(gpt2, tmp_path):
    """A truncated copy whose header was 'fixed' to the new size: the table or a section runs past the end."""
    data = gpt2.read_bytes()
    c = Container(data)
    for cut in _cut_points(data):
        if cut < mtok.HEADER.size:
            continue
        c2 = Container(data)
        c2.header["file_size"] = cut
        p = write(tmp_path, c2.pack()[:cut], f"cut{cut}.mtok")
        if cut < entry_pos(len(c.entries)):
            load_error(p, "table", TABLE, "does not fit")
            continue
        bad = next((i for i, e in enumerate(c.entries) if e["offset"] + e["length"] > cut), None)
        if bad is None:  # only trailing padding was cut: still a well-formed file
            assert exercise(p) == exercise(gpt2)
            continue
        load_error(p, mtok.section_name(c.entries[bad]["id"]), entry_pos(bad) + E_OFF["length"], "runs past the end")


def test_padded_copy_refused(gpt2, tmp_path):
    data = gpt2.read_bytes()
    load_error(write(tmp_path, data + b"\0" * mtok.ALIGN), "header", H_OFF["file_size"], "truncated or padded")


@pytest.mark.parametrize("size", [0, 1, mtok.HEADER.size - 1])
def test_tiny_files(tmp_path, size):
    load_error(write(tmp_path, mtok.MAGIC[:size] + b"\0" * max(0, size - len(mtok.MAGIC))), "header", size)


def test_missing_file_and_directory(tmp_path):
    for p in (tmp_path / "nope.mtok", tmp_path):
        with pytest.raises(tokmap.FormatError) as ei:
            tokmap.load(p)
        assert ei.value.path == str(p) and str(ei.value).startswith(str(p)) and "cannot open" in str(ei.value)


# -- header ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("magic", [b"\0" * len(mtok.MAGIC), mtok.MAGIC.lower(), b"PK\x03\x04\0\0\0\0",
                                   mtok.MAGIC.replace(b"\r\n", b"\n") + b"\0"])
def test_wrong_magic(gpt2, tmp_path, magic):
    c = Container(gpt2.read_bytes())
    c.header["magic"] = magic
    load_error(write(tmp_path, c.pack()), "header", H_OFF["magic"], "not a .mtok file")


def test_text_mode_copy(gpt2, tmp_path):
    """A copy through a CRLF -> LF text-mode transfer breaks the magic first."""
    data = gpt2.read_bytes().replace(b"\r\n", b"\n")
    load_error(write(tmp_path, data), "header", H_OFF["magic"], "not a .mtok file")


@pytest.mark.parametrize("version", [mtok.FORMAT_VERSION + 1, 0, 0xFFFF])
def test_unsupported_version(gpt2, tmp_path, version):
    c = Container(gpt2.read_bytes())
    c.header["version"] = version
    load_error(write(tmp_path, c.pack()), "header", H_OFF["version"], rf"format version {version} is not supported")


@pytest.mark.parametrize("delta", [-1, 1, mtok.ALIGN, -mtok.ALIGN])
def test_file_size_field_mismatch(gpt2, tmp_path, delta):
    c = Container(gpt2.read_bytes())
    c.header["file_size"] += delta
    load_error(write(tmp_path, c.pack()), "header", H_OFF["file_size"], "truncated or padded")


# -- section table ----------------------------------------------------------------------------------------
def test_table_checksum(gpt2, tmp_path):
    data = gpt2.read_bytes()
    c = Container(data)
    c.header["table_crc"] ^= 1
    load_error(write(tmp_path, c.pack(fix_table_crc=False)), "table", TABLE, "checksum")
    # every byte of the table is covered, at every load (no verify needed)
    n = len(c.entries)
    for pos in range(TABLE, entry_pos(n)):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        load_error(write(tmp_path, bytes(bad)), "table", TABLE, "checksum")


def test_header_fields_checked_at_every_load(gpt2, tmp_path):
    """Flipping any byte of a checked header field is refused without verify."""
    data = gpt2.read_bytes()
    for f in CHECKED_HEADER_FIELDS:
        for pos in range(H_OFF[f], H_END[f]):
            bad = bytearray(data)
            bad[pos] ^= 0x10
            with pytest.raises(tokmap.FormatError) as ei:
                tokmap.load(write(tmp_path, bytes(bad)))
            assert ei.value.section in ("header", "table"), (f, pos, str(ei.value))
            assert ei.value.offset is not None


@pytest.mark.parametrize("n", [0, 2**32 - 1, None])
def test_section_count_does_not_fit(gpt2, tmp_path, n):
    c = Container(gpt2.read_bytes())
    c.header["n_sections"] = n if n is not None else (c.header["file_size"] - TABLE) // mtok.ENTRY.size + 1
    load_error(write(tmp_path, c.pack(fix_table_crc=False)), "table", TABLE, "does not fit")


def _edit_entry(path, sid, **fields) -> tuple[bytes, int]:
    c = Container(path.read_bytes())
    i = c.index(sid)
    c.entries[i].update(fields)
    return c.pack(), i


@pytest.mark.parametrize("sid", [mtok.SECTION_TOKEN_BYTES, mtok.SECTION_MERGE_RANKS, mtok.SECTION_BYTE_IDS,
                                 mtok.BLOB_BASE])
def test_overlapping_sections(gpt2, gpt2_ranked, tmp_path, sid):
    path = _with_ranks(sid, gpt2, gpt2_ranked)
    c = Container(path.read_bytes())
    i = c.index(sid)
    prev = next(e for e in reversed(c.entries[:i]) if e["length"] > 0)  # an empty one has no inside
    start = prev["offset"] + (prev["length"] // 2) // mtok.ALIGN * mtok.ALIGN  # aligned, inside the previous one
    data, i = _edit_entry(path, sid, offset=start)
    load_error(write(tmp_path, data), mtok.section_name(sid), entry_pos(i) + E_OFF["offset"], "overlapping")


def test_section_overlapping_header_and_table(gpt2, tmp_path):
    c = Container(gpt2.read_bytes())
    first = c.entries[0]["id"]
    for off in {0, entry_pos(len(c.entries)) // 2 // mtok.ALIGN * mtok.ALIGN}:
        data, i = _edit_entry(gpt2, first, offset=off)
        load_error(write(tmp_path, data), mtok.section_name(first), entry_pos(i) + E_OFF["offset"], "overlapping")


def test_sections_out_of_order(gpt2, tmp_path):
    c = Container(gpt2.read_bytes())
    a, b = c.entries[2], c.entries[3]
    a["offset"], b["offset"] = b["offset"], a["offset"]
    a["length"], b["length"] = min(a["length"], b["length"]), min(a["length"], b["length"])
    load_error(write(tmp_path, c.pack()), mtok.section_name(b["id"]), entry_pos(3) + E_OFF["offset"], "overlapping")


@pytest.mark.parametrize("how", ["length", "offset", "huge_length", "huge_offset"])
def test_section_out_of_range(gpt2, tmp_path, how):
    c = Container(gpt2.read_bytes())
    size = c.header["file_size"]
    last = c.entries[-1]
    elem = mtok.DTYPES[last["dtype"]][1]
    fields = {
        "length": {"length": mtok.align_up(size - last["offset"]) + elem},
        "offset": {"offset": mtok.align_up(size) + mtok.ALIGN},
        "huge_length": {"length": (2**64 - 1) // elem * elem},
        "huge_offset": {"offset": 2**64 - mtok.ALIGN},
    }[how]
    data, i = _edit_entry(gpt2, last["id"], **fields)
    load_error(write(tmp_path, data), mtok.section_name(last["id"]), entry_pos(i) + E_OFF["length"],
               "runs past the end")


@pytest.mark.parametrize("delta", [1, 4, mtok.ALIGN // 2, mtok.ALIGN - 1])
def test_misaligned_section(gpt2, tmp_path, delta):
    c = Container(gpt2.read_bytes())
    sid = c.entries[-1]["id"]
    data, i = _edit_entry(gpt2, sid, offset=c.entries[-1]["offset"] + delta)
    load_error(write(tmp_path, data), mtok.section_name(sid), entry_pos(i) + E_OFF["offset"], "aligned")


@pytest.mark.parametrize("k", [1, 5, -1])
def test_duplicate_section_id(gpt2, tmp_path, k):
    c = Container(gpt2.read_bytes())
    k %= len(c.entries)
    dup = c.entries[k - 1]["id"]
    c.entries[k]["id"] = dup
    load_error(write(tmp_path, c.pack()), mtok.section_name(dup), entry_pos(k), rf"duplicate section id {dup}")


@pytest.mark.parametrize("dtype", [0, max(mtok.DTYPES) + 1, 0xFFFFFFFF])
def test_unknown_dtype(gpt2, tmp_path, dtype):
    data, i = _edit_entry(gpt2, mtok.SECTION_MERGE_KEYS, dtype=dtype)
    load_error(write(tmp_path, data), "merge_keys", entry_pos(i) + E_OFF["dtype"], rf"unknown element type {dtype}")


def test_length_not_multiple_of_element(gpt2, tmp_path):
    c = Container(gpt2.read_bytes())
    e = c.entry(mtok.SECTION_TOKEN_OFFSETS)
    data, i = _edit_entry(gpt2, mtok.SECTION_TOKEN_OFFSETS, length=e["length"] - 1)
    load_error(write(tmp_path, data), "token_offsets", entry_pos(i) + E_OFF["length"], "multiple of the element size")


@pytest.mark.parametrize("sid", sorted(mtok.REQUIRED) + [mtok.SECTION_MERGE_KEYS, mtok.SECTION_MERGE_RANKS,
                                                          mtok.SECTION_MERGE_RESULTS, mtok.SECTION_BYTE_IDS])
def test_missing_section(gpt2, gpt2_ranked, tmp_path, sid):
    p = write(tmp_path, with_section(_with_ranks(sid, gpt2, gpt2_ranked), sid, None))
    load_error(p, mtok.section_name(sid), None, "missing")


@pytest.mark.parametrize("sid", sorted(mtok.REQUIRED) + [mtok.SECTION_MERGE_KEYS, mtok.SECTION_MERGE_RESULTS,
                                                          mtok.SECTION_BYTE_IDS])
def test_section_with_wrong_dtype(gpt2, tmp_path, sid):
    secs = Container(gpt2.read_bytes()).sections()
    dtype, payload = secs[sid]
    other = mtok.U8 if dtype != mtok.U8 else mtok.U32
    secs[sid] = (other, payload[: len(payload) // 8 * 8])
    p = write(tmp_path, layout(secs))
    # The reader checks required sections' types (no offset: the table entry is fine, the type is wrong
    # for the id); the others are checked when first viewed, at the section's offset.
    offset = None if sid in mtok.REQUIRED else Container(p.read_bytes()).entry(sid)["offset"]
    load_error(p, mtok.section_name(sid), offset, rf"element type {other}, expected {dtype}")


def test_unknown_section_ids_are_ignored(gpt2, tmp_path):
    """Forward compatibility: a section this reader does not know is skipped, not fatal."""
    secs = Container(gpt2.read_bytes()).sections()
    secs[0x7FFF] = (mtok.U8, b"future data")
    p = write(tmp_path, layout(secs))
    assert exercise(p) == exercise(gpt2)


# -- inconsistent array sections ----------------------------------------------------------------------------
_LENGTH_CASES = [
    (mtok.SECTION_MERGE_RANKS, -1, "merge_ranks"),
    (mtok.SECTION_MERGE_RESULTS, +1, "merge_results"),
    (mtok.SECTION_MERGE_KEYS, -1, "merge_ranks"),  # the keys set the count; the first array off by one is named
    (mtok.SECTION_BYTE_IDS, -1, "byte_ids"),
    (mtok.SECTION_TOKEN_OFFSETS, -1, "token_offsets"),
    (mtok.SECTION_TOKEN_OFFSETS, +1, "token_offsets"),
]


# gpt2 as exported has no rank section (the results are the ranks): the results are then the first
# array the keys must match. gpt2_ranked is the layout with one.
@pytest.mark.parametrize("model,sid,delta,named", [("gpt2_ranked", *c) for c in _LENGTH_CASES] + [
    ("gpt2", sid, delta, "merge_results" if named == "merge_ranks" else named)
    for sid, delta, named in _LENGTH_CASES if sid != mtok.SECTION_MERGE_RANKS])
def test_array_lengths_disagree(request, tmp_path, model, sid, delta, named):
    secs = Container(request.getfixturevalue(model).read_bytes()).sections()
    dtype, payload = secs[sid]
    size = mtok.DTYPES[dtype][1]
    secs[sid] = (dtype, payload[:-size] if delta < 0 else payload + payload[-size:])
    p = write(tmp_path, layout(secs))
    load_error(p, named, Container(p.read_bytes()).entry(SID[named])["offset"], "inconsistent file")


# -- merge ranks stored as the results (model.ranks_from_results) -------------------------------------------
def test_rank_section_beside_the_flag_is_refused(gpt2, tmp_path):
    secs = Container(gpt2.read_bytes()).sections()
    secs[mtok.SECTION_MERGE_RANKS] = secs[mtok.SECTION_MERGE_RESULTS]
    p = write(tmp_path, layout(secs))
    load_error(p, "merge_ranks", Container(p.read_bytes()).entry(mtok.SECTION_MERGE_RANKS)["offset"],
               "ranks_from_results")


@pytest.mark.parametrize("flag", [False, "absent"])
def test_no_rank_section_needs_the_flag(gpt2, tmp_path, flag):
    def edit(m):
        if flag == "absent":
            del m["model"]["ranks_from_results"]
        else:
            m["model"]["ranks_from_results"] = flag
    load_error(write(tmp_path, with_meta(gpt2, edit)), "merge_ranks", None, "required section is missing")


def test_legacy_layout_with_ranks_encodes_alike(gpt2, gpt2_ranked):
    model = tokmap.load(gpt2_ranked).model
    assert model.ranks is not model.results and model.ranks.tolist() == model.results.tolist()
    assert exercise(gpt2_ranked, strict=True) == exercise(gpt2, strict=True)


def test_one_rank_with_two_results_is_refused(gpt2_ranked, tmp_path):
    """Merges sharing a rank share their result (tiktoken's all splits of one token): the batch merge
    finds a merge's result from its rank. A table breaking that names merge_ranks on the first
    batch merge, instead of merging to the wrong token."""
    secs = Container(gpt2_ranked.read_bytes()).sections()
    raw = secs[mtok.SECTION_MERGE_RANKS][1]
    ranks = list(struct.unpack(f"<{len(raw) // 4}I", raw))
    results = struct.unpack(f"<{len(ranks)}I", secs[mtok.SECTION_MERGE_RESULTS][1])
    ranks[next(j for j, r in enumerate(results) if r != results[0])] = ranks[0]
    p = write(tmp_path, with_section(gpt2_ranked, mtok.SECTION_MERGE_RANKS, struct.pack(f"<{len(ranks)}I", *ranks)))
    tok = tokmap.load(p)
    for _ in range(2):  # (and again: the first failure left no half-built batch merger to go on with)
        with pytest.raises(tokmap.FormatError) as ei:
            tok.encode_ordinary(" ".join(f"w{k}x{k * 7}" for k in range(20000)))  # a batch of misses
        check_error(ei.value, p, "merge_ranks", MtokFile(p).sections[mtok.SECTION_MERGE_RANKS][1],
                    "one rank with different results")


# -- META ---------------------------------------------------------------------------------------------------
def _meta_off(p) -> int:
    return Container(p.read_bytes()).entry(mtok.SECTION_META)["offset"]


@pytest.mark.parametrize("payload", [b"{not json", b"\xff\xfe{}", b"", b"[]", b'"meta"', b"null", b"123",
                                     b"[" * 100_000 + b"]" * 100_000, b'{"a": ' * 50_000 + b"1" + b"}" * 50_000],
                         ids=["syntax", "not-utf8", "empty", "list", "string", "null", "number", "deep-list",
                              "deep-object"])
def test_bad_meta_json(gpt2, tmp_path, payload):
    p = write(tmp_path, with_section(gpt2, mtok.SECTION_META, payload))
    load_error(p, "meta", _meta_off(p), r"invalid JSON|expected a JSON dict")


def test_meta_checksum_always_checked(gpt2, tmp_path):
    """META is parsed at every load, so its checksum is checked even without verify."""
    data = bytearray(gpt2.read_bytes())
    e = Container(bytes(data)).entry(mtok.SECTION_META)
    data[e["offset"] + e["length"] // 2] ^= 0x01
    load_error(write(tmp_path, bytes(data)), "meta", e["offset"], "checksum mismatch")


def _del(*keys):
    def edit(m):
        d = m
        for k in keys[:-1]:
            d = d[k]
        del d[keys[-1]]
    return edit


def _set(*keys_value):
    *keys, value = keys_value

    def edit(m):
        d = m
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value(m) if callable(value) else value
    return edit


def _first_split(m):
    return next(s for s in m["pre_tokenizer"] if s["type"] == "split")


def _split_set(key, value):
    def edit(m):
        _first_split(m)[key] = value
    return edit


def _split_del(key):
    def edit(m):
        del _first_split(m)[key]
    return edit


# (id, edit, section named, when: "load" | "use", message pattern). Offsets are the named section's.
META_CASES = [
    ("not-object", lambda m: [m], "meta", "load", "expected a JSON dict"),
    *[(f"missing-{k}", _del(k), "meta", "load", rf"field {k}\b")
      for k in ("api", "vocab_size", "model", "normalizer", "pre_tokenizer", "post_processor", "decoder", "n_added")],
    ("missing-model.ignore_merges", _del("model", "ignore_merges"), "meta", "load", "model.ignore_merges"),
    ("missing-model.unk_id", _del("model", "unk_id"), "meta", "load", "model.unk_id"),
    ("api-unknown", _set("api", "sentencepiece"), "meta", "load", "field api"),
    ("api-list", _set("api", ["tiktoken"]), "meta", "load", "field api"),
    ("vocab_size-string", _set("vocab_size", lambda m: str(m["vocab_size"])), "meta", "load", "vocab_size"),
    ("vocab_size-float", _set("vocab_size", lambda m: float(m["vocab_size"])), "meta", "load", "vocab_size"),
    ("vocab_size-infinite", _set("vocab_size", float("inf")), "meta", "load", "vocab_size"),
    ("vocab_size-huge", _set("vocab_size", 10**30), "meta", "load", "vocab_size"),
    ("vocab_size-negative", _set("vocab_size", -1), "meta", "load", "vocab_size"),
    ("vocab_size-bool", _set("vocab_size", True), "meta", "load", "vocab_size"),
    ("vocab_size-null", _set("vocab_size", None), "meta", "load", "vocab_size"),
    ("vocab_size-off-by-one", _set("vocab_size", lambda m: m["vocab_size"] + 1), "token_offsets", "load",
     "token offsets for vocab_size"),
    ("model-list", _set("model", []), "meta", "load", "field model"),
    ("ignore_merges-string", _set("model", "ignore_merges", "yes"), "meta", "load", "model.ignore_merges"),
    ("ranks_from_results-string", _set("model", "ranks_from_results", "yes"), "meta", "load",
     "model.ranks_from_results"),
    ("ranks_from_results-int", _set("model", "ranks_from_results", 1), "meta", "load", "model.ranks_from_results"),
    ("unk_id-out-of-range", _set("model", "unk_id", lambda m: m["vocab_size"]), "meta", "load", "model.unk_id"),
    ("unk_id-string", _set("model", "unk_id", "0"), "meta", "load", "model.unk_id"),
    ("pre_tokenizer-object", _set("pre_tokenizer", {}), "meta", "load", "field pre_tokenizer"),
    ("pre_tokenizer-step-string", _set("pre_tokenizer", ["split"]), "meta", "load", r"pre_tokenizer\[0\]"),
    ("pre_tokenizer-step-no-type", _set("pre_tokenizer", [{}]), "meta", "load", r"pre_tokenizer\[0\]"),
    ("split-missing-regex", _split_del("regex"), "meta", "load", r"\.regex"),
    ("split-regex-number", _split_set("regex", 5), "meta", "load", r"\.regex"),
    ("split-behavior", _split_set("behavior", "sideways"), "meta", "load", r"\.behavior"),
    ("split-invert-string", _split_set("invert", "no"), "meta", "load", r"\.invert"),
    ("split-class_index-string", _split_set("class_index", "0"), "meta", "load", r"\.class_index"),
    ("normalizer-step-list", _set("normalizer", [[]]), "meta", "load", r"normalizer\[0\]"),
    ("normalizer-form", _set("normalizer", [{"type": "unicode", "form": "NFX", "tables": 0}]), "meta", "load",
     r"normalizer\[0\]\.form"),
    ("post_processor-string", _set("post_processor", "x"), "meta", "load", "post_processor"),
    ("post_template-ids", _set("post_processor", [{"type": "template", "single": [{"special": "s", "type_id": 0}],
                                                   "pair": [], "special_tokens": {"s": {"ids": ["1"]}}}]),
     "meta", "load", "special_tokens"),
    ("post_template-unknown-special", _set("post_processor", [{"type": "template", "pair": [],
                                                               "single": [{"special": "t", "type_id": 0}],
                                                               "special_tokens": {"s": {"ids": [1]}}}]),
     "meta", "load", r"single\[0\]"),
    ("post_byte_level-flags", _set("post_processor", [{"type": "byte_level", "trim_offsets": 1,
                                                       "add_prefix_space": False}]), "meta", "load", "trim_offsets"),
    ("decoder-step-number", _set("decoder", [1]), "meta", "load", r"decoder\[0\]"),
    ("holes-string", _set("holes", "x"), "meta", "load", "holes"),
    ("holes-short", _set("holes", [[1]]), "meta", "load", "holes"),
    ("irregular-list", _set("irregular", []), "meta", "load", "irregular"),
    ("irregular-id-string", _set("irregular", {"a": "b"}), "meta", "load", "irregular"),
    ("extra-list", _set("extra", []), "meta", "load", "extra"),
    ("provenance-list", _set("provenance", []), "meta", "load", "provenance"),
    ("padding-string", _set("padding", "x"), "meta", "load", "padding"),
    ("padding-missing-fields", _set("padding", {"length": 8}), "meta", "load", "padding"),
    ("truncation-string-length", _set("truncation", {"max_length": "5", "stride": 0, "strategy": "LongestFirst",
                                                     "direction": "right"}), "meta", "load", "truncation.max_length"),
    ("truncation-stride", _set("truncation", {"max_length": 4, "stride": 4, "strategy": "LongestFirst",
                                              "direction": "right"}), "meta", "load", "truncation.stride"),
    ("word_class-string", _set("word_class", "x"), "meta", "load", "word_class"),
    # Read lazily: refused at first use, still naming the section.
    ("split-regex-invalid", _split_set("regex", "(unbalanced"), "meta", "use", "regex does not compile"),
    ("pre_tokenizer-unknown-step", _set("pre_tokenizer", [{"type": "foo"}]), "meta", "use",
     "unknown pre-tokenizer step 'foo'"),
    ("split-class_index-no-blob", _split_set("class_index", 999), f"blob{999}", "use", "missing"),
    ("split-class_index-wrong-dtype", lambda m: _first_split(m).update(class_index=_first_split(m)["class_blocks"]),
     "blob-of-class_blocks", "use", "element type"),
]


@pytest.mark.parametrize("case", META_CASES, ids=[c[0] for c in META_CASES])
def test_meta_wrong_types_and_missing_keys(gpt2, tmp_path, case):
    _id, edit, section, when, match = case
    meta = json.loads(Container(gpt2.read_bytes()).payload(mtok.SECTION_META))
    if section == "blob-of-class_blocks":
        section = mtok.section_name(mtok.BLOB_BASE + _first_split(meta)["class_blocks"])
    p = write(tmp_path, with_meta(gpt2, edit))
    c = Container(p.read_bytes())
    sid = SID.get(section)
    if sid is None and section.startswith("blob"):
        sid = mtok.BLOB_BASE + int(section[4:])
    offset = c.entry(sid)["offset"] if any(e["id"] == sid for e in c.entries) else None
    if when == "load":
        load_error(p, section, offset, match)
        return
    tok = tokmap.load(p)  # lazily read: load succeeds, the first encode refuses
    assert tok.vocab_size > 0
    e = first_format_error(p)
    assert e is not None, "the hostile META was never refused"
    check_error(e, p, section, offset, match)


def legacy_added(path, tmp_path, payload: bytes) -> pathlib.Path:
    """The file as written before the added_columns section: its added tokens a JSON list (payload)."""
    bare = write(tmp_path, with_section(path, mtok.SECTION_ADDED_COLUMNS, None), "bare.mtok")
    return write(tmp_path, with_section(bare, mtok.SECTION_ADDED_TOKENS, payload, mtok.U8), "legacy.mtok")


def test_deep_json_in_meta_and_added_tokens_fails_cleanly(gpt2, tmp_path):
    deep = b"[" * 200_000 + b"]" * 200_000
    p = legacy_added(gpt2, tmp_path, deep)
    e = first_format_error(p)
    check_error(e, p, "added_tokens", Container(p.read_bytes()).entry(mtok.SECTION_ADDED_TOKENS)["offset"],
                "invalid JSON")


# -- added tokens ---------------------------------------------------------------------------------------------
ADDED_CASES = [
    ("not-json", b"[[50256, \"<|endoftext|>\"", "invalid JSON"),
    ("not-utf8", b"\xff\xfe", "invalid JSON"),
    ("object", b"{}", "expected a JSON list"),
    ("list-of-numbers", b"[1, 2, 3]", "bad added-token entry"),
    ("short-entry", json.dumps([[50256, "<|endoftext|>", True]]).encode(), "bad added-token entry"),
    ("id-string", json.dumps([["50256", "<|endoftext|>", True, False, False, False, False]]).encode(),
     "bad added-token entry"),
    ("id-bool", json.dumps([[True, "<|endoftext|>", True, False, False, False, False]]).encode(),
     "bad added-token entry"),
    ("content-number", json.dumps([[50256, 5, True, False, False, False, False]]).encode(), "bad added-token entry"),
    ("content-empty", json.dumps([[50256, "", True, False, False, False, False]]).encode(), "bad added-token entry"),
    ("flag-string", json.dumps([[50256, "<|endoftext|>", "yes", False, False, False, False]]).encode(),
     "bad added-token entry"),
    ("id-out-of-range", json.dumps([[10**9, "<|endoftext|>", True, False, False, False, False]]).encode(),
     "outside the vocabulary"),
    ("id-negative", json.dumps([[-1, "<|endoftext|>", True, False, False, False, False]]).encode(),
     "outside the vocabulary"),
]


@pytest.mark.parametrize("model", ["gpt2", "llama3"])
@pytest.mark.parametrize("case", ADDED_CASES, ids=[c[0] for c in ADDED_CASES])
def test_added_tokens_garbage(request, tmp_path, model, case):
    _id, payload, match = case
    path = request.getfixturevalue(model)
    p = legacy_added(path, tmp_path, payload)
    tok = tokmap.load(p)  # parsed on first use, not at load
    assert tok._added is None
    e = first_format_error(p)
    assert e is not None, "garbage added tokens were accepted"
    check_error(e, p, "added_tokens", Container(p.read_bytes()).entry(mtok.SECTION_ADDED_TOKENS)["offset"], match)


def test_added_tokens_checksum_checked_on_first_use(gpt2, tmp_path):
    for sid, name in ((mtok.SECTION_ADDED_COLUMNS, "added_columns"), (mtok.SECTION_ADDED_TOKENS, "added_tokens")):
        src = gpt2 if sid == mtok.SECTION_ADDED_COLUMNS else legacy_added(
            gpt2, tmp_path, json.dumps([[50256, "<|endoftext|>", True, False, False, False, False]]).encode())
        data = bytearray(src.read_bytes())
        e = Container(bytes(data)).entry(sid)
        data[e["offset"] + 1] ^= 0x20
        p = write(tmp_path, bytes(data), f"flip{sid}.mtok")
        tokmap.load(p)
        err = first_format_error(p)
        check_error(err, p, name, e["offset"], "checksum mismatch")


def _columns(ids, contents, flags, n=None, nbytes=None, ends=None) -> bytes:
    data = "".join(contents).encode("utf-8")
    if ends is None:
        ends = [sum(map(len, contents[:k + 1])) for k in range(len(contents))]
    return (mtok.ADDED_COLUMNS.pack(len(ids) if n is None else n, len(data) if nbytes is None else nbytes)
            + struct.pack(f"<{len(ids)}I", *ids) + struct.pack(f"<{len(ends)}I", *ends) + bytes(flags) + data)


COLUMN_CASES = [
    ("empty", b"", "shorter than their header"),
    ("header-only", mtok.ADDED_COLUMNS.pack(2, 0), "need 26"),
    ("count-too-high", _columns([50256], ["<|endoftext|>"], [1], n=2), "bytes, where the header's counts"),
    ("bytes-too-few", _columns([50256], ["<|endoftext|>"], [1], nbytes=3), "bytes, where the header's counts"),
    ("not-utf8", _columns([50256], ["<|endoftext|>"], [1])[:-1] + b"\xff", "not UTF-8"),
    ("empty-content", _columns([50256, 50255], ["", "<|x|>"], [1, 0]), "content ends do not rise"),
    ("ends-past-text", _columns([50256], ["<|endoftext|>"], [1], ends=[40]), "content ends do not rise"),
    ("ends-falling", _columns([50256, 50255], ["<|a|>", "<|b|>"], [1, 1], ends=[5, 3]), "content ends do not rise"),
    ("flag-bit-5", _columns([50256], ["<|endoftext|>"], [0x21]), "a bit past the five fields"),
    ("id-out-of-range", _columns([10**9], ["<|endoftext|>"], [1]), "outside the vocabulary"),
]


@pytest.mark.parametrize("case", COLUMN_CASES, ids=[c[0] for c in COLUMN_CASES])
def test_added_columns_garbage(gpt2, tmp_path, case):
    _id, payload, match = case
    p = write(tmp_path, with_section(gpt2, mtok.SECTION_ADDED_COLUMNS, payload, mtok.U8))
    assert tokmap.load(p)._added is None  # parsed on first use, not at load
    e = first_format_error(p)
    assert e is not None, "garbage added columns were accepted"
    check_error(e, p, "added_columns", Container(p.read_bytes()).entry(mtok.SECTION_ADDED_COLUMNS)["offset"], match)


def test_added_columns_equal_the_json_list(llama3, tmp_path):
    """The columns hold what the JSON list of older files held: each token's id, content and five
    flags, read back alike (both flags of every kind set somewhere)."""
    tok = tokmap.load(llama3)
    fields = ("id", "content") + mtok.ADDED_FLAGS
    rows = [[getattr(a, f) for f in fields] for a in tok.added_tokens]
    for k in range(2, 7):  # (each flag field as Llama 3 has it is one value throughout: one flipped)
        rows[k * 3][k] = not rows[k * 3][k]
    legacy = tokmap.load(legacy_added(llama3, tmp_path, json.dumps(rows).encode()))
    cols = tokmap.load(write(tmp_path, with_section(llama3, mtok.SECTION_ADDED_COLUMNS, _columns(
        [r[0] for r in rows], [r[1] for r in rows],
        [sum(bool(v) << k for k, v in enumerate(r[2:])) for r in rows]), mtok.U8), "cols.mtok"))
    assert [tuple(a) for a in cols.added_tokens] == [tuple(a) for a in legacy.added_tokens] == [tuple(r) for r in rows]
    assert all(any(r[k] for r in rows) and not all(r[k] for r in rows) for k in range(2, 7))


# -- bit flips and verify ----------------------------------------------------------------------------------------
def _flip_each_section(path):
    data = path.read_bytes()
    for e in Container(data).entries:
        if e["length"] == 0:  # e.g. gpt2's unreached: no token is out of reach, nothing to flip
            continue
        for where in sorted({0, e["length"] // 2, e["length"] - 1}):
            bad = bytearray(data)
            bad[e["offset"] + where] ^= 0x08
            yield e, where, bytes(bad)


@pytest.mark.parametrize("model", ["gpt2", "llama3", "gpt2_ranked"])
def test_verify_catches_a_flip_in_every_section(request, tmp_path, model):
    path = request.getfixturevalue(model)
    names = set()
    for e, where, bad in _flip_each_section(path):
        name = mtok.section_name(e["id"])
        names.add(name)
        p = write(tmp_path, bad, f"flip-{name}-{where}.mtok")
        with pytest.raises(tokmap.FormatError) as ei:
            tokmap.load(p, verify=True)
        check_error(ei.value, p, name, e["offset"], "checksum mismatch")
        assert len(MtokFile(p).sections) == len(Container(bad).entries)
        if e["id"] == mtok.SECTION_META:
            load_error(p, "meta", e["offset"], "checksum mismatch")  # META is always checked
            continue
        tok = tokmap.load(p)  # without verify the damage is not read
        with pytest.raises(tokmap.FormatError) as ei:
            tok.verify()
        check_error(ei.value, p, name, e["offset"], "checksum mismatch")
        with pytest.raises(tokmap.FormatError) as ei:
            MtokFile(p).verify()
        check_error(ei.value, p, name, e["offset"], "checksum mismatch")
    assert {"meta", "token_bytes", "token_offsets", "sorted_ids", "merge_keys", "merge_results",
            "added_columns", "byte_ids", "blob0", "blob1"} <= names
    assert ("merge_ranks" in names) == (model == "gpt2_ranked")
    tokmap.load(path, verify=True).verify()  # the intact file passes


def test_cli_verify_names_the_section(gpt2, tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli.main, ["verify", str(gpt2)])
    assert r.exit_code == 0 and "OK" in r.output, r.output
    seen = set()
    for e, where, bad in _flip_each_section(gpt2):
        if where:
            continue
        name = mtok.section_name(e["id"])
        p = write(tmp_path, bad, f"cli-{name}.mtok")
        r = runner.invoke(cli.main, ["verify", str(p)])
        assert r.exit_code == 1, (name, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        out = r.output
        assert f"error: {p} (section {name}, offset {e['offset']}): checksum mismatch" in out, out
        seen.add(name)
    assert len(seen) == len([e for e in Container(gpt2.read_bytes()).entries if e["length"]])


def test_load_without_verify_stays_cheap(llama3, monkeypatch):
    """The default load checksums only the table and META; verify checksums every byte of every section."""
    hashed = []
    real = zlib.crc32

    def counting(data, *a):
        hashed.append(len(memoryview(data).cast("B")))
        return real(data, *a)

    c = Container(llama3.read_bytes())
    table_len = len(c.entries) * mtok.ENTRY.size
    meta_len = c.entry(mtok.SECTION_META)["length"]
    monkeypatch.setattr(zlib, "crc32", counting)
    tok = tokmap.load(llama3)
    assert sorted(hashed) == sorted([table_len, meta_len]), hashed
    assert tok._model is None and tok._pipeline is None and tok._added is None
    hashed.clear()
    tokmap.load(llama3, verify=True)
    assert sum(hashed) >= sum(e["length"] for e in c.entries)
    monkeypatch.undo()
    t0 = time.perf_counter()
    for _ in range(20):
        tokmap.load(llama3)
    assert (time.perf_counter() - t0) / 20 < 0.05  # loose: a load is ~0.3 ms; reading the file would show


# -- random mutations ------------------------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised by the watchdog; a BaseException so that no `except Exception` in tokmap can swallow it."""


@contextlib.contextmanager
def watchdog(seconds: float):
    """Raise Hang in the block if it runs longer than `seconds` (no-op where SIGALRM does not exist)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def alarm(signum, frame):
        raise Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="no SIGALRM")
def test_watchdog_catches_a_hang():
    t0 = time.perf_counter()
    with pytest.raises(Hang):
        with watchdog(0.2):
            while True:
                pass
    assert time.perf_counter() - t0 < 5




def mutate(orig: bytes, rng: random.Random):
    """One seeded mutation: (description, bytes, changed range or None when the size changed, crc_fixed)."""
    c = Container(orig)
    n = len(orig)
    data = bytearray(orig)
    table_end = entry_pos(len(c.entries))
    meta = c.entry(mtok.SECTION_META)
    kind = rng.choices(
        ["overwrite", "bitflip", "truncate", "duplicate", "delete", "copy", "header", "table", "meta",
         "section", "entry", "meta_fixed"],
        weights=[10, 10, 6, 5, 5, 5, 8, 8, 8, 15, 10, 10])[0]

    def span(lo, hi, k):
        p = rng.randrange(lo, max(lo + 1, hi))
        return p, min(p + k, n)

    if kind in ("overwrite", "header", "table", "meta", "section"):
        if kind == "overwrite":
            lo, hi = 0, n
        elif kind == "header":
            lo, hi = 0, mtok.HEADER.size
        elif kind == "table":
            lo, hi = TABLE, table_end
        elif kind == "meta":
            lo, hi = meta["offset"], meta["offset"] + meta["length"]
        else:
            e = rng.choice(c.entries)
            lo, hi = e["offset"], e["offset"] + max(e["length"], 1)
        p, q = span(lo, hi, rng.choice([1, 1, 2, 4, 8, 64]))
        data[p:q] = bytes(rng.randrange(256) for _ in range(q - p))
        return f"{kind}[{p}:{q}]", bytes(data), (p, q), False
    if kind == "bitflip":
        p = rng.randrange(n)
        data[p] ^= 1 << rng.randrange(8)
        return f"bitflip@{p}", bytes(data), (p, p + 1), False
    if kind == "truncate":
        cut = rng.choice([rng.randrange(n), rng.randrange(table_end + 64)])
        return f"truncate@{cut}", bytes(data[:cut]), None, False
    if kind == "duplicate":
        p, k = rng.randrange(n), rng.choice([1, 7, 64, 4096])
        data[p:p] = data[p:p + k]
        return f"duplicate[{p}:+{k}]", bytes(data), None, False
    if kind == "delete":
        p, k = rng.randrange(n), rng.choice([1, 7, 64, 4096])
        del data[p:p + k]
        return f"delete[{p}:+{k}]", bytes(data), None, False
    if kind == "copy":  # same-size: a chunk copied over another place
        p, q, k = rng.randrange(n), rng.randrange(n), rng.choice([8, 64, 4096])
        chunk = data[p:p + k][: n - q]
        data[q:q + len(chunk)] = chunk
        return f"copy[{p}:+{k}]->{q}", bytes(data), (q, q + len(chunk)), False
    if kind == "entry":  # a table field changed with the table crc recomputed, to get past the checksum
        i = rng.randrange(len(c.entries))
        e = c.entries[i]
        f = rng.choice(ENTRY_FIELDS)
        lim = 1 << (8 * E_SIZE[f])
        v = rng.choice([0, 1, 2, 3, 4, 7, 11, 0x100, 0x101, 0x102, 2**31, lim - 1, mtok.ALIGN, n, n - mtok.ALIGN,
                        e["offset"] + mtok.ALIGN, e["offset"] - mtok.ALIGN, e["length"] // 2, e["length"] + 8,
                        e["length"] - 4, e["length"] * 2, rng.randrange(lim)])
        e[f] = v % lim
        return f"entry {mtok.section_name(e['id'])}.{f}={e[f]}", c.pack(), None, True
    # meta_fixed: random JSON-ish edits with META's crc and the table crc recomputed
    raw = bytearray(c.payload(mtok.SECTION_META))
    for _ in range(rng.randint(1, 4)):
        raw[rng.randrange(len(raw))] = rng.choice(b'{}[]",:0123456789.-etruefalsnul \\x')
    e = c.entry(mtok.SECTION_META)
    data[e["offset"]: e["offset"] + e["length"]] = raw
    c.data = data
    e["crc32"] = zlib.crc32(bytes(raw))
    return "meta_fixed", c.pack(), None, True


def _live(c: Container, lo: int, hi: int) -> set[str]:
    """What a changed byte range [lo, hi) touches: checked header fields, the table, section payloads."""
    hit = set()
    for f in CHECKED_HEADER_FIELDS:
        if lo < H_END[f] and H_OFF[f] < hi:
            hit.add("header")
    if lo < entry_pos(len(c.entries)) and TABLE < hi:
        hit.add("table")
    for e in c.entries:
        if lo < e["offset"] + e["length"] and e["offset"] < hi:
            hit.add(mtok.section_name(e["id"]))
    return hit


def run_mutations(path: pathlib.Path, tmp_path: pathlib.Path, count: int, seed: str):
    orig = path.read_bytes()
    c0 = Container(orig)
    baseline = exercise(path)
    assert "FormatError" not in baseline
    failures, outcomes = [], {"ok": 0}
    target = tmp_path / f"mutant-{path.stem}.mtok"
    for i in range(count):
        rng = random.Random(f"{seed}-{i}")
        desc, data, changed, crc_fixed = mutate(orig, rng)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)  # a fresh inode: earlier maps of the old file stay valid
        label = f"case {seed}-{i} ({desc})"
        try:
            errors: list = []
            with watchdog(WATCHDOG_SECONDS):
                try:
                    res = exercise(target, errors=errors)
                    err = None
                except tokmap.TokmapError as e:
                    res, err = None, e
                    errors.append(e)
            for e in errors:
                if not isinstance(e, tokmap.FormatError):
                    continue
                if e.path != str(target) or not str(e).startswith(str(target)):
                    failures.append(f"{label}: error does not name the file: {e}")
                if e.section is None and not crc_fixed:
                    failures.append(f"{label}: FormatError names no section: {e}")
            if err is not None:
                outcomes[type(err).__name__] = outcomes.get(type(err).__name__, 0) + 1
                continue
            outcomes["ok"] += 1
            if "FormatError" in res:
                outcomes["format_error_on_use"] = outcomes.get("format_error_on_use", 0) + 1
            if changed is None or data == orig:
                if data == orig and res != baseline:
                    failures.append(f"{label}: unchanged file gave different results")
                continue
            # Same-size damage that still loads: if it touched no live byte, behaviour is unchanged;
            # if it touched a section, verify() must name that section.
            lo, hi = changed
            diff = [k for k in range(lo, hi) if data[k] != orig[k]]
            if not diff:
                continue
            touched = _live(c0, diff[0], diff[-1] + 1)
            if not touched:
                if res != baseline:
                    failures.append(f"{label}: damage in padding/reserved bytes changed the results")
                continue
            try:
                tokmap.load(target).verify()
                failures.append(f"{label}: verify() passed a file with damaged {sorted(touched)}")
            except tokmap.FormatError as e:
                if e.section not in touched:
                    failures.append(f"{label}: verify() named {e.section}, damage was in {sorted(touched)}")
        except Hang:
            failures.append(f"{label}: HANG (> {WATCHDOG_SECONDS} s)")
        except Exception as e:  # noqa: BLE001 - any non-tokmap exception is the failure being hunted
            failures.append(f"{label}: {type(e).__name__}: {e}")
        if i % 100 == 99:
            gc.collect()
    return failures, outcomes


@pytest.mark.parametrize("model,count", [("gpt2", N_GPT2_MUTATIONS), ("llama3", N_LLAMA3_MUTATIONS)])
def test_random_mutations(request, tmp_path, model, count):
    path = request.getfixturevalue(model)
    t0 = time.perf_counter()
    failures, outcomes = run_mutations(path, tmp_path, count, f"mtok-{model}")
    elapsed = time.perf_counter() - t0
    print(f"{model}: {count} mutations in {elapsed:.1f} s: {outcomes}")
    assert not failures, f"{len(failures)} of {count} mutated files misbehaved:\n" + "\n".join(failures[:30])
    # The mutations must actually reach both outcomes: refused files and files that still run.
    assert outcomes.get("FormatError", 0) > count // 5 and outcomes["ok"] > count // 10, outcomes


# One real file of each other model kind, whose sections the runtime reads its own way.
OTHER_KINDS = {"spm-bpe": "models/sentencepiece/mistral-v3.model",
               "spm-unigram": "models/sentencepiece/botchan_en_unigram_1000.model",
               "char-bpe": "models/llama2/tokenizer.json", "wordpiece": "models/minilm/tokenizer.json",
               "unigram": "models/botchan-unigram/tokenizer.json", "wordlevel": "models/botchan-wordlevel/tokenizer.json"}


@pytest.mark.parametrize("kind", sorted(OTHER_KINDS))
def test_random_mutations_of_other_kinds(tmp_path, kind):
    """The same mutations over the other model kinds. An empty user-defined SentencePiece symbol
    (a damaged token_offsets table, checksum fixed) once made mistral-v3's first encode loop
    forever (cases 224 and 1223 here: token_bytes' table entry shortened)."""
    path = tmp_path / f"{kind}.mtok"
    tokmap.export(_require(OTHER_KINDS[kind]), path)
    failures, outcomes = run_mutations(path, tmp_path, N_OTHER_MUTATIONS, f"mtok-{kind}")
    print(f"{kind}: {N_OTHER_MUTATIONS} mutations: {outcomes}")
    assert not failures, f"{len(failures)} mutated files misbehaved:\n" + "\n".join(failures[:30])
    assert outcomes.get("FormatError", 0) > N_OTHER_MUTATIONS // 5 and outcomes["ok"] > N_OTHER_MUTATIONS // 10, outcomes
