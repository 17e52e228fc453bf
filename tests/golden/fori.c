/* isokernel native kernel isk_fori_r0 -- generated, do not edit.
 * Graph fori; compile without fast-math. */
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



ISK_INLINE void isk_fori_r0_point(int64_t i, const double *restrict in0, double *restrict out0)
{
    uint32_t isk_polls = 0;  // loop iterations, for ISK_POLLED
    const double v0 = in0[i];  // row of %0 input
    int64_t s2_c0 = INT64_C(0);  // carry in: %2 scan @ models.py:65
    double s2_c1 = v0;  // carry in: %2 scan @ models.py:65
    for (int64_t s2_t = 0; s2_t < 10; s2_t++) {  // %2 scan @ models.py:65
        if (ISK_POLLED(isk_polls))  // the call was stopped
            break;
        const int64_t s2_v3 = (int64_t)((uint64_t)s2_c0 + (uint64_t)INT64_C(1));  // %3 add @ models.py:65
        const double s2_v6 = (s2_c1 * 0x1.0p-1);  // %6 mul @ models.py:65
        const double s2_v7 = (double)s2_c0;  // %7 cast @ models.py:65
        const double s2_v9 = (s2_v6 + s2_v7);  // %9 add @ models.py:65
        s2_c0 = s2_v3;  // carry: %2 scan @ models.py:65
        s2_c1 = s2_v9;  // carry: %2 scan @ models.py:65
    }
    out0[i] = s2_c1;
}

static __attribute__((noinline)) void isk_fori_r0_block(const double *restrict in0, double *restrict out0)
{
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_fori_r0_point(j, in0, out0);
}

static void isk_fori_r0_tail(const double *restrict in0, double *restrict out0, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 1 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 1 * sizeof(double), (const char *)in0 + (i + (r < n ? r : 0)) * 1 * sizeof(double), 1 * sizeof(double));
    char *t_out0 = malloc(ISK_BLOCK * 1 * sizeof(double));
    isk_fori_r0_block((const double *)t_in0, (double *)t_out0);
    memcpy((char *)out0 + i * 1 * sizeof(double), t_out0, n * 1 * sizeof(double));
    free(t_out0);
    free(t_in0);
}

uint32_t isk_fori_r0(const double *restrict in0, double *restrict out0, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_fori_r0_block(in0 + i * 1, out0 + i * 1);
    if (i < end && !ISK_STOPPED(flag))
        isk_fori_r0_tail(in0, out0, i, end);
    return isk_fpe();
}
