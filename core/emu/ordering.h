// What a thread or a task of the emulated device is ordered after, kept as a race
// detector keeps it (a vector clock): per stream, how many of its tasks are known to have
// run before. Stream order passes it from task to task, Event::record and Stream::wait
// pass it between streams, and a host's Event::synchronize or Stream::synchronize passes
// it to the host thread, which hands it to the work it queues next. A read noted on
// device memory (note_read) and a later write from another stream (check_write_ordered)
// are then compared by what orders them, not by when they happened to run: a missing
// event is an error on every run, however the timing falls (compute-sanitizer's racecheck
// and ThreadSanitizer reason the same way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace st::emu {

class Stream;

struct OrderingClock {
  // Stream number (creation order) -> how many of its first tasks are ordered before.
  std::map<int, uint64_t> after;

  void merge(const OrderingClock& other);
  bool covers(int stream, uint64_t tasks) const;
};

// The calling thread's clock: inside a stream task the task's own, else the host
// thread's.
OrderingClock& thread_clock();
// Makes `clock` the calling thread's for a scope (the executor, around each task).
class TaskClockScope {
 public:
  explicit TaskClockScope(OrderingClock& clock);
  ~TaskClockScope();
  TaskClockScope(const TaskClockScope&) = delete;
  TaskClockScope& operator=(const TaskClockScope&) = delete;

 private:
  OrderingClock* prev_;
};

// Notes that the task queued last on `s` reads [data, data + bytes); `reader` names it
// in an error. A later note on the same range replaces it.
void note_read(Stream& s, const void* data, size_t bytes, const std::string& reader);
// Throws one line when [data, data + bytes) has a noted read that the calling thread or
// task is not ordered after. `writer` names the write.
void check_write_ordered(const void* data, size_t bytes, const std::string& writer);
// Drops the notes on a block being freed.
void forget_reads(const void* data, size_t bytes);

}  // namespace st::emu
