/* runtime/text/tokenizer.h — vocabularies from GGUF metadata: text <-> token ids.
 *
 * Families (tokenizer.ggml.model): "llama" (SentencePiece BPE with byte fallback) and "gpt2"
 * (byte-level BPE, pre-tokenizer from tokenizer.ggml.pre).  Results equal llama.cpp's (c392e509)
 * llama_tokenize(add_special, parse_special), llama_token_to_piece and llama_detokenize exactly.
 * Supported pre-tokenizers: default (none), llama3 llama-v3 llama-bpe falcon3 dbrx smaug-bpe
 * chatglm-bpe, gpt-2 mpt olmo jais phi-2 jina-es jina-de jina-v1-en jina-v2-{es,de,code} gigachat
 * roberta-bpe, falcon, starcoder refact command-r smollm codeshell exaone minerva-7b, deepseek-llm,
 * deepseek-coder, qwen2 deepseek-r1-qwen, gpt-4o (gpt-oss's o200k_harmony: there tiktoken's results,
 * which differ from llama.cpp's on combining marks, see tokenizer_pre.c); any other value is -ENOTSUP.
 *
 * A loaded vocabulary is immutable and owns all its memory (the sl_gguf may be closed after
 * sl_vocab_load); any number of threads may tokenize with it at once.
 *
 * Where llama.cpp would abort or throw on hostile input, sluice does something defined instead:
 * a default special id that does not exist becomes -1 and is then never added; an SPM byte without
 * any byte token becomes the unknown token (or nothing); a UTF-8 lead F4..F7 decoding past
 * U+10FFFF counts as U+FFFD in BPE pre-tokenization; duplicate token texts are a load error.
 */
#ifndef SL_RUNTIME_TOKENIZER_H
#define SL_RUNTIME_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/gguf.h"

typedef struct sl_vocab sl_vocab;

/* Load the vocabulary described by g's tokenizer.* keys, with llama.cpp's defaults (SPM: BOS 1,
 * EOS 2, UNK 0, add BOS, add space prefix; BPE: the flags tied to tokenizer.ggml.pre).  Validates:
 * tokens present, non-empty, unique; scores/types arrays (if present) of the right type and count;
 * merges present for gpt2 (ill-formed merge lines never match, as in llama.cpp); special ids out of
 * range keep the default (llama.cpp's rule) or become -1.  0, or -EINVAL / -ENOTSUP / -ENOMEM with
 * a one-line message in err. */
int  sl_vocab_load(const sl_gguf *g, sl_vocab **out, char *err, size_t errlen);
void sl_vocab_free(sl_vocab *v);

int32_t sl_vocab_n_tokens(const sl_vocab *v);
int32_t sl_vocab_bos(const sl_vocab *v);        /* -1 when none */
int32_t sl_vocab_eos(const sl_vocab *v);        /* -1 when none */
int32_t sl_vocab_eot(const sl_vocab *v);        /* -1 when none */
bool    sl_vocab_is_eog(const sl_vocab *v, int32_t id);   /* end of generation: eos, eot, … */
const char *sl_vocab_family(const sl_vocab *v); /* "llama" (SPM) or "gpt2" (BPE) */
const char *sl_vocab_pre(const sl_vocab *v);    /* pre-tokenizer name ("default" when none) */
size_t  sl_vocab_mem_bytes(const sl_vocab *v);  /* heap held by the vocabulary */

/* Tokenize text[0..len).  add_special: add BOS/EOS as the metadata says (llama.cpp add_special);
 * parse_special: match control/special token texts in the input (USER_DEFINED texts are matched
 * either way, as in llama.cpp).  Writes up to n_max ids to out and
 * returns the total number of ids (may exceed n_max: call again with a larger buffer), or -errno. */
int64_t sl_tokenize(const sl_vocab *v, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t *out, int64_t n_max);

/* Bytes that token `id` stands for when detokenizing (llama_token_to_piece with special=false:
 * control tokens give ""; byte tokens <0xNN> give that byte; SPM '▁' becomes ' ').  Writes up to
 * buflen bytes, returns the piece's length (may exceed buflen), or -EINVAL for a bad id. */
int  sl_token_piece(const sl_vocab *v, int32_t id, char *buf, size_t buflen);
/* The same with llama_token_to_piece's `special` flag: when true, control and unknown tokens give
 * their text (e.g. "<s>") instead of "". */
int  sl_token_piece_ex(const sl_vocab *v, int32_t id, bool special, char *buf, size_t buflen);

/* The token's text exactly as stored in the vocabulary (for display and tests). */
const char *sl_vocab_text(const sl_vocab *v, int32_t id, size_t *len);

/* Detokenize a whole sequence as llama.cpp's llama_detokenize(remove_special=false,
 * unparse_special=false) does: pieces concatenated; when the vocabulary adds a space prefix (SPM)
 * one leading space of the FIRST piece is dropped (if the first token is BOS its empty piece uses
 * up that rule, as in llama.cpp); BPE vocabularies with clean_up_tokenization_spaces then get
 * llama.cpp's three clean-up passes (" ." -> ".", " 's" -> "'s", ...).  Writes up to buflen bytes
 * and returns the full length (may exceed buflen: call again with a larger buffer), or -EINVAL
 * (bad id or arguments) / -ENOMEM. */
int64_t sl_detokenize(const sl_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t buflen);

/* Streaming output: feed pieces, get back only complete UTF-8 (never a broken character). */
typedef struct sl_utf8_stream { unsigned char pend[8]; int npend; } sl_utf8_stream;
/* Appends piece bytes; writes the bytes that now form complete characters to out and returns how
 * many.  out must hold len + 8 bytes.  Invalid sequences are passed through byte by byte. */
size_t sl_utf8_stream_feed(sl_utf8_stream *s, const char *piece, size_t len, char *out);
/* Flush what is left at the end of generation. */
size_t sl_utf8_stream_flush(sl_utf8_stream *s, char *out);

#endif
