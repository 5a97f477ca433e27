#include "core/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace st::test {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("st_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Safetensors, RoundTripTensorsAndMetadata) {
  TensorFile f;
  f.tensors.emplace_back("conv1.weight", Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
  f.tensors.emplace_back("labels", Tensor::from_vector_i32({7, -1}, {2}));
  Tensor steps = Tensor::zeros({}, DType::I64);
  steps.data<int64_t>()[0] = 1ll << 40;
  f.tensors.emplace_back("bn1.num_batches_tracked", steps);
  f.metadata["epoch"] = "3";
  const std::string path = temp_path("rt.safetensors");
  save_safetensors(path, f);
  TensorFile g = load_safetensors(path);
  ASSERT_EQ(g.tensors.size(), 3u);
  EXPECT_EQ(g.metadata.at("epoch"), "3");
  EXPECT_EQ(g.get("conv1.weight", {2, 3}, path).to_vector(),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(g.find("labels")->data<int32_t>()[1], -1);
  EXPECT_EQ(g.find("bn1.num_batches_tracked")->data<int64_t>()[0], 1ll << 40);
  EXPECT_THROW(g.get("conv1.weight", {3, 2}, path), Error);
  EXPECT_THROW(g.get("nope", {1}, path), Error);
  std::filesystem::remove(path);
}

TEST(Safetensors, TruncatedAndCorruptFilesNameTheFile) {
  TensorFile f;
  f.tensors.emplace_back("w", Tensor::full({1000}, 1.0f));
  const std::string path = temp_path("trunc.safetensors");
  save_safetensors(path, f);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  try {
    load_safetensors(path);
    FAIL() << "truncated file loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << "garbage!";
  }
  EXPECT_THROW(load_safetensors(path), Error);
  std::filesystem::remove(path);
  EXPECT_THROW(load_safetensors(path), Error);
}

// kill -9 in the middle of a save leaves the previous file loadable.
TEST(Safetensors, KillDuringWriteKeepsPreviousFile) {
  const std::string path = temp_path("kill.safetensors");
  TensorFile small;
  small.tensors.emplace_back("w", Tensor::full({4}, 2.0f));
  save_safetensors(path, small);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    TensorFile big;
    big.tensors.emplace_back("w", Tensor::full({64 << 20}, 3.0f));  // 256 MB: takes a while
    for (;;) save_safetensors(path, big);
  }
  ::usleep(150 * 1000);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  TensorFile g = load_safetensors(path);  // whichever version, it is complete
  const Tensor* w = g.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->numel() == 4 || w->numel() == (64 << 20));
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    if (e.path().string().rfind(path + ".tmp", 0) == 0) std::filesystem::remove(e.path());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace st::test
