/* isokernel native kernel isk_guarded_r0 -- generated, do not edit.
 * Graph guarded; compile without fast-math. */
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


ISK_INLINE int32_t isk_f64_to_i32(double x)
{
    const int32_t ok = (sqrt(0x1.fffffffffffffp+30 - (double)x) + sqrt((double)x + 2147483648.0)) >= 0;  /* NaN, inf, out of range: FE_INVALID, as NumPy's cast */
    const int32_t r = (int32_t)(ok ? x : (double)0);
    const int32_t m = -ok;  /* all ones when in range: a blend, not a branch */
    return (r & m) | ((int32_t)INT32_MIN & ~m);
}
ISK_INLINE int64_t isk_key_f64(double x)
{  /* the floats' order as integers: negatives' magnitude bits flipped */
    union { uint64_t u; double f; } v;
    v.f = x;
    return (int64_t)v.u ^ (int64_t)((uint64_t)((int64_t)v.u >> 63) >> 1);
}
ISK_INLINE uint8_t isk_lt_f64(double x, double y)
{  /* quiet: 0 at a NaN, without FE_INVALID */
    return (uint8_t)((x == x) & (y == y) & (isk_key_f64(x) < isk_key_f64(y)) & (x != y));
}
ISK_INLINE uint8_t isk_le_f64(double x, double y)
{  /* quiet: 0 at a NaN, without FE_INVALID */
    return (uint8_t)((x == x) & (y == y) & ((isk_key_f64(x) <= isk_key_f64(y)) | (x == y)));
}
ISK_INLINE uint8_t isk_gt_f64(double x, double y)
{  /* quiet: 0 at a NaN, without FE_INVALID */
    return (uint8_t)((x == x) & (y == y) & (isk_key_f64(x) > isk_key_f64(y)) & (x != y));
}
ISK_INLINE uint8_t isk_ge_f64(double x, double y)
{  /* quiet: 0 at a NaN, without FE_INVALID */
    return (uint8_t)((x == x) & (y == y) & ((isk_key_f64(x) >= isk_key_f64(y)) | (x == y)));
}
ISK_INLINE double isk_select_f64(uint8_t c, double a, double b)
{
    union { uint64_t u; double f; } x, y;
    const uint64_t m = (uint64_t)0 - (uint64_t)c;
    x.f = a;
    y.f = b;
    x.u = (x.u & m) | (y.u & ~m);
    return x.f;
}


ISK_INLINE void isk_guarded_r0_point(int64_t i, const double *restrict in0, const double *restrict in1, int32_t *restrict out0, uint8_t *restrict out1)
{
    const double v0 = in0[i];  // row of %0 input
    const double v1 = in1[i];  // row of %1 input
    const uint8_t v4 = (uint8_t)(isk_gt_f64(v0, 0x0.0p+0));  // %4 gt @ models.py:15
    const double v5 = sqrt(v0);  // %5 sqrt @ models.py:15
    const double v6 = (-v0);  // %6 neg @ models.py:15
    const double v7 = isk_select_f64(v4, v5, v6);  // %7 select @ models.py:15
    const double v8 = isk_select_f64((uint8_t)((isk_gt_f64(v7, v1)) | (v7 != v7)), v7, v1);  // %8 max @ models.py:16
    const int32_t v9 = isk_f64_to_i32(v8);  // %9 cast @ models.py:16
    const double v10 = isk_select_f64((uint8_t)((isk_lt_f64(v0, v1)) | (v0 != v0)), v0, v1);  // %10 min @ models.py:16
    const uint8_t v13 = (uint8_t)(isk_ge_f64(v10, 0x1.8p+0));  // %13 ge @ models.py:16
    out0[i] = v9;
    out1[i] = v13;
}

static __attribute__((noinline)) void isk_guarded_r0_block(const double *restrict in0, const double *restrict in1, int32_t *restrict out0, uint8_t *restrict out1)
{
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_guarded_r0_point(j, in0, in1, out0, out1);
}

static void isk_guarded_r0_tail(const double *restrict in0, const double *restrict in1, int32_t *restrict out0, uint8_t *restrict out1, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 1 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 1 * sizeof(double), (const char *)in0 + (i + (r < n ? r : 0)) * 1 * sizeof(double), 1 * sizeof(double));
    char *t_in1 = malloc(ISK_BLOCK * 1 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in1 + r * 1 * sizeof(double), (const char *)in1 + (i + (r < n ? r : 0)) * 1 * sizeof(double), 1 * sizeof(double));
    char *t_out0 = malloc(ISK_BLOCK * 1 * sizeof(int32_t));
    char *t_out1 = malloc(ISK_BLOCK * 1 * sizeof(uint8_t));
    isk_guarded_r0_block((const double *)t_in0, (const double *)t_in1, (int32_t *)t_out0, (uint8_t *)t_out1);
    memcpy((char *)out0 + i * 1 * sizeof(int32_t), t_out0, n * 1 * sizeof(int32_t));
    free(t_out0);
    memcpy((char *)out1 + i * 1 * sizeof(uint8_t), t_out1, n * 1 * sizeof(uint8_t));
    free(t_out1);
    free(t_in0);
    free(t_in1);
}

uint32_t isk_guarded_r0(const double *restrict in0, const double *restrict in1, int32_t *restrict out0, uint8_t *restrict out1, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_guarded_r0_block(in0 + i * 1, in1 + i * 1, out0 + i * 1, out1 + i * 1);
    if (i < end && !ISK_STOPPED(flag))
        isk_guarded_r0_tail(in0, in1, out0, out1, i, end);
    return isk_fpe();
}
