#include "tests/gradcheck.h"

#include <cmath>
#include <map>

namespace st::test {

Tensor random_tensor(const Shape& shape, Rng& rng, float scale) {
  Tensor t = Tensor::empty(shape);
  float* p = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = (2.0f * rng.uniform() - 1.0f) * scale;
  return t;
}

namespace {

double weighted_sum(const Tensor& y, const Tensor& w) {
  std::vector<float> a = y.to_vector(), b = w.to_vector();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Compares analytic[i] with central differences of f at sampled elements of `target`.
void compare(const std::function<double()>& f, Tensor& target, const Tensor& analytic,
             const std::string& what, const GradCheckOptions& opt) {
  ASSERT_EQ(target.shape(), analytic.shape()) << what;
  Tensor host_grad = analytic.to(Device::cpu());
  float* v = target.f32();
  const float* g = host_grad.f32();
  const int64_t n = target.numel();
  const int64_t step = std::max<int64_t>(1, n / opt.max_points);
  int checked = 0, kinks = 0;
  for (int64_t i = (n > 1 ? 7 % step : 0); i < n; i += step) {
    const float orig = v[i];
    const double f0 = f();
    v[i] = orig + opt.eps;
    const double fp = f();
    v[i] = orig - opt.eps;
    const double fm = f();
    v[i] = orig;
    const double right = (fp - f0) / opt.eps, left = (f0 - fm) / opt.eps;
    const double numeric = (fp - fm) / (2.0 * opt.eps);
    // One-sided slopes that disagree beyond the tolerance mean a kink lies within
    // [x-eps, x+eps] (a ReLU input crossing 0, a max-pool arg-max changing): the
    // derivative is not defined there. A wrong analytic gradient cannot hide here,
    // since both slopes would still agree with each other.
    if (std::abs(right - left) > opt.atol + opt.rtol * std::abs(numeric)) {
      ++kinks;
      continue;
    }
    ++checked;
    EXPECT_NEAR(g[i], numeric, opt.atol + opt.rtol * std::abs(numeric))
        << what << " element " << i << " of " << target.shape();
  }
  EXPECT_GT(checked, 0) << what << ": no point was checked";
  EXPECT_LE(kinks, opt.max_kink_share * (checked + kinks) + 1)
      << what << ": too many kinks skipped";
}

}  // namespace

void check_layer_gradients(Layer& layer, const Tensor& x_in, const GradCheckOptions& opt) {
  Rng rng(1234);
  Tensor x = x_in.clone();
  Tensor y = layer.forward(x);
  Tensor w = random_tensor(y.shape(), rng);

  std::vector<Param*> params = collect_params(layer);
  std::map<Param*, int> ready_count;
  for (Param* p : params) {
    p->grad.zero();
    p->on_grad_ready = [&ready_count](Param& q) { ++ready_count[&q]; };
  }
  layer.forward(x);
  Tensor dx = layer.backward(w);
  for (Param* p : params) {
    EXPECT_EQ(ready_count[p], 1) << layer.describe() << ": " << p->name
                                 << " must announce gradient-ready exactly once";
    p->on_grad_ready = nullptr;
  }
  auto loss = [&]() { return weighted_sum(layer.forward(x), w); };
  if (opt.check_input) compare(loss, x, dx, layer.describe() + " input", opt);
  for (Param* p : params) {
    Tensor analytic = p->grad.clone();
    compare(loss, p->value, analytic, layer.describe() + " " + p->name, opt);
  }
}

void check_scalar_gradient(const std::function<double(const Tensor&)>& f, const Tensor& x_in,
                           const Tensor& analytic, const std::string& what,
                           const GradCheckOptions& opt) {
  Tensor x = x_in.clone();
  compare([&]() { return f(x); }, x, analytic, what, opt);
}

}  // namespace st::test
