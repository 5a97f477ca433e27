#include "comm/split_communicator.h"

#include "comm/mpi_communicator.h"
#include "core/error.h"

namespace st {

class SplitCommunicator::Entry {
 public:
  Entry(Plane& plane, int rank) : plane_(plane) {
    std::thread::id none{};
    ST_CHECK(plane.inside.compare_exchange_strong(none, std::this_thread::get_id()), "the ",
             plane.name, " communicator of rank ", rank,
             " was entered by two threads at once (collectives on one communicator must come "
             "from one thread at a time)");
  }
  ~Entry() { plane_.inside.store(std::thread::id{}); }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

 private:
  Plane& plane_;
};

SplitCommunicator::SplitCommunicator(std::unique_ptr<Communicator> host,
                                     std::unique_ptr<Communicator> device, DeviceFactory remake)
    : host_(std::move(host)), device_(std::move(device)), remake_(std::move(remake)) {
  ST_CHECK(host_ && device_, "SplitCommunicator: both a host and a device backend are needed");
  ST_CHECK(host_->size() == device_->size() && host_->rank() == device_->rank(),
           "SplitCommunicator: the ", device_->backend(), " communicator (rank ", device_->rank(),
           " of ", device_->size(), ") does not match its ", host_->backend(), " bootstrap (rank ",
           host_->rank(), " of ", host_->size(), ")");
  host_plane_.comm = host_.get();
  host_plane_.name = "host";
  device_plane_.comm = device_.get();
  device_plane_.name = "device";
}

SplitCommunicator::~SplitCommunicator() {
  wait_idle();  // queued exchanges still use both planes
}

SplitCommunicator::Plane& SplitCommunicator::plane_of(const Tensor& t) {
  return t.device().is_cpu() ? host_plane_ : device_plane_;
}

SplitCommunicator::Plane& SplitCommunicator::plane_of(const Tensor& in, const Tensor& out,
                                                      const char* op) {
  ST_CHECK(in.device().is_cpu() == out.device().is_cpu(), backend(), " ", op, ": input ", in.str(),
           " on ", in.device().str(), " and output ", out.str(), " on ", out.device().str(),
           " must both be host or both be device memory");
  return plane_of(in);
}

void SplitCommunicator::allreduce(Tensor& t, ReduceOp op) {
  Plane& p = plane_of(t);
  Entry e(p, rank());
  p.comm->allreduce(t, op);
}

void SplitCommunicator::allgather(const Tensor& in, Tensor& out) {
  Plane& p = plane_of(in, out, "allgather");
  Entry e(p, rank());
  p.comm->allgather(in, out);
}

void SplitCommunicator::allgatherv(const Tensor& in, Tensor& out,
                                   const std::vector<int64_t>& counts) {
  Plane& p = plane_of(in, out, "allgatherv");
  Entry e(p, rank());
  p.comm->allgatherv(in, out, counts);
}

void SplitCommunicator::broadcast(Tensor& t, int root) {
  Plane& p = plane_of(t);
  Entry e(p, rank());
  p.comm->broadcast(t, root);
}

void SplitCommunicator::barrier() {
  Entry e(host_plane_, rank());
  host_->barrier();
}

void SplitCommunicator::reduce_scatter(const Tensor& in, Tensor& out,
                                       const std::vector<int64_t>& counts) {
  Plane& p = plane_of(in, out, "reduce_scatter");
  Entry e(p, rank());
  p.comm->reduce_scatter(in, out, counts);
}

std::unique_ptr<Communicator> SplitCommunicator::split(int color, int key) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(host_.get());
  ST_CHECK(mpi && remake_, "the ", backend(), " communicator cannot be split into groups");
  Entry e(host_plane_, rank());
  std::unique_ptr<MpiCommunicator> host = mpi->split_mpi(color, key);
  std::unique_ptr<Communicator> device = remake_(*host);
  return std::make_unique<SplitCommunicator>(std::move(host), std::move(device), remake_);
}

std::vector<std::string> SplitCommunicator::gather_bytes(const std::string& mine, int root) {
  Entry e(host_plane_, rank());
  return host_->gather_bytes(mine, root);
}

}  // namespace st
