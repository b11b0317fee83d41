/* loader/ftype.h — llama.cpp file types (general.file_type) and the per-tensor type mix
 * llama-quantize gives each: which ggml type every weight of a model gets in, say, a Q3_K_M file.
 *
 * One table serves the model generator (tools/sluice-gen writes files of these mixes) and the
 * planner (`sluice plan` estimates how a smaller file of the same model would stream), so both
 * agree on what a "Q3_K_M file" holds.  The rules are llama.cpp's llama_tensor_get_type, without an
 * importance matrix except for IQ4_XS (whose files are made with one), with its fallback for rows
 * that do not split into the chosen type's blocks, and its 8-expert rules (Mixtral: attn_k and
 * attn_v Q8_0, attn_output Q5_K).  Not modelled: Falcon, the 70B attn_v bump, and the IQ1/IQ2/IQ3
 * file types (which need an importance matrix).
 */
#ifndef SL_LOADER_FTYPE_H
#define SL_LOADER_FTYPE_H

#include <stdbool.h>
#include <stdint.h>

/* llama.cpp's LLAMA_FTYPE_* numbers (part of the file format: general.file_type). */
enum sl_ftype {
    SL_FTYPE_F16 = 1, SL_FTYPE_Q4_0 = 2, SL_FTYPE_Q8_0 = 7, SL_FTYPE_Q2_K = 10, SL_FTYPE_Q3_K_M = 12,
    SL_FTYPE_Q4_K_M = 15, SL_FTYPE_Q5_K_M = 17, SL_FTYPE_Q6_K = 18, SL_FTYPE_IQ4_XS = 30, SL_FTYPE_MXFP4_MOE = 38
};

/* What a weight is for, as llama.cpp's quantizer tells tensors apart (by name). */
enum sl_tensor_role {
    SL_ROLE_OTHER,        /* 1-D tensors (norms, biases, rope factors): never quantized */
    SL_ROLE_TOKEN_EMBD, SL_ROLE_OUTPUT,
    SL_ROLE_ATTN_Q, SL_ROLE_ATTN_K, SL_ROLE_ATTN_V, SL_ROLE_ATTN_QKV, SL_ROLE_ATTN_OUTPUT,
    SL_ROLE_FFN_GATE, SL_ROLE_FFN_UP, SL_ROLE_FFN_DOWN,  /* a fused gate+up (phi3's ffn_up) is FFN_UP */
    SL_ROLE_EXPS = 0x100  /* or'ed into an FFN role: a 3-D expert stack (ffn_*_exps, ne2 = experts > 1) */
};
/* MoE tensors take the roles llama.cpp's name matching gives them: the expert stacks and the shared
 * expert (ffn_{gate,up,down}_exps / _shexp) are FFN_GATE/UP/DOWN, the routers (ffn_gate_inp,
 * ffn_gate_inp_shexp) are never quantized (OTHER: F32).  The stacks add SL_ROLE_EXPS: MXFP4_MOE
 * (llama-quantize: "MoE tensors -> MXFP4, other tensors -> Q8_0", by ne[2] > 1) tells them apart by
 * shape, not by name; the other mixes ignore the flag. */

/* The facts about a model the mix depends on. */
typedef struct sl_ftype_model {
    int n_layers;
    int n_heads, n_kv_heads;   /* n_gqa = n_heads / n_kv_heads */
    bool tied;                 /* no output.weight: token_embd is the LM head and gets the output's type */
} sl_ftype_model;

/* A file type llama-quantize makes and this table knows: its number, the name llama-quantize takes
 * ("Q3_K_M") and its main type. */
typedef struct sl_ftype_info {
    int ftype;
    const char *name;
    int base_type;        /* enum sl_type */
} sl_ftype_info;

/* The known file types, largest first (F16 ... Q2_K), and their count. */
extern const sl_ftype_info sl_ftypes[];
extern const int sl_n_ftypes;

/* The entry for a general.file_type number, or for a name ("Q3_K_M", case-sensitive); NULL when the
 * table does not know it. */
const sl_ftype_info *sl_ftype_get(int ftype);
const sl_ftype_info *sl_ftype_by_name(const char *name);
/* "F16 Q8_0 ..." — every known name, for "supported: ..." messages (a static string). */
const char *sl_ftype_names(void);

/* The ggml type (enum sl_type) llama-quantize gives a tensor of role `role` in block `layer` (-1
 * outside the blocks) with rows of ne0 elements, in a file of type `ftype` of model m.  1-D tensors
 * (SL_ROLE_OTHER) stay F32.  -1 for an ftype the table does not know. */
int sl_ftype_tensor_type(int ftype, const sl_ftype_model *m, int role, int layer, int64_t ne0);
/* The same for a Mixture-of-Experts model of n_expert routed experts a block (expert_count; 0 or 1:
 * dense, as sl_ftype_tensor_type).  MXFP4_MOE (gpt-oss's file type) is a mix for MoE models only:
 * -1 for a dense model (n_expert 0), where llama-quantize would write Q8_0 throughout. */
int sl_ftype_tensor_type_moe(int ftype, const sl_ftype_model *m, int n_expert, int role, int layer, int64_t ne0);

#endif
