#include "train/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "layers/linear.h"
#include "optim/sgd.h"

namespace st::test {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("st_ckpt_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// `what` must throw st::Error whose message starts with `prefix`.
template <typename Fn>
void expect_error(Fn what, const std::string& prefix) {
  try {
    what();
    ADD_FAILURE() << "no error (expected '" << prefix << "')";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
  }
}

TEST(CheckpointMeta, TypedValuesParse) {
  const std::map<std::string, std::string> m{
      {"epoch", "12"}, {"neg", "-3"}, {"lr", "1e-3"}, {"best", "inf"}, {"arch", "resnet20"}};
  EXPECT_EQ(meta_int(m, "epoch", "f"), 12);
  EXPECT_EQ(meta_int(m, "neg", "f"), -3);
  EXPECT_DOUBLE_EQ(meta_double(m, "lr", "f"), 1e-3);
  EXPECT_DOUBLE_EQ(meta_double(m, "epoch", "f"), 12.0);
  EXPECT_TRUE(std::isinf(meta_double(m, "best", "f")));
  EXPECT_EQ(meta_string(m, "arch", "f"), "resnet20");
}

TEST(CheckpointMeta, ErrorsNameTheFileAndTheKey) {
  const std::map<std::string, std::string> m{
      {"epoch", "abc"}, {"step", "12 "}, {"big", "99999999999999999999"},
      {"neg", "-1"},    {"lr", "0.1x"},  {"empty", ""}};
  expect_error([&] { meta_int(m, "epoch", "c.st"); },
               "c.st: checkpoint metadata 'epoch' is 'abc', expected an integer");
  expect_error([&] { meta_int(m, "step", "c.st"); },
               "c.st: checkpoint metadata 'step' is '12 ', expected an integer");
  expect_error([&] { meta_int(m, "big", "c.st"); },
               "c.st: checkpoint metadata 'big' is '99999999999999999999', expected an integer");
  expect_error([&] { meta_int(m, "empty", "c.st"); },
               "c.st: checkpoint metadata 'empty' is '', expected an integer");
  expect_error([&] { meta_int(m, "neg", "c.st", 0, 10); },
               "c.st: checkpoint metadata 'neg' is -1, expected an integer in [0, 10]");
  expect_error([&] { meta_double(m, "lr", "c.st"); },
               "c.st: checkpoint metadata 'lr' is '0.1x', expected a number");
  expect_error([&] { meta_double(m, "absent", "c.st"); },
               "c.st: checkpoint metadata lacks 'absent'");
  expect_error([&] { meta_string(m, "absent", "c.st"); },
               "c.st: checkpoint metadata lacks 'absent'");
}

class CheckpointFile : public ::testing::Test {
 protected:
  Rng rng{7};
  Linear model{3, 2, true, rng};
  std::string path = temp_path("model.safetensors");
  void TearDown() override { std::filesystem::remove(path); }

  // Saves a checkpoint, then rewrites metadata key `key` (erased when value is null).
  void save_with(const std::string& key, const char* value) {
    save_checkpoint(path, model, nullptr, {2, 5, 40}, {{"arch", "linear"}});
    TensorFile f = load_safetensors(path);
    if (value)
      f.metadata[key] = value;
    else
      f.metadata.erase(key);
    save_safetensors(path, f);
  }
};

TEST_F(CheckpointFile, RoundTripRestoresPositionAndModel) {
  save_checkpoint(path, model, nullptr, {2, 5, 40}, {{"arch", "linear"}});
  const std::vector<float> w = model.weight().value.to_vector();
  model.weight().value.fill(0.0f);
  std::map<std::string, std::string> meta;
  const TrainPosition pos = load_checkpoint(path, model, nullptr, &meta);
  EXPECT_EQ(pos.epoch, 2);
  EXPECT_EQ(pos.batch, 5);
  EXPECT_EQ(pos.step, 40);
  EXPECT_EQ(meta.at("arch"), "linear");
  EXPECT_EQ(meta.count(kChecksumKey), 0u);
  EXPECT_EQ(model.weight().value.to_vector(), w);
}

// A NaN or an infinity in any tensor: nothing is written, the previous file stays, and the
// error names the file and the tensor.
TEST_F(CheckpointFile, NonFiniteTensorIsNotWrittenAndThePreviousFileStays) {
  save_checkpoint(path, model, nullptr, {0, 1, 1}, {});
  const TensorFile before = load_safetensors(path);
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    model.bias()->value.f32()[1] = bad;
    expect_error(
        [&] {
          save_checkpoint(path, model, nullptr, {0, 2, 2}, {});
        },
        path + ": not written: tensor 'bias' holds NaN or inf");
    model.bias()->value.f32()[1] = 0.5f;
    expect_error(
        [&] {
          save_checkpoint(path, model, nullptr, {0, 2, 2}, {}, {{"extra", Tensor::full({3}, bad)}});
        },
        path + ": not written: tensor 'extra' holds NaN or inf");
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const TensorFile after = load_safetensors(path);
  EXPECT_EQ(after.metadata.at("step"), "1");
  EXPECT_EQ(first_non_finite(after.tensors), "");
  EXPECT_EQ(first_non_finite({{"a", Tensor::full({2}, 1.0f)}, {"b", Tensor::full({2}, -INFINITY)}}),
            "b");
}

TEST_F(CheckpointFile, BadPositionMetadataNamesKeyAndFile) {
  save_with("epoch", "abc");
  expect_error([&] { load_checkpoint(path, model, nullptr); },
               path + ": checkpoint metadata 'epoch' is 'abc', expected an integer");
  save_with("batch", "-4");
  expect_error([&] { load_checkpoint(path, model, nullptr); },
               path + ": checkpoint metadata 'batch' is -4, expected an integer in [0, ");
  save_with("step", nullptr);
  expect_error([&] { load_checkpoint(path, model, nullptr); },
               path + ": checkpoint metadata lacks 'step'");
}

TEST_F(CheckpointFile, BadMetadataLeavesTheModelUntouched) {
  save_with("epoch", "1.5");
  const std::vector<float> before = model.weight().value.to_vector();
  model.weight().value.fill(0.25f);
  EXPECT_THROW(load_checkpoint(path, model, nullptr), Error);
  for (float v : model.weight().value.to_vector()) EXPECT_EQ(v, 0.25f);
  EXPECT_NE(before[0], 0.25f);
}

// Strict reading, as PyTorch's load_state_dict(strict=True): each refusal names the file
// and leaves the model as it was.
class CheckpointStrict : public CheckpointFile {
 protected:
  void expect_refused(const std::string& message, bool allow_unknown = false) {
    model.weight().value.fill(0.25f);
    expect_error([&] { load_checkpoint(path, model, nullptr, nullptr, {}, allow_unknown); },
                 path + message);
    for (float v : model.weight().value.to_vector()) EXPECT_EQ(v, 0.25f);
  }
};

TEST_F(CheckpointStrict, RunMetadataOutOfRangeOrUnknown) {
  struct Case {
    const char *key, *value, *message;
  };
  const std::string meta = ": checkpoint metadata ";
  const Case cases[] = {
      {"world_size", "0", "'world_size' is 0, expected an integer in [1, "},
      {"world_size", "-1", "'world_size' is -1, expected an integer in [1, "},
      {"world_size", "99999999999", "'world_size' is 99999999999, expected an integer in [1, "},
      {"batch_size", "0", "'batch_size' is 0, expected an integer in [1, "},
      {"precision", "fp8", "'precision' is 'fp8', expected fp32, bf16 or fp16"},
      {"density", "0", "'density' is 0, expected a number in (0, 1]"}};
  for (const Case& c : cases) {
    save_with(c.key, c.value);
    expect_refused(meta + c.message);
  }
  save_with("format", "sparsetrain-checkpoint-99");
  expect_refused(": checkpoint format 'sparsetrain-checkpoint-99' is not one this build reads");
  save_with("world_size", "4");  // in range: loads
  EXPECT_NO_THROW(load_checkpoint(path, model, nullptr));
}

TEST_F(CheckpointStrict, UnknownTensorRefusedUnlessAllowed) {
  save_checkpoint(path, model, nullptr, {0, 0, 3}, {});
  TensorFile f = load_safetensors(path);
  f.tensors.emplace_back("layer9.weight", Tensor::zeros({2}));
  save_safetensors(path, f);
  expect_refused(
      ": tensor \"layer9.weight\" is neither a parameter or buffer of this model nor "
      "trainer state (pass --allow-unknown-tensors to ignore such tensors)");
  EXPECT_NO_THROW(load_checkpoint(path, model, nullptr, nullptr, {}, true));
}

TEST_F(CheckpointStrict, WrongTypeNamesFileAndTensor) {
  save_checkpoint(path, model, nullptr, {0, 0, 3}, {});
  TensorFile f = load_safetensors(path);
  for (auto& [name, t] : f.tensors)
    if (name == "bias") t = Tensor::zeros(t.shape(), DType::I32);
  save_safetensors(path, f);
  expect_refused(": tensor \"bias\" is int32, expected float32");
}

TEST_F(CheckpointStrict, RunFolderSaysWhichFileWasMeant) {
  const std::string dir = temp_path("run");
  std::filesystem::create_directories(dir);
  expect_error([&] { load_checkpoint(dir, model, nullptr); },
               dir + " is a directory (did you mean " + dir + "/checkpoint.safetensors?)");
  std::filesystem::remove(dir);
}

TEST_F(CheckpointStrict, MissingMomentumBufferIsRefused) {
  SgdOptions o;
  o.momentum = 0.9f;
  Sgd sgd(collect_params(model), o);
  sgd.step();  // every parameter gets its buffer
  save_checkpoint(path, model, &sgd, {0, 1, 1}, {});
  Sgd fresh(collect_params(model), o);
  EXPECT_NO_THROW(load_checkpoint(path, model, &fresh));
  TensorFile f = load_safetensors(path);
  std::erase_if(f.tensors,
                [](const auto& e) { return e.first == "optimizer.bias.momentum_buffer"; });
  save_safetensors(path, f);
  expect_error([&] { load_checkpoint(path, model, &fresh); },
               path + ": the checkpoint was written with 2 optimizer state tensors but holds 1");
  // A file that does not record the count: the optimiser's own check, naming the file.
  f.metadata.erase("optimizer_tensors");
  save_safetensors(path, f);
  expect_error([&] { load_checkpoint(path, model, &fresh); },
               path + ": SGD state: 'bias.momentum_buffer' is missing");
}

}  // namespace
}  // namespace st::test
