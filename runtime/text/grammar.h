/* runtime/text/grammar.h — constrained decoding: JSON, and a JSON Schema subset, compiled to an
 * automaton over bytes; per decoding step, the vocabulary's tokens the automaton accepts.
 *
 * A grammar is a literal prefix, one JSON value, a literal suffix.  The value is any JSON object
 * (schema NULL: OpenAI's json_object) or one the schema describes.  Supported keywords: type
 * (object, array, string, number, integer, boolean, null, or an array of them), properties,
 * required, additionalProperties (false; absent counts as false: see below; true or a schema only
 * for an object without properties: a map), items, minItems, maxItems, enum, const, minLength,
 * maxLength, minimum, maximum (integer and number), anyOf, $ref to #/$defs/NAME or
 * #/definitions/NAME, $defs/definitions themselves, and the annotations title, description,
 * $schema, $id, $comment, default, examples, strict, format-free metadata.  Any other keyword is
 * refused: "unsupported JSON Schema keyword 'pattern' (supported: ...)".
 *
 * What the automaton emits — always valid against the schema, a subset of what it allows:
 *   - properties in the schema's order, each optional one either present or skipped, no keys the
 *     schema does not name (additionalProperties absent means none, as llama.cpp's converter does);
 *   - whitespace only between structural characters ({ } [ ] : ,), at most SL_GRAMMAR_WS_MAX bytes
 *     of ' ', '\n', '\t' per gap, none before or after the value;
 *   - integers of at most SL_GRAMMAR_INT_DIGITS digits (no leading zeros, no "-0"); numbers with
 *     that many integer digits, at most SL_GRAMMAR_FRAC_DIGITS fraction digits and
 *     SL_GRAMMAR_EXP_DIGITS exponent digits (no exponent when the number has minimum/maximum);
 *   - strings of valid UTF-8 (no overlongs, no surrogates) and JSON escapes; \u escapes pair their
 *     surrogates and \u0000 is never emitted; lengths count code points (as JSON Schema does);
 *   - enum/const values as compact JSON (jansson-style: no spaces);
 *   - containers nested at most SL_GRAMMAR_MAX_DEPTH deep.
 * So every answer ends once its strings and arrays do (maxLength, maxItems bound those:
 * sl_grammar_max_bytes says when the whole answer is bounded).
 *
 * The prefix and suffix are literal bytes (e.g. "<tool_call>\n" ... "\n</tool_call>").  A token
 * whose text is a special (control) token's text is allowed only where that exact text is the next
 * part of a literal; end-of-generation tokens are allowed only once the suffix is complete, and
 * then nothing else is.
 *
 * Pure text layer: no I/O; a compiled grammar is immutable (shareable between threads), a state
 * belongs to one sequence.
 */
#ifndef SL_RUNTIME_GRAMMAR_H
#define SL_RUNTIME_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/text/tokenizer.h"

#define SL_GRAMMAR_WS_MAX 8        /* whitespace bytes per gap between structural characters */
#define SL_GRAMMAR_INT_DIGITS 16   /* integer digits of an integer or number */
#define SL_GRAMMAR_FRAC_DIGITS 16  /* fraction digits of a number */
#define SL_GRAMMAR_EXP_DIGITS 3    /* exponent digits of a number */
#define SL_GRAMMAR_MAX_DEPTH 32    /* nested containers (and $ref recursion) */
#define SL_GRAMMAR_MAX_LITERAL 4096 /* bytes of the prefix, the suffix, an enum value, a property name */

typedef struct sl_grammar sl_grammar;   /* compiled: immutable */
typedef struct sl_gstate sl_gstate;     /* where one sequence is in a grammar */
typedef struct sl_gvocab sl_gvocab;     /* a vocabulary's token bytes as a trie (once per model) */

/* Compile schema_json[0..len) (NULL: any JSON object) between the literals prefix and suffix (NULL:
 * ""), both NUL-terminated.  0 with *out set, or -EINVAL with one line in err (invalid JSON, a schema
 * that is not an object or boolean, an unsupported keyword: "unsupported JSON Schema keyword 'X'
 * (supported: ...)", a bad value: "'minItems' must be a non-negative integer", an unresolvable
 * $ref, a schema no value satisfies), or -ENOMEM. */
int  sl_grammar_compile(const char *schema_json, size_t len, const char *prefix, const char *suffix,
                        sl_grammar **out, char *err, size_t errlen);
void sl_grammar_free(sl_grammar *g);
/* The most bytes a complete text (prefix + value + suffix) can have, or -1 when unbounded (a
 * string without maxLength, an array without maxItems, recursion, a map). */
int64_t sl_grammar_max_bytes(const sl_grammar *g);

/* A state at the start of g (g must outlive it).  NULL on out of memory. */
sl_gstate *sl_gstate_new(const sl_grammar *g);
void sl_gstate_free(sl_gstate *s);
/* Back to the start. */
void sl_gstate_reset(sl_gstate *s);
/* Copy src's position into dst (states of the same grammar). */
void sl_gstate_copy(sl_gstate *dst, const sl_gstate *src);
/* Advance over bytes p[0..n): true when every byte is allowed (s advanced); false leaves s as it was. */
bool sl_gstate_feed(sl_gstate *s, const char *p, size_t n);
/* The text so far is a complete prefix + value + suffix (end of generation may come now). */
bool sl_gstate_complete(const sl_gstate *s);
/* The whole of text[0..n) is a complete text of g (tests, validation). */
bool sl_grammar_accepts(const sl_grammar *g, const char *text, size_t n);

/* The trie of every token's bytes (sl_token_piece), the special tokens' texts and the
 * end-of-generation ids.  0 or -ENOMEM. */
int  sl_gvocab_build(const sl_vocab *v, sl_gvocab **out);
void sl_gvocab_free(sl_gvocab *gv);
int32_t sl_gvocab_n_tokens(const sl_gvocab *gv);
/* Heap the trie and the token table hold (for the memory a model's grammars cost). */
size_t  sl_gvocab_mem_bytes(const sl_gvocab *gv);
/* allowed[id] = 1 for every token that may come next from s, else 0 (n_tokens bytes).  Returns
 * how many are allowed (0: none: the vocabulary cannot spell what must come next). */
int  sl_grammar_mask(const sl_gvocab *gv, const sl_gstate *s, uint8_t *allowed);
/* Advance s over token id (its bytes; an end-of-generation token where s is complete: no change).
 * 0, or -EINVAL when the token is not allowed (s unchanged). */
int  sl_gstate_accept_token(sl_gstate *s, const sl_gvocab *gv, int32_t id);

#endif
