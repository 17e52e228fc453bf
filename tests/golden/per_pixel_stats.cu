/* isokernel CUDA kernels isk_per_pixel_stats_r1 -- generated, do not edit.
 * Graph per_pixel_stats; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
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

// between the kernels, as library operations (not in this file):
//   %5 reduce_max @ models.py:22

ISK_INLINE void isk_per_pixel_stats_r1_point(int64_t i, const double *restrict in0, const double *restrict in1, const double *restrict w0, double *restrict out0)
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

extern "C" __global__ void isk_per_pixel_stats_r1(const double *restrict in0, const double *restrict in1, const double *restrict w0, double *restrict out0, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_per_pixel_stats_r1_point(i, in0, in1, w0, out0);
}
