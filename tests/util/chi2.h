/* tests/util/chi2.h — the two-sample chi-square test the speculative-sampling tests use. */
#ifndef SL_TESTS_CHI2_H
#define SL_TESTS_CHI2_H

#include <math.h>

/* Two-sample chi-square statistic over ids (cells with fewer than 10 in both samples pooled) and
 * its degrees of freedom. */
static inline double chi2_two_sample(const int *a, const int *b, int n, int *df)
{
    double chi = 0, pa = 0, pb = 0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] + b[i] < 10) { pa += a[i]; pb += b[i]; continue; }
        chi += (double)(a[i] - b[i]) * (a[i] - b[i]) / (a[i] + b[i]);
        cells++;
    }
    if (pa + pb > 0) { chi += (pa - pb) * (pa - pb) / (pa + pb); cells++; }
    *df = cells - 1;
    return chi;
}

/* chi-square quantile at p = 0.999 (Wilson-Hilferty; z = 3.09). */
static inline double chi2_crit(int df)
{
    double h = 2.0 / (9.0 * df);
    return df * pow(1 - h + 3.09 * sqrt(h), 3);
}

#endif
