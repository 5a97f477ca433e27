// Linear on CUDA with cuBLAS. cuBLAS is column-major; a row-major [r, c] matrix is the
// column-major [c, r] matrix with leading dimension c, so each row-major product
// C = A B is issued as the column-major C^T = B^T A^T (operands swapped).
// --precision bf16|fp16: both operands of each product are rounded to 16-bit copies (the
// CPU path's rounding, core/kernels/half_math.h) and cuBLAS multiplies them with fp32
// accumulation into the fp32 result (cublasGemmEx, CUBLAS_COMPUTE_32F).
#include <algorithm>
#include <climits>

#include "core/cuda/check.h"
#include "core/cuda/half.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "layers/linear.h"

namespace st {

namespace {
// y[i, j] = b[j]: the GEMM then accumulates into it with beta = 1.
__global__ void broadcast_rows_kernel(const float* b, float* y, int64_t rows, int64_t cols) {
  ST_GRID_STRIDE_LOOP(i, rows * cols) y[i] = b[i % cols];
}

// db[j] += sum_i dy[i, j]; one thread per column, adjacent threads read adjacent columns.
__global__ void column_sum_accumulate_kernel(const float* dy, float* db, int64_t rows,
                                             int64_t cols) {
  ST_GRID_STRIDE_LOOP(j, cols) {
    float s = 0.0f;
    for (int64_t i = 0; i < rows; ++i) s += dy[i * cols + j];
    db[j] += s;
  }
}

// C = alpha op(A) op(B) + beta C, column-major, A and B holding a_n and b_n floats; in
// fp32 cublasSgemm, in bf16/fp16 on 16-bit copies of A and B.
struct Gemm {
  cublasHandle_t handle;
  Precision precision;
  Device device;
  void operator()(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                  const float* a, int lda, int64_t a_n, const float* b, int ldb, int64_t b_n,
                  float beta, float* c, int ldc) const {
    if (precision == Precision::F32) {
      ST_CUBLAS_CHECK(cublasSgemm(handle, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc));
      return;
    }
    const Storage ah(static_cast<size_t>(std::max<int64_t>(a_n, 1)) * 2, device);
    const Storage bh(static_cast<size_t>(std::max<int64_t>(b_n, 1)) * 2, device);
    cuda::pack_half(precision, a, 1.0f, static_cast<uint16_t*>(ah.data()), a_n);
    cuda::pack_half(precision, b, 1.0f, static_cast<uint16_t*>(bh.data()), b_n);
    const cudaDataType_t type = precision == Precision::BF16 ? CUDA_R_16BF : CUDA_R_16F;
    ST_CUBLAS_CHECK(cublasGemmEx(handle, ta, tb, m, n, k, &alpha, ah.data(), type, lda, bh.data(),
                                 type, ldb, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
  }
};

int blas_dim(const Layer& layer, int64_t d) {
  ST_CHECK(d <= INT_MAX, layer.describe(), ": extent ", d, " exceeds cuBLAS's int range");
  return static_cast<int>(d);
}
}  // namespace

Tensor Linear::forward_cuda(const Tensor& x) {
  check_input(x);
  const Device device = x.device();
  cuda::expect_on(describe(), "input", x, device);
  cuda::expect_on(describe(), "weight", weight_->value, device);
  if (bias_) cuda::expect_on(describe(), "bias", bias_->value, device);
  x_ = x;
  const int64_t n = x.dim(0);
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  cuda::Context& ctx = cuda::context(dev);
  Tensor y = Tensor::empty(Shape{n, out_}, DType::F32, device);
  if (n == 0) return y;
  if (bias_) {
    broadcast_rows_kernel<<<cuda::grid_for(n * out_), cuda::kBlock, 0, ctx.stream()>>>(
        bias_->value.f32(), y.f32(), n, out_);
    ST_CUDA_CHECK_LAUNCH();
  }
  // y^T [out, n] = W [out, in] x^T [in, n]; W row-major is W^T column-major, hence OP_T.
  const float one = 1.0f, beta = bias_ ? 1.0f : 0.0f;
  const int m = blas_dim(*this, out_), nn = blas_dim(*this, n), k = blas_dim(*this, in_);
  const Gemm gemm{ctx.cublas(), precision_, device};
  gemm(CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, one, weight_->value.f32(), k, weight_->value.numel(),
       x.f32(), k, x.numel(), beta, y.f32(), m);
  return y;
}

Tensor Linear::backward_cuda(const Tensor& dy) {
  const int64_t n = x_.dim(0);
  expect_shape("gradient", Shape{n, out_}, dy.shape());
  const Device device = x_.device();
  cuda::expect_on(describe(), "gradient", dy, device);
  cuda::expect_on(describe(), "weight gradient", weight_->grad, device);
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  cuda::Context& ctx = cuda::context(dev);
  const float one = 1.0f, zero = 0.0f;
  const int m = blas_dim(*this, out_), nn = blas_dim(*this, n), k = blas_dim(*this, in_);
  // dW [out, in] += dy^T x: column-major dW^T [in, out] = x^T [in, n] dy [n, out].
  const Gemm gemm{ctx.cublas(), precision_, device};
  if (n > 0)
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, k, m, nn, one, x_.f32(), k, x_.numel(), dy.f32(), m, dy.numel(),
         one, weight_->grad.f32(), k);
  if (!tied_) weight_->mark_grad_ready();
  if (bias_) {
    cuda::expect_on(describe(), "bias gradient", bias_->grad, device);
    column_sum_accumulate_kernel<<<cuda::grid_for(out_), cuda::kBlock, 0, ctx.stream()>>>(
        dy.f32(), bias_->grad.f32(), n, out_);
    ST_CUDA_CHECK_LAUNCH();
    bias_->mark_grad_ready();
  }
  // dx [n, in] = dy W: column-major dx^T [in, n] = W^T [in, out] dy^T [out, n].
  Tensor dx = Tensor::empty(x_.shape(), DType::F32, device);
  if (n > 0)
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, k, nn, m, one, weight_->value.f32(), k, weight_->value.numel(),
         dy.f32(), m, dy.numel(), zero, dx.f32(), k);
  return dx;
}

}  // namespace st
