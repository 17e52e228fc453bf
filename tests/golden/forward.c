/* isokernel native kernel isk_forward_r0 -- generated, do not edit.
 * Graph forward; compile without fast-math. */
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

__attribute__((simd("notinbranch"))) float expf(float);


ISK_INLINE void isk_forward_r0_point(int64_t i, const float *restrict in0, const float *restrict in1, const float *restrict in2, float *restrict out0, float *restrict out1)
{
    const float v0 = in0[i];  // row of %0 input
    const float v1 = in1[i];  // row of %1 input
    const float v2 = in2[i];  // row of %2 input
    const float v5 = (0x1.15c29p+4f * v0);  // %5 mul @ models.py:10
    const float v8 = (0x1.8cccccp+1f + v5);  // %8 add @ models.py:10
    const float v11 = (0x1.f8f5c2p+5f * v0);  // %11 mul @ models.py:10
    const float v12 = (v11 * v0);  // %12 mul @ models.py:10
    const float v13 = (v8 + v12);  // %13 add @ models.py:10
    const float v16 = (v13 - 0x1.a71796p-2f);  // %16 sub @ models.py:10
    const float v17 = sqrtf(v16);  // %17 sqrt @ models.py:10
    const float v20 = (0x1.8836fap-1f - v17);  // %20 sub @ models.py:10
    const float v21 = (0x1.8836fap-1f + v17);  // %21 add @ models.py:10
    const float v22 = (v20 / v21);  // %22 div @ models.py:10
    const float v23 = (v22 * v22);  // %23 mul @ models.py:10
    const float v24 = (v13 * 0x1.8836fap-1f);  // %24 mul @ models.py:10
    const float v25 = (v24 - v17);  // %25 sub @ models.py:10
    const float v26 = (v24 + v17);  // %26 add @ models.py:10
    const float v27 = (v25 / v26);  // %27 div @ models.py:10
    const float v28 = (v27 * v27);  // %28 mul @ models.py:10
    const float v31 = (-0x1.c28f5cp-4f * v1);  // %31 mul @ models.py:10
    const float v32 = (v31 / 0x1.8836fap-1f);  // %32 div @ models.py:10
    const float v33 = expf(v32);  // %33 exp @ models.py:10
    const float v36 = (v23 * 0x1.da64c8p-1f);  // %36 mul @ models.py:10
    const float v39 = (0x1.0p+0f - v36);  // %39 sub @ models.py:10
    const float v40 = (v2 * v39);  // %40 mul @ models.py:10
    const float v41 = (v40 * v33);  // %41 mul @ models.py:10
    const float v44 = (v2 * 0x1.e66666p-1f);  // %44 mul @ models.py:10
    const float v45 = (0x1.0p+0f - v33);  // %45 sub @ models.py:10
    const float v46 = (v44 * v45);  // %46 mul @ models.py:10
    const float v47 = (v36 * v33);  // %47 mul @ models.py:10
    const float v48 = (0x1.0p+0f + v47);  // %48 add @ models.py:10
    const float v49 = (v46 * v48);  // %49 mul @ models.py:10
    const float v50 = (v41 + v49);  // %50 add @ models.py:10
    const float v51 = (v28 * 0x1.da64c8p-1f);  // %51 mul @ models.py:10
    const float v52 = (0x1.0p+0f - v51);  // %52 sub @ models.py:10
    const float v53 = (v2 * v52);  // %53 mul @ models.py:10
    const float v54 = (v53 * v33);  // %54 mul @ models.py:10
    const float v55 = (v51 * v33);  // %55 mul @ models.py:10
    const float v56 = (0x1.0p+0f + v55);  // %56 add @ models.py:10
    const float v57 = (v46 * v56);  // %57 mul @ models.py:10
    const float v58 = (v54 + v57);  // %58 add @ models.py:10
    out0[i] = v50;
    out1[i] = v58;
}

static __attribute__((noinline)) void isk_forward_r0_block(const float *restrict in0, const float *restrict in1, const float *restrict in2, float *restrict out0, float *restrict out1)
{
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        isk_forward_r0_point(j, in0, in1, in2, out0, out1);
}

static void isk_forward_r0_tail(const float *restrict in0, const float *restrict in1, const float *restrict in2, float *restrict out0, float *restrict out1, int64_t i, int64_t end)
{
    int64_t n = end - i;
    char *t_in0 = malloc(ISK_BLOCK * 1 * sizeof(float));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in0 + r * 1 * sizeof(float), (const char *)in0 + (i + (r < n ? r : 0)) * 1 * sizeof(float), 1 * sizeof(float));
    char *t_in1 = malloc(ISK_BLOCK * 1 * sizeof(float));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in1 + r * 1 * sizeof(float), (const char *)in1 + (i + (r < n ? r : 0)) * 1 * sizeof(float), 1 * sizeof(float));
    char *t_in2 = malloc(ISK_BLOCK * 1 * sizeof(float));
    for (int64_t r = 0; r < ISK_BLOCK; r++)
        memcpy(t_in2 + r * 1 * sizeof(float), (const char *)in2 + (i + (r < n ? r : 0)) * 1 * sizeof(float), 1 * sizeof(float));
    char *t_out0 = malloc(ISK_BLOCK * 1 * sizeof(float));
    char *t_out1 = malloc(ISK_BLOCK * 1 * sizeof(float));
    isk_forward_r0_block((const float *)t_in0, (const float *)t_in1, (const float *)t_in2, (float *)t_out0, (float *)t_out1);
    memcpy((char *)out0 + i * 1 * sizeof(float), t_out0, n * 1 * sizeof(float));
    free(t_out0);
    memcpy((char *)out1 + i * 1 * sizeof(float), t_out1, n * 1 * sizeof(float));
    free(t_out1);
    free(t_in0);
    free(t_in1);
    free(t_in2);
}

uint32_t isk_forward_r0(const float *restrict in0, const float *restrict in1, const float *restrict in2, float *restrict out0, float *restrict out1, int64_t begin, int64_t end, const int32_t *stop)
{
    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    const int32_t *const flag = stop ? stop : &isk_never_stopped;
    isk_stop_flag = flag;
    int64_t i = begin;
    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)
        isk_forward_r0_block(in0 + i * 1, in1 + i * 1, in2 + i * 1, out0 + i * 1, out1 + i * 1);
    if (i < end && !ISK_STOPPED(flag))
        isk_forward_r0_tail(in0, in1, in2, out0, out1, i, end);
    return isk_fpe();
}
