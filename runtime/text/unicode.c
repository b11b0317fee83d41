/* runtime/text/unicode.c — category lookup, lowercase, UTF-8 decode/encode (see unicode.h). */
#include "runtime/text/unicode.h"

/* Flags of cpt: ASCII from a direct table (the hot path for English text), everything else by
 * binary search over the generated category ranges plus the small White_Space list. */
unsigned sl_uc_flags(uint32_t cpt)
{
    if (cpt < 128)
        return sl_uc_ascii[cpt];
    if (cpt >= 0x110000)
        return SL_UC_UNDEF;
    /* Largest i with first(i) <= cpt; entry 0 starts at 0 and the sentinel at 0x110000 > cpt. */
    size_t lo = 0, hi = sl_uc_cat_ranges_n - 1;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((sl_uc_cat_ranges[mid] >> 8) <= cpt)
            lo = mid;
        else
            hi = mid;
    }
    unsigned f = sl_uc_cat_ranges[lo] & 0xFF;
    /* White_Space outside ASCII lives in U+0085..U+3000; a linear scan of 25 entries is cheap
     * and only runs for code points in that window. */
    if (cpt <= 0x3000) {
        for (size_t i = 0; i < sl_uc_space_n; i++) {
            if (sl_uc_space[i] == cpt) { f |= SL_UC_SPACE; break; }
            if (sl_uc_space[i] > cpt) break;
        }
    }
    return f;
}

/* Letter case by binary search over the generated case ranges (ASCII directly). */
unsigned sl_uc_letter_case(uint32_t cpt)
{
    if (cpt < 128)
        return (cpt >= 'A' && cpt <= 'Z') ? SL_UC_CASE_UPPER : (cpt >= 'a' && cpt <= 'z') ? SL_UC_CASE_LOWER : 0;
    if (cpt >= 0x110000)
        return 0;
    size_t lo = 0, hi = sl_uc_case_ranges_n - 1;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((sl_uc_case_ranges[mid] >> 8) <= cpt)
            lo = mid;
        else
            hi = mid;
    }
    return sl_uc_case_ranges[lo] & 0xFF;
}

/* Simple lowercase by binary search in the generated (code point, lowercase) pairs. */
uint32_t sl_uc_tolower(uint32_t cpt)
{
    if (cpt < 128)
        return (cpt >= 'A' && cpt <= 'Z') ? cpt + 32 : cpt;
    size_t lo = 0, hi = sl_uc_lower_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sl_uc_lower[mid][0] < cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < sl_uc_lower_n && sl_uc_lower[lo][0] == cpt) ? sl_uc_lower[lo][1] : cpt;
}

/* Decode with llama.cpp's rules: the lead byte's bit pattern fixes the length; every continuation
 * must be 10xxxxxx and present; no range checks beyond that.  Anything else: U+FFFD, one byte. */
uint32_t sl_utf8_decode(const unsigned char *s, size_t n, size_t *adv)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) { *adv = 1; return c; }
    if ((c & 0x40) == 0) { *adv = 1; return 0xFFFD; }          /* stray continuation byte */
    if ((c & 0x20) == 0)      { len = 2; cp = c & 0x1F; }
    else if ((c & 0x10) == 0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0x08) == 0) { len = 4; cp = c & 0x07; }
    else { *adv = 1; return 0xFFFD; }                            /* F8..FF */
    if (len > n) { *adv = 1; return 0xFFFD; }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *adv = 1; return 0xFFFD; }
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *adv = len;
    return cp;
}

/* Standard UTF-8 encoding; surrogates are encoded like any other value (llama.cpp does too). */
size_t sl_utf8_encode(uint32_t cpt, unsigned char *out)
{
    if (cpt < 0x80) { out[0] = (unsigned char)cpt; return 1; }
    if (cpt < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cpt >> 6));
        out[1] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cpt >> 12));
        out[1] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    if (cpt < 0x110000) {
        out[0] = (unsigned char)(0xF0 | (cpt >> 18));
        out[1] = (unsigned char)(0x80 | ((cpt >> 12) & 0x3F));
        out[2] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
        out[3] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 4;
    }
    return 0;
}

/* Strict validation (RFC 3629 table): second-byte ranges exclude overlongs (E0, F0), surrogates
 * (ED) and values past U+10FFFF (F4); C0, C1 and F5..FF never start a character. */
size_t sl_utf8_valid_prefix(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else
            return i;
        if (i + len > n)
            return i;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
        i += len;
    }
    return n;
}
