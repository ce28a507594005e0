"""The .mtok container: the format spec in one docstring, the constants in one table.

Layout (all integers little-endian, every section offset a multiple of ALIGN):

    offset 0   header          HEADER struct (64 bytes)
    offset 64  section table   n_sections x ENTRY struct (32 bytes each)
    ...        sections        each starts on an ALIGN boundary; padding bytes are zero

HEADER fields:
    magic       8s  b"MTOK\\r\\n\\x1a\\n" (catches text-mode and truncated copies, as PNG does)
    version     H   FORMAT_VERSION; a reader refuses a newer major version
    flags       H   reserved, 0
    n_sections  I   number of entries in the section table
    file_size   Q   total file size in bytes; a shorter file is truncated
    table_crc   I   zlib.crc32 of the section table bytes (always checked: it is tiny)
    reserved    36s zero

ENTRY fields:
    id          I   section id (SECTION_* below); ids >= BLOB_BASE are pipeline blobs named in META
    dtype       I   element type code (DTYPES below): the reader casts the view to it
    offset      Q   byte offset of the section in the file
    length      Q   byte length (a multiple of the element size)
    crc32       I   zlib.crc32 of the section bytes, checked by verify() only
    reserved    I   zero

Sections are non-overlapping, inside the file, in increasing offset order, with unique ids. The
META section is UTF-8 JSON: the pipeline (normalizer, pre-tokenizer, model, added tokens,
post-processor, decoder, padding, truncation) as lists of tagged steps, plus provenance.
Everything large is an array section viewed in place without copying.

BPE merges: MERGE_KEYS, MERGE_RANKS and MERGE_RESULTS are parallel arrays. When META's
model.ranks_from_results is true the file has no MERGE_RANKS: the results array is the ranks
(the exporter stores it only when rank is a strictly increasing function of result, so the two
order and tie alike), and a MERGE_RANKS section beside the flag is refused. For byte-level BPE the
exporter keeps only the merges that can ever fire (exporter/merges.py has the proof); META's
model.source_merges counts the source's distinct merges.
"""

from __future__ import annotations

import struct

MAGIC = b"MTOK\r\n\x1a\n"
FORMAT_VERSION = 1
ALIGN = 64

HEADER = struct.Struct("<8sHHIQI36s")
ENTRY = struct.Struct("<IIQQII")
# SECTION_ADDED_COLUMNS: this header (n tokens, UTF-8 bytes of their contents), then ids u32[n],
# content ends u32[n] (in code points of the decoded contents, one after another), flags u8[n]
# (ADDED_FLAGS, bit k for field k), the contents' UTF-8. Parsing costs one decode and a few C-level
# passes, where the JSON list costs json.loads plus a type check per field (Gemma 3's 6,415: ~7 ms).
ADDED_COLUMNS = struct.Struct("<II")
ADDED_FLAGS = ("special", "normalized", "lstrip", "rstrip", "single_word")
assert HEADER.size == 64 and ENTRY.size == 32

# Element types: code -> (memoryview format, size in bytes, numpy dtype string).
DTYPES = {
    1: ("B", 1, "<u1"),
    2: ("H", 2, "<u2"),
    3: ("I", 4, "<u4"),
    4: ("Q", 8, "<u8"),
    5: ("i", 4, "<i4"),
    6: ("f", 4, "<f4"),
    7: ("d", 8, "<f8"),
}
U8, U16, U32, U64, I32, F32 = 1, 2, 3, 4, 5, 6
F64 = 7

# Section ids. A section's meaning never changes once released; new ones get new ids.
SECTION_META = 1  # JSON: pipeline + provenance
SECTION_TOKEN_BYTES = 2  # u8: every token's bytes, concatenated in id order
SECTION_TOKEN_OFFSETS = 3  # u32[n+1]: token i is TOKEN_BYTES[off[i]:off[i+1]]
SECTION_SORTED_IDS = 4  # u32[n]: ids ordered by their token bytes (bytewise), for binary search
SECTION_MERGE_KEYS = 5  # u64[m]: left_id << 32 | right_id, ascending
SECTION_MERGE_RANKS = 6  # u32[m]: rank of the merge at the same index (lower first); absent if ranks_from_results
SECTION_MERGE_RESULTS = 7  # u32[m]: id of the merged token
SECTION_ADDED_TOKENS = 8  # JSON list of added tokens (parsed on first use, not at load); files
#                          since SECTION_ADDED_COLUMNS have that instead
SECTION_ADDED_COLUMNS = 25  # u8: the added tokens column by column (ADDED_COLUMNS below)
SECTION_CHAT_TEMPLATE = 9  # UTF-8 text
SECTION_BYTE_IDS = 10  # u32[256]: id of the single-byte symbol for each byte (NO_ID if none)
# Byte-level BPE speed-ups, derived from the sections above at export (optional: the runtime
# computes them itself when absent, at a cost on the first long encode). MERGE_NONMONO also
# serves character-level BPE.
SECTION_MERGE_NONMONO = 16  # u8 bitmap, bit k (LSB first) of merge k in key order: some merge
#                             using its result as an operand ranks lower (see bpe_batch.py)
SECTION_UNREACHED = 17  # u32[]: ascending ids of tokens whose own bytes do not merge to them
SECTION_PIECE_HASH = 18  # u64[]: ascending hash32 << 32 | id of each token a piece of exactly its
#                          bytes encodes to (bpe_batch.piece_hashes), for a bulk whole-piece lookup
SECTION_ATOMIC_CHARS = 19  # u64[]: ascending code_point << 40 | flags << 32 | id of characters BPE
#                            always forms first (exporter/atomic_chars.py)
SECTION_ATOMIC_EDGES = 26  # u64[] pairs: ascending code_point << 1 | side, then a mask of the neighbour
#                            edge bytes beside which an atomic char forms first, where its kind's flag fails
SECTION_CUT_WINDOWS = 22  # u32[]: ascending 3-byte windows inside merge results that span a UTF-8
#                           continuation -> lead step, and 2-byte such results (runtime/models/bpe_cuts.py)
# WordPiece speed-up: the text of each token of SORTED_IDS, each followed by "\n", in that order;
# written when every one is UTF-8 on its own and holds no "\n". The str -> id dict is then one
# decode and split (~5 ms for BERT's 30K tokens, against ~9 ms a token at a time).
SECTION_TOKEN_TEXT = 23  # u8
# WordPiece batch lookups (runtime/models/wordpiece_batch.py) use SECTION_PIECE_HASH over every
# model token (a word's first piece is any token of its bytes) and, for the later pieces:
SECTION_WORDPIECE_CONT = 24  # u64[]: ascending hash32 << 32 | id of each token that starts with the
#                              continuing_subword_prefix, hashed over its bytes after the prefix
# Character-level BPE (no prefix/suffix) speed-ups: runtime/models/charcut.py's table, which the
# runtime otherwise builds on the first long piece (~70 ms for Gemma 3's 515K merges).
SECTION_CHAR_TOKENS = 20  # u64[]: ascending code_point << 32 | id of each char that is a token alone
SECTION_CHAR_BIGRAMS = 21  # u64[]: ascending distinct a << 21 | b of adjacent chars inside merge results
# SentencePiece .model sources (ids kept apart from the tokenizer.json models' sections).
SECTION_SPM_SCORES = 32  # f32[n]: each piece's score, by id
SECTION_SPM_TYPES = 33  # u8[n]: each piece's SentencePiece type (1 normal .. 6 byte), by id
SECTION_SPM_CHARSMAP = 34  # u8: normalizer_spec.precompiled_charsmap as is (Darts trie + strings)
SECTION_UNIGRAM_SCORES = 40  # f64[n]: tokenizer.json Unigram piece scores, by id
BLOB_BASE = 0x100  # 0x100 + k: k-th pipeline blob (class tables, normalization tables)

SECTION_NAMES = {
    SECTION_META: "meta",
    SECTION_TOKEN_BYTES: "token_bytes",
    SECTION_TOKEN_OFFSETS: "token_offsets",
    SECTION_SORTED_IDS: "sorted_ids",
    SECTION_MERGE_KEYS: "merge_keys",
    SECTION_MERGE_RANKS: "merge_ranks",
    SECTION_MERGE_RESULTS: "merge_results",
    SECTION_ADDED_TOKENS: "added_tokens",
    SECTION_CHAT_TEMPLATE: "chat_template",
    SECTION_BYTE_IDS: "byte_ids",
    SECTION_MERGE_NONMONO: "merge_nonmono",
    SECTION_UNREACHED: "unreached",
    SECTION_PIECE_HASH: "piece_hash",
    SECTION_ATOMIC_CHARS: "atomic_chars",
    SECTION_ATOMIC_EDGES: "atomic_edges",
    SECTION_CUT_WINDOWS: "cut_windows",
    SECTION_TOKEN_TEXT: "token_text",
    SECTION_WORDPIECE_CONT: "wordpiece_cont",
    SECTION_ADDED_COLUMNS: "added_columns",
    SECTION_CHAR_TOKENS: "char_tokens",
    SECTION_CHAR_BIGRAMS: "char_bigrams",
    SECTION_SPM_SCORES: "spm_scores",
    SECTION_SPM_TYPES: "spm_types",
    SECTION_SPM_CHARSMAP: "spm_charsmap",
    SECTION_UNIGRAM_SCORES: "unigram_scores",
}

# Sections every file must have, with their element type.
REQUIRED = {
    SECTION_META: U8,
    SECTION_TOKEN_BYTES: U8,
    SECTION_TOKEN_OFFSETS: U32,
    SECTION_SORTED_IDS: U32,
}

NO_ID = 0xFFFFFFFF  # "no token" in u32 id arrays


def section_name(sid: int) -> str:
    if sid in SECTION_NAMES:
        return SECTION_NAMES[sid]
    if sid >= BLOB_BASE:
        return f"blob{sid - BLOB_BASE}"
    return f"section{sid}"


def align_up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
