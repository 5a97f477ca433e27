#include "layers/precision.h"

#include "layers/conv2d.h"
#include "layers/linear.h"

namespace st {

int set_model_precision(Layer& model, Precision p) {
  int count = 0;
  model.visit_layers([&](Layer& layer) {
    if (auto* conv = dynamic_cast<Conv2d*>(&layer)) {
      conv->set_precision(p);
      ++count;
    } else if (auto* linear = dynamic_cast<Linear*>(&layer)) {
      linear->set_precision(p);
      ++count;
    }
  });
  return count;
}

}  // namespace st
