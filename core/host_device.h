// ST_HD marks math that compiles for both the CPU and the CUDA backend, so the
// CPU tests exercise exactly the formula the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define ST_HD __host__ __device__ __forceinline__
#else
#define ST_HD inline
#endif
