/* isokernel native kernel isk_layout_r0 -- generated, do not edit.
 * Graph layout; compile without fast-math. */
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


ISK_INLINE float isk_bits_f32(uint32_t bits)
{
    union { uint32_t u; float f; } v;
    v.u = bits;
    return v.f;
}


ISK_INLINE void isk_layout_r0_point(int64_t i, const float *restrict in0, float *restrict out0)
{
    const float v0_0 = in0[0 * ISK_BLOCK + i];  // row of %0 input
    const float v0_1 = in0[1 * ISK_BLOCK + i];  // row of %0 input
    const float v0_2 = in0[2 * ISK_BLOCK + i];  // row of %0 input
    const float v0_3 = in0[3 * ISK_BLOCK + i];  // row of %0 input
    const float v0_4 = in0[4 * ISK_BLOCK + i];  // row of %0 input
    const float v0_5 = in0[5 * ISK_BLOCK + i];  // row of %0 input
    const float v6_0 = (v0_3 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_1 = (v0_0 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_2 = (v0_4 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_3 = (v0_1 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_4 = (v0_5 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_5 = (v0_2 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    out0[0 * ISK_BLOCK + i] = v0_3;
    out0[1 * ISK_BLOCK + i] = v6_0;
    out0[2 * ISK_BLOCK + i] = v6_1;
    out0[3 * ISK_BLOCK + i] = v0_4;
    out0[4 * ISK_BLOCK + i] = v6_2;
    out0[5 * ISK_BLOCK + i] = v6_3;
    out0[6 * ISK_BLOCK + i] = v0_5;
    out0[7 * ISK_BLOCK + i] = v6_4;
    out0[8 * ISK_BLOCK + i] = v6_5;
}

static __attribute__((noinline)) void isk_layout_r0_block(const float *restrict in0, float *restrict out0)
{
    float isk_c_in0[ISK_BLOCK * 6];  /* in0 by columns: element k of row j at k * ISK_BLOCK + j */
    for (int64_t k = 0; k < 6; k++)  /* in0: rows to columns */
        for (int64_t j = 0; j < ISK_BLOCK; j++)
            isk_c_in0[k * ISK_BLOCK + j] = in0[j * 6 + k];
    float isk_c_out0[ISK_BLOCK * 9];  /* out0 by columns: element k of row j at k * ISK_BLOCK + j */
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_layout_r0_point(j, isk_c_in0, isk_c_out0);
    for (int64_t k = 0; k < 9; k++)  /* out0: rows from columns */
        for (int64_t j = 0; j < ISK_BLOCK; j++)
            out0[j * 9 + k] = isk_c_out0[k * ISK_BLOCK + j];
}

static void isk_layout_r0_tail(const float *restrict in0, float *restrict out0, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 6 * sizeof(float));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 6 * sizeof(float), (const char *)in0 + (i + (r < n ? r : 0)) * 6 * sizeof(float), 6 * sizeof(float));
    char *t_out0 = malloc(ISK_BLOCK * 9 * sizeof(float));
    isk_layout_r0_block((const float *)t_in0, (float *)t_out0);
    memcpy((char *)out0 + i * 9 * sizeof(float), t_out0, n * 9 * sizeof(float));
    free(t_out0);
    free(t_in0);
}

uint32_t isk_layout_r0(const float *restrict in0, float *restrict out0, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_layout_r0_block(in0 + i * 6, out0 + i * 9);
    if (i < end && !ISK_STOPPED(flag))
        isk_layout_r0_tail(in0, out0, i, end);
    return isk_fpe();
}
