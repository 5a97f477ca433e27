#include "comm/launch_agreement.h"

#include <cstdint>
#include <cstring>

#include "comm/communicator.h"
#include "core/safetensors.h"
#include "core/tensor.h"

namespace st {

namespace {

// One fact on the wire: its value's first bytes (for the message) and a hash of all of it.
constexpr int64_t kFactWords = 32;
constexpr size_t kShownBytes = (kFactWords - 2) * 4;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

void pack(const std::string& value, int32_t* words) {
  std::memset(words, 0, kFactWords * 4);
  std::memcpy(words, value.data(), std::min(value.size(), kShownBytes));
  const uint64_t h = fnv1a(value);
  std::memcpy(words + kFactWords - 2, &h, sizeof h);
}

std::string shown(const int32_t* words) {
  const char* c = reinterpret_cast<const char*>(words);
  return std::string(c, strnlen(c, kShownBytes));
}

}  // namespace

std::unique_ptr<MpiCommunicator> agree_on_launch(const std::string& backend,
                                                 const std::string& device,
                                                 const std::vector<LaunchFact>& facts) {
  if (!launched_by_mpi()) return nullptr;
  // The thread level make_communicator would ask for: MPI starts only once.
  auto mpi = std::make_unique<MpiCommunicator>(needs_mpi_thread_multiple(backend, device));
  const int p = mpi->size();
  if (p == 1) return mpi;
  const int64_t n = static_cast<int64_t>(facts.size());
  Tensor mine = Tensor::zeros({n * kFactWords}, DType::I32);
  for (int64_t i = 0; i < n; ++i)
    pack(facts[static_cast<size_t>(i)].value, mine.data<int32_t>() + i * kFactWords);
  Tensor all = Tensor::zeros({p * n * kFactWords}, DType::I32);
  mpi->allgather(mine, all);
  const int32_t* w = all.data<int32_t>();
  auto at = [&](int rank, int64_t fact) { return w + (rank * n + fact) * kFactWords; };
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 1; r < p; ++r) {
      if (std::memcmp(at(0, i), at(r, i), kFactWords * 4) == 0) continue;
      throw EveryRankError(mpi->rank(), p,
                           "the ranks disagree on " + facts[static_cast<size_t>(i)].flag +
                               ": rank 0 has '" + shown(at(0, i)) + "', rank " + std::to_string(r) +
                               " has '" + shown(at(r, i)) +
                               "'; every rank needs the same command and flags");
    }
  }
  return mpi;
}

std::vector<LaunchFact> launch_facts(const std::string& subcommand, bool check_flags,
                                     const std::string& device, const std::string& comm,
                                     const std::string& checkpoint_flag,
                                     const std::string& checkpoint) {
  // Only the kind of device must agree: a wrapper may give each rank its own index.
  const std::string kind = device.substr(0, device.find(':'));
  std::string identity = "(none)";
  if (!checkpoint.empty()) {
    try {
      identity = safetensors_identity(checkpoint);
    } catch (const std::exception& e) {
      identity = e.what();
    }
  }
  return {{"the subcommand", subcommand},
          {"--check-flags", check_flags ? "given" : "not given"},
          {"--device", kind},
          {"--comm", comm},
          {checkpoint_flag, identity}};
}

}  // namespace st
