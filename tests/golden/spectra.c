/* isokernel native kernel isk_spectra_r0 -- generated, do not edit.
 * Graph spectra; compile without fast-math. */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define ISK_INLINE static inline __attribute__((always_inline))
#define ISK_BLOCK 256

/* the floating-point flags raised since they were cleared, as NumPy's NPY_FPE_* bits */
static uint32_t isk_fpe(void)
{
    const int s = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    return ((s & FE_DIVBYZERO) ? 1u : 0u) | ((s & FE_OVERFLOW) ? 2u : 0u)
         | ((s & FE_UNDERFLOW) ? 4u : 0u) | ((s & FE_INVALID) ? 8u : 0u);
}

/* the call's stop flag (Ctrl-C, or a failure in another task): this thread's kernel sets it
 * on entry; loops read it every ISK_POLL iterations and end once it is set (once seen, the
 * counter stays one short of the next read, so every enclosing loop reads it at its next
 * iteration: nested loops end at once, not after up to ISK_POLL more inner steps each) */
static const int32_t isk_never_stopped;
static __thread const int32_t *isk_stop_flag = &isk_never_stopped;
#define ISK_POLL 1024
#define ISK_STOPPED(flag) __builtin_expect(__atomic_load_n((flag), __ATOMIC_RELAXED) != 0, 0)
#define ISK_POLLED(n) \
    __builtin_expect(((++(n)) & (ISK_POLL - 1)) == 0 && ISK_STOPPED(isk_stop_flag) \
                     && ((n) = ISK_POLL - 1, 1), 0)



/* index map: 100 elements */
static const int32_t isk_idx_8f99019120a7[100] = {
    0, 10, 20, 30, 40, 50, 60, 70,
    80, 90, 1, 11, 21, 31, 41, 51,
    61, 71, 81, 91, 2, 12, 22, 32,
    42, 52, 62, 72, 82, 92, 3, 13,
    23, 33, 43, 53, 63, 73, 83, 93,
    4, 14, 24, 34, 44, 54, 64, 74,
    84, 94, 5, 15, 25, 35, 45, 55,
    65, 75, 85, 95, 6, 16, 26, 36,
    46, 56, 66, 76, 86, 96, 7, 17,
    27, 37, 47, 57, 67, 77, 87, 97,
    8, 18, 28, 38, 48, 58, 68, 78,
    88, 98, 9, 19, 29, 39, 49, 59,
    69, 79, 89, 99
};

ISK_INLINE void isk_spectra_r0_point(int64_t i, const double *restrict in0, const double *restrict w0, double *restrict out0, double *restrict out1, double *restrict out2, double *restrict out3)
{
    double v6[100];  // %6 add @ models.py:41
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: %3 mul @ models.py:41 .. %6 add @ models.py:41
        const double v3_k = (in0[i * 100 + k] * w0[k]);  // %3 mul @ models.py:41
        const double v6_k = (v3_k + 0x1.0p-1);  // %6 add @ models.py:41
        v6[k] = v6_k;
    }
    double v9[100];  // %9 concatenate @ models.py:42
    for (int64_t k = 0; k < 40; k++) {  // for k < 40: %9 concatenate @ models.py:42, operand 0
        v9[k] = v6[k];
    }
    for (int64_t k = 0; k < 60; k++) {  // for k < 60: %9 concatenate @ models.py:42, operand 1
        v9[k + 40] = in0[i * 100 + k + 40];
    }
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: %12 sqrt @ models.py:44 .. %14 sub @ models.py:44
        const double v12_k = sqrt(v6[k]);  // %12 sqrt @ models.py:44
        const double v14_k = (v12_k - v6[99 - k]);  // %14 sub @ models.py:44
        out2[i * 100 + k] = v14_k;
    }
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: out0 = %9 concatenate @ models.py:42
        out0[i * 100 + k] = v9[k];
    }
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: out1 = %11 transpose @ models.py:43
        out1[i * 100 + k] = v6[isk_idx_8f99019120a7[k]];
    }
    out3[i * 2 + 0] = v6[0];
    out3[i * 2 + 1] = v6[1];
}

static __attribute__((noinline)) void isk_spectra_r0_block(const double *restrict in0, const double *restrict w0, double *restrict out0, double *restrict out1, double *restrict out2, double *restrict out3)
{
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_spectra_r0_point(j, in0, w0, out0, out1, out2, out3);
}

static void isk_spectra_r0_tail(const double *restrict in0, const double *restrict w0, double *restrict out0, double *restrict out1, double *restrict out2, double *restrict out3, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 100 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 100 * sizeof(double), (const char *)in0 + (i + (r < n ? r : 0)) * 100 * sizeof(double), 100 * sizeof(double));
    char *t_out0 = malloc(ISK_BLOCK * 100 * sizeof(double));
    char *t_out1 = malloc(ISK_BLOCK * 100 * sizeof(double));
    char *t_out2 = malloc(ISK_BLOCK * 100 * sizeof(double));
    char *t_out3 = malloc(ISK_BLOCK * 2 * sizeof(double));
    isk_spectra_r0_block((const double *)t_in0, w0, (double *)t_out0, (double *)t_out1, (double *)t_out2, (double *)t_out3);
    memcpy((char *)out0 + i * 100 * sizeof(double), t_out0, n * 100 * sizeof(double));
    free(t_out0);
    memcpy((char *)out1 + i * 100 * sizeof(double), t_out1, n * 100 * sizeof(double));
    free(t_out1);
    memcpy((char *)out2 + i * 100 * sizeof(double), t_out2, n * 100 * sizeof(double));
    free(t_out2);
    memcpy((char *)out3 + i * 2 * sizeof(double), t_out3, n * 2 * sizeof(double));
    free(t_out3);
    free(t_in0);
}

uint32_t isk_spectra_r0(const double *restrict in0, const double *restrict w0, double *restrict out0, double *restrict out1, double *restrict out2, double *restrict out3, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_spectra_r0_block(in0 + i * 100, w0, out0 + i * 100, out1 + i * 100, out2 + i * 100, out3 + i * 2);
    if (i < end && !ISK_STOPPED(flag))
        isk_spectra_r0_tail(in0, w0, out0, out1, out2, out3, i, end);
    return isk_fpe();
}
