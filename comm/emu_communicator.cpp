// EmuCommunicator: the emulated device's collective backend, with NCCL's rules. It takes
// emulated device memory only (host tensors go to the MPI plane of the SplitCommunicator
// make_communicator builds around it), admits one calling thread at a time, and runs each
// collective on its own stream, which first waits on an event recorded on the calling
// thread's current stream (nothing else orders the two); the call returns when that stream
// is done. Underneath, the stream's executor runs MPI on a duplicate of the bootstrap
// communicator, while the host plane may use MPI from another thread: MPI must run at
// MPI_THREAD_MULTIPLE (make_communicator asks for it when the device is emulated).
#include <mpi.h>

#include <atomic>
#include <thread>

#include "comm/mpi_communicator.h"
#include "core/emu/context.h"
#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "core/error.h"

namespace st {

namespace {

class EmuCommunicator : public Communicator {
 public:
  EmuCommunicator(const MpiCommunicator& bootstrap, int device) : device_(device) {
    int level = 0;
    MPI_Query_thread(&level);
    ST_CHECK(level == MPI_THREAD_MULTIPLE, "--comm emu on rank ", bootstrap.rank(),
             ": MPI runs at thread level ", level,
             ", the emulated collective needs MPI_THREAD_MULTIPLE (start the process's first "
             "communicator with make_communicator(..., \"emu\"))");
    ST_CHECK(device >= 0 && device < emu::device_count(), "--comm emu on rank ", bootstrap.rank(),
             ": no device emu:", device);
    mpi_ = bootstrap.duplicate();
    emu::DeviceGuard guard(device_);  // as NcclCommunicator's constructor does
    stream_ = std::make_unique<emu::Stream>(device_);
  }
  ~EmuCommunicator() override { wait_idle(); }

  std::string backend() const override { return "emu"; }
  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  NodePlacement placement() const override { return mpi_->placement(); }

  void allreduce(Tensor& t, ReduceOp op) override {
    Caller c(*this, {&t}, "allreduce");
    run([&] {
      Tensor h = t.as_host_memory();
      mpi_->allreduce(h, op);
    });
  }
  void allgather(const Tensor& in, Tensor& out) override {
    Caller c(*this, {&in, &out}, "allgather");
    run([&] {
      Tensor o = out.as_host_memory();
      mpi_->allgather(in.as_host_memory(), o);
    });
  }
  void allgatherv(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) override {
    Caller c(*this, {&in, &out}, "allgatherv");
    run([&] {
      Tensor o = out.as_host_memory();
      mpi_->allgatherv(in.as_host_memory(), o, counts);
    });
  }
  void broadcast(Tensor& t, int root) override {
    Caller c(*this, {&t}, "broadcast");
    run([&] {
      Tensor h = t.as_host_memory();
      mpi_->broadcast(h, root);
    });
  }
  void barrier() override { mpi_->barrier(); }
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    return mpi_->gather_bytes(mine, root);
  }

 private:
  // One call in progress: emulated tensors of this device, from one thread at a time.
  class Caller {
   public:
    Caller(EmuCommunicator& c, std::initializer_list<const Tensor*> tensors, const char* op)
        : c_(c) {
      for (const Tensor* t : tensors)
        ST_CHECK(t->device() == Device::emu(c.device_), "emu collective ", op, " on rank ",
                 c.rank(), ": tensor ", t->str(), " is not on emu:", c.device_,
                 " (the device collective takes its device's memory only; host tensors go to "
                 "MPI)");
      std::thread::id none{};
      ST_CHECK(c.inside_.compare_exchange_strong(none, std::this_thread::get_id()),
               "emu collective ", op, " on rank ", c.rank(),
               ": a second thread entered the communicator while another is inside");
    }
    ~Caller() { c_.inside_.store(std::thread::id{}); }
    Caller(const Caller&) = delete;
    Caller& operator=(const Caller&) = delete;

   private:
    EmuCommunicator& c_;
  };

  // The collective's stream waits for everything the caller queued so far (its input may
  // still be in flight there), runs `op`, and the host waits for it.
  template <typename Op>
  void run(Op op) {
    ready_.record(emu::current_stream(device_));
    stream_->wait(ready_);
    stream_->enqueue(op);
    stream_->synchronize();
  }

  int device_;
  std::unique_ptr<MpiCommunicator> mpi_;
  std::unique_ptr<emu::Stream> stream_;
  emu::Event ready_;
  std::atomic<std::thread::id> inside_{};
};

}  // namespace

std::unique_ptr<Communicator> make_emu_communicator(const MpiCommunicator& bootstrap, int device) {
  return std::make_unique<EmuCommunicator>(bootstrap, device);
}

}  // namespace st
