// The emulated accelerator enforces a GPU's rules on the CPU: its memory is not host
// memory, its streams run asynchronously and are ordered only by events, and a thread
// works on one device at a time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "core/emu/task_observer.h"
#include "core/error.h"
#include "core/tensor.h"
#include "tests/error_text.h"

namespace st::test {
namespace {

using Clock = std::chrono::steady_clock;

// Sets the executors' task delay for a scope.
class Delay {
 public:
  explicit Delay(int us) { emu::set_task_delay_us(us); }
  ~Delay() { emu::set_task_delay_us(0); }
};

TEST(EmuDevice, HostCodeCannotReadOrWriteDeviceMemory) {
  Tensor t = Tensor::full({4}, 2.5f, Device::emu(0));
  const std::string read = error_of([&] { (void)t.f32()[0]; });
  EXPECT_NE(read.find("host code touched the memory of float32[4] on emu:0"), std::string::npos)
      << read;
  EXPECT_EQ(read.find('\n'), std::string::npos) << "one line";
  EXPECT_THROW(t.raw(), Error);
  EXPECT_THROW(t.as_host_memory(), Error);
  // Copies go through the stream and are fine.
  EXPECT_EQ(t.to_vector(), std::vector<float>(4, 2.5f));
  Tensor back = Tensor::from_vector({1, 2, 3, 4}, {4});
  t.copy_from(back);
  EXPECT_EQ(t.to(Device::cpu()).to_vector(), (std::vector<float>{1, 2, 3, 4}));
  t.zero();
  EXPECT_EQ(t.to_vector(), std::vector<float>(4, 0.0f));
  // The CPU is untouched by all this.
  EXPECT_EQ(back.f32()[3], 4.0f);
}

TEST(EmuDevice, ItsStreamsReachItsMemory) {
  Tensor t = Tensor::zeros({2}, DType::F32, Device::emu(0));
  emu::Stream& s = emu::current_stream(0);
  s.enqueue([t] { t.as_host_memory().f32()[1] = 7.0f; });
  s.synchronize();
  EXPECT_EQ(t.to_vector(), (std::vector<float>{0.0f, 7.0f}));
}

TEST(EmuDevice, ParsedLikeCudaWithLocalRanks) {
  EXPECT_EQ(parse_device("emu:1"), Device::emu(1));
  EXPECT_EQ(Device::emu(3).str(), "emu:3");
  EXPECT_EQ(parse_device("emu", NodePlacement{6, 2, 4}), Device::emu(2));
  EXPECT_THROW(parse_device("emu:x"), Error);
  EXPECT_THROW(parse_device("emu:" + std::to_string(emu_device_count())), Error);
  const std::string crowded = error_of([] { local_emu({9, 1, emu_device_count() + 1}); });
  EXPECT_NE(crowded.find("rank 9"), std::string::npos) << crowded;
  // "auto" never picks the emulated device.
  EXPECT_FALSE(parse_device("auto").is_emu());
}

TEST(EmuDevice, AThreadWorksOnTheDeviceItBound) {
  Tensor on1 = Tensor::empty({2}, DType::F32, Device::emu(1));  // allocation touches nothing
  // This thread never bound a device: it works on emu:0, as a CUDA thread on GPU 0.
  const std::string unbound = error_of([&] { on1.to_vector(); });
  EXPECT_NE(unbound.find("on emu:1 from a thread that works on emu:0"), std::string::npos)
      << unbound;
  std::string other;
  std::thread([&] {
    emu::set_thread_device(1);
    on1.zero();
    EXPECT_EQ(on1.to_vector(), std::vector<float>(2, 0.0f));
    Tensor on0 = Tensor::empty({2}, DType::F32, Device::emu(0));
    other = error_of([&] { on0.to_vector(); });
  }).join();
  EXPECT_NE(other.find("on emu:0 from a thread that works on emu:1"), std::string::npos) << other;
}

TEST(EmuStream, HostCallsReturnAtOnceAndSynchronizeWaits) {
  Delay delay(50000);
  emu::Stream s(0);
  std::atomic<int> ran{0};
  const auto start = Clock::now();
  s.enqueue([&] { ++ran; });
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(25));
  EXPECT_EQ(ran.load(), 0);
  EXPECT_FALSE(s.ready());
  s.synchronize();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
}

// Two tasks on stream a (two delays) before the write, one on b before the read: without
// an event the read runs first and sees the old value; with one it sees the write.
int read_after_write(bool with_event) {
  Delay delay(40000);
  emu::Stream a(0), b(0);
  std::atomic<int> x{0}, seen{-1};
  emu::Event written;
  a.enqueue([] {});
  a.enqueue([&] { x = 1; });
  if (with_event) {
    written.record(a);
    b.wait(written);
  }
  b.enqueue([&] { seen = x.load(); });
  b.synchronize();
  a.synchronize();
  return seen.load();
}

TEST(EmuStream, AnEventOrdersTwoStreams) {
  EXPECT_EQ(read_after_write(true), 1);
}

TEST(EmuStream, WithoutAnEventTwoStreamsAreNotOrdered) {
  EXPECT_EQ(read_after_write(false), 0);
}

TEST(EmuStream, EventsMeanWhatCudasMean) {
  emu::Stream a(0), b(0);
  emu::Event never;
  EXPECT_TRUE(never.ready());  // never recorded: complete
  b.wait(never);               // a no-op
  b.synchronize();
  Delay delay(20000);
  emu::Event e;
  a.enqueue([] {});
  e.record(a);
  EXPECT_FALSE(e.ready());
  e.synchronize();
  EXPECT_TRUE(e.ready());
}

TEST(EmuStream, ATaskErrorSurfacesAtTheNextSynchronize) {
  emu::Stream s(0);
  std::atomic<bool> later{false};
  s.enqueue([] { ST_THROW("kernel failed"); });
  s.enqueue([&] { later = true; });  // later work still runs, so events complete
  const std::string e = error_of([&] { s.synchronize(); });
  EXPECT_NE(e.find("kernel failed"), std::string::npos) << e;
  EXPECT_TRUE(later.load());
  EXPECT_NO_THROW(s.synchronize());
}

// What a task observer is told, copied (the names live only during the call).
struct Seen {
  int stream;
  std::string kind, what;
  std::thread::id queued_by;
  Clock::time_point queued, begin, end;
};

TEST(EmuStream, ATaskObserverHearsOfEveryTaskQueuedWhileItWasSetOnceItRan) {
  Delay delay(5000);
  emu::Stream s(0, "copy"), other(0);
  s.enqueue([] {});  // queued before the observer: not reported
  std::vector<Seen> seen;
  emu::set_task_observer([&seen](const emu::TaskRun& r) {
    seen.push_back({r.stream, r.stream_kind, r.what, r.queued_by, r.queued, r.begin, r.end});
  });
  EXPECT_TRUE(emu::observing_tasks());
  s.enqueue([] {});
  s.enqueue([] {}, /*slow=*/false);
  s.enqueue([] {}, true, "a layer");
  emu::Event e;
  e.record(s);
  other.wait(e);
  other.synchronize();
  s.synchronize();
  emu::set_task_observer(nullptr);  // every report is in once this returns
  EXPECT_FALSE(emu::observing_tasks());
  s.enqueue([] {});  // after: not reported
  s.synchronize();

  // Each executor reports its own stream's tasks in queue order; the two streams' reports
  // interleave as their executors reach the observer (the wait can finish, and be
  // reported, before the record's executor reports the record), so split them by stream.
  ASSERT_EQ(seen.size(), 5u);
  const int s_id = seen[0].stream;  // s reports its first task before the record runs
  std::vector<Seen> on_s_seen, on_other;
  for (const Seen& r : seen) (r.stream == s_id ? on_s_seen : on_other).push_back(r);
  const std::vector<std::string> on_s = {"kernel", "copy", "a layer", "record event"};
  ASSERT_EQ(on_s_seen.size(), on_s.size());
  ASSERT_EQ(on_other.size(), 1u);
  for (size_t i = 0; i < on_s.size(); ++i) {
    const Seen& r = on_s_seen[i];
    EXPECT_EQ(r.what, on_s[i]) << i;
    EXPECT_EQ(r.kind, "copy");
    EXPECT_EQ(r.queued_by, std::this_thread::get_id());
    EXPECT_LE(r.queued, r.begin);
    EXPECT_LE(r.begin, r.end);
    if (i > 0) {
      EXPECT_LE(on_s_seen[i - 1].end, r.begin) << "in queue order";
    }
  }
  // A kernel's delay runs inside its span.
  EXPECT_GE(on_s_seen[0].end - on_s_seen[0].begin, std::chrono::microseconds(5000));
  const Seen& wait = on_other[0];
  EXPECT_EQ(wait.what, "wait for event");
  EXPECT_EQ(wait.kind, "");
  EXPECT_GE(wait.end, on_s_seen[3].begin) << "the other stream waited for the event's position";
}

}  // namespace
}  // namespace st::test
