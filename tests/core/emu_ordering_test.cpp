// The emulated device's ordering clocks (core/emu/ordering.h): a write from one stream
// after a read queued on another is accepted only when stream order or an event orders
// it after the read, whether or not the read has already run.

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "core/emu/ordering.h"
#include "core/emu/stream.h"
#include "tests/error_text.h"

namespace st::test {
namespace {

// A block of "device memory" the tests only take addresses of.
float block[64];

// Queues a read of `block` on `s` and notes it.
void queue_read(emu::Stream& s) {
  s.enqueue([] {});
  emu::note_read(s, block, sizeof(block), "the test's reader");
}

// The write's check, run as a task on `s`; returns its error ("" if ordered).
std::string write_on(emu::Stream& s) {
  s.enqueue([] { emu::check_write_ordered(block, sizeof(block), "the test's writer"); });
  return error_of([&] { s.synchronize(); });
}

TEST(EmuOrdering, AWriteAfterAHostWaitOnAnEventPastTheReadIsOrdered) {
  emu::Stream compute(0), comm(0);
  queue_read(compute);
  emu::Event after_read;
  after_read.record(compute);
  after_read.synchronize();  // the host learns the read has run, and so does its next work
  EXPECT_EQ(write_on(comm), "");
  emu::forget_reads(block, sizeof(block));
}

TEST(EmuOrdering, AnEventBeforeTheReadDoesNotOrderTheWriteEvenWhenTheReadHasRun) {
  emu::Stream compute(0), comm(0);
  emu::Event before_read;
  before_read.record(compute);
  queue_read(compute);
  compute.synchronize();  // the read has run; only the event is passed to the writer's thread
  std::string e;
  std::thread t([&] {
    before_read.synchronize();
    e = write_on(comm);
  });
  t.join();
  EXPECT_NE(e.find("the test's writer is not ordered after the test's reader"), std::string::npos)
      << e;
  emu::forget_reads(block, sizeof(block));
}

TEST(EmuOrdering, AStreamWaitingOnAnEventIsOrderedAfterWhatTheEventFollows) {
  emu::Stream compute(0), comm(0);
  queue_read(compute);
  std::string e;
  std::thread t([&] {
    emu::Event after_read;
    after_read.record(compute);
    comm.wait(after_read);  // cudaStreamWaitEvent: the device waits, not the host
    e = write_on(comm);
  });
  t.join();
  EXPECT_EQ(e, "");
  emu::forget_reads(block, sizeof(block));
}

TEST(EmuOrdering, StreamOrderOrdersAWriteAfterAReadOnTheSameStream) {
  emu::Stream compute(0);
  std::string e;
  std::thread t([&] {
    queue_read(compute);
    e = write_on(compute);
  });
  t.join();
  EXPECT_EQ(e, "");
  emu::forget_reads(block, sizeof(block));
}

}  // namespace
}  // namespace st::test
