/* isokernel native kernel isk_per_pixel_stats_r0 -- generated, do not edit.
 * Graph per_pixel_stats; compile without fast-math. */
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



ISK_INLINE void isk_per_pixel_stats_r0_point(int64_t i, const double *restrict in0, const double *restrict in1, const double *restrict w0, double *restrict out0)
{
    const double v0_0 = in0[i * 4 + 0];  // row of %0 input
    const double v0_1 = in0[i * 4 + 1];  // row of %0 input
    const double v0_2 = in0[i * 4 + 2];  // row of %0 input
    const double v0_3 = in0[i * 4 + 3];  // row of %0 input
    const double v5 = in1[i];  // row of %5 reduce_max @ models.py:22
    const double v1_0 = w0[0];  // %1 input
    const double v1_1 = w0[1];  // %1 input
    const double v1_2 = w0[2];  // %1 input
    const double v1_3 = w0[3];  // %1 input
    const double v3_0 = (v0_0 * v1_0);  // %3 mul @ models.py:21
    const double v3_1 = (v0_1 * v1_1);  // %3 mul @ models.py:21
    const double v3_2 = (v0_2 * v1_2);  // %3 mul @ models.py:21
    const double v3_3 = (v0_3 * v1_3);  // %3 mul @ models.py:21
    const double v4 = ((((0x0.0p+0 + v3_0) + v3_1) + v3_2) + v3_3);  // %4 reduce_sum @ models.py:22
    const double v6 = (v4 / v5);  // %6 div @ models.py:22
    out0[i] = v6;
}

static __attribute__((noinline)) void isk_per_pixel_stats_r0_block(const double *restrict in0, const double *restrict in1, const double *restrict w0, double *restrict out0)
{
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_per_pixel_stats_r0_point(j, in0, in1, w0, out0);
}

static void isk_per_pixel_stats_r0_tail(const double *restrict in0, const double *restrict in1, const double *restrict w0, double *restrict out0, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 4 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 4 * sizeof(double), (const char *)in0 + (i + (r < n ? r : 0)) * 4 * sizeof(double), 4 * sizeof(double));
    char *t_in1 = malloc(ISK_BLOCK * 1 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in1 + r * 1 * sizeof(double), (const char *)in1 + (i + (r < n ? r : 0)) * 1 * sizeof(double), 1 * sizeof(double));
    char *t_out0 = malloc(ISK_BLOCK * 1 * sizeof(double));
    isk_per_pixel_stats_r0_block((const double *)t_in0, (const double *)t_in1, w0, (double *)t_out0);
    memcpy((char *)out0 + i * 1 * sizeof(double), t_out0, n * 1 * sizeof(double));
    free(t_out0);
    free(t_in0);
    free(t_in1);
}

uint32_t isk_per_pixel_stats_r0(const double *restrict in0, const double *restrict in1, const double *restrict w0, double *restrict out0, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_per_pixel_stats_r0_block(in0 + i * 4, in1 + i * 1, w0, out0 + i * 1);
    if (i < end && !ISK_STOPPED(flag))
        isk_per_pixel_stats_r0_tail(in0, in1, w0, out0, i, end);
    return isk_fpe();
}
