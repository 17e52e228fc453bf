/* isokernel CUDA kernels isk_integer_bins_r0 -- generated, do not edit.
 * Graph integer_bins; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
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

ISK_INLINE int64_t isk_floordiv_i64(int64_t a, int64_t b)
{  /* NumPy: x // 0 == 0, MIN // -1 wraps to MIN, rounds toward -inf */
    if (b == 0) return 0;
    if (b == -1) return (int64_t)((uint64_t)0 - (uint64_t)a);
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
ISK_INLINE int64_t isk_rem_i64(int64_t a, int64_t b)
{  /* NumPy: x % 0 == 0; the result takes the divisor's sign */
    if (b == 0 || b == -1) return 0;
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

extern "C" __global__ void isk_integer_bins_r0(const int64_t *restrict in0, const int64_t *restrict in1, int64_t *restrict out0, int64_t *restrict out1, int64_t *restrict out2, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_integer_bins_r0_point(i, in0, in1, out0, out1, out2);
}
