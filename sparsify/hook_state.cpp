#include "sparsify/hook_state.h"

namespace st {

std::vector<uint8_t> write_hook_state(const HookState& s) {
  StateWriter w;
  w.put_string(s.method);
  w.put_buckets(s.residuals,
                [](StateWriter& out, const std::vector<float>& r) { out.put_vector(r); });
  // No count before the rule state: it runs to the end of the stream.
  w.put_raw(s.rule);
  return w.bytes();
}

HookState read_hook_state(StateReader& in) {
  HookState s;
  s.method = in.get_string();
  in.get_buckets(s.residuals,
                 [](StateReader& r, std::vector<float>& v) { v = r.get_vector<float>(); });
  s.rule = in.get_rest();
  return s;
}

}  // namespace st
