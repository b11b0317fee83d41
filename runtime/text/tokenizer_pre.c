/* runtime/text/tokenizer_pre.c — BPE pre-tokenizers: split text into words before merging.
 *
 * llama.cpp applies, per tokenizer.ggml.pre, a list of regexes one after the other; each regex
 * splits every piece left by the previous one into its matches and the gaps between them.  Two
 * regexes have hand-written matchers in llama.cpp (GPT-2's and Llama 3's); the others go through
 * std::regex.  Here every regex of the supported lists is a hand-written matcher that reproduces
 * the leftmost-match ECMAScript semantics of that exact pattern, including llama.cpp's quirks:
 *
 *  - Patterns using \p{..} run on a "collapsed" text in which every non-ASCII code point is replaced
 *    by one byte for its category (0xD1 N, 0xD2 L, 0xD3 P, 0xD4 M, 0xD5 S, 0xD0 other) or by 0x0B
 *    when it is White_Space; \p{X} becomes [<marker>+<ASCII members>].  Llama.cpp's ASCII member
 *    lists are those of Unicode, except that \p{S} lacks '~' (not used by the lists below).
 *  - Patterns without \p{..} run on the code points, non-ASCII White_Space replaced by 0x0B.
 *  - In both, \s is std::regex's class in the "C" locale: ASCII 09..0D and 20 (so 0x0B stands for
 *    every non-ASCII White_Space).
 */
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

#include <errno.h>
#include <stdlib.h>

enum kind { K_GPT2, K_LLAMA3, K_QWEN2, K_O200K, K_RUN, K_ONE, K_WS_RUN, K_WS_TAIL, K_DIGIT3 };
enum cls { C_NONE, C_CRLF, C_DSL_LETTER, C_DSL_PUNCT, C_CJK, C_N, C_L, C_P, C_FALCON, C_DEFAULT };
typedef struct pass { unsigned char kind, cls; } pass;

/* The regex lists of llama.cpp's llm_tokenizer_bpe, per rule set (comments give the pattern). */
static const pass passes_default[] = {
    { K_RUN, C_DEFAULT },    /* [\p{P}\$\+<=>\^~\|]+ */
    { K_GPT2, 0 },           /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
    { K_RUN, C_N },          /* \p{N}+ */
    { K_DIGIT3, 0 },         /* [0-9][0-9][0-9] */
};
static const pass passes_llama3[] = { { K_LLAMA3, 0 } };
/* Qwen2: (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *        | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ : Llama 3's with one digit per match */
static const pass passes_qwen2[] = { { K_QWEN2, 0 } };
static const pass passes_gpt4o[] = { { K_O200K, 0 } };   /* see split_o200k */
static const pass passes_deepseek_llm[] = {
    { K_ONE, C_CRLF },           /* [\r\n] */
    { K_WS_RUN, C_DSL_LETTER },  /* \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+ */
    { K_WS_RUN, C_DSL_PUNCT },   /* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
    { K_WS_TAIL, 0 },            /* \s+$ */
    { K_RUN, C_CJK },            /* [一-龥ࠀ-一가-퟿]+ */
    { K_RUN, C_N },              /* \p{N}+ */
};
static const pass passes_deepseek_coder[] = {
    { K_ONE, C_CRLF },           /* [\r\n] */
    { K_WS_RUN, C_L },           /* \s?\p{L}+ */
    { K_WS_RUN, C_P },           /* \s?\p{P}+ */
    { K_RUN, C_CJK },            /* [一-龥ࠀ-一가-퟿]+ */
    { K_ONE, C_N },              /* \p{N} */
};
static const pass passes_falcon[] = {
    { K_RUN, C_FALCON },     /* [\p{P}\$\+<=>\^~\|`]+ */
    { K_GPT2, 0 },
    { K_DIGIT3, 0 },         /* [0-9][0-9][0-9] */
};
static const pass passes_starcoder[] = { { K_ONE, C_N }, { K_GPT2, 0 } };   /* \p{N}, GPT-2 */
static const pass passes_gpt2[] = { { K_GPT2, 0 } };

/* deepseek-llm's letter class, transcribed range by range from its regex. */
static const uint32_t dsl_letter[][2] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A},
    {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57},
    {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124},
    {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139},
    {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B},
    {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06},
    {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

static bool in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n)
{
    size_t lo = 0, hi = n;            /* first range whose end >= c */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid][1] < c) lo = mid + 1; else hi = mid;
    }
    return lo < n && r[lo][0] <= c;
}

/* ASCII members of \p{P} in llama.cpp's collapsed regexes: !"#%&'()*,-./:;?@[\]_{} */
static bool ascii_punct(uint32_t c)
{
    return (c >= 0x21 && c <= 0x23) || (c >= 0x25 && c <= 0x2A) || (c >= 0x2C && c <= 0x2F) ||
           c == 0x3A || c == 0x3B || c == 0x3F || c == 0x40 || (c >= 0x5B && c <= 0x5D) ||
           c == 0x5F || c == 0x7B || c == 0x7D;
}

/* The collapsed byte of a non-ASCII code point (see the file comment). */
static unsigned collapsed(unsigned f)
{
    if (f & SL_UC_SPACE) return 0x0B;
    switch (f & SL_UC_CATEGORY) {
    case SL_UC_NUMBER: return 0xD1;
    case SL_UC_LETTER: return 0xD2;
    case SL_UC_PUNCT:  return 0xD3;
    case SL_UC_MARK:   return 0xD4;
    case SL_UC_SYMBOL: return 0xD5;
    default:           return 0xD0;
    }
}

/* \s in both modes: ASCII whitespace, or a non-ASCII White_Space (which became 0x0B). */
static inline bool is_s(uint32_t c, unsigned f)
{
    return c < 128 ? (c == ' ' || (c >= 9 && c <= 13)) : (f & SL_UC_SPACE) != 0;
}

/* Does code point c (flags f) belong to class k? */
static bool in_class(int k, uint32_t c, unsigned f)
{
    /* The value the regex sees in wide mode: non-ASCII White_Space is 0x0B. */
    uint32_t w = (c >= 128 && (f & SL_UC_SPACE)) ? 0x0B : c;
    unsigned b = c < 128 ? c : collapsed(f);
    switch (k) {
    case C_CRLF:       return w == '\r' || w == '\n';
    case C_DSL_LETTER: return in_ranges(w, dsl_letter, sizeof dsl_letter / sizeof dsl_letter[0]);
    case C_DSL_PUNCT:  return (w >= 0x21 && w <= 0x2F) || (w >= 0x3A && w <= 0x7E) ||
                              (w >= 0xFF01 && w <= 0xFF0F) || (w >= 0xFF1A && w <= 0xFF5E) ||
                              (w >= 0x2018 && w <= 0x201F) || (w >= 0x3000 && w <= 0x3002);
    case C_CJK:        return (w >= 0x4E00 && w <= 0x9FA5) || (w >= 0x0800 && w <= 0x4E00) ||
                              (w >= 0xAC00 && w <= 0xD7FF);
    case C_N:          return b == 0xD1 || (b >= '0' && b <= '9');
    case C_L:          return b == 0xD2 || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z');
    case C_P:          return b == 0xD3 || (b < 128 && ascii_punct(b));
    case C_FALCON:     return b == 0xD3 || (b < 128 && (ascii_punct(b) || b == '$' || b == '+' ||
                              b == '<' || b == '=' || b == '>' || b == '^' || b == '~' || b == '|' || b == '`'));
    case C_DEFAULT:    return b == 0xD3 || (b < 128 && (ascii_punct(b) || b == '$' || b == '+' ||
                              b == '<' || b == '=' || b == '>' || b == '^' || b == '~' || b == '|'));
    default:           return false;
    }
}

/* Emit the piece [*prev, end) if non-empty. */
static int emit(sl_zvec *out, size_t *prev, size_t end)
{
    int rc = 0;
    if (end > *prev) rc = sl_zvec_push(out, end - *prev);
    *prev = end;
    return rc;
}

#define FL(p) ((p) < e ? (unsigned)fl[p] : 0u)   /* flags, 0 past the piece (llama.cpp's OUT_OF_RANGE) */
#define WLN (SL_UC_SPACE | SL_UC_LETTER | SL_UC_NUMBER)

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ on [s, e). */
static int split_gpt2(const uint32_t *cp, const uint16_t *fl, size_t s, size_t e, sl_zvec *out)
{
    size_t pos = s, prev = s;
    int rc = 0;
    while (pos < e && rc == 0) {
        uint32_t c = cp[pos];
        unsigned f = fl[pos];
        if (c == '\'' && pos + 1 < e) {
            uint32_t c1 = cp[pos + 1];
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                rc = emit(out, &prev, pos += 2);
                continue;
            }
            if (pos + 2 < e) {
                uint32_t c2 = cp[pos + 2];
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    rc = emit(out, &prev, pos += 3);
                    continue;
                }
            }
        }
        unsigned f2 = c == ' ' ? FL(pos + 1) : f;
        if (f2 & (SL_UC_LETTER | SL_UC_NUMBER)) {          /* ' ?\p{L}+' or ' ?\p{N}+' */
            unsigned want = f2 & SL_UC_LETTER ? SL_UC_LETTER : SL_UC_NUMBER;
            pos += c == ' ';
            while (FL(pos) & want) pos++;
            rc = emit(out, &prev, pos);
            continue;
        }
        if (!(f2 & WLN) && f2) {                            /* ' ?[^\s\p{L}\p{N}]+' */
            pos += c == ' ';
            while (!(FL(pos) & WLN) && FL(pos)) pos++;
            rc = emit(out, &prev, pos);
            continue;
        }
        size_t nws = 0;
        while (FL(pos + nws) & SL_UC_SPACE) nws++;
        if (nws > 1 && pos + nws < e) {                     /* '\s+(?!\S)': leave the last one */
            rc = emit(out, &prev, pos += nws - 1);
            continue;
        }
        if (nws > 0) {
            rc = emit(out, &prev, pos += nws);
            continue;
        }
        rc = emit(out, &prev, ++pos);
    }
    return rc;
}

/* Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *          |\s*[\r\n]+|\s+(?!\S)|\s+ on [s, e); max_digits 3 (Llama 3) or 1 (Qwen2). */
static int split_llama3(const uint32_t *cp, const uint16_t *fl, size_t s, size_t e, size_t max_digits, sl_zvec *out)
{
    size_t pos = s, prev = s;
    int rc = 0;
    while (pos < e && rc == 0) {
        uint32_t c = cp[pos];
        unsigned f = fl[pos];
        if (c == '\'' && pos + 1 < e) {
            uint32_t c1 = sl_uc_tolower(cp[pos + 1]);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                rc = emit(out, &prev, pos += 2);
                continue;
            }
            if (pos + 2 < e) {
                uint32_t c2 = sl_uc_tolower(cp[pos + 2]);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    rc = emit(out, &prev, pos += 3);
                    continue;
                }
            }
        }
        if (!(c == '\r' || c == '\n' || (f & SL_UC_NUMBER)) &&
            ((f & SL_UC_LETTER) || (FL(pos + 1) & SL_UC_LETTER))) {   /* [^\r\n\p{L}\p{N}]?\p{L}+ */
            pos++;
            while (FL(pos) & SL_UC_LETTER) pos++;
            rc = emit(out, &prev, pos);
            continue;
        }
        if (f & SL_UC_NUMBER) {                                        /* \p{N}{1,max_digits} */
            size_t ini = pos;
            while ((FL(pos) & SL_UC_NUMBER) && rc == 0)
                if (++pos - ini >= max_digits) { rc = emit(out, &prev, pos); ini = pos; }
            if (rc == 0) rc = emit(out, &prev, pos);
            continue;
        }
        unsigned f2 = c == ' ' ? FL(pos + 1) : f;
        if (!(f2 & WLN)) {                                /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
            pos += c == ' ';
            while (!(FL(pos) & WLN) && FL(pos)) pos++;
            while (pos < e && (cp[pos] == '\r' || cp[pos] == '\n')) pos++;
            rc = emit(out, &prev, pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (FL(pos + nws) & SL_UC_SPACE) {
            uint32_t c2 = cp[pos + nws];
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {                                             /* \s*[\r\n]+ */
            rc = emit(out, &prev, pos = last_rn);
            continue;
        }
        if (nws > 1 && pos + nws < e) {                                /* \s+(?!\S) */
            rc = emit(out, &prev, pos += nws - 1);
            continue;
        }
        if (nws > 0) {                                                 /* \s+ */
            rc = emit(out, &prev, pos += nws);
            continue;
        }
        rc = emit(out, &prev, ++pos);
    }
    return rc;
}

/* ---------------------------------------------------------------- o200k (gpt-4o, gpt-oss)
 *
 * tiktoken's o200k_base pattern, alternatives in order (leftmost-first, backtracking):
 *   1  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   2  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   3  \p{N}{1,3}
 *   4   ?[^\s\p{L}\p{N}]+[\r\n/]*
 *   5  \s*[\r\n]+
 *   6  \s+(?!\S)
 *   7  \s+
 * with Unicode classes as tiktoken's Rust regex has them: \s is White_Space, (?i) folds 's' with
 * 'S' and U+017F.  llama.cpp (LLAMA_VOCAB_PRE_TYPE_GPT4O) runs a rewrite of this pattern whose
 * "upper" and "lower" classes are "a letter but not a-z" / "a letter but not A-Z": it drops \p{M},
 * so combining marks (Devanagari vowel signs and virama, U+0301, ...) split words, and it makes every
 * non-ASCII letter both upper and lower.  gpt-oss was trained with tiktoken, so this follows
 * tiktoken: " हिन्दी" is one pre-token (and one token, 191681), not four.  The two agree on text
 * without combining marks or non-ASCII case changes (all of ../shared's goldens). */

#define O_L(p)   (FL(p) & SL_UC_LETTER)
#define O_N(p)   (FL(p) & SL_UC_NUMBER)
#define O_S(p)   (FL(p) & SL_UC_SPACE)
#define O_M(p)   (FL(p) & SL_UC_MARK)
#define O_UP(p)  ((O_L(p) && !(FL(p) & SL_FL_LOWER)) || O_M(p))   /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
#define O_LO(p)  ((O_L(p) && !(FL(p) & SL_FL_UPPER)) || O_M(p))   /* [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
#define O_PRE(p) ((p) < e && cp[p] != '\r' && cp[p] != '\n' && !O_L(p) && !O_N(p))   /* [^\r\n\p{L}\p{N}] */
#define O_OTH(p) ((p) < e && !O_S(p) && !O_L(p) && !O_N(p))                          /* [^\s\p{L}\p{N}] */

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)? at p: the end of the contraction, or p. */
static size_t o200k_suffix(const uint32_t *cp, size_t p, size_t e)
{
    if (p + 1 >= e || cp[p] != '\'') return p;
    uint32_t a = cp[p + 1] == 0x17F ? 's' : sl_uc_tolower(cp[p + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
    if (p + 2 >= e) return p;
    uint32_t b = sl_uc_tolower(cp[p + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return p + 3;
    return p;
}

/* Alternative 1 or 2 without its optional first character, from s: the end, or 0 when it fails. */
static size_t o200k_word(const uint32_t *cp, const uint16_t *fl, size_t s, size_t e, bool second)
{
    size_t r = s;
    while (r < e && O_UP(r)) r++;
    if (second) {                       /* upper+ lower* : greedy, nothing to give back */
        if (r == s) return 0;
    } else {                            /* upper* lower+ : give back uppers until a lower follows */
        while (!(r < e && O_LO(r))) {
            if (r == s) return 0;
            r--;
        }
    }
    while (r < e && O_LO(r)) r++;
    return o200k_suffix(cp, r, e);
}

/* End of the o200k match that starts at p < e. */
static size_t o200k_match(const uint32_t *cp, const uint16_t *fl, size_t p, size_t e)
{
    for (int alt = 0; alt < 2; alt++) {                     /* 1, 2: the optional prefix first */
        size_t t;
        if (O_PRE(p) && (t = o200k_word(cp, fl, p + 1, e, alt))) return t;
        if ((t = o200k_word(cp, fl, p, e, alt))) return t;
    }
    if (O_N(p)) {                                           /* 3 */
        size_t t = p + 1;
        while (t < e && t < p + 3 && O_N(t)) t++;
        return t;
    }
    size_t s = (cp[p] == ' ' && O_OTH(p + 1)) ? p + 1 : p;  /* 4 */
    if (O_OTH(s)) {
        while (O_OTH(s)) s++;
        while (s < e && (cp[s] == '\r' || cp[s] == '\n' || cp[s] == '/')) s++;
        return s;
    }
    size_t w = p, last_rn = 0;                              /* 5, 6, 7: a whitespace run */
    while (w < e && O_S(w)) {
        if (cp[w] == '\r' || cp[w] == '\n') last_rn = w + 1;
        w++;
    }
    if (last_rn) return last_rn;
    if (w == e || w - p == 1) return w > p ? w : p + 1;     /* 6 at the end, else 7 (or no class) */
    return w - 1;                                           /* 6: leave one before the non-space */
}

static int split_o200k(const uint32_t *cp, const uint16_t *fl, size_t s, size_t e, sl_zvec *out)
{
    size_t pos = s, prev = s;
    int rc = 0;
    while (pos < e && rc == 0) rc = emit(out, &prev, pos = o200k_match(cp, fl, pos, e));
    return rc;
}

/* Leftmost match of a simple pattern in [p, e); sets [*ms, *me) and returns true if found. */
static bool find_match(const pass *ps, const uint32_t *cp, const uint16_t *fl, size_t p, size_t e,
                       size_t *ms, size_t *me)
{
    switch (ps->kind) {
    case K_RUN:                       /* [cls]+ */
    case K_ONE:                       /* [cls] */
        for (; p < e; p++) {
            if (!in_class(ps->cls, cp[p], fl[p])) continue;
            size_t q = p + 1;
            if (ps->kind == K_RUN)
                while (q < e && in_class(ps->cls, cp[q], fl[q])) q++;
            *ms = p; *me = q;
            return true;
        }
        return false;
    case K_WS_RUN:                    /* \s?[cls]+ : the optional \s is greedy, then backtracks */
        for (; p < e; p++) {
            size_t start;
            if (is_s(cp[p], fl[p]) && p + 1 < e && in_class(ps->cls, cp[p + 1], fl[p + 1]))
                start = p + 1;
            else if (in_class(ps->cls, cp[p], fl[p]))
                start = p;
            else
                continue;
            size_t q = start + 1;
            while (q < e && in_class(ps->cls, cp[q], fl[q])) q++;
            *ms = p; *me = q;
            return true;
        }
        return false;
    case K_WS_TAIL: {                 /* \s+$ : the whitespace run that reaches the end */
        size_t t = e;
        while (t > p && is_s(cp[t - 1], fl[t - 1])) t--;
        if (t == e) return false;
        *ms = t; *me = e;
        return true;
    }
    case K_DIGIT3:                    /* [0-9][0-9][0-9] */
        for (; p + 3 <= e; p++) {
            if (cp[p] >= '0' && cp[p] <= '9' && cp[p + 1] >= '0' && cp[p + 1] <= '9' &&
                cp[p + 2] >= '0' && cp[p + 2] <= '9') {
                *ms = p; *me = p + 3;
                return true;
            }
        }
        return false;
    }
    return false;
}

/* One regex over one piece [s, e): matches and the gaps between them become pieces. */
static int split_simple(const pass *ps, const uint32_t *cp, const uint16_t *fl, size_t s, size_t e,
                        sl_zvec *out)
{
    size_t prev = s, ms, me;
    int rc = 0;
    while (rc == 0 && prev < e && find_match(ps, cp, fl, prev, e, &ms, &me)) {
        rc = emit(out, &prev, ms);
        if (rc == 0) rc = emit(out, &prev, me);
    }
    if (rc == 0) rc = emit(out, &prev, e);
    return rc;
}

int sl_pretokenize(int pre, const uint32_t *cpt, const uint16_t *fl, size_t n, sl_zvec *out)
{
    const pass *ps;
    size_t np;
    switch (pre) {
    case SL_PRE_LLAMA3:         ps = passes_llama3; np = 1; break;
    case SL_PRE_DEEPSEEK_LLM:   ps = passes_deepseek_llm; np = 6; break;
    case SL_PRE_DEEPSEEK_CODER: ps = passes_deepseek_coder; np = 5; break;
    case SL_PRE_FALCON:         ps = passes_falcon; np = 3; break;
    case SL_PRE_STARCODER:      ps = passes_starcoder; np = 2; break;
    case SL_PRE_GPT2:           ps = passes_gpt2; np = 1; break;
    case SL_PRE_QWEN2:          ps = passes_qwen2; np = 1; break;
    case SL_PRE_GPT4O:          ps = passes_gpt4o; np = 1; break;
    default:                    ps = passes_default; np = 4; break;
    }
    if (n == 0)
        return 0;
    /* Each pass reads the pieces in `cur` and writes the finer pieces to `nxt`. */
    sl_zvec a = { 0 }, b = { 0 };
    sl_zvec *cur = &a, *nxt = &b;
    int rc = sl_zvec_push(cur, n);
    for (size_t k = 0; k < np && rc == 0; k++) {
        nxt->n = 0;
        size_t start = 0;
        for (size_t i = 0; i < cur->n && rc == 0; i++) {
            size_t e = start + cur->v[i];
            if (ps[k].kind == K_GPT2)        rc = split_gpt2(cpt, fl, start, e, nxt);
            else if (ps[k].kind == K_LLAMA3) rc = split_llama3(cpt, fl, start, e, 3, nxt);
            else if (ps[k].kind == K_QWEN2)  rc = split_llama3(cpt, fl, start, e, 1, nxt);
            else if (ps[k].kind == K_O200K)  rc = split_o200k(cpt, fl, start, e, nxt);
            else                             rc = split_simple(&ps[k], cpt, fl, start, e, nxt);
            start = e;
        }
        sl_zvec *t = cur; cur = nxt; nxt = t;
    }
    for (size_t i = 0; i < cur->n && rc == 0; i++)
        rc = sl_zvec_push(out, cur->v[i]);
    free(a.v);
    free(b.v);
    return rc ? -ENOMEM : 0;
}
