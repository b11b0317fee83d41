/* runtime/engine/arch.c — the table of architecture descriptions (see arch.h). */
#include "runtime/engine/arch.h"

static const sl_arch *const g_archs[] = {
    &sl_arch_llama,
};

#define N_ARCHS (sizeof g_archs / sizeof *g_archs)

/* Contract: the description whose name equals `name` byte for byte, or NULL. */
const sl_arch *sl_arch_find(sl_str name)
{
    for (size_t i = 0; i < N_ARCHS; i++)
        if (sl_str_eq(name, g_archs[i]->name)) return g_archs[i];
    return NULL;
}

/* Contract: a static string naming every description, space-separated, built once. */
const char *sl_arch_supported(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t at = 0;
        for (size_t i = 0; i < N_ARCHS && at + 1 < sizeof buf; i++) {
            const char *s = g_archs[i]->name;
            if (i) buf[at++] = ' ';
            while (*s && at + 1 < sizeof buf) buf[at++] = *s++;
        }
        buf[at] = 0;
    }
    return buf;
}
