/* tests/util/budget_identity.h — a model run through the C API under budgets between the least that
 * works and all-resident must give the resident run's logits bit for bit (test_arch, test_moe). */
#ifndef SL_TESTS_BUDGET_IDENTITY_H
#define SL_TESTS_BUDGET_IDENTITY_H

#include "util/golden.h"

/* The prompt of g and 3 teacher-forced steps, resident and then at each budget
 * min + (all_resident - min) * num[i] / den; asserts (Criterion) the plan streams, stays within its
 * budget and gives the resident bits.  `what` prefixes the progress lines. */
void budget_identity_check(const char *path, const golden_run *g, const int *num, int n, int den, const char *what);

#endif
