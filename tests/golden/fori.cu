/* isokernel CUDA kernels isk_fori_r0 -- generated, do not edit.
 * Graph fori; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
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

ISK_INLINE void isk_fori_r0_point(int64_t i, const double *restrict in0, double *restrict out0)
{
    const double v0 = in0[i];  // row of %0 input
    int64_t s2_c0 = INT64_C(0);  // carry in: %2 scan @ models.py:65
    double s2_c1 = v0;  // carry in: %2 scan @ models.py:65
    for (int64_t s2_t = 0; s2_t < 10; s2_t++) {  // %2 scan @ models.py:65
        const int64_t s2_v3 = (int64_t)((uint64_t)s2_c0 + (uint64_t)INT64_C(1));  // %3 add @ models.py:65
        const double s2_v6 = (s2_c1 * 0x1.0p-1);  // %6 mul @ models.py:65
        const double s2_v7 = (double)s2_c0;  // %7 cast @ models.py:65
        const double s2_v9 = (s2_v6 + s2_v7);  // %9 add @ models.py:65
        s2_c0 = s2_v3;  // carry: %2 scan @ models.py:65
        s2_c1 = s2_v9;  // carry: %2 scan @ models.py:65
    }
    out0[i] = s2_c1;
}

extern "C" __global__ void isk_fori_r0(const double *restrict in0, double *restrict out0, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_fori_r0_point(i, in0, out0);
}
