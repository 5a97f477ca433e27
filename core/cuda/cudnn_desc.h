// RAII owners for the cuDNN descriptors the layers use (NCHW; float32 unless a layer in
// mixed precision asks for bf16 or fp16 data). cuDNN takes
// int extents, so each setter checks that a dimension fits before narrowing.
#pragma once

#include <cudnn.h>

#include <climits>
#include <cstdint>

#include "core/cuda/check.h"

namespace st::cuda {

inline int cudnn_dim(int64_t d, const char* what) {
  ST_CHECK(d >= 0 && d <= INT_MAX, "cuDNN: ", what, " extent ", d, " does not fit in an int");
  return static_cast<int>(d);
}

class TensorDesc {
 public:
  TensorDesc() { ST_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  TensorDesc(int64_t n, int64_t c, int64_t h, int64_t w) : TensorDesc() { set(n, c, h, w); }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;

  void set(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    ST_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, type, cudnn_dim(n, "N"),
                                              cudnn_dim(c, "C"), cudnn_dim(h, "H"),
                                              cudnn_dim(w, "W")));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { ST_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_)); }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;

  void set(int64_t cout, int64_t cin, int64_t kh, int64_t kw,
           cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    ST_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d_, type, CUDNN_TENSOR_NCHW, cudnn_dim(cout, "Cout"),
                                              cudnn_dim(cin, "Cin"), cudnn_dim(kh, "KH"),
                                              cudnn_dim(kw, "KW")));
  }
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { ST_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_)); }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;

  // Cross-correlation (what deep-learning frameworks call convolution), float accumulate
  // whatever the data type (cuDNN's "pseudo" half and bfloat16 configurations).
  // Padding and stride per direction (rows, columns): cuDNN takes rectangular filters.
  void set(int pad_h, int pad_w, int stride_h, int stride_w) {
    ST_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d_, pad_h, pad_w, stride_h, stride_w, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  }
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

class PoolingDesc {
 public:
  PoolingDesc() { ST_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_)); }
  ~PoolingDesc() { (void)cudnnDestroyPoolingDescriptor(d_); }
  PoolingDesc(const PoolingDesc&) = delete;
  PoolingDesc& operator=(const PoolingDesc&) = delete;

  void set(cudnnPoolingMode_t mode, int kernel, int stride, int pad) {
    ST_CUDNN_CHECK(cudnnSetPooling2dDescriptor(d_, mode, CUDNN_PROPAGATE_NAN, kernel, kernel, pad,
                                               pad, stride, stride));
  }
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

}  // namespace st::cuda
