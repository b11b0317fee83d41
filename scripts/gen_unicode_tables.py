#!/usr/bin/env python3
"""Generate runtime/text/unicode_tables.c (categories, White_Space, ASCII flags) and
runtime/text/unicode_case_tables.c (lowercase mappings, letter-case ranges) from the Unicode
Character Database.

Usage (from the repository root; Debian package `unicode-data` provides the files):

    python3 scripts/gen_unicode_tables.py                 # writes both files into runtime/text/
    python3 scripts/gen_unicode_tables.py /path/to/ucd-dir [--out DIR]

Emits three compact tables used by the tokenizers' pre-tokenizer rules (runtime/text/unicode.c):
  * general-category ranges, one uint32 per range: (first code point << 8) | category flag,
    a range lasting until the next entry's first code point (code points absent from
    UnicodeData.txt are "Cn", flag UNDEF); the flags follow the \\p{..} classes
    llama.cpp's pre-tokenizer regexes use (L, N, P, S, M, Z, C, Cn);
  * White_Space code points (PropList.txt), the regex class \\s;
  * simple lowercase mappings (UnicodeData.txt field 13), for case-insensitive contractions;
  * letter-case ranges, one uint32 per range: (first code point << 8) | kind, kind 1 for Lu and Lt,
    2 for Ll, 0 for everything else (o200k's pattern tells [\\p{Lu}\\p{Lt}..] from [\\p{Ll}..]).
Plus a 128-entry ASCII fast-path table combining category and whitespace flags.
"""
import os
import re
import sys

MAX_CP = 0x110000

# Flag values: keep in sync with enum in runtime/text/unicode.h.
F_UNDEF, F_NUMBER, F_LETTER, F_SEPARATOR = 0x01, 0x02, 0x04, 0x08
F_MARK, F_PUNCT, F_SYMBOL, F_CONTROL = 0x10, 0x20, 0x40, 0x80
F_SPACE = 0x100

CAT_FLAG = {
    "Cn": F_UNDEF,
    "Cc": F_CONTROL, "Cf": F_CONTROL, "Co": F_CONTROL, "Cs": F_CONTROL,
    "Ll": F_LETTER, "Lm": F_LETTER, "Lo": F_LETTER, "Lt": F_LETTER, "Lu": F_LETTER,
    "Mc": F_MARK, "Me": F_MARK, "Mn": F_MARK,
    "Nd": F_NUMBER, "Nl": F_NUMBER, "No": F_NUMBER,
    "Pc": F_PUNCT, "Pd": F_PUNCT, "Pe": F_PUNCT, "Pf": F_PUNCT, "Pi": F_PUNCT,
    "Po": F_PUNCT, "Ps": F_PUNCT,
    "Sc": F_SYMBOL, "Sk": F_SYMBOL, "Sm": F_SYMBOL, "So": F_SYMBOL,
    "Zl": F_SEPARATOR, "Zp": F_SEPARATOR, "Zs": F_SEPARATOR,
}

# Letter-case kinds: keep in sync with sl_uc_letter_case in runtime/text/unicode.h.
CASE_KIND = {"Lu": 1, "Lt": 1, "Ll": 2}


# Unicode 15.1.0 (September 2023) assigned 627 code points that Debian 12's unicode-data (15.0.0)
# lacks; llama.cpp's tables (commit c392e509) were generated from 15.1, so we add them to match it
# exactly.  Source: Unicode 15.1.0 DerivedAge.txt / UnicodeData.txt (no case mappings were added).
UNICODE_15_1_ADDITIONS = [
    (0x2FFC, 0x2FFF, "So"),    # IDEOGRAPHIC DESCRIPTION CHARACTER SURROUND FROM RIGHT .. ROTATION
    (0x31EF, 0x31EF, "So"),    # CJK STROKE HXG
    (0x2EBF0, 0x2EE5D, "Lo"),  # CJK Unified Ideographs Extension I
]


def read_unicode_data(path):
    """Yield (code point, category, simple lowercase or None), expanding <..., First>/<..., Last> ranges."""
    first = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 15:
                continue
            cp = int(fields[0], 16)
            name, cat = fields[1], fields[2]
            lower = int(fields[13], 16) if fields[13] else None
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                assert first is not None
                for c in range(first, cp + 1):
                    yield c, cat, None
                first = None
                continue
            yield cp, cat, lower


def read_white_space(path):
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            rng, prop = [s.strip() for s in line.split(";")]
            if prop != "White_Space":
                continue
            if ".." in rng:
                a, b = [int(x, 16) for x in rng.split("..")]
            else:
                a = b = int(rng, 16)
            out.update(range(a, b + 1))
    return out


def ucd_version(ucd_dir):
    try:
        with open(os.path.join(ucd_dir, "ReadMe.txt"), encoding="utf-8") as f:
            m = re.search(r"Version (\d+\.\d+\.\d+)", f.read())
            return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


def emit_u32_list(name, values, per_line=8, comment=""):
    print("const uint32_t %s[%d] = {%s" % (name, len(values), comment))
    for i in range(0, len(values), per_line):
        print("    " + " ".join("0x%08Xu," % v for v in values[i:i + per_line]))
    print("};")


def main():
    args = sys.argv[1:]
    out_dir = "runtime/text"
    if "--out" in args:
        k = args.index("--out")
        out_dir = args[k + 1]
        del args[k:k + 2]
    ucd = args[0] if args else "/usr/share/unicode"
    flags = bytearray([F_UNDEF]) * MAX_CP
    case = bytearray(MAX_CP)
    lower_pairs = []
    for cp, cat, lower in read_unicode_data(os.path.join(ucd, "UnicodeData.txt")):
        flags[cp] = CAT_FLAG[cat]
        case[cp] = CASE_KIND.get(cat, 0)
        if lower is not None and lower != cp:
            lower_pairs.append((cp, lower))
    version = ucd_version(ucd)
    if version.startswith("15.0."):
        for a, b, cat in UNICODE_15_1_ADDITIONS:
            for cp in range(a, b + 1):
                assert flags[cp] == F_UNDEF
                flags[cp] = CAT_FLAG[cat]
        version += " + the 15.1.0 additions listed in the generator"
    space = sorted(read_white_space(os.path.join(ucd, "PropList.txt")))
    lower_pairs.sort()

    ranges = []
    for cp in range(MAX_CP):
        if not ranges or flags[cp] != (ranges[-1] & 0xFF):
            ranges.append((cp << 8) | flags[cp])
    ranges.append((MAX_CP << 8) | 0)  # sentinel: end of the last range

    case_ranges = []
    for cp in range(MAX_CP):
        if not case_ranges or case[cp] != (case_ranges[-1] & 0xFF):
            case_ranges.append((cp << 8) | case[cp])
    case_ranges.append((MAX_CP << 8) | 0)

    ascii_flags = [flags[c] | (F_SPACE if c in space else 0) for c in range(128)]

    source = ("%s/UnicodeData.txt + PropList.txt (Unicode %s, Debian package unicode-data)" % (ucd, version))
    with open(os.path.join(out_dir, "unicode_tables.c"), "w", encoding="utf-8") as out:
        sys.stdout = out
        print("/* runtime/text/unicode_tables.c — GENERATED, do not edit.")
        print(" *")
        print(" * Generator: python3 scripts/gen_unicode_tables.py (also writes unicode_case_tables.c)")
        print(" * Source:    %s" % source)
        print(" * Contents:  %d category ranges, %d White_Space code points, ASCII flags."
              % (len(ranges), len(space)))
        print(" */")
        print('#include "runtime/text/unicode.h"')
        print()
        emit_u32_list("sl_uc_cat_ranges", ranges,
                      comment="  /* (first << 8) | flag; a range ends where the next begins */")
        print()
        emit_u32_list("sl_uc_space", space)
        print()
        print("const uint16_t sl_uc_ascii[128] = {")
        for i in range(0, 128, 8):
            print("    " + " ".join("0x%03X," % v for v in ascii_flags[i:i + 8]))
        print("};")
        print()
        print("const size_t sl_uc_cat_ranges_n = %d;" % len(ranges))
        print("const size_t sl_uc_space_n = %d;" % len(space))
    with open(os.path.join(out_dir, "unicode_case_tables.c"), "w", encoding="utf-8") as out:
        sys.stdout = out
        print("/* runtime/text/unicode_case_tables.c — GENERATED, do not edit.")
        print(" *")
        print(" * Generator: python3 scripts/gen_unicode_tables.py (also writes unicode_tables.c)")
        print(" * Source:    %s" % source)
        print(" * Contents:  %d lowercase mappings, %d letter-case ranges." % (len(lower_pairs), len(case_ranges)))
        print(" */")
        print('#include "runtime/text/unicode.h"')
        print()
        print("const uint32_t sl_uc_lower[%d][2] = {  /* (code point, simple lowercase), sorted */" % len(lower_pairs))
        for i in range(0, len(lower_pairs), 4):
            print("    " + " ".join("{0x%05X, 0x%05X}," % p for p in lower_pairs[i:i + 4]))
        print("};")
        print()
        emit_u32_list("sl_uc_case_ranges", case_ranges,
                      comment="  /* (first << 8) | 1 Lu/Lt, 2 Ll, 0 other; a range ends where the next begins */")
        print()
        print("const size_t sl_uc_lower_n = %d;" % len(lower_pairs))
        print("const size_t sl_uc_case_ranges_n = %d;" % len(case_ranges))
    sys.stdout = sys.__stdout__

if __name__ == "__main__":
    main()
