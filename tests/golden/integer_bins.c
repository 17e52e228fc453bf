/* isokernel native kernel isk_integer_bins_r0 -- generated, do not edit.
 * Graph integer_bins; compile without fast-math. */
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


ISK_INLINE int64_t isk_floordiv_i64(int64_t a, int64_t b)
{  /* NumPy: x // 0 == 0, MIN // -1 wraps to MIN, rounds toward -inf */
    if (b == 0) { feraiseexcept(FE_DIVBYZERO); return 0; }
    if (b == -1) { if (a == INT64_MIN) feraiseexcept(FE_OVERFLOW); return (int64_t)((uint64_t)0 - (uint64_t)a); }
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
ISK_INLINE int64_t isk_rem_i64(int64_t a, int64_t b)
{  /* NumPy: x % 0 == 0; the result takes the divisor's sign */
    if (b == 0) { feraiseexcept(FE_DIVBYZERO); return 0; }
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}


ISK_INLINE void isk_integer_bins_r0_point(int64_t i, const int64_t *restrict in0, const int64_t *restrict in1, int64_t *restrict out0, int64_t *restrict out1, int64_t *restrict out2)
{
    const int64_t v0 = in0[i];  // row of %0 input
    const int64_t v1 = in1[i];  // row of %1 input
    const int64_t v2 = isk_floordiv_i64(v0, v1);  // %2 floordiv @ models.py:27
    const int64_t v3 = isk_rem_i64(v0, v1);  // %3 rem @ models.py:27
    const int64_t v4 = (int64_t)((uint64_t)0 - (uint64_t)v0);  // %4 neg @ models.py:27
    const int64_t v7 = (int64_t)((uint64_t)v4 * (uint64_t)INT64_C(3));  // %7 mul @ models.py:27
    out0[i] = v2;
    out1[i] = v3;
    out2[i] = v7;
}

static __attribute__((noinline)) void isk_integer_bins_r0_block(const int64_t *restrict in0, const int64_t *restrict in1, int64_t *restrict out0, int64_t *restrict out1, int64_t *restrict out2)
{
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_integer_bins_r0_point(j, in0, in1, out0, out1, out2);
}

static void isk_integer_bins_r0_tail(const int64_t *restrict in0, const int64_t *restrict in1, int64_t *restrict out0, int64_t *restrict out1, int64_t *restrict out2, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 1 * sizeof(int64_t));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 1 * sizeof(int64_t), (const char *)in0 + (i + (r < n ? r : 0)) * 1 * sizeof(int64_t), 1 * sizeof(int64_t));
    char *t_in1 = malloc(ISK_BLOCK * 1 * sizeof(int64_t));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in1 + r * 1 * sizeof(int64_t), (const char *)in1 + (i + (r < n ? r : 0)) * 1 * sizeof(int64_t), 1 * sizeof(int64_t));
    char *t_out0 = malloc(ISK_BLOCK * 1 * sizeof(int64_t));
    char *t_out1 = malloc(ISK_BLOCK * 1 * sizeof(int64_t));
    char *t_out2 = malloc(ISK_BLOCK * 1 * sizeof(int64_t));
    isk_integer_bins_r0_block((const int64_t *)t_in0, (const int64_t *)t_in1, (int64_t *)t_out0, (int64_t *)t_out1, (int64_t *)t_out2);
    memcpy((char *)out0 + i * 1 * sizeof(int64_t), t_out0, n * 1 * sizeof(int64_t));
    free(t_out0);
    memcpy((char *)out1 + i * 1 * sizeof(int64_t), t_out1, n * 1 * sizeof(int64_t));
    free(t_out1);
    memcpy((char *)out2 + i * 1 * sizeof(int64_t), t_out2, n * 1 * sizeof(int64_t));
    free(t_out2);
    free(t_in0);
    free(t_in1);
}

uint32_t isk_integer_bins_r0(const int64_t *restrict in0, const int64_t *restrict in1, int64_t *restrict out0, int64_t *restrict out1, int64_t *restrict out2, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_integer_bins_r0_block(in0 + i * 1, in1 + i * 1, out0 + i * 1, out1 + i * 1, out2 + i * 1);
    if (i < end && !ISK_STOPPED(flag))
        isk_integer_bins_r0_tail(in0, in1, out0, out1, out2, i, end);
    return isk_fpe();
}
