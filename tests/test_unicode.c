/* tests/test_unicode.c — the generated Unicode tables and the UTF-8 helpers.
 *   - categories/White_Space/lowercase of code points whose properties are fixed facts of the
 *     standard (one or more per class, incl. a Unicode 15.1 addition and unassigned code points);
 *   - the committed runtime/text/unicode_tables.c equals what scripts/gen_unicode_tables.py generates
 *     from /usr/share/unicode now (skipped when python3 or the data are missing);
 *   - llama.cpp's lenient UTF-8 decoding rules, and strict validation.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/text/unicode.h"

Test(unicode, categories)
{
    static const struct { uint32_t cp; unsigned cat; int space; } k[] = {
        { 'A', SL_UC_LETTER, 0 }, { 'z', SL_UC_LETTER, 0 }, { '5', SL_UC_NUMBER, 0 }, { ' ', SL_UC_SEPARATOR, 1 },
        { '\t', SL_UC_CONTROL, 1 }, { '\n', SL_UC_CONTROL, 1 }, { 0x1C, SL_UC_CONTROL, 0 }, { '!', SL_UC_PUNCT, 0 },
        { '$', SL_UC_SYMBOL, 0 }, { '~', SL_UC_SYMBOL, 0 }, { '_', SL_UC_PUNCT, 0 }, { 0x85, SL_UC_CONTROL, 1 },
        { 0xA0, SL_UC_SEPARATOR, 1 }, { 0xAD, SL_UC_CONTROL, 0 }, { 0xB5, SL_UC_LETTER, 0 }, { 0xBD, SL_UC_NUMBER, 0 },
        { 0x0301, SL_UC_MARK, 0 }, { 0x0378, SL_UC_UNDEF, 0 }, { 0x0663, SL_UC_NUMBER, 0 }, { 0x1680, SL_UC_SEPARATOR, 1 },
        { 0x180E, SL_UC_CONTROL, 0 }, { 0x200B, SL_UC_CONTROL, 0 }, { 0x2028, SL_UC_SEPARATOR, 1 },
        { 0x2029, SL_UC_SEPARATOR, 1 }, { 0x202F, SL_UC_SEPARATOR, 1 }, { 0x205F, SL_UC_SEPARATOR, 1 },
        { 0x20AC, SL_UC_SYMBOL, 0 }, { 0x2160, SL_UC_NUMBER, 0 }, { 0x3000, SL_UC_SEPARATOR, 1 }, { 0x3002, SL_UC_PUNCT, 0 },
        { 0x4E00, SL_UC_LETTER, 0 }, { 0x9FFF, SL_UC_LETTER, 0 }, { 0xAC00, SL_UC_LETTER, 0 }, { 0xD800, SL_UC_CONTROL, 0 },
        { 0xE000, SL_UC_CONTROL, 0 }, { 0xFFFD, SL_UC_SYMBOL, 0 }, { 0xFFFF, SL_UC_UNDEF, 0 }, { 0x1F600, SL_UC_SYMBOL, 0 },
        { 0x1F3FD, SL_UC_SYMBOL, 0 }, { 0x2EBF0, SL_UC_LETTER, 0 }, { 0x31EF, SL_UC_SYMBOL, 0 },
        { 0xE0001, SL_UC_CONTROL, 0 }, { 0x10FFFF, SL_UC_UNDEF, 0 }, { 0x110000, SL_UC_UNDEF, 0 }, { 0x1FFFFF, SL_UC_UNDEF, 0 },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        unsigned f = sl_uc_flags(k[i].cp);
        cr_assert_eq(f & SL_UC_CATEGORY, k[i].cat, "U+%04X: category 0x%x, want 0x%x", k[i].cp, f & SL_UC_CATEGORY, k[i].cat);
        cr_assert_eq((f & SL_UC_SPACE) != 0, k[i].space != 0, "U+%04X: White_Space", k[i].cp);
    }
    /* The ASCII fast path agrees with the range table. */
    for (uint32_t c = 0; c < 128; c++) {
        size_t lo = 0;
        while ((sl_uc_cat_ranges[lo + 1] >> 8) <= c) lo++;
        cr_assert_eq(sl_uc_flags(c) & SL_UC_CATEGORY, sl_uc_cat_ranges[lo] & 0xFF, "U+%04X", c);
    }
    cr_assert_eq(sl_uc_tolower('Q'), 'q');
    cr_assert_eq(sl_uc_tolower(0x0130), 'i');      /* İ */
    cr_assert_eq(sl_uc_tolower(0x212A), 'k');      /* KELVIN SIGN */
    cr_assert_eq(sl_uc_tolower(0x0410), 0x0430);   /* А -> а */
    cr_assert_eq(sl_uc_tolower(0x00DF), 0x00DF);   /* ß has no simple lowercase change */
    cr_assert_eq(sl_uc_tolower(0x1F600), 0x1F600);
}

/* The committed generated files are what the generator makes from the installed data. */
Test(unicode, tables_are_regenerable)
{
    if (access("/usr/share/unicode/UnicodeData.txt", R_OK) != 0 || system("python3 -c '' 2>/dev/null") != 0)
        cr_skip_test("python3 or /usr/share/unicode (Debian unicode-data) not available");
    char dir[] = "/tmp/sl-unicode-XXXXXX", cmd[2048];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cd %s && python3 scripts/gen_unicode_tables.py --out %s", SL_SOURCE_DIR, dir);
    cr_assert_eq(system(cmd), 0, "the generator failed");
    static const char *const files[] = { "unicode_tables.c", "unicode_case_tables.c" };
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cmp -s %s/%s %s/runtime/text/%s", dir, files[i], SL_SOURCE_DIR, files[i]);
        cr_assert_eq(system(cmd), 0, "runtime/text/%s differs from the generator's output", files[i]);
        snprintf(cmd, sizeof cmd, "%s/%s", dir, files[i]);
        unlink(cmd);
    }
    rmdir(dir);
}

Test(unicode, lenient_decode)
{
    static const struct { const char *s; size_t n; uint32_t cp; size_t adv; } k[] = {
        { "A", 1, 'A', 1 }, { "\xC3\xA9", 2, 0xE9, 2 }, { "\xE2\x82\xAC", 3, 0x20AC, 3 },
        { "\xF0\x9F\x98\x80", 4, 0x1F600, 4 },
        { "\xC0\x80", 2, 0, 2 },                  /* overlong: accepted, as llama.cpp does */
        { "\xED\xA0\x80", 3, 0xD800, 3 },         /* surrogate: accepted */
        { "\xF7\xBF\xBF\xBF", 4, 0x1FFFFF, 4 },   /* past U+10FFFF: decoded (llama.cpp too) */
        { "\x80", 1, 0xFFFD, 1 }, { "\xC3", 1, 0xFFFD, 1 }, { "\xC3(", 2, 0xFFFD, 1 },
        { "\xE2\x82", 2, 0xFFFD, 1 }, { "\xF8\x88\x80\x80", 4, 0xFFFD, 1 }, { "\xFF", 1, 0xFFFD, 1 },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t adv = 0;
        uint32_t cp = sl_utf8_decode((const unsigned char *)k[i].s, k[i].n, &adv);
        cr_assert_eq(cp, k[i].cp, "case %zu: U+%04X", i, cp);
        cr_assert_eq(adv, k[i].adv, "case %zu", i);
    }
    /* Encode/decode round trip over every scalar value. */
    for (uint32_t c = 0; c < 0x110000; c += (c < 0x10000 ? 1 : 97)) {
        unsigned char b[4];
        size_t n = sl_utf8_encode(c, b), adv;
        cr_assert_eq(sl_utf8_decode(b, n, &adv), c);
        cr_assert_eq(adv, n);
        if (c < 0xD800 || c > 0xDFFF) cr_assert_eq(sl_utf8_valid_prefix(b, n), n, "U+%04X", c);
        else cr_assert_eq(sl_utf8_valid_prefix(b, n), 0, "U+%04X", c);
    }
    cr_assert_eq(sl_utf8_encode(0x110000, (unsigned char[4]){ 0 }), 0);
    cr_assert_eq(sl_utf8_valid_prefix((const unsigned char *)"ab\xC0\x80", 4), 2);
    cr_assert_eq(sl_utf8_valid_prefix((const unsigned char *)"\xF4\x90\x80\x80", 4), 0);
    cr_assert_eq(sl_utf8_valid_prefix((const unsigned char *)"\xE0\x9F\xBF", 3), 0);
}
