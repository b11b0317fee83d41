/* runtime/text/json_text.h — reading and re-spacing JSON text without building a tree.
 *
 * The text layer has no JSON library (jansson is serve's), yet chat templates print tool schemas the
 * way Python's json.dumps does and the tool-call parsers must find where a model's JSON ends.  These
 * helpers work on the text itself: a strict scanner (RFC 8259 syntax; nesting bounded), member
 * lookup in an object, string decoding, and re-spacing compact JSON as json.dumps prints it.
 * Pure functions; the only allocation is in the results said to be malloc'd.
 */
#ifndef SL_RUNTIME_JSON_TEXT_H
#define SL_RUNTIME_JSON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

enum { SL_JSON_BAD = -1, SL_JSON_PARTIAL = 0, SL_JSON_OK = 1 };
#define SL_JSON_MAX_DEPTH 64

/* Scan one JSON value at s[0..n) after optional whitespace.  SL_JSON_OK: *end is the offset just
 * past it; SL_JSON_PARTIAL: the text is a valid beginning of a value that n bytes do not finish;
 * SL_JSON_BAD: it cannot be a value (or nests deeper than SL_JSON_MAX_DEPTH). */
int sl_json_scan(const char *s, size_t n, size_t *end);

/* Iterate over the members of the object at obj[0..n) (a whole scanned value): from *pos (0 to
 * start), the next key (raw, quotes removed, escapes kept) and value text.  false at the end or when
 * obj is not an object. */
bool sl_json_next_member(const char *obj, size_t n, size_t *pos, const char **key, size_t *klen, const char **val,
                         size_t *vlen);
/* The value of member `key` (an ASCII key without escapes) of the object obj[0..n), or NULL. */
const char *sl_json_member(const char *obj, size_t n, const char *key, size_t *vlen);
/* The JSON string value v[0..n) decoded to UTF-8 (malloc'd, NUL-terminated; NULL when v is not a
 * string, holds an escaped NUL or an unpaired surrogate, or memory runs out). */
char *sl_json_string(const char *v, size_t n);

/* s as a JSON string, quoted and escaped as json.dumps(s, ensure_ascii=False) writes it ("\"",
 * "\\", \n \r \t \b \f, other control bytes as \u00XX, everything else as is).  malloc'd. */
char *sl_json_quote(const char *s, size_t *outlen);

/* Compact JSON json[0..n) (a whole value, as jansson's JSON_COMPACT writes it) re-spaced as
 * Python's json.dumps(x, ensure_ascii=False) prints it: indent 0 puts ", " and ": " between items,
 * indent k > 0 one item per line indented by k spaces per level, "," and ": ", empty {} and []
 * kept on one line.  Strings are copied as they are.  malloc'd, NULL when out of memory. */
char *sl_json_pyformat(const char *json, size_t n, int indent, size_t *outlen);

#endif
