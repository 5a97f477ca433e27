// Byte streams for the checkpointed state of a sparsifier (error-feedback residuals and
// the rule state a method carries between iterations), so a resumed run continues
// exactly where it stopped. The writer appends plain values and vectors; the reader reads
// them back in the same order and names the checkpoint entry when the stream ends early
// or holds something else.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace st {

class StateWriter {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<int64_t>(static_cast<int64_t>(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(T));
  }
  // The same layout as put_vector<char> (a count, then the characters).
  void put_string(const std::string& s) {
    put<int64_t>(static_cast<int64_t>(s.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    bytes_.insert(bytes_.end(), p, p + s.size());
  }
  // Bytes as they are, without a count (a nested stream that runs to the end).
  void put_raw(const std::vector<uint8_t>& b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  // A per-bucket map: the count, then (bucket id, entry) pairs; put_entry(writer, entry).
  template <typename T, typename Fn>
  void put_buckets(const std::map<int, T>& m, Fn put_entry) {
    put<int64_t>(static_cast<int64_t>(m.size()));
    for (const auto& [id, entry] : m) {
      put<int32_t>(id);
      put_entry(*this, entry);
    }
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class StateReader {
 public:
  // `what` names the stream in errors (e.g. "checkpoint.safetensors: sparsify.state").
  StateReader(const uint8_t* data, size_t size, std::string what)
      : data_(data), size_(size), what_(std::move(what)) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const int64_t n = get<int64_t>();
    ST_CHECK(n >= 0 && static_cast<size_t>(n) <= (size_ - pos_) / sizeof(T), what_,
             ": corrupt sparsifier state (vector of ", n, " entries at byte ", pos_, ")");
    std::vector<T> v(static_cast<size_t>(n));
    if (n > 0) std::memcpy(v.data(), take(v.size() * sizeof(T)), v.size() * sizeof(T));
    return v;
  }
  std::string get_string() {
    const std::vector<char> c = get_vector<char>();
    return std::string(c.begin(), c.end());
  }
  // Reads what put_buckets wrote, replacing m; get_entry(reader, entry&).
  template <typename T, typename Fn>
  void get_buckets(std::map<int, T>& m, Fn get_entry) {
    m.clear();
    const int64_t count = get<int64_t>();
    // Each entry holds at least its 4-byte id: a larger count is a corrupt stream.
    ST_CHECK(count >= 0 && static_cast<uint64_t>(count) <= (size_ - pos_) / sizeof(int32_t), what_,
             ": corrupt sparsifier state (", count, " buckets at byte ", pos_, ")");
    for (int64_t i = count; i > 0; --i) {
      const int32_t id = get<int32_t>();
      get_entry(*this, m[id]);
    }
  }
  // The bytes not read yet (what put_raw appended at the end), leaving the reader done.
  std::vector<uint8_t> get_rest() {
    const size_t n = size_ - pos_;
    const uint8_t* p = take(n);
    return std::vector<uint8_t>(p, p + n);
  }
  bool done() const { return pos_ == size_; }
  const std::string& what() const { return what_; }
  // A resume on another number of ranks (sparsify/resplit.h): the world size the state is
  // loaded for, 0 when it is the one that wrote it. A rule whose state depends on the
  // world size (MiCRO's and ExDyna's partitions) rebuilds that part for it.
  void set_new_world(int world) { new_world_ = world; }
  int new_world() const { return new_world_; }

 private:
  const uint8_t* take(size_t n) {
    ST_CHECK(n <= size_ - pos_, what_, ": sparsifier state ends early (need ", n, " bytes at byte ",
             pos_, " of ", size_, ")");
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  const uint8_t* data_;
  size_t size_, pos_ = 0;
  std::string what_;
  int new_world_ = 0;
};

}  // namespace st
