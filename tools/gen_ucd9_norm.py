"""Generate tokmap/exporter/data/ucd9_norm.bin: pinned Unicode 9.0 normalization tables.

HF tokenizers' NFC/NFD/NFKC/NFKD use Unicode 9.0 data (crate
unicode-normalization-alignments 0.1.12), so the tables come from
unicodedata2 9.0.0.x, never from the running Python's `unicodedata`.
unicodedata2 9.0 only builds on CPython <= 3.9, hence:

    python3.9 -m venv /tmp/ucd9
    /tmp/ucd9/bin/pip install unicodedata2==9.0.0.post4
    /tmp/ucd9/bin/python tools/gen_ucd9_norm.py

The container layout is documented in tokmap/exporter/norm_tables.py, whose
`pack_container` writes the file.  Before writing, the tables are checked by
normalizing every code point with a small reference implementation and
comparing with unicodedata2's own normalize().
"""

import importlib.util
import os
import struct
import sys

import unicodedata2 as ucd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tokmap", "exporter", "data", "ucd9_norm.bin")

S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
N_COUNT = V_COUNT * T_COUNT
S_COUNT = L_COUNT * N_COUNT


def _load_norm_tables():
    # Loaded by path: this script runs under an old Python in its own venv,
    # so it must not import the tokmap package (and whatever it pulls in).
    path = os.path.join(ROOT, "tokmap", "exporter", "norm_tables.py")
    spec = importlib.util.spec_from_file_location("_norm_tables", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def code_points():
    for cp in range(0x110000):
        if not 0xD800 <= cp < 0xE000:
            yield cp


def read_ucd():
    ccc, canon, compat = {}, {}, {}
    for cp in code_points():
        ch = chr(cp)
        c = ucd.combining(ch)
        if c:
            ccc[cp] = c
        d = ucd.decomposition(ch)
        if not d:
            continue
        if d.startswith("<"):
            compat[cp] = [int(x, 16) for x in d.split()[1:]]
        else:
            canon[cp] = [int(x, 16) for x in d.split()]
    return ccc, canon, compat


def full_decompositions(canon, compat):
    """Recursive decompositions, precomputed so the runtime does one lookup."""

    def expand(cp, compatible):
        if cp < 0x80:  # ASCII never decomposes
            return [cp]
        assert not S_BASE <= cp < S_BASE + S_COUNT, "Hangul must stay algorithmic"
        m = canon.get(cp)
        if m is None and compatible:
            m = compat.get(cp)
        if m is None:
            return [cp]
        return [y for x in m for y in expand(x, compatible)]

    cfull, kfull = {}, {}
    for cp in sorted(set(canon) | set(compat)):
        if S_BASE <= cp < S_BASE + S_COUNT:
            continue
        c = expand(cp, False)
        if c != [cp]:
            cfull[cp] = c
        k = expand(cp, True)
        if k != [cp]:
            kfull[cp] = k
    # Compatibility entries equal to the canonical ones are not stored twice.
    kdelta = {cp: v for cp, v in kfull.items() if cfull.get(cp) != v}
    return cfull, kfull, kdelta


def composition_pairs(canon, ccc):
    """(first, second) -> composite, for primary composites only.

    A pair composes iff its composite is a primary composite: it has a
    two-character canonical decomposition, is not a singleton, has no
    non-starter decomposition and is not in CompositionExclusions.  The last
    list is not in unicodedata2's API, so it is recovered the standard way:
    a canonical composite that NFC does not give back is excluded.
    """
    pairs = {}
    for cp, d in sorted(canon.items()):
        if len(d) != 2:
            continue  # singleton
        if ccc.get(cp, 0) or ccc.get(d[0], 0):
            continue  # non-starter decomposition
        if ucd.normalize("NFC", chr(cp)) != chr(cp):
            continue  # composition exclusion
        assert (d[0], d[1]) not in pairs
        pairs[(d[0], d[1])] = cp
    return pairs


def ccc_runs(ccc):
    runs = []
    prev = None
    for cp in range(0x110000):
        c = ccc.get(cp, 0)
        if c != prev:
            runs.append((cp << 8) | c)
            prev = c
    return runs


def pack_decomp(table):
    keys = sorted(table)
    data = bytearray()
    ends = []
    for k in keys:
        data += "".join(map(chr, table[k])).encode("utf-8")
        ends.append(len(data))
    assert len(data) < 0x10000, "u16 ends overflow"
    out = struct.pack("<%dI" % len(keys), *keys)
    out += struct.pack("<%dH" % len(ends), *ends)
    out += b"\0" * (-len(out) % 4)
    out += bytes(data)
    return out, len(keys)


def pack_comp(pairs):
    seconds = sorted({b for _, b in pairs})
    assert len(seconds) <= 256, "second index must fit in 8 bits"
    sidx = {b: i for i, b in enumerate(seconds)}
    items = sorted(((a << 8) | sidx[b], r) for (a, b), r in pairs.items())
    n = len(items)
    out = struct.pack("<II", len(seconds), n)
    out += struct.pack("<%dI" % len(seconds), *seconds)
    out += struct.pack("<%dI" % n, *(k for k, _ in items))
    out += struct.pack("<%dI" % n, *(r for _, r in items))
    return out, n


# --- self-check: standard UAX #15 algorithm on these tables ----------------

def reference_normalize(s, form, ccc, cfull, kfull, pairs):
    table = kfull if form in ("NFKC", "NFKD") else cfull
    out = []
    for ch in s:
        cp = ord(ch)
        if S_BASE <= cp < S_BASE + S_COUNT:
            si = cp - S_BASE
            out += [L_BASE + si // N_COUNT, V_BASE + (si % N_COUNT) // T_COUNT]
            if si % T_COUNT:
                out.append(T_BASE + si % T_COUNT)
        else:
            out += table.get(cp, [cp])
    # canonical ordering (stable sort of non-starter runs)
    i = 0
    while i < len(out):
        if ccc.get(out[i], 0) == 0:
            i += 1
            continue
        j = i
        while j < len(out) and ccc.get(out[j], 0):
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda c: ccc[c])
        i = j
    if form in ("NFD", "NFKD"):
        return "".join(map(chr, out))
    res = []
    starter = None  # index in res of the last starter
    between = None  # ccc of the last uncomposed char after it; None = adjacent
    for cp in out:
        c = ccc.get(cp, 0)
        if starter is not None and (between is None or between < c):
            a = res[starter]
            if L_BASE <= a < L_BASE + L_COUNT and V_BASE <= cp < V_BASE + V_COUNT:
                r = S_BASE + ((a - L_BASE) * V_COUNT + (cp - V_BASE)) * T_COUNT
            elif (S_BASE <= a < S_BASE + S_COUNT and (a - S_BASE) % T_COUNT == 0
                  and T_BASE < cp < T_BASE + T_COUNT):
                r = a + cp - T_BASE
            else:
                r = pairs.get((a, cp))
            if r is not None:
                res[starter] = r
                continue
        if c == 0:
            starter, between = len(res), None
        else:
            between = c
        res.append(cp)
    return "".join(map(chr, res))


def self_check(ccc, cfull, kfull, pairs):
    bad = 0
    for cp in code_points():
        ch = chr(cp)
        for form in ("NFC", "NFD", "NFKC", "NFKD"):
            if reference_normalize(ch, form, ccc, cfull, kfull, pairs) != ucd.normalize(form, ch):
                bad += 1
                if bad < 10:
                    print("mismatch", form, hex(cp), file=sys.stderr)
    # Sequences that exercise ordering and composition across characters.
    samples = ["e\u0301", "a\u0323\u0302", "\u1100\u1161\u11a8", "\uac00\u11a8",
               "\u0b47\u0b3e", "\u0cc6\u0cc2\u0cd5", "q\u0307\u0323", "\u212b\u0323"]
    for s in samples:
        for form in ("NFC", "NFD", "NFKC", "NFKD"):
            if reference_normalize(s, form, ccc, cfull, kfull, pairs) != ucd.normalize(form, s):
                bad += 1
                print("mismatch", form, ascii(s), file=sys.stderr)
    if bad:
        raise SystemExit(f"{bad} self-check mismatches; tables not written")


def main():
    if ucd.unidata_version != "9.0.0":
        raise SystemExit(f"need unicodedata2 9.0.0.x, found Unicode {ucd.unidata_version}")
    nt = _load_norm_tables()
    ccc, canon, compat = read_ucd()
    cfull, kfull, kdelta = full_decompositions(canon, compat)
    pairs = composition_pairs(canon, ccc)
    self_check(ccc, cfull, kfull, pairs)

    runs = ccc_runs(ccc)
    cdec, n_c = pack_decomp(cfull)
    kdec, n_k = pack_decomp(kdelta)
    comp, n_p = pack_comp(pairs)
    sections = [
        (b"CCC_", struct.pack("<%dI" % len(runs), *runs), len(runs)),
        (b"CDEC", cdec, n_c),
        (b"KDEC", kdec, n_k),
        (b"COMP", comp, n_p),
    ]
    blob = nt.pack_container(sections, 15, ucd.unidata_version)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(blob)
    print(f"wrote {OUT}: {len(blob)} bytes; ccc runs {len(runs)}, canonical {n_c}, "
          f"compat delta {n_k}, pairs {n_p}")


if __name__ == "__main__":
    main()
