"""The encode/decode pipeline built from META's tagged steps.

    text -> added tokens (raw pass) -> normalizer -> added tokens (normalized pass)
         -> pre-tokenizer steps -> model per piece -> truncation -> post-processor -> padding

Each stage is data from the file dispatched by its "type"; this module only wires them together
and keeps offsets (original code-point ranges) when asked for them.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_right
from itertools import accumulate, chain, compress, filterfalse, repeat

from .. import bytelevel
from ..errors import ArgumentError, TokmapError
from . import normalizers, postprocess, pretokenizers
from .added import AddedToken, Matcher
from .pretokenizers import SplitStep, expand

# chars from which a text with space cuts may go by chunks (spacecut.py): a shorter text met again
# costs more by chunks than by pieces (numpy's fixed costs; o200k, 2K chars of pride.txt: 125 ->
# 160 us; 4K: even; 16K: 900 -> 570 us)
CHUNK_TEXT = 1 << 13


RUNS_TEXT = 1 << 12  # chars; a shorter text never takes the runs pattern (SplitStep.runs) ...
RUNS_SHARE = 4  # ... nor one whose chars are less than 1/4 of the run class's
_NON_ASCII = re.compile("[^\x00-\x7f]")
HOLE_IDS_MAX = 1 << 16  # ids in holes up to which all_known tests them as one set
DECODE_COPY_IDS = 256  # ids in one decode from which the token bytes are copied out of the map (_bytes_of)
DECODE_NP_IDS = 4096  # ids in one decode from which they are gathered in numpy, when it is loaded (_id_array)
DECODE_NP_HOLES = 8  # holes up to which _id_array tests them one by one (more: the list route)


class UnknownTokenError(TokmapError, KeyError):
    """An id outside the vocabulary was given to a decoder that, like tiktoken's, refuses it."""


def _check_u32(ids: list[int]) -> None:
    """tokenizers drops an id its vocabulary lacks, but takes ids as u32: one below 0 or from 2^32
    up (a -100 label, say) raises OverflowError there, and ArgumentError here, not ''."""
    for k, i in enumerate(ids):
        if not 0 <= i < 1 << 32:
            raise ArgumentError(f"token ids are 0 to 2^32 - 1 (tokenizers raises OverflowError too); got {i} at "
                                f"index {k}")


class Pipeline:
    def __init__(self, f, meta, model, added_tokens):
        self.f = f
        self.meta = meta
        self.api = meta["api"]
        self.model = model
        self.pre = pretokenizers.build(f, meta["pre_tokenizer"])
        self.normalizers = normalizers.build(f, meta["normalizer"])
        self.post = meta["post_processor"]
        self._around = postprocess.specials_around(self.post)  # encode_ids' specials, worked out once
        self._decoder = None  # built on the first decode: an encode-only process never imports decoders
        # added_tokens: added.AddedColumns. Its AddedTokens are made as text or a decode meets them,
        # and the by-id dict and the special set on the first decode (Gemma 3 has 6,415).
        self.added = added_tokens
        self._added_by_id = self._special_ids = None
        self.irregular = meta.get("irregular", {})
        self.irregular_by_id = {v: k for k, v in self.irregular.items()}
        self.holes = [tuple(h) for h in meta.get("holes", [])]
        self._hole_ids = None  # frozenset of the ids in holes, on first all_known (False: too many)
        self._token_bytes = None  # a bytes copy of the token bytes, on a first long decode
        self._token_strs = None  # every token's string (plain UTF-8 vocabularies), on a longer one (_tokens_of)
        normalized = added_tokens.having("normalized")
        norm = list(map(added_tokens.token, normalized))
        raw = sorted(set(range(len(added_tokens))).difference(normalized)) if normalized else None  # None: all
        self.word_char = _WordClass(f, meta["word_class"]) if meta.get("word_class") else _no_word_class
        self.raw_matcher = None
        if self.api == "hf" and (len(added_tokens) if raw is None else raw):
            self.raw_matcher = Matcher.of_columns(added_tokens, raw, self.word_char)
        self.norm_matcher = None
        if norm and self.api == "hf":
            self.norm_matcher = Matcher({self.normalize(a.content)[0]: a for a in norm}, self.word_char)
        # tokenizers 0.23 decodes a normalized added token as its normalized form when normalizing
        # changes it; skip_special_tokens compares that string with the specials' contents, so such
        # a special token is then kept (special_ids leaves it out).
        self.added_decode = {}
        if norm and self.api == "hf" and self.normalizers:
            for a in norm:
                s = self.normalize(a.content)[0]
                if s != a.content:
                    self.added_decode[a.id] = s
        self._special_regex = {}
        self.fast_split = _fast_split_step(self.pre, model)
        # whole runs of the split pattern's D{1,k} alternative, when the model cuts them itself
        self.runs = bool(self.fast_split is not None and self.fast_split.runs and getattr(model, "takes_runs", False))
        # chunk -> ids between the spaces no piece crosses (spacecut.py), when the file proves them
        self.space_cuts = None
        step = self.fast_split
        if step is not None and step.space_cut is not None and step.tiles and hasattr(model, "piece_ids"):
            from .spacecut import SpaceCuts

            self.space_cuts = SpaceCuts(self, step, step.space_cut)
        self.fast = None  # whole-stretch encoding of other models when no offsets are wanted
        if self.fast_split is None:
            from . import fastpath

            self.fast = fastpath.build(self)

    @property
    def added_by_id(self) -> dict:
        if self._added_by_id is None:
            tokens = self.added.tokens()
            self._added_by_id = dict(zip(map(AddedToken.id.fget, tokens), tokens))
        return self._added_by_id

    @property
    def special_ids(self) -> set:
        if self._special_ids is None:
            ids = self.added.ids
            self._special_ids = set(map(ids.__getitem__, self.added.having("special"))) - self.added_decode.keys()
        return self._special_ids

    # -- stages ---------------------------------------------------------------------------------
    def normalize(self, text: str, want_align: bool = False):
        """(normalized text, per-char (start, end) into `text`, or None when unchanged)."""
        return normalizers.run(self.normalizers, text, want_align)

    def pieces(self, text: str, offs):
        pieces = [(text, offs)]
        for step in self.pre:
            pieces = step(pieces)
        return pieces

    def encode_pieces(self, pieces, ids: list, offsets: list | None):
        model = self.model
        for ptext, poffs in pieces:
            toks = model.encode_piece(ptext)
            ids.extend(toks)
            if offsets is not None:
                offsets.extend(_map_offsets(model.piece_offsets(ptext, toks), poffs))

    def _units_of_text(self, text: str, base: int, units: list, want: bool):
        """Pre-tokenized units of a stretch with no raw-pass added token: (piece text, offs) for
        the model, or (AddedToken, (start, end)) for a normalized-pass match."""
        ntext, align = self.normalize(text, want) if self.normalizers else (text, None)
        offs0 = [(base + a, base + b) for a, b in align] if want and align is not None else base
        if self.norm_matcher is not None:
            for tok, s, e in self.norm_matcher.split(ntext):
                if tok is not None:
                    o = expand(offs0, len(ntext)) if want else None
                    units.append((tok, (o[s][0], o[e - 1][1]) if want and e > s else (base, base)))
                elif e > s:
                    units.extend(self.pieces(ntext[s:e], pretokenizers.slice_offs(offs0, s, e)))
        else:
            units.extend(self.pieces(ntext, offs0))

    def units(self, text: str, want: bool) -> list:
        units: list = []
        if self.raw_matcher is None:
            self._units_of_text(text, 0, units, want)
        else:
            for tok, s, e in self.raw_matcher.split(text):
                if tok is not None:
                    units.append((tok, (s, e)))
                elif e > s:
                    self._units_of_text(text[s:e], s, units, want)
        return units

    def encode_sequence(self, text: str, want_offsets: bool, limit=None):
        """Model ids (and offsets) for one sequence, before post-processing (tokenizers' rules).

        limit=(max_tokens, direction) is tokenizers 0.23's early exit under truncation: units are
        tokenized from the kept side until max_tokens exist, and the rest is dropped unseen."""
        if limit is None and not want_offsets and self.fast is not None:
            return self.fast(text), None
        units = self.units(text, want_offsets)
        model = self.model
        tokens: list = [None] * len(units)  # per unit: (ids, piece text, bytes, offs) or added token
        order = range(len(units))
        if limit is not None and limit[1] == "left":
            order = range(len(units) - 1, -1, -1)
        total = 0
        for k in order:
            u = units[k]
            if isinstance(u[0], str):
                toks = model.encode_piece(u[0])
                tokens[k] = (toks, u[0], u[1])
                total += len(toks)
                # tokenizers checks the limit only after tokenizing a split: an added token that
                # reaches it does not stop the next split from being tokenized.
                if limit is not None and total >= limit[0]:
                    break
            else:
                tokens[k] = u
                total += 1
        ids: list[int] = []
        offsets = [] if want_offsets else None
        for t in tokens:
            if t is None:
                continue
            if len(t) == 3:
                ids.extend(t[0])
                if want_offsets:
                    offsets.extend(_map_offsets(model.piece_offsets(t[1], t[0]), t[2]))
            else:
                ids.append(t[0].id)
                if want_offsets:
                    offsets.append(t[1])
        return ids, offsets

    def encode_ids(self, text: str, add_special_tokens: bool) -> list[int]:
        if self.fast_split is not None:
            ids = self._fast_sequence(text)
        elif self.fast is not None:  # (encode_sequence's own first step, called directly)
            ids = self.fast(text)
        else:
            ids, _ = self.encode_sequence(text, False)
        around = self._around
        if not add_special_tokens or around is None:  # (None: a template with the sequence twice)
            return postprocess.add_specials_ids(self.post, ids, add_special_tokens)
        before, after = around
        if before:  # ids is this call's own list: the specials go in place
            ids[:0] = before
        if after:
            ids.extend(after)
        return ids

    def short_encoder(self, ordinary: bool = False):
        """(text, add_special_tokens) -> encode_ids' ids (ordinary: encode_ordinary's, tiktoken's
        and Tekken's: no added tokens, no normalizers, no specials), for Tokenizer.encode's short
        path (texts under 1K chars: no space cuts, no runs pattern). With a one-regex
        pre-tokenizer, no normalized-pass added token and specials around one sequence, the
        stages run in this one frame -- raw-pass added-token search, normalizers, split (an ASCII
        text: findall alone), model, specials -- where encode_ids goes through six calls (~1 of a
        6 us sentence). A text where an added token may start takes encode_ids."""
        if ordinary:
            if self.fast_split is None:
                return lambda text, add: self.encode_ordinary(text)
            encode_ids, first, steps, around = None, None, (), ((), ())
        else:
            if self.fast_split is None or self.norm_matcher is not None or self._around is None:
                return self.encode_ids
            encode_ids, steps, around = self.encode_ids, self.normalizers, self._around
            first = None if self.raw_matcher is None else self.raw_matcher.first  # (its candidate search)
        normalize = normalizers.text_chain(steps) if steps else None
        step = self.fast_split
        findall, whole = step.regex.findall, step.invert or step.tiles
        split = self._split_runs
        model = self.model.encode_pieces
        before, after = around

        def encode_short(text: str, add: bool) -> list[int]:
            if first is not None and first.search(text) is not None:
                return encode_ids(text, add)
            if normalize is not None:
                text = normalize(text)
            if text.isascii():
                parts = findall(text)
                if not whole and sum(map(len, parts)) != len(text):
                    parts = split(text, False)[0]
            else:
                parts = split(text, False)[0]
            ids = model(parts)
            if add:
                if before:  # (the model's fresh list: the specials go in place)
                    ids[:0] = before
                if after:
                    ids.extend(after)
            return ids
        return encode_short

    # -- the fast path: one split regex over the whole text, the model over the list of pieces ---
    def split_fast(self, text: str) -> list[str]:
        """The pieces of a one-regex pre-tokenizer: findall over a same-length text t (the text
        itself; or, from SplitStep.direct, the text with a few astral chars replaced by stand-ins;
        or the class-translated text), and where t differs from the text, the pieces holding a
        changed char cut from the original."""
        return self._split_runs(text, False)[0]

    def _split_runs(self, text: str, runs: bool):
        """(split_fast's pieces, None); with runs (the model takes them) and a pattern whose
        D{1,k} alternative cuts runs of D chars (SplitStep.runs), a translated text's runs longer
        than k are whole pieces instead: (pieces, (k, set of those runs)) for encode_pieces."""
        step = self.fast_split
        direct = step.direct(text)
        regex, t, changed = direct if direct is not None else (step.regex, step.translate(text), None)
        long = None
        if runs and direct is None and len(t) >= RUNS_TEXT:
            # Only a text mostly of D's chars is worth the search for runs (~13 ns a char): an
            # ASCII document with a few years in it would lose it (2 C passes count them first).
            if len(t.encode("latin-1").translate(None, step.run_others())) * RUNS_SHARE >= len(t):
                whole, long_run, k = step.runs_regex()
                long = {text[m.start():m.end()] for m in long_run.finditer(t)}
                if long:
                    regex, long = whole, (k, long)
                else:
                    long = None
        parts = regex.findall(t)
        if t is text:  # the matches are the pieces (when they cover the text, or only matches count)
            if step.invert or step.tiles or sum(map(len, parts)) == len(text):
                return parts, long
            return [text[s:e] for s, e in step.spans(text)], None
        ends = list(accumulate(map(len, parts)))
        if (ends[-1] if ends else 0) != len(text):  # gaps (Split(invert=True, removed) drops them)
            return [text[s:e] for s, e in step.spans(text)], None
        # The matches tile the text: the pieces, whether the matches are them (invert) or they
        # cover it anyway; each is its original text, re-cut below where a char was changed.
        if changed is None and (len(text.encode("utf-8", "surrogatepass")) - len(text)) * 8 < len(parts):
            changed = (m.start() for m in _NON_ASCII.finditer(t))  # mostly ASCII: few translated chars
        if changed is None:
            return list(map(text.__getitem__, map(slice, chain((0,), ends), ends))), long
        for p in changed:  # only the pieces holding a changed char differ from the original
            k = bisect_right(ends, p)
            parts[k] = text[ends[k] - len(parts[k]):ends[k]]
        return parts, long

    def _split_ids(self, text: str) -> list[int]:
        """The model's ids of split_fast's pieces: of a long text that keeps coming (repeats.py) by
        its chunks between space cuts, where the file proves them (spacecut.py); else _piece_ids."""
        cuts = self.space_cuts
        if cuts is not None and len(text) >= CHUNK_TEXT and cuts.repeats(text):
            return cuts.ids(text)
        return self._piece_ids(text)

    def _piece_ids(self, text: str) -> list[int]:
        """The model's ids of split_fast's pieces (runs whole where the model cuts them)."""
        pieces, runs = self._split_runs(text, self.runs)
        return self.model.encode_pieces(pieces) if runs is None else self.model.encode_pieces(pieces, runs)

    def _fast_text(self, text: str, ids: list) -> list:
        """_units_of_text + the model, for a stretch with no raw-pass added token, ids only: added
        to ids, or (_joined) in place of ids when it is empty. Returns the list they are in."""
        if self.normalizers:
            text = self.normalize(text)[0]
        if self.norm_matcher is None:
            return _joined(ids, self._split_ids(text))
        for tok, s, e in self.norm_matcher.split(text):
            if tok is not None:
                ids.append(tok.id)
            elif e > s:
                ids = _joined(ids, self._split_ids(text[s:e]))
        return ids

    def _fast_sequence(self, text: str) -> list[int]:
        ids: list[int] = []
        if self.raw_matcher is None:
            return self._fast_text(text, ids)
        for tok, s, e in self.raw_matcher.split(text):
            if tok is not None:
                ids.append(tok.id)
            elif e > s:
                ids = self._fast_text(text[s:e], ids)
        return ids

    def _ordinary_into(self, text: str, base: int, ids: list) -> list:
        """tiktoken's ordinary ids of text (at base in the whole) added to ids, or in place of ids
        when it is empty (_joined); returns the list they are in."""
        if self.fast_split is not None:
            return _joined(ids, self._split_ids(text))
        self.encode_pieces(self.pieces(text, base), ids, None)
        return ids

    def encode_full(self, text: str, pair: str | None, add_special_tokens: bool):
        trunc = self.meta.get("truncation")
        lim_a = lim_b = None
        if trunc:
            lim_b = (trunc["max_length"], trunc["direction"])
            lim_a = lim_b if trunc["strategy"] != "OnlySecond" else None
        a = postprocess.make_encoding(*self.encode_sequence(text, True, lim_a), type_id=0)
        b = postprocess.make_encoding(*self.encode_sequence(pair, True, lim_b), type_id=1) if pair is not None \
            else None
        return postprocess.finish(self.meta, self.post, a, b, add_special_tokens,
                                  tokens_of=lambda ids: [self.id_to_token(i) or "" for i in ids])

    def encode_ordinary(self, text: str) -> list[int]:
        return self._ordinary_into(text, 0, [])

    def encode_with_specials(self, text: str, allowed: dict[str, int]) -> list[int]:
        """tiktoken: allowed specials become their ids, the text between is encoded on its own."""
        if not allowed:
            return self.encode_ordinary(text)
        key = frozenset(allowed)
        rx = self._special_regex.get(key)
        if rx is None:
            rx = re.compile("|".join(re.escape(s) for s in sorted(allowed, key=lambda s: (-len(s), s))))
            self._special_regex[key] = rx
        ids: list[int] = []
        prev = 0
        for m in rx.finditer(text):
            if m.start() > prev:
                ids = self._ordinary_into(text[prev:m.start()], prev, ids)
            ids.append(allowed[m.group()])
            prev = m.end()
        if prev < len(text):
            ids = self._ordinary_into(text[prev:], prev, ids)
        return ids

    # -- decoding ---------------------------------------------------------------------------------
    @property
    def decoder(self):
        if self._decoder is None and self.api == "hf":
            from .decoders import Decoder

            self._decoder = Decoder(self.meta["decoder"], self.f)
        return self._decoder

    def known(self, i: int) -> bool:
        if not 0 <= i < self.model_vocab_limit():
            return False
        for a, b in self.holes:
            if a <= i < b:
                return False
        return True

    def all_known(self, ids: list[int]) -> bool:
        """known(i) for every i, in C-level passes: the range by min and max, the holes (a few ids
        between the vocabulary and the added tokens) by one set test. A loop of known() calls cost
        ~1 us an id: decoding utf8seq.txt's 833K Llama 3 ids took 2.6 s against tokenizers' 0.17."""
        if not ids:
            return True
        if min(ids) < 0 or max(ids) >= self.model_vocab_limit():
            return False
        if not self.holes:
            return True
        if self._hole_ids is None:
            n = sum(b - a for a, b in self.holes)
            self._hole_ids = frozenset(chain.from_iterable(map(range, *zip(*self.holes)))) if n <= HOLE_IDS_MAX else False
        if self._hole_ids is False:
            return all(map(self.known, ids))
        return self._hole_ids.isdisjoint(ids)

    def model_vocab_limit(self):
        return self.meta["vocab_size"]

    def decode_bytes(self, ids: list[int]) -> bytes:
        at = self._id_array(ids)
        if at is not None:
            return self._gathered(at)
        if not self.all_known(ids):
            bad = next(i for i in ids if not self.known(i))
            raise UnknownTokenError(f"Invalid token for decoding: {bad}")
        return self._bytes_of(ids)

    def _id_array(self, ids: list[int]):
        """ids as an int64 array when they are DECODE_NP_IDS or more, numpy is loaded and every one
        is known (checked in numpy: min, max, one compare per hole); else None, and the caller
        takes the list route (which names an unknown id). Every pass over a list of Python ints
        costs ~30-40 ns an id (utf8seq.txt's 833K Llama 3 ids: the list into an array 39 ms, min
        and max 23 ms each, the specials' isdisjoint 36 ms)."""
        if len(ids) < DECODE_NP_IDS or "numpy" not in sys.modules or len(self.holes) > DECODE_NP_HOLES:
            return None
        import numpy as np

        try:
            at = np.array(ids, dtype=np.int64)
        except OverflowError:  # (an id past int64: unknown)
            return None
        if int(at.min()) < 0 or int(at.max()) >= self.model_vocab_limit():
            return None
        for a, b in self.holes:
            if ((at >= a) & (at < b)).any():
                return None
        return at

    def _gathered(self, at) -> bytes:
        """The bytes of the ids in the int64 array at (all known), joined: a gather of their
        offsets, then one of their bytes (utf8seq.txt's 833K Llama 3 ids: ~30 ms with the list
        made an array, where a Python loop of known() tests and slices of the map took 2.6 s and
        tokenizers takes 0.13-0.18 s)."""
        import numpy as np

        from .models.textparts import ranges

        off = np.frombuffer(self.model.off, dtype="<u4")
        first = off.take(at).astype(np.int64)
        size = off.take(at + 1).astype(np.int64)
        size -= first  # (offsets out of order, a damaged file: negative, refused by repeat)
        return np.frombuffer(self.model.tb, dtype=np.uint8).take(ranges(first, size)).tobytes()

    def _bytes_of(self, ids: list[int]) -> bytes:
        """The bytes of ids (all known), joined, without numpy: each id's slice by C-level maps
        (offsets, slice) over a bytes copy of the token bytes, made on the first decode of
        DECODE_COPY_IDS ids or more. A slice of the mapped section is a memoryview, which
        bytes.join reads through the buffer protocol at ~3 us each, where a bytes slice is a
        small copy (the 833K ids above: views 2.9 s, bytes ~0.5 s)."""
        tb = self._token_bytes
        if tb is None:
            tb = self.model.tb
            if len(ids) >= DECODE_COPY_IDS:
                tb = self._token_bytes = bytes(tb)
        return b"".join(_slices(tb, self.model.off, ids))

    def decode(self, ids: list[int], skip_special_tokens: bool | None) -> str:
        if self.api == "tiktoken":
            return self.decode_bytes(ids).decode("utf-8", "replace")
        if self.api == "tekken":
            # Tekkenizer decodes each run of ordinary tokens separately and ignores specials.
            n_special = self.meta["extra"]["num_special"]
            out, run = [], []
            for i in ids + [-1]:
                if i >= n_special:
                    run.append(i)
                    continue
                if run:
                    out.append(self.decode_bytes(run).decode("utf-8", "replace"))
                    run = []
            return "".join(out)
        skip = True if skip_special_tokens is None else skip_special_tokens
        at = self._id_array(ids) if self.decoder.bytes_only else None
        if at is not None:
            if skip and self.special_ids:
                import numpy as np

                at = at[~np.isin(at, np.fromiter(self.special_ids, np.int64, len(self.special_ids)))]
            return self._gathered(at).decode("utf-8", "replace")
        if self.all_known(ids):  # (the usual case, in C-level passes)
            special = self.special_ids if skip else None
            keep = ids if not special or special.isdisjoint(ids) else list(filterfalse(special.__contains__, ids))
        else:
            keep = [i for i in ids if self.known(i) and not (skip and i in self.special_ids)]
            _check_u32(ids)  # (ids dropped: unknown ones, as tokenizers drops them, or worse)
        if self.decoder.bytes_only:
            return self._bytes_of(keep).decode("utf-8", "replace")
        return self.decoder.decode(self._tokens_of(keep))

    def _tokens_of(self, ids: list[int]) -> list:
        """[id_to_token(i) for i in ids] (every id known), for an HF vocabulary of plain UTF-8
        strings (SentencePiece-style, WordPiece, Unigram) by C-level maps: each id's bytes sliced
        from a bytes copy (_bytes_of's) and decoded, then the added and irregular tokens among
        them put right one by one. id_to_token's branches cost ~8 us an id (Gemma 3 over en.txt's
        68K ids: 0.55 of a 0.8 s decode)."""
        if self.meta["model"].get("byte_level", True) is not False or len(ids) < DECODE_COPY_IDS:
            return [self.id_to_token(i) for i in ids]
        if self._token_bytes is None:
            self._token_bytes = bytes(self.model.tb)
        tb, off = self._token_bytes, self.model.off
        if self._token_strs is None and len(ids) >= max(DECODE_NP_IDS, len(off) // 4):
            # Every token's string, once a decode is long enough to pay for them (Llama 2's 32K
            # in ~10 ms): then each id is one list lookup. A vocabulary with a token that is no
            # UTF-8 keeps the slices.
            ends = off.tolist()
            try:
                self._token_strs = list(map(bytes.decode, map(tb.__getitem__, map(slice, ends, ends[1:])),
                                            repeat("utf-8"), repeat("surrogatepass")))
            except UnicodeDecodeError:
                self._token_strs = False
        if self._token_strs:
            out = list(map(self._token_strs.__getitem__, ids))
        else:
            out = list(map(bytes.decode, _slices(tb, off, ids), repeat("utf-8"), repeat("surrogatepass")))
        odd = self.added_by_id.keys() | self.irregular_by_id.keys()
        if odd and not odd.isdisjoint(ids):
            for k in compress(range(len(ids)), map(odd.__contains__, ids)):
                out[k] = self.id_to_token(ids[k])
        return out

    def id_to_token(self, i: int):
        """HF: the vocabulary string; tiktoken: the token's bytes; Tekken: Tekkenizer.id_to_piece."""
        if not self.known(i):
            return None
        a = self.added_by_id.get(i)
        if self.api == "tiktoken":
            return a.content.encode("utf-8") if a is not None and not self._in_model(i) else self.model.token_bytes(i)
        if a is not None:
            return self.added_decode.get(i, a.content)
        if self.api == "tekken":
            return self.model.token_bytes(i).decode("utf-8", "replace")
        if i in self.irregular_by_id:
            return self.irregular_by_id[i]
        if self.meta["model"].get("byte_level", True) is False:  # vocabulary strings are plain UTF-8
            return self.model.token_bytes(i).decode("utf-8", "surrogatepass")
        return bytelevel.to_str(self.model.token_bytes(i))

    def _in_model(self, i: int) -> bool:
        return i < self.meta["model_vocab_size"] and self.model.lookup(self.model.token_bytes(i)) == i

    def token_to_id(self, token) -> int | None:
        if isinstance(token, (bytes, bytearray, memoryview)):
            data = bytes(token)
            text = data.decode("utf-8", "replace")
        elif isinstance(token, str):
            text = token
            data = None
        else:
            raise TypeError(f"token must be str or bytes, got {type(token).__name__}")
        try:
            return self.added.ids[self.added.contents.index(text)]  # (the first of that content)
        except ValueError:
            pass
        if data is None:
            if text in self.irregular:
                return self.irregular[text]
            byte_level = self.api == "hf" and self.meta["model"].get("byte_level", True) is not False
            data = bytelevel.to_bytes(text) if byte_level else text.encode("utf-8", "surrogatepass")
            if data is None:
                return None
        return self.model.lookup(data)


def _slices(tb, off, ids):
    """Each id's bytes, tb[off[i]:off[i + 1]], as an iterator of C-level maps."""
    at = off.__getitem__
    return map(tb.__getitem__, map(slice, map(at, ids), map(at, map((1).__add__, ids))))


def _joined(ids: list, more: list) -> list:
    """ids with more after them: more itself when ids is empty (the model's fresh list; extend
    would take a reference to each of its ids again: o200k over multi.txt, 2.5M ids, ~5 ms)."""
    if not ids:
        return more
    ids.extend(more)
    return ids


class _WordClass:
    """Rust regex's Unicode \\w, compiled at export like a split pattern (for single_word tokens)."""

    def __init__(self, f, step):
        self.step = pretokenizers.SplitStep(f, step)

    def __call__(self, c: str) -> bool:
        return self.step.regex.fullmatch(self.step.translate(c)) is not None


def _fast_split_step(pre: list, model):
    """The SplitStep when the pre-tokenizer is one regex split whose pieces findall gives (kept
    matches and gaps, or Split(invert, removed): matches only) and the model encodes piece lists."""
    if len(pre) != 1 or not hasattr(model, "encode_pieces"):
        return None
    step = pre[0]
    if not isinstance(step, SplitStep) or step.index is None or step.regex.groups:
        return None
    if (step.behavior, step.invert) in (("isolated", False), ("removed", True)):
        return step
    return None


def _no_word_class(c: str) -> bool:
    raise ValueError("file has single_word added tokens but no word class table")


def _map_offsets(spans, poffs):
    """Code-point spans inside a piece -> original (start, end) through the piece's offsets."""
    if isinstance(poffs, int):
        return [(poffs + cs, poffs + ce) for cs, ce in spans]
    return [(poffs[cs][0], poffs[ce - 1][1]) if ce > cs else (poffs[cs][0],) * 2 for cs, ce in spans]
