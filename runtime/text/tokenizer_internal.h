/* runtime/text/tokenizer_internal.h — the vocabulary's in-memory layout, shared by tokenizer.c
 * (loading, special tokens), tokenizer_table.c (hash tables), tokenizer_text.c (partitioning,
 * pieces, detokenizing), tokenizer_spm.c, tokenizer_bpe.c and tokenizer_pre.c.
 *
 * Memory layout (Llama 3's 128k tokens + 280k merges: 15.8 MB, 3x less than llama.cpp's maps):
 *   - every string (token texts, then merge halves that are not tokens) lives in one arena
 *     (1 MB); `strs` (16 B each) describes each string: ids 0..n_tokens-1 are the tokens, ids
 *     above are merge-only strings ("extras") so that a merge keyed by two strings can be keyed by
 *     two ids (Llama 3 has none);
 *   - an open-addressing table maps text -> string id (16 B slots, load <= 3/4, 4 MB);
 *   - merges are an open-addressing table keyed by (left id, right id) holding the rank and the id
 *     of left+right, or -1 (16 B slots, 8 MB).
 */
#ifndef SL_RUNTIME_TOKENIZER_INTERNAL_H
#define SL_RUNTIME_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/text/tokenizer.h"

/* Token attributes: llama.cpp's llama_token_attr bit values. */
enum {
    SL_ATTR_UNDEFINED    = 0,
    SL_ATTR_UNKNOWN      = 1 << 0,
    SL_ATTR_UNUSED       = 1 << 1,
    SL_ATTR_NORMAL       = 1 << 2,
    SL_ATTR_CONTROL      = 1 << 3,
    SL_ATTR_USER_DEFINED = 1 << 4,
    SL_ATTR_BYTE         = 1 << 5,
    SL_ATTR_LSTRIP       = 1 << 7,
    SL_ATTR_RSTRIP       = 1 << 8,
};

enum sl_vocab_type { SL_VOCAB_SPM = 1, SL_VOCAB_BPE = 2 };

/* Pre-tokenizer rule sets (each is llama.cpp's list of regexes for the named tokenizer.ggml.pre
 * values, see tokenizer_pre.c). */
enum sl_pre {
    SL_PRE_DEFAULT = 0,      /* "default" or no key */
    SL_PRE_LLAMA3,           /* llama3, llama-v3, llama-bpe, falcon3, dbrx, smaug-bpe, chatglm-bpe */
    SL_PRE_DEEPSEEK_LLM,
    SL_PRE_DEEPSEEK_CODER,
    SL_PRE_FALCON,
    SL_PRE_STARCODER,        /* starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b */
    SL_PRE_GPT2,             /* gpt-2, mpt, olmo, jais, phi-2, jina-*, gigachat, roberta-bpe */
    SL_PRE_QWEN2,            /* qwen2, deepseek-r1-qwen: Llama 3's regex with single digits */
    SL_PRE_GPT4O,            /* gpt-4o: tiktoken's o200k pattern (gpt-oss's o200k_harmony) */
};

/* Letter-case bits the BPE tokenizer adds to the flags it hands sl_pretokenize for SL_PRE_GPT4O
 * (above the SL_UC_* bits): Lu/Lt and Ll, from sl_uc_letter_case. */
enum { SL_FL_UPPER = 0x200, SL_FL_LOWER = 0x400 };

typedef struct sl_vstr {
    uint32_t off;    /* into arena */
    uint32_t len;
    float    score;
    uint32_t attr;   /* SL_ATTR_* (0 for extras) */
} sl_vstr;

/* String-table slot: id (-1 empty), the string's hash, and a copy of its arena offset/length so a
 * probe needs no access to `strs`. */
typedef struct sl_hslot { int32_t id; uint32_t hash; uint32_t off, len; } sl_hslot;

/* Merge-table slot, keyed by (left id, right id): rank (-1 empty) and the id of left+right (-1 when
 * that string is neither a token nor a merge half). */
typedef struct sl_mslot { int32_t left, right, rank, result; } sl_mslot;

struct sl_vocab {
    int      type;                 /* enum sl_vocab_type */
    int      pre;                  /* enum sl_pre */
    char     pre_name[40];
    int32_t  n_tokens;
    int32_t  n_strs;               /* tokens + extras */
    sl_vstr *strs;
    char    *arena;
    size_t   arena_len, arena_cap;

    uint32_t hmask;                /* string table: capacity - 1 (power of two) */
    struct sl_hslot *hslot;

    int32_t  n_merges;             /* ranks 0..n_merges-1 (ill-formed merge lines keep their rank) */
    uint32_t mmask;
    struct sl_mslot *mslot;

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_space_prefix, ignore_merges, clean_spaces;
    bool spm_split;                /* SPM: no token has U+2581 after another character (see spm.c) */
    bool rank_by_token;            /* BPE: a merge's priority is the merged token's id (tiktoken's
                                      rule; ids are its ranks) instead of the merge list's rank */

    int32_t *special;              /* CONTROL/USER_DEFINED/UNKNOWN ids, longest text first */
    int32_t  n_special;
    int32_t  n_special_plain;      /* of those, the ones matched without parse_special */
    /* Trie over the special texts, to learn in one pass which of them occur in a text:
     * trie_root[b] is the node for first byte b; nodes chain children through `sibling`. */
    int32_t  trie_root[256];
    struct sl_tnode { int32_t child, sibling, rank; unsigned char byte; } *trie;
    int32_t  n_trie;
    int32_t *eog;                  /* end-of-generation ids, ascending */
    int32_t  n_eog;

    int32_t byte_tok[256];         /* SPM byte fallback: <0xNN> or the 1-byte token, else -1 */
    int32_t byte_sym[256];         /* BPE: string id of the byte-level character of each byte */
    int32_t single_tok[256];       /* BPE: token whose whole text is this single byte, else -1 */
    unsigned char byte_chr[256][2];/* BPE: UTF-8 of the byte-level character (1 or 2 bytes) */
    unsigned char byte_chr_len[256];
    int16_t chr_byte[324];         /* BPE: inverse, code point (< 324) -> byte, or -1 */

    size_t mem;                    /* heap bytes owned */
};

/* Growable int32 vector (token output). */
typedef struct sl_ivec { int32_t *v; size_t n, cap; } sl_ivec;
int sl_ivec_push(sl_ivec *a, int32_t x);

/* Merge candidates of both tokenizers, in a binary min-heap ordered by (key, left): key is the BPE
 * merge rank, or for SPM the score mapped so that a higher score gives a smaller key — so both pop
 * llama.cpp's order (best rank/score first, leftmost on ties).  `size` (bytes of left + right when
 * queued) detects stale entries; `result` is the BPE id of the merged string. */
typedef struct sl_bigram { uint32_t key; int32_t left, right; uint32_t size; int32_t result; } sl_bigram;
typedef struct sl_heap { sl_bigram *a; size_t n, cap; } sl_heap;
int       sl_heap_push(sl_heap *h, sl_bigram x);
sl_bigram sl_heap_pop(sl_heap *h);              /* h->n > 0 */

/* Growable size_t vector (pre-token lengths). */
typedef struct sl_zvec { size_t *v; size_t n, cap; } sl_zvec;
int sl_zvec_push(sl_zvec *a, size_t x);

/* String table (tokenizer_table.c).  Lookup: id of the string s[0..n) (token or extra), or -1;
 * _h: with its precomputed hash. */
uint32_t sl_vocab_hash(const void *s, size_t n);
uint32_t sl_hash_more(uint32_t h, const void *s, size_t n);
int      sl_table_resize(sl_vocab *v, size_t want);
/* Slot of a 32-bit hash: the middle bits of a 64-bit multiplicative mix depend on every bit of h
 * (FNV's low bits alone cluster under linear probing). */
static inline uint32_t sl_slot_of(uint32_t h, uint32_t mask)
{
    return (uint32_t)(((uint64_t)h * 0x9E3779B97F4A7C15ull) >> 29) & mask;
}
int32_t  sl_vocab_find(const sl_vocab *v, const char *s, size_t n);
int32_t  sl_vocab_find_h(const sl_vocab *v, const char *s, size_t n, uint32_t h);
static inline const char *sl_vstr_text(const sl_vocab *v, int32_t id) { return v->arena + v->strs[id].off; }

/* Rank of merge (left id, right id) and the id of the merged string in *result; -1 if none. */
int32_t sl_merge_find(const sl_vocab *v, int32_t left, int32_t right, int32_t *result);

/* Build the BPE merge tables from tokenizer.ggml.merges (tokenizer_bpe.c). */
int sl_bpe_load_merges(sl_vocab *v, const sl_gguf *g, char *err, size_t errlen);
/* Fill byte_chr/chr_byte/byte_sym/single_tok (tokenizer_bpe.c). */
void sl_bpe_init_bytes(sl_vocab *v);

/* Tokenize one raw-text fragment, appending ids to out.  0 or -errno. */
int sl_spm_tokenize(const sl_vocab *v, const char *text, size_t len, bool add_prefix, sl_ivec *out);
int sl_bpe_tokenize(const sl_vocab *v, const char *text, size_t len, sl_ivec *out);

/* Split code points into pre-tokens following rule set `pre`; appends pre-token lengths (in code
 * points, summing to n) to out.  fl[i] = sl_uc_flags(cpt[i]).  0 or -ENOMEM. */
int sl_pretokenize(int pre, const uint32_t *cpt, const uint16_t *fl, size_t n, sl_zvec *out);

/* BPE detokenization of one NORMAL token text (llama.cpp llama_decode_text); appends to buf. */
typedef struct sl_bytes { char *p; size_t n, cap; } sl_bytes;
int sl_bytes_append(sl_bytes *b, const void *s, size_t n);
int sl_bpe_decode_text(const sl_vocab *v, const char *text, size_t len, sl_bytes *out);

#endif
