/* runtime/text/grammar_internal.h — what the JSON reader (json_value.c), the schema compiler
 * (json_schema.c), the byte automaton (json_grammar.c) and the vocabulary mask (grammar_vocab.c)
 * share.  See grammar.h for what the grammar accepts. */
#ifndef SL_RUNTIME_GRAMMAR_INTERNAL_H
#define SL_RUNTIME_GRAMMAR_INTERNAL_H

#include "runtime/text/grammar.h"

/* ---- a parsed JSON document (json_value.c) ---- */
enum jv_kind { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };
typedef struct jv {
    int kind;
    bool b;
    double num;
    char *str;                  /* JV_STR: the decoded bytes (NUL-terminated; may hold NUL) */
    size_t len;                 /* JV_STR: bytes; */
    const char *raw;            /* scalars: the source text (a number's digits, a string's quotes and escapes) */
    size_t raw_len;
    struct jv *items;           /* JV_ARR: values; JV_OBJ: values of keys[i] */
    char **keys;                /* JV_OBJ: decoded keys (NUL-terminated) */
    int n;
} jv;
/* Parse text[0..len) (one JSON value, whitespace around it).  The jv's raw pointers point into
 * text, which must outlive it.  0, or -EINVAL with "invalid JSON at byte N: ..." in err, -ENOMEM. */
int  jv_parse(const char *text, size_t len, jv **out, char *err, size_t errlen);
void jv_free(jv *v);
/* Object member by key, or NULL. */
const jv *jv_get(const jv *o, const char *key);
/* Compact JSON text of v (scalars as their source text) into a malloc'd string; NULL on ENOMEM. */
char *jv_dump(const jv *v, size_t *len);
/* s[0..n) as a JSON string, quotes included (malloc'd, NUL-terminated; *len its length if len). */
char *g_json_quote(const char *s, size_t n, size_t *len);

/* ---- the compiled grammar (json_schema.c builds it, json_grammar.c runs it) ---- */
enum gnode_kind { G_OBJECT, G_ARRAY, G_STRING, G_INTEGER, G_NUMBER, G_LITERAL, G_ANYOF };
#define G_MAX_PROPS 64          /* properties per object, values per enum */
#define G_MAX_ALTS 32           /* anyOf alternatives (and type arrays) */

typedef struct gprop {
    char *key;                  /* the key as JSON text, quotes included: "\"name\"" */
    size_t key_len;
    int node;
    bool required;
} gprop;

typedef struct gnode {
    int kind;
    bool sat;                   /* some value satisfies it (g_mark_satisfiable); the automaton never enters one that none does */
    /* G_OBJECT: props in schema order; next_req[i]: the first required index >= i (n_props: none);
     * map >= 0: no props, any string keys, values of node `map` */
    gprop *props;
    int n_props, map;
    int *next_req;
    /* G_ARRAY */
    int item;
    int64_t min_items, max_items;   /* max -1: none */
    /* G_STRING (code points) */
    int64_t min_len, max_len;       /* max -1: none */
    /* G_INTEGER, G_NUMBER: the range of the integer part (a number's fraction is allowed only where
     * [ip, ip + 1) lies in [fmin, fmax]); bounded: no exponent */
    int64_t imin, imax;
    bool bounded;
    double fmin, fmax;
    /* G_LITERAL: compact JSON texts */
    char **lits;
    size_t *lit_lens;
    int n_lits;
    /* G_ANYOF */
    int *alts;
    int n_alts;
} gnode;

struct sl_grammar {
    gnode *nodes;
    int n_nodes, cap_nodes;
    int root;
    char *prefix, *suffix;
    size_t prefix_len, suffix_len;
};

/* Append a node (zeroed but for kind, map/item -1, max -1); its index or -ENOMEM. */
int  g_node_add(sl_grammar *g, int kind);
/* The grammar's "any JSON value" / "any JSON object" nodes (made once per grammar); index or -ENOMEM. */
int  g_any_value(sl_grammar *g);
int  g_any_object(sl_grammar *g);
/* Set every node's sat: the least fixed point (a definition that only refers to itself is never
 * satisfiable).  Returns g->nodes[g->root].sat. */
bool g_mark_satisfiable(sl_grammar *g);
/* Compile schema into g's nodes; sets g->root.  0 or -EINVAL/-ENOMEM with err. */
int  g_compile_schema(sl_grammar *g, const jv *schema, char *err, size_t errlen);

/* ---- the automaton's state (json_grammar.c) ---- */
#define G_MAX_CFG 32            /* live parses at once (anyOf alternatives still possible) */

typedef struct gframe {
    int32_t node;
    uint8_t phase, ws, rem, lo, hi;   /* rem/lo/hi: a UTF-8 character's continuation bytes */
    bool neg;
    int32_t pos;                /* bytes of a key or literal matched; digits; hex digits */
    int32_t sel;                /* the property whose key or value this is */
    int64_t count;              /* array items, string code points, object: the next property index */
    int64_t val;                /* an integer's magnitude, a \u escape's value */
    uint64_t mask;              /* candidate keys / literals */
} gframe;

typedef struct gcfg {
    uint8_t seq;                /* enum g_seq */
    int32_t pos;                /* in the prefix or suffix */
    int32_t depth;
    gframe f[SL_GRAMMAR_MAX_DEPTH];
} gcfg;

struct sl_gstate {
    const sl_grammar *g;
    int n;
    gcfg cfg[G_MAX_CFG];
};

/* s2 = s advanced over byte c (s2 may not be s).  false: no parse takes c (s2 then has n = 0). */
bool g_state_step(const sl_gstate *s, sl_gstate *s2, uint8_t c);
/* Some parse of s sits in the prefix or suffix with lit[0..n) as the literal's next bytes. */
bool g_state_literal_next(const sl_gstate *s, const char *lit, size_t n);
/* Every parse of s is inside a string's plain text (not in an escape or a UTF-8 character): then
 * a token of plain text (no '"', '\\', control bytes; whole UTF-8 characters) of c code points is
 * allowed exactly when c <= *room (the most any parse has left; INT64_MAX: no maxLength). */
bool g_state_string_room(const sl_gstate *s, int64_t *room);
/* Copy only the live part of src (configurations, their frames). */
void g_state_copy(sl_gstate *dst, const sl_gstate *src);

#endif
