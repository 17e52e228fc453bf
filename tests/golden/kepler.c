/* isokernel native kernel isk_kepler_r0 -- generated, do not edit.
 * Graph kepler; compile without fast-math. */
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

__attribute__((simd("notinbranch"))) double cos(double);
__attribute__((simd("notinbranch"), const)) double isk_vcos(double) __asm__("cos");
__attribute__((simd("notinbranch"))) double sin(double);
__attribute__((simd("notinbranch"), const)) double isk_vsin(double) __asm__("sin");

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


/* how many rows of the block still run their lane-wise loop */
static inline int64_t isk_running(const uint8_t *restrict go)
{
    int64_t n = 0;
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        n += go[j];
    return n;
}

ISK_INLINE void isk_kepler_r0_s0_point(int64_t i, const double *restrict in0, const double *restrict in1, double *restrict out0, double *restrict out1)
{
    const double v0 = in0[i];  // row of %0 input
    const double v1 = in1[i];  // row of %1 input
    const double v2 = isk_vsin(v0);  // %2 sin @ models.py:57
    const double v3 = (v1 * v2);  // %3 mul @ models.py:57
    const double v4 = (v0 + v3);  // %4 add @ models.py:57
    out0[i] = v4;
    out1[i] = 0x1.0p+0;
}

ISK_INLINE void isk_kepler_r0_s1i_point(int64_t i, const double *restrict in0, const double *restrict in1, const double *restrict in2, const double *restrict in3, double *restrict out0, double *restrict out1, uint8_t *restrict out2)
{
    const double v4 = in0[i];  // row of %4 add @ models.py:57
    const double v6 = in1[i];  // row of %6 broadcast @ models.py:58
    const double v1 = in2[i];  // row of %1 input
    const double v0 = in3[i];  // row of %0 input
    out0[i] = v4;
    out1[i] = v6;
    const double qv4 = fabs(v6);  // %4 abs @ models.py:58
    const uint8_t qv7 = (uint8_t)(isk_gt_f64(qv4, 0x1.19799812dea11p-40));  // %7 gt @ models.py:58
    out2[i] = qv7;  // first test: %7 while @ models.py:58
}

ISK_INLINE void isk_kepler_r0_s1s_point(int64_t i, const double *restrict in0, const double *restrict in1, double *restrict out0, double *restrict out1, uint8_t *restrict out2)
{
    const double v1 = in0[i];  // row of %1 input
    const double v0 = in1[i];  // row of %0 input
    const uint8_t g = out2[i];  // running: %7 while @ models.py:58
    const double a0 = out0[i];  // carry: %7 while @ models.py:58
    const double a1 = out1[i];  // carry: %7 while @ models.py:58
    const double bv4 = isk_vsin(a0);  // %4 sin @ models.py:55
    const double bv5 = (v1 * bv4);  // %5 mul @ models.py:55
    const double bv6 = (a0 - bv5);  // %6 sub @ models.py:55
    const double bv7 = (bv6 - v0);  // %7 sub @ models.py:55
    const double bv8 = isk_vcos(a0);  // %8 cos @ models.py:55
    const double bv9 = (v1 * bv8);  // %9 mul @ models.py:55
    const double bv12 = (0x1.0p+0 - bv9);  // %12 sub @ models.py:55
    const double bv13 = (bv7 / bv12);  // %13 div @ models.py:55
    const double bv14 = (a0 - bv13);  // %14 sub @ models.py:56
    const double n0 = isk_select_f64(g, bv14, a0);  // kept where stopped: %7 while @ models.py:58
    const double n1 = isk_select_f64(g, bv13, a1);  // kept where stopped: %7 while @ models.py:58
    out0[i] = n0;
    out1[i] = n1;
    const double qv4 = fabs(n1);  // %4 abs @ models.py:58
    const uint8_t qv7 = (uint8_t)(isk_gt_f64(qv4, 0x1.19799812dea11p-40));  // %7 gt @ models.py:58
    out2[i] = (uint8_t)(g & qv7);  // test: %7 while @ models.py:58
}

ISK_INLINE void isk_kepler_r0_s2_point(int64_t i, const double *restrict in0, double *restrict out0)
{
    const double v8 = in0[i];  // row of %8 get @ models.py:58
    out0[i] = v8;
}

static __attribute__((noinline)) void isk_kepler_r0_block(const double *restrict in0, const double *restrict in1, double *restrict out0)
{
    double isk_l0[ISK_BLOCK * 1];  /* between the stages */
    double isk_l1[ISK_BLOCK * 1];  /* between the stages */
    double isk_l2[ISK_BLOCK * 1];  /* between the stages */
    double isk_l3[ISK_BLOCK * 1];  /* between the stages */
    uint8_t isk_l4[ISK_BLOCK * 1];  /* between the stages */
    const int32_t *const isk_flag = isk_stop_flag;  /* read once per step */
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_kepler_r0_s0_point(j, in0, in1, isk_l0, isk_l1);
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_kepler_r0_s1i_point(j, isk_l0, isk_l1, in1, in0, isk_l2, isk_l3, isk_l4);
    while (isk_running(isk_l4) > 0) {  /* every row steps; those that stopped keep their carry */
        if (ISK_STOPPED(isk_flag))  /* the call was stopped */
            break;
        for (int64_t j = 0; j < ISK_BLOCK; j++)
            isk_kepler_r0_s1s_point(j, in1, in0, isk_l2, isk_l3, isk_l4);
    }
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_kepler_r0_s2_point(j, isk_l2, out0);
}

static void isk_kepler_r0_tail(const double *restrict in0, const double *restrict in1, double *restrict out0, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 1 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 1 * sizeof(double), (const char *)in0 + (i + (r < n ? r : 0)) * 1 * sizeof(double), 1 * sizeof(double));
    char *t_in1 = malloc(ISK_BLOCK * 1 * sizeof(double));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in1 + r * 1 * sizeof(double), (const char *)in1 + (i + (r < n ? r : 0)) * 1 * sizeof(double), 1 * sizeof(double));
    char *t_out0 = malloc(ISK_BLOCK * 1 * sizeof(double));
    isk_kepler_r0_block((const double *)t_in0, (const double *)t_in1, (double *)t_out0);
    memcpy((char *)out0 + i * 1 * sizeof(double), t_out0, n * 1 * sizeof(double));
    free(t_out0);
    free(t_in0);
    free(t_in1);
}

uint32_t isk_kepler_r0(const double *restrict in0, const double *restrict in1, double *restrict out0, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_kepler_r0_block(in0 + i * 1, in1 + i * 1, out0 + i * 1);
    if (i < end && !ISK_STOPPED(flag))
        isk_kepler_r0_tail(in0, in1, out0, i, end);
    return isk_fpe();
}
