/* tests/qemu_testutil.h — what changes when the suite runs under qemu-user (scripts/test-arm64.sh
 * sets SL_TEST_QEMU_USER=1 for the aarch64 run).
 *
 * Two things a user-mode emulator cannot give, and nothing else:
 *   - native speed: emulated compute is 10-50x slower, so the rate floors that catch a unit error
 *     (bytes vs GB) are lowered 100x — still far above what a unit error would give;
 *   - madvise hints: qemu-user answers MADV_RANDOM / MADV_POPULATE_READ with success and does
 *     nothing, so the host kernel reads ahead around mmap faults and the mmap backend's page-cache
 *     bound cannot hold; those checks report "skipped: …" instead.
 */
#ifndef SL_TESTS_QEMU_TESTUTIL_H
#define SL_TESTS_QEMU_TESTUTIL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool tq_under_qemu_user(void)
{
    const char *e = getenv("SL_TEST_QEMU_USER");
    return e && *e && strcmp(e, "0") != 0;
}

/* A rate floor that holds natively, or 1/100 of it under emulation. */
static inline double tq_rate_floor(double native) { return tq_under_qemu_user() ? native / 100 : native; }

#endif
