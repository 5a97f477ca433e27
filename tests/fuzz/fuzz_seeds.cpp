// Writes the seed corpus of every fuzz target (tests/fuzz/corpus/<target>/): a few small
// valid inputs made by the project's own writers, and a few invalid ones. Rerun after a
// format changes:  <sanitize-build>/tests/fuzz/fuzz_seeds tests/fuzz/corpus
#include <stb/stb_image_write.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/safetensors.h"
#include "layers/linear.h"
#include "optim/sgd.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/fuzz/sparsifier_drive.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

fs::path g_root;

void seed(const std::string& target, const std::string& name, const Bytes& b) {
  fs::create_directories(g_root / target);
  std::ofstream out(g_root / target / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void seed(const std::string& target, const std::string& name, const std::string& s) {
  seed(target, name, Bytes(s.begin(), s.end()));
}
Bytes read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes raw_safetensors(const std::string& header, size_t data_bytes) {
  Bytes b(8, 0);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

void safetensors_seeds(const fs::path& tmp) {
  st::TensorFile f;
  f.tensors.emplace_back("w", st::Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
  f.tensors.emplace_back("n", st::Tensor::from_vector_i32({7, -1}, {2}));
  f.metadata["epoch"] = "1";
  st::save_safetensors(tmp.string(), f);
  seed("safetensors_fuzz", "valid", read_all(tmp));
  seed("safetensors_fuzz", "foreign",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})",
                       16));
  seed("safetensors_fuzz", "empty_offsets",
       raw_safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[]}})", 4));
  seed("safetensors_fuzz", "overlap",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       12));
  seed("safetensors_fuzz", "repeated_name",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                       4));
}

void checkpoint_seeds(const fs::path& tmp) {
  st::Rng rng(1);
  st::Linear model(3, 2, true, rng);
  st::SgdOptions o;
  o.momentum = 0.9f;
  st::Sgd sgd(st::collect_params(model), o);
  for (st::Param* p : st::collect_params(model)) p->grad.fill(0.5f);
  sgd.step();
  st::save_checkpoint(tmp.string(), model, &sgd, {1, 2, 3}, {{"arch", "linear"}});
  seed("checkpoint_fuzz", "valid", read_all(tmp));
  st::TensorFile f = st::load_safetensors(tmp.string());
  f.metadata["epoch"] = "abc";
  st::save_safetensors(tmp.string(), f);
  seed("checkpoint_fuzz", "bad_epoch", read_all(tmp));
  f.metadata["epoch"] = "1";
  std::erase_if(f.tensors,
                [](const auto& t) { return t.first == "optimizer.bias.momentum_buffer"; });
  st::save_safetensors(tmp.string(), f);
  seed("checkpoint_fuzz", "missing_momentum", read_all(tmp));
  f = st::load_safetensors(tmp.string());
  f.metadata["world_size"] = "0";
  f.tensors.emplace_back("stray", st::Tensor::zeros({1}));
  st::save_safetensors(tmp.string(), f);
  seed("checkpoint_fuzz", "bad_world_and_stray_tensor", read_all(tmp));
}

// Runs a few iterations so the rule has state, then saves it.
void sparsifier_state_seeds() {
  const char* const methods[] = {"micro", "exdyna", "dgc", "sidco-e", "vgc", "sage", "topk"};
  for (uint8_t m = 0; m < std::size(methods); ++m) {
    st::SparsifierOptions o;
    o.density = 0.05;
    st::SparsifierPtr s = st::make_sparsifier(methods[m], o);
    std::vector<float> x(96);
    for (int t = 0; t < 3; ++t) {
      for (int i = 0; i < 96; ++i) x[i] = float((i * 37 + t * 11) % 23) - 11.0f;
      st::SelectContext ctx;
      ctx.iteration = t;
      ctx.density = 0.05;
      ctx.k = 4;
      ctx.segments = {0, 32};
      st::fuzz::select_and_observe(*s, x, 1.0f, ctx);
    }
    st::StateWriter w;
    s->save_state(w);
    seed("sparsifier_state_fuzz", methods[m], cat(Bytes{m}, w.bytes()));
    st::SparsifyHook hook(std::move(s), o, 0);
    seed("sparsifier_state_fuzz", std::string(methods[m]) + "_hook",
         cat(Bytes{static_cast<uint8_t>(0x80 | m)}, hook.save_state()));
  }
}

Bytes idx(const std::vector<uint32_t>& dims, uint8_t fill) {
  Bytes b = {0, 0, 8, static_cast<uint8_t>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
    n *= d;
  }
  b.resize(b.size() + n, fill);
  return b;
}

void idx_seeds(const fs::path& tmp) {
  const Bytes images = idx({2, 3, 3}, 200), labels = idx({2}, 7);
  seed("idx_fuzz", "images", cat(Bytes{1}, images));
  seed("idx_fuzz", "labels", cat(Bytes{0}, labels));
  gzFile gz = gzopen(tmp.c_str(), "wb");
  gzwrite(gz, images.data(), static_cast<unsigned>(images.size()));
  gzclose(gz);
  seed("idx_fuzz", "images_gz", cat(Bytes{1}, read_all(tmp)));
  Bytes bad = images;
  bad[2] = 9;
  seed("idx_fuzz", "bad_magic", cat(Bytes{1}, bad));
}

void cifar_seeds() {
  Bytes c10(2 * 3073, 90);
  c10[0] = 3;
  c10[3073] = 9;
  seed("cifar_fuzz", "cifar10", cat(Bytes{0}, c10));
  Bytes c100(3074, 40);
  c100[0] = 19;
  c100[1] = 99;
  seed("cifar_fuzz", "cifar100", cat(Bytes{1}, c100));
  c10[0] = 10;
  seed("cifar_fuzz", "bad_label", cat(Bytes{0}, c10));
}

void to_bytes(void* ctx, void* data, int size) {
  auto* out = static_cast<Bytes*>(ctx);
  out->insert(out->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
}

void image_seeds() {
  const int w = 5, h = 4;
  std::vector<uint8_t> px(w * h * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 13);
  Bytes png, jpg, bmp, gray;
  stbi_write_png_to_func(to_bytes, &png, w, h, 3, px.data(), w * 3);
  stbi_write_jpg_to_func(to_bytes, &jpg, w, h, 3, px.data(), 90);
  stbi_write_bmp_to_func(to_bytes, &bmp, w, h, 3, px.data());
  stbi_write_png_to_func(to_bytes, &gray, w, h, 1, px.data(), w);
  seed("image_fuzz", "rgb.png", png);
  seed("image_fuzz", "rgb.jpg", jpg);
  seed("image_fuzz", "rgb.bmp", bmp);
  seed("image_fuzz", "gray.png", gray);
  seed("image_fuzz", "truncated.png", Bytes(png.begin(), png.begin() + png.size() / 2));
}

void text_seeds() {
  using namespace std::string_literals;
  seed("text_corpus_fuzz", "valid", "the cat sat\non the mat\n\0the dog\n\0a cat\n"s);
  seed("text_corpus_fuzz", "empty_train", "\n\n\0the dog\n\0a cat\n"s);
  seed("text_corpus_fuzz", "fortune", "Don't panic!  _\bx -- 42, \xc3\xa9t\xc3\xa9.\n"s);
}

void schedule_seeds() {
  const std::string head = {64, 10, 4, 5};
  for (const char* spec :
       {"constant", "cosine", "multistep", "multistep:3,6:0.5", "multistep:x", "warmup"}) {
    std::string file = spec;  // no ':' or ',' in file names
    for (char& c : file)
      if (c == ':' || c == ',') c = '_';
    seed("lr_schedule_fuzz", file, head + spec);
  }
}

void options_seeds() {
  const std::vector<st::SparsifierInfo>& all = st::sparsifiers();
  for (size_t i = 0; i < all.size(); ++i) {
    // Every declared key at its default, one key=value per line.
    std::string params;
    for (const st::SpKey& key : all[i].keys) params += key.name + "=" + key.default_text() + "\n";
    seed("sparsifier_options_fuzz", all[i].name, std::string{static_cast<char>(i), 4, 1} + params);
  }
  seed("sparsifier_options_fuzz", "unknown_key", std::string{0, 4, 1} + "nope=1");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  const fs::path tmp = fs::temp_directory_path() / ("st_fuzz_seed_" + std::to_string(getpid()));
  safetensors_seeds(tmp);
  checkpoint_seeds(tmp);
  sparsifier_state_seeds();
  idx_seeds(tmp);
  cifar_seeds();
  image_seeds();
  text_seeds();
  schedule_seeds();
  options_seeds();
  fs::remove(tmp);
  std::printf("seeds written to %s\n", argv[1]);
  return 0;
}
