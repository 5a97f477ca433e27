// Contexts on the emulated devices mean what CUDA's mean: setting a device opens one, a
// device guard restores device 0 on a thread that never chose a device (opening a context
// there), and in exclusive-process mode a second process on a device fails in one line.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "core/device.h"
#include "core/emu/context.h"
#include "core/emu/runtime.h"
#include "core/error.h"
#include "tests/error_text.h"

namespace st::test {
namespace {

// A guard on a thread that never chose a device restores device 0, as cudaSetDevice does:
// the thread opens a context there. With the process's device set first it does not.
TEST(EmuContext, AGuardOnAnUnboundThreadOpensDeviceZero) {
  set_process_device(Device::cpu());
  const int before = emu::context_threads(0);
  std::thread([] { emu::DeviceGuard guard(5); }).join();
  EXPECT_EQ(emu::context_threads(0), before + 1) << "the guard's restore opened emu:0";
  set_process_device(Device::emu(5));
  std::thread([] { emu::DeviceGuard guard(5); }).join();
  EXPECT_EQ(emu::context_threads(0), before + 1) << "a bound thread never touches emu:0";
  set_process_device(Device::cpu());
  emu::set_thread_device(0);
}

// Rank 0 holds emu:6 (a forked process); this process is "rank 1" opening a context on
// it: one line naming the device and the holder. Once the holder exits, the device is free.
TEST(EmuContext, ASecondProcessOnAnExclusiveDeviceFails) {
  char dir[] = "/tmp/st-emu-exclusive-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  emu::set_exclusive_dir(dir);
  int up[2], down[2];
  ASSERT_EQ(::pipe(up), 0);
  ASSERT_EQ(::pipe(down), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    char c = 'x';
    try {
      emu::set_thread_device(6);
      c = 'y';
    } catch (...) {
    }
    (void)!::write(up[1], &c, 1);
    (void)!::read(down[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(up[0], &c, 1), 1);
  ASSERT_EQ(c, 'y') << "the holder could not open emu:6";
  const std::string err = error_of([] { emu::set_thread_device(6); });
  EXPECT_NE(err.find("emu:6 is in exclusive-process mode and process " + std::to_string(holder) +
                     " holds a context on it"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << "one line";
  (void)!::write(down[1], &c, 1);
  int status = 0;
  ::waitpid(holder, &status, 0);
  EXPECT_NO_THROW(emu::set_thread_device(6)) << "the holder has exited";
  emu::set_exclusive_dir("");
  emu::set_thread_device(0);
  for (int fd : {up[0], up[1], down[0], down[1]}) ::close(fd);
}

}  // namespace
}  // namespace st::test
