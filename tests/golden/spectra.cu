/* isokernel CUDA kernels isk_spectra_r0 -- generated, do not edit.
 * Graph spectra; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
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

/* index map: 100 elements */
static __device__ const int32_t isk_idx_8f99019120a7[100] = {
    0, 10, 20, 30, 40, 50, 60, 70,
    80, 90, 1, 11, 21, 31, 41, 51,
    61, 71, 81, 91, 2, 12, 22, 32,
    42, 52, 62, 72, 82, 92, 3, 13,
    23, 33, 43, 53, 63, 73, 83, 93,
    4, 14, 24, 34, 44, 54, 64, 74,
    84, 94, 5, 15, 25, 35, 45, 55,
    65, 75, 85, 95, 6, 16, 26, 36,
    46, 56, 66, 76, 86, 96, 7, 17,
    27, 37, 47, 57, 67, 77, 87, 97,
    8, 18, 28, 38, 48, 58, 68, 78,
    88, 98, 9, 19, 29, 39, 49, 59,
    69, 79, 89, 99
};
ISK_INLINE void isk_spectra_r0_point(int64_t i, const double *restrict in0, const double *restrict w0, double *restrict out0, double *restrict out1, double *restrict out2, double *restrict out3)
{
    double v6[100];  // %6 add @ models.py:41
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: %3 mul @ models.py:41 .. %6 add @ models.py:41
        const double v3_k = (in0[i * 100 + k] * w0[k]);  // %3 mul @ models.py:41
        const double v6_k = (v3_k + 0x1.0p-1);  // %6 add @ models.py:41
        v6[k] = v6_k;
    }
    double v9[100];  // %9 concatenate @ models.py:42
    for (int64_t k = 0; k < 40; k++) {  // for k < 40: %9 concatenate @ models.py:42, operand 0
        v9[k] = v6[k];
    }
    for (int64_t k = 0; k < 60; k++) {  // for k < 60: %9 concatenate @ models.py:42, operand 1
        v9[k + 40] = in0[i * 100 + k + 40];
    }
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: %12 sqrt @ models.py:44 .. %14 sub @ models.py:44
        const double v12_k = sqrt(v6[k]);  // %12 sqrt @ models.py:44
        const double v14_k = (v12_k - v6[99 - k]);  // %14 sub @ models.py:44
        out2[i * 100 + k] = v14_k;
    }
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: out0 = %9 concatenate @ models.py:42
        out0[i * 100 + k] = v9[k];
    }
    for (int64_t k = 0; k < 100; k++) {  // for k < 100: out1 = %11 transpose @ models.py:43
        out1[i * 100 + k] = v6[isk_idx_8f99019120a7[k]];
    }
    out3[i * 2 + 0] = v6[0];
    out3[i * 2 + 1] = v6[1];
}

extern "C" __global__ void isk_spectra_r0(const double *restrict in0, const double *restrict w0, double *restrict out0, double *restrict out1, double *restrict out2, double *restrict out3, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_spectra_r0_point(i, in0, w0, out0, out1, out2, out3);
}
