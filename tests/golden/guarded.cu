/* isokernel CUDA kernels isk_guarded_r0 -- generated, do not edit.
 * Graph guarded; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
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

ISK_INLINE int32_t isk_f64_to_i32(double x)
{
    const int32_t ok = ((double)x >= -2147483648.0) & ((double)x < 2147483648.0);
    const int32_t r = (int32_t)(ok ? x : (double)0);
    const int32_t m = -ok;  /* all ones when in range: a blend, not a branch */
    return (r & m) | ((int32_t)INT32_MIN & ~m);
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
    const uint8_t v4 = (uint8_t)(v0 > 0x0.0p+0);  // %4 gt @ models.py:15
    const double v5 = sqrt(v0);  // %5 sqrt @ models.py:15
    const double v6 = (-v0);  // %6 neg @ models.py:15
    const double v7 = isk_select_f64(v4, v5, v6);  // %7 select @ models.py:15
    const double v8 = isk_select_f64((uint8_t)((v7 > v1) | (v7 != v7)), v7, v1);  // %8 max @ models.py:16
    const int32_t v9 = isk_f64_to_i32(v8);  // %9 cast @ models.py:16
    const double v10 = isk_select_f64((uint8_t)((v0 < v1) | (v0 != v0)), v0, v1);  // %10 min @ models.py:16
    const uint8_t v13 = (uint8_t)(v10 >= 0x1.8p+0);  // %13 ge @ models.py:16
    out0[i] = v9;
    out1[i] = v13;
}

extern "C" __global__ void isk_guarded_r0(const double *restrict in0, const double *restrict in1, int32_t *restrict out0, uint8_t *restrict out1, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_guarded_r0_point(i, in0, in1, out0, out1);
}
