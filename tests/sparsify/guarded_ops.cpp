#include "tests/sparsify/guarded_ops.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace st::test {

namespace {
// A quiet NaN with a recognisable payload, and a large negative index.
constexpr uint32_t kPoisonF32 = 0x7FC0DEADu;
constexpr uint32_t kPoisonI32 = 0xDEADBEEFu;
}  // namespace

void* CheckedCpuOps::memory(const bulk::Buffer& b) {
  ST_CHECK(in_call,
           "GuardedOps: buffer memory reached outside a guarded call (a call made on the CPU "
           "implementation behind the guard, around it)");
  return CpuOps::memory(b);
}

void GuardedOps::poison(Tensor& t) {
  const uint32_t word = t.dtype() == DType::F32 ? kPoisonF32 : kPoisonI32;
  auto* p = static_cast<uint32_t*>(t.raw());
  std::fill(p, p + t.numel(), word);
}

GuardedOps::Alloc* GuardedOps::find(const Buffer& b) {
  const Tensor& t = storage(b);
  if (!t.defined()) return nullptr;
  const auto addr = reinterpret_cast<uintptr_t>(t.raw());
  auto it = allocs_.upper_bound(addr);
  if (it != allocs_.begin()) {
    --it;
    if (addr < it->first + it->second.base.nbytes()) return &it->second;
  }
  // First sight: memory CpuOps just allocated or a bucket tensor just wrapped. It holds
  // the truth right now.
  Alloc& a = allocs_[addr];
  a.base = t;
  a.shadow.resize(t.nbytes());
  std::memcpy(a.shadow.data(), t.raw(), t.nbytes());
  return &a;
}

void GuardedOps::collect(const Call& call, std::vector<Alloc*>& touched) {
  auto add = [&](const Buffer* b) {
    Alloc* a = b ? find(*b) : nullptr;
    if (a && std::find(touched.begin(), touched.end(), a) == touched.end()) touched.push_back(a);
  };
  for (const Buffer* b : call.buffers) add(b);
  add(call.result);
}

// Restore, run, save and poison. Memory a call gives its outputs joins once it returns;
// release() hands the tensor back with its true contents and forgets it.
void GuardedOps::around(Call& call, bulk::FunctionRef run) {
  ++calls_;
  std::vector<Alloc*> touched;
  collect(call, touched);
  for (Alloc* a : touched) std::memcpy(a->base.raw(), a->shadow.data(), a->shadow.size());
  cpu.in_call = true;
  struct Repoison {
    GuardedOps& g;
    Call& call;
    std::vector<Alloc*>& touched;
    ~Repoison() {
      g.cpu.in_call = false;
      if (call.op.mode == bulk::OpMode::Release) {
        for (Alloc* a : touched) g.allocs_.erase(reinterpret_cast<uintptr_t>(a->base.raw()));
        return;
      }
      g.collect(call, touched);
      for (Alloc* a : touched) {
        std::memcpy(a->shadow.data(), a->base.raw(), a->shadow.size());
        poison(a->base);
      }
    }
  } repoison{*this, call, touched};
  run();
}

}  // namespace st::test
