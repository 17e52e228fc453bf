/* isokernel CUDA kernels isk_layout_r0 -- generated, do not edit.
 * Graph layout; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
 * (no fast-math: IEEE division and square root, subnormals preserved). */
#define ISK_INLINE static __device__ __forceinline__
#define restrict __restrict__
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned char uint8_t;
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_C(c) c##LL
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL

ISK_INLINE float isk_bits_f32(uint32_t bits)
{
    union { uint32_t u; float f; } v;
    v.u = bits;
    return v.f;
}

ISK_INLINE void isk_layout_r0_point(int64_t i, const float *restrict in0, float *restrict out0)
{
    const float v0_0 = in0[i * 6 + 0];  // row of %0 input
    const float v0_1 = in0[i * 6 + 1];  // row of %0 input
    const float v0_2 = in0[i * 6 + 2];  // row of %0 input
    const float v0_3 = in0[i * 6 + 3];  // row of %0 input
    const float v0_4 = in0[i * 6 + 4];  // row of %0 input
    const float v0_5 = in0[i * 6 + 5];  // row of %0 input
    const float v6_0 = (v0_3 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_1 = (v0_0 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_2 = (v0_4 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_3 = (v0_1 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_4 = (v0_5 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    const float v6_5 = (v0_2 * isk_bits_f32(0x7f800000u));  // %6 mul @ models.py:33
    out0[i * 9 + 0] = v0_3;
    out0[i * 9 + 1] = v6_0;
    out0[i * 9 + 2] = v6_1;
    out0[i * 9 + 3] = v0_4;
    out0[i * 9 + 4] = v6_2;
    out0[i * 9 + 5] = v6_3;
    out0[i * 9 + 6] = v0_5;
    out0[i * 9 + 7] = v6_4;
    out0[i * 9 + 8] = v6_5;
}

extern "C" __global__ void isk_layout_r0(const float *restrict in0, float *restrict out0, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_layout_r0_point(i, in0, out0);
}
