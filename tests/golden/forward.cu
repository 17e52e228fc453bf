/* isokernel CUDA kernels isk_forward_r0 -- generated, do not edit.
 * Graph forward; compile with NVRTC --std=c++17 --ftz=false --prec-div=true --prec-sqrt=true --fmad=false
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

extern "C" __global__ void isk_forward_r0(const float *restrict in0, const float *restrict in1, const float *restrict in2, float *restrict out0, float *restrict out1, const int64_t rows)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += step)
        isk_forward_r0_point(i, in0, in1, in2, out0, out1);
}
