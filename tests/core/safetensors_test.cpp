#include "core/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

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
  // The header alone gives the same metadata, without the checksum key.
  EXPECT_EQ(load_safetensors_metadata(path), g.metadata);
  std::filesystem::remove(path);
}

TEST(Safetensors, TruncatedAndCorruptFilesNameTheFile) {
  TensorFile f;
  f.tensors.emplace_back("w", Tensor::full({1000}, 1.0f));
  const std::string path = temp_path("trunc.safetensors");
  save_safetensors(path, f);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  // A header that claims more data than the file holds: refused by the header alone.
  EXPECT_THROW(load_safetensors_metadata(path), Error);
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
  EXPECT_THROW(load_safetensors_metadata(path), Error);
  std::filesystem::remove(path);
  EXPECT_THROW(load_safetensors(path), Error);
  EXPECT_THROW(load_safetensors_metadata(path), Error);
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

// A file in safetensors layout with the given header text and data section.
std::string raw_file(const std::string& header, const std::string& data, uint64_t len) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(len >> (8 * i));
  return out + header + data;
}
std::string raw_file(const std::string& header, const std::string& data) {
  return raw_file(header, data, header.size());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Loads `bytes` from a file and from memory; both must fail with one line that names
// the file and contains `expect`.
void expect_rejected(const std::string& bytes, const std::string& expect) {
  const std::string path = temp_path("hostile.safetensors");
  write_bytes(path, bytes);
  for (int in_memory = 0; in_memory < 2; ++in_memory) {
    try {
      if (in_memory)
        parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
      else
        load_safetensors(path);
      ADD_FAILURE() << "accepted (expected '" << expect << "')";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
      EXPECT_NE(what.find(expect), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  std::filesystem::remove(path);
}

const std::string kFour(4, '\0');  // one F32

TEST(SafetensorsHostile, DataOffsetsEmptyOrMissing) {
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[]}})", kFour),
                  "tensor \"w\": data_offsets must be [begin, end]");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1]}})", kFour),
                  "tensor \"w\": 'data_offsets' is missing");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", kFour),
                  "data_offsets must be");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})", kFour),
                  "data_offsets must be");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", kFour),
                  "data_offsets must be");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", kFour),
                  "end before they begin");
  expect_rejected(raw_file(R"({"w":[1,2]})", kFour), "tensor \"w\": entry must be an object");
}

TEST(SafetensorsHostile, OffsetsOutsideTheFile) {
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[100],"data_offsets":[0,400]}})", kFour),
                  "tensor \"w\": data_offsets [0, 400] reach past the data section of 4 bytes");
  expect_rejected(
      raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,0]}})",
               kFour),
      "tensor \"w\"");
}

TEST(SafetensorsHostile, OverlapsGapsAndUncoveredBytes) {
  const std::string data(12, '\0');
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           data),
                  "tensor \"b\": bytes [4, 12) overlap tensor \"a\"");
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                           data),
                  "tensor \"b\": starts at byte 8, leaving a gap");
  expect_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data),
                  "the tensors cover 4 bytes but the data section holds 12");
}

TEST(SafetensorsHostile, ByteLengthMustMatchTheShape) {
  expect_rejected(
      raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
      "tensor \"w\": data_offsets [0, 8] hold 8 bytes, but shape [3] of F32 needs 12");
}

TEST(SafetensorsHostile, DtypeAndShapeAreChecked) {
  expect_rejected(raw_file(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", kFour),
                  "tensor \"w\": unsupported dtype \"F16\"");
  expect_rejected(raw_file(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", kFour),
                  "dtype must be a string");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", kFour),
                  "tensor \"w\": shape entries must be non-negative integers, got -1");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", kFour),
                  "non-negative integers");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", kFour),
                  "shape must be an array");
  expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],)"
                           R"("data_offsets":[0,4]}})",
                           kFour),
                  "overflows");
}

TEST(SafetensorsHostile, HeaderLengthAndShape) {
  expect_rejected(raw_file("{}", "", uint64_t{1} << 40), "header length 1099511627776 exceeds");
  const std::string big(100'000'008, ' ');
  expect_rejected(raw_file(big, "", big.size()), "exceeds the limit");
  expect_rejected(raw_file("[1,2]", ""), "header must be a JSON object");
  expect_rejected(raw_file("{\"w\":", ""), "corrupt header");
  expect_rejected(std::string(5, '\0'), "truncated (5 bytes");
}

TEST(SafetensorsHostile, MetadataMustBeAnObjectOfStrings) {
  expect_rejected(raw_file(R"({"__metadata__":{"epoch":3}})", ""),
                  "__metadata__ key \"epoch\" must be a string, got number");
  expect_rejected(raw_file(R"({"__metadata__":["a"]})", ""), "__metadata__ must be an object");
}

TEST(SafetensorsHostile, NamesWithControlCharactersStayOnOneLine) {
  expect_rejected(raw_file(R"({"a\nb":{"dtype":"X","shape":[1],"data_offsets":[0,4]}})", kFour),
                  "tensor \"a\\nb\": unsupported dtype");
}

TEST(SafetensorsHostile, RepeatedNamesAreRefused) {
  // Both entries cover the same bytes, so only the repetition is wrong.
  const std::string entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  expect_rejected(raw_file(R"({"w":)" + entry + R"(,"w":)" + entry + "}", kFour),
                  "the header names \"w\" twice");
  expect_rejected(
      raw_file(R"({"__metadata__":{"epoch":"1","epoch":"2"},"w":)" + entry + "}", kFour),
      "the header names \"epoch\" twice");
  // The same name in two different objects is fine.
  const std::string ok = raw_file(R"({"__metadata__":{"w":"x"},"w":)" + entry + "}", kFour);
  EXPECT_EQ(parse_safetensors(reinterpret_cast<const uint8_t*>(ok.data()), ok.size(), "mem")
                .tensors.size(),
            1u);
}

// Files of other writers (no checksum, no metadata, other key order) still load.
TEST(Safetensors, ForeignFileWithoutChecksumLoads) {
  std::string data(12, '\0');
  const float v[3] = {1.5f, -2.0f, 3.0f};
  std::memcpy(data.data(), v, sizeof v);
  const std::string bytes =
      raw_file(R"({"b":{"shape":[1],"dtype":"F32","data_offsets":[8,12]},)"
               R"("a":{"dtype":"F32","data_offsets":[0,8],"shape":[2]},"__metadata__":{"x":"y"}})",
               data);
  TensorFile f =
      parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "a");  // data order
  EXPECT_EQ(f.get("a", {2}, "mem").to_vector(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(f.get("b", {1}, "mem").to_vector(), (std::vector<float>{3.0f}));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"x", "y"}}));
}

TEST(Safetensors, ChecksumCatchesAFlippedDataByte) {
  TensorFile f;
  f.tensors.emplace_back("w", Tensor::full({256}, 1.0f));
  f.tensors.emplace_back("n", Tensor::from_vector_i32({1, 2, 3}, {3}));
  f.metadata["epoch"] = "2";
  const std::string path = temp_path("flip.safetensors");
  save_safetensors(path, f);
  TensorFile ok = load_safetensors(path);
  EXPECT_EQ(ok.metadata, f.metadata);  // the checksum key is the reader's, not the caller's
  const auto size = std::filesystem::file_size(path);
  for (uint64_t back : {1u, 500u}) {  // in "n", then in "w"
    save_safetensors(path, f);
    std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
    io.seekg(static_cast<std::streamoff>(size - back));
    char c = 0;
    io.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    io.seekp(static_cast<std::streamoff>(size - back));
    io.write(&c, 1);
    io.close();
    try {
      load_safetensors(path);
      ADD_FAILURE() << "flipped byte " << back << " from the end accepted";
    } catch (const Error& e) {
      EXPECT_EQ(
          std::string(e.what()).rfind(path + ": tensor data checksum mismatch (file damaged)", 0),
          0u)
          << e.what();
    }
  }
  std::filesystem::remove(path);
}

TEST(Safetensors, SaveReplacesAStaleTemporaryAndRefusesDuplicateNames) {
  const std::string path = temp_path("stale.safetensors");
  write_bytes(path + ".tmp", std::string(1 << 20, 'x'));  // left by a killed save
  TensorFile f;
  f.tensors.emplace_back("w", Tensor::full({2}, 1.0f));
  save_safetensors(path, f);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(load_safetensors(path).get("w", {2}, path).to_vector(), (std::vector<float>{1, 1}));
  f.tensors.emplace_back("w", Tensor::full({3}, 2.0f));
  EXPECT_THROW(save_safetensors(path, f), Error);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(load_safetensors(path).find("w")->numel(), 2);  // the previous file survives
  std::filesystem::remove(path);
}

TEST(Safetensors, FailedWriteRemovesItsTemporary) {
  const std::string dir = temp_path("ro_dir");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/x.safetensors";
  std::filesystem::create_directories(path);  // rename onto a directory fails
  TensorFile f;
  f.tensors.emplace_back("w", Tensor::full({2}, 1.0f));
  EXPECT_THROW(save_safetensors(path, f), Error);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace st::test
