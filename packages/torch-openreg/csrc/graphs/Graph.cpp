// Graph.cpp - torch.accelerator.Graph on openreg: PyTorch's device-generic
// GraphImplInterface over libopenreg's stream capture (orStreamBeginCapture,
// orGraphInstantiate, orGraphLaunch), with a private memory pool per graph.
// Random kernels draw new numbers at every replay (Note [Random numbers in
// graphs] in Generator.cpp). Not here: torch.cuda.CUDAGraph's capture of
// several streams joined by events, which openreg graphs do not support.

#include <ATen/core/GraphImplInterface.h>

#include <c10/core/DeviceGuard.h>
#include <torch_openreg/Check.h>

#include <atomic>

#include "runtime/Device.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Generator.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

orStreamCaptureMode runtimeMode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::ThreadLocal: return orStreamCaptureModeThreadLocal;
    case at::GraphCaptureMode::Relaxed: return orStreamCaptureModeRelaxed;
    default: return orStreamCaptureModeGlobal;  // Default is Global, as on CUDA
  }
}

// Private pools get ids {0, n}; ids a user passes in (another graph's pool())
// are shared. CUDA numbers graph-private pools the same way.
c10::MempoolId_t newPoolId() {
  static std::atomic<c10::CaptureId_t> next{1};
  return {0, next++};
}

// LITERALINCLUDE START: GRAPH_IMPL
// The contract PyTorch expects (ATen/core/GraphImplInterface.h): capture on
// the current stream of the current device, replay on the current stream,
// reset() releases everything so the object can capture again. Every method
// raises c10::Error on misuse and leaves the object as it was.
class OpenRegGraph final : public at::GraphImplInterface {
 public:
  explicit OpenRegGraph(const at::GraphImplArgs& args) : keepGraph_(args.keep_graph) {}
  ~OpenRegGraph() override {
    try {
      reset();
    } catch (...) {  // a destructor must not throw; reset() frees what it can
    }
  }

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    TORCH_CHECK(!capturing_ && graph_ == nullptr && exec_ == nullptr,
                "openreg graph: this graph already holds a capture; call reset() before capturing again");
    c10::DeviceIndex device = currentDevice();
    c10::Stream stream = currentStream(device);
    TORCH_CHECK(stream != defaultStream(device),
                "openreg graphs must be captured on a non-default stream: capture inside "
                "`with torch.Stream(device=\"openreg\"):` (as CUDA graphs require)");
    c10::MempoolId_t poolId = (pool.first == 0 && pool.second == 0) ? newPoolId() : pool;
    orStreamCaptureMode runtime = runtimeMode(mode);
    beginAllocateToPool(device, poolId, nativeStream(stream), runtime != orStreamCaptureModeRelaxed);
    orError_t status = orStreamBeginCapture(nativeStream(stream), runtime);
    if (status != orSuccess) {
      endAllocateToPool(device, nativeStream(stream));
      releasePool(device, poolId);
      OPENREG_CHECK(status);
    }
    device_ = device;
    stream_ = stream;
    pool_ = poolId;
    randomness_ = beginGraphRandomness(nativeStream(stream));
    capturing_ = true;
  }

  void capture_end() override {
    TORCH_CHECK(capturing_, "openreg graph: capture_end() without capture_begin()");
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    TORCH_CHECK(currentStream(device_) == stream_,
                "openreg graph: capture_end() must be called on the stream the capture began on");
    orGraph_t graph = nullptr;
    orError_t status = orStreamEndCapture(nativeStream(stream_), &graph);
    endAllocateToPool(device_, nativeStream(stream_));
    endGraphRandomness(nativeStream(stream_));
    capturing_ = false;
    if (status != orSuccess) {
      releasePool(device_, pool_);  // an invalidated capture keeps nothing
      OPENREG_CHECK(status);
    }
    graph_ = graph;
    if (!keepGraph_) {
      instantiate();
      if (!debug_) destroyGraph();  // the launchable copy is all a replay needs
    }
  }

  void instantiate() override {
    TORCH_CHECK(graph_ != nullptr, "openreg graph: nothing to instantiate; capture first",
                keepGraph_ ? "" : " (without keep_graph=True the graph is instantiated by capture_end())");
    if (exec_ != nullptr) OPENREG_CHECK(orGraphExecDestroy(exec_));
    exec_ = nullptr;
    OPENREG_CHECK(orGraphInstantiate(&exec_, graph_));
  }

  // Enqueues the whole recorded graph on the current stream in one call.
  void replay() override {
    TORCH_CHECK(!capturing_ && (exec_ != nullptr || graph_ != nullptr),
                "openreg graph: replay() needs a finished capture");
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    if (exec_ == nullptr) instantiate();  // keep_graph=True: first replay instantiates
    orStream_t stream = nativeStream(currentStream(device_));
    randomness_->queueReplaySeeds(stream);
    OPENREG_CHECK(orGraphLaunch(exec_, stream));
  }

  void reset() override {
    if (capturing_) {  // e.g. an exception inside the capture: end it, keep nothing
      orGraph_t discarded = nullptr;
      if (orStreamEndCapture(nativeStream(stream_), &discarded) == orSuccess) orGraphDestroy(discarded);
      endAllocateToPool(device_, nativeStream(stream_));
      endGraphRandomness(nativeStream(stream_));
      capturing_ = false;
      hasPool_ = true;
    }
    bool held = exec_ != nullptr || graph_ != nullptr || hasPool_;
    if (exec_ != nullptr) orGraphExecDestroy(exec_);  // waits for queued replays
    exec_ = nullptr;
    destroyGraph();
    if (held) releasePool(device_, pool_);
    hasPool_ = false;
  }

  c10::MempoolId_t pool() const override { return pool_; }

  // Keeps the captured graph after capture_end() so debug_dump() can print it.
  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(graph_ != nullptr, "openreg graph: debug_dump() needs the captured graph: call "
                "enable_debug_mode() before capturing, or construct the graph with keep_graph=True");
    OPENREG_CHECK(orGraphDebugDotPrint(graph_, path.c_str()));
  }

 private:
  void destroyGraph() {
    if (graph_ != nullptr) orGraphDestroy(graph_);
    graph_ = nullptr;
  }

  const bool keepGraph_;
  bool debug_ = false;
  bool capturing_ = false;
  bool hasPool_ = false;  // a discarded capture still counted on the pool
  c10::DeviceIndex device_ = 0;
  c10::Stream stream_{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  c10::MempoolId_t pool_{0, 0};
  orGraph_t graph_ = nullptr;
  orGraphExec_t exec_ = nullptr;
  std::shared_ptr<GraphRandomness> randomness_;  // the generators its random kernels use
};

}  // namespace

}  // namespace torch_openreg

// PyTorch finds the implementation under c10::DeviceTypeName(PrivateUse1,
// /*lower_case=*/false): the renamed backend's name in capitals. (The macro
// names the registry unqualified, so it is used in namespace at.)
namespace at {
REGISTER_GRAPH_IMPL(OPENREG, torch_openreg::OpenRegGraph);
}  // namespace at
// LITERALINCLUDE END: GRAPH_IMPL
