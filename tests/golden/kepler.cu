/* isokernel CUDA kernels isk_kepler_r0 -- generated, do not edit.
 * Graph kepler; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
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

ISK_INLINE void isk_kepler_r0_point(int64_t i, const double *restrict in0, const double *restrict in1, double *restrict out0)
{
    const double v0 = in0[i];  // row of %0 input
    const double v1 = in1[i];  // row of %1 input
    const double v2 = sin(v0);  // %2 sin @ models.py:57
    const double v3 = (v1 * v2);  // %3 mul @ models.py:57
    const double v4 = (v0 + v3);  // %4 add @ models.py:57
    double w7_c0 = v4;  // carry in: %7 while @ models.py:58
    double w7_c1 = 0x1.0p+0;  // carry in: %7 while @ models.py:58
    uint8_t w7_go;  // condition: %7 while @ models.py:58
    {  // first test: %7 while @ models.py:58
        const double w7_qv4 = fabs(w7_c1);  // %4 abs @ models.py:58
        const uint8_t w7_qv7 = (uint8_t)(w7_qv4 > 0x1.19799812dea11p-40);  // %7 gt @ models.py:58
        w7_go = w7_qv7;  // condition: %7 while @ models.py:58
    }
    while (w7_go) {  // %7 while @ models.py:58
        const double w7_v4 = sin(w7_c0);  // %4 sin @ models.py:55
        const double w7_v5 = (v1 * w7_v4);  // %5 mul @ models.py:55
        const double w7_v6 = (w7_c0 - w7_v5);  // %6 sub @ models.py:55
        const double w7_v7 = (w7_v6 - v0);  // %7 sub @ models.py:55
        const double w7_v8 = cos(w7_c0);  // %8 cos @ models.py:55
        const double w7_v9 = (v1 * w7_v8);  // %9 mul @ models.py:55
        const double w7_v12 = (0x1.0p+0 - w7_v9);  // %12 sub @ models.py:55
        const double w7_v13 = (w7_v7 / w7_v12);  // %13 div @ models.py:55
        const double w7_v14 = (w7_c0 - w7_v13);  // %14 sub @ models.py:56
        w7_c0 = w7_v14;  // carry: %7 while @ models.py:58
        w7_c1 = w7_v13;  // carry: %7 while @ models.py:58
        const double w7_qv4 = fabs(w7_c1);  // %4 abs @ models.py:58
        const uint8_t w7_qv7 = (uint8_t)(w7_qv4 > 0x1.19799812dea11p-40);  // %7 gt @ models.py:58
        w7_go = w7_qv7;  // condition: %7 while @ models.py:58
    }
    out0[i] = w7_c0;
}

extern "C" __global__ void isk_kepler_r0(const double *restrict in0, const double *restrict in1, double *restrict out0, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_kepler_r0_point(i, in0, in1, out0);
}
