#include "core/emu/ordering.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/emu/stream.h"
#include "core/error.h"

namespace st::emu {

void OrderingClock::merge(const OrderingClock& other) {
  for (const auto& [stream, tasks] : other.after) {
    uint64_t& mine = after[stream];
    mine = std::max(mine, tasks);
  }
}

bool OrderingClock::covers(int stream, uint64_t tasks) const {
  const auto it = after.find(stream);
  return it != after.end() && it->second >= tasks;
}

namespace {

thread_local OrderingClock* t_task_clock = nullptr;

struct NotedRead {
  const char* begin;
  size_t bytes;
  int stream;
  uint64_t position;  // the reading task is the stream's position-th
  std::string reader;
};

struct Notes {
  std::mutex mu;
  std::vector<NotedRead> reads;
};

Notes& notes() {
  static Notes n;
  return n;
}

bool overlaps(const NotedRead& r, const char* begin, size_t bytes) {
  return r.begin < begin + bytes && begin < r.begin + r.bytes;
}

}  // namespace

OrderingClock& thread_clock() {
  thread_local OrderingClock host;
  return t_task_clock != nullptr ? *t_task_clock : host;
}

TaskClockScope::TaskClockScope(OrderingClock& clock) : prev_(t_task_clock) {
  t_task_clock = &clock;
}

TaskClockScope::~TaskClockScope() {
  t_task_clock = prev_;
}

void note_read(Stream& s, const void* data, size_t bytes, const std::string& reader) {
  const auto* begin = static_cast<const char*>(data);
  NotedRead read{begin, bytes, s.number(), s.tasks_queued(), reader};
  Notes& n = notes();
  std::lock_guard<std::mutex> lock(n.mu);
  for (NotedRead& r : n.reads) {
    if (r.begin == begin && r.bytes == bytes) {
      r = std::move(read);
      return;
    }
  }
  n.reads.push_back(std::move(read));
}

void check_write_ordered(const void* data, size_t bytes, const std::string& writer) {
  const auto* begin = static_cast<const char*>(data);
  const OrderingClock& clock = thread_clock();
  Notes& n = notes();
  std::lock_guard<std::mutex> lock(n.mu);
  for (const NotedRead& r : n.reads) {
    if (!overlaps(r, begin, bytes) || clock.covers(r.stream, r.position)) continue;
    ST_THROW("emu: ", writer, " is not ordered after ", r.reader, " (task ", r.position,
             " of stream ", r.stream,
             "), which reads that memory: no event orders the write "
             "after the read, so on a GPU it may land first");
  }
}

void forget_reads(const void* data, size_t bytes) {
  const auto* begin = static_cast<const char*>(data);
  Notes& n = notes();
  std::lock_guard<std::mutex> lock(n.mu);
  std::erase_if(n.reads, [&](const NotedRead& r) { return overlaps(r, begin, bytes); });
}

}  // namespace st::emu
