// Collectives.cpp - every collective of c10d::Backend, each written once on
// top of the transport's exchange: every rank contributes some of its
// tensors, then reads what it needs from the others' contributions. The
// host half checks the arguments and describes the collective; the body
// runs later, inside the kernel, on host views of the tensors (inputs, then
// outputs, in the order given to launch()). Not here: streams and works
// (Backend.cpp), moving bytes (the transports).
#include <ATen/ATen.h>

#include <numeric>

#include "Backend.h"
#include "Rendezvous.h"
#include "Reduce.h"
#include "SpeedLayer.h"

namespace occl {

namespace {

// What every rank must agree on: the collective, dtypes and shapes, extras.
std::string signatureOf(const char* op, const std::vector<at::Tensor>& tensors, const std::string& extra = "") {
  std::string out = op;
  for (const at::Tensor& t : tensors) out += std::string(" ") + c10::toString(t.scalar_type()) + c10::str(t.sizes());
  return extra.empty() ? out : out + " " + extra;
}

// The tensors shaped like `likes`, as packed in one rank's contribution.
std::vector<at::Tensor> unpackAll(const at::Tensor& bytes, const std::vector<at::Tensor>& likes) {
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (const at::Tensor& like : likes) {
    out.push_back(unpack(bytes, offset, like.scalar_type(), like.sizes()));
    offset += packedBytes({like});
  }
  return out;
}

// Views [first, first + count) of views.
std::vector<at::Tensor> slice(const std::vector<at::Tensor>& views, size_t first, size_t count) {
  return std::vector<at::Tensor>(views.begin() + first, views.begin() + first + count);
}

// Chunk r of world equal chunks of t, flattened.
at::Tensor chunk(const at::Tensor& t, int r, int world) {
  int64_t n = t.numel() / world;
  return t.reshape(-1).narrow(0, r * n, n);
}

void checkCount(const char* op, size_t got, size_t expected, const char* what) {
  TORCH_CHECK(got == expected, "occl: ", op, " expects ", expected, " ", what, ", got ", got);
}

// Each of `tensors` (named `what`) must hold as many elements of the same
// dtype as `like`: checked on the host, before any rank waits for the others.
void checkEachLike(const char* op, const std::vector<at::Tensor>& tensors, const at::Tensor& like, const char* what,
                   const char* likeWhat) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    TORCH_CHECK(tensors[i].numel() == like.numel() && tensors[i].scalar_type() == like.scalar_type(), "occl: ", op,
                " needs ", what, " of the ", likeWhat, "'s dtype and number of elements (", like.scalar_type(), ", ",
                like.numel(), "); ", what, " ", i, " is ", tensors[i].scalar_type(), " with ", tensors[i].numel(),
                " elements");
  }
}

// The rows (or elements) each rank sends to each other rank must be what
// that rank expects from it. Every rank posts both its send and its
// receive counts (extras: sends, then receives), so every rank checks the
// whole exchange and all fail together, not only the ones short-changed.
void checkExchangeCounts(const CollectiveName& name, const std::vector<std::vector<int64_t>>& extras, int world,
                         const char* unit) {
  for (int s = 0; s < world; ++s) {
    for (int r = 0; r < world; ++r) {
      int64_t sent = extras[s][r], expected = extras[r][world + s];
      if (sent == expected) continue;
      throw CollectiveError("occl: " + name.str() + ": rank " + std::to_string(s) + " sends " + std::to_string(sent) +
                            " " + unit + " to rank " + std::to_string(r) + ", which expects " +
                            std::to_string(expected) + " (its output split sizes); every rank's input split sizes "
                            "must match the other ranks' output split sizes");
    }
  }
}

// A reduction as a kernel captures it: the op, PREMUL_SUM's factor as a
// host value (undefined for the other ops), and its name for the signature.
struct Reduction {
  c10d::ReduceOp op;
  at::Tensor factor;
  std::string name;
};

Reduction reductionOf(const c10d::ReduceOp& op) {
  Reduction reduction{op, at::Tensor(), reduceOpName(op)};
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supplement, "occl: ReduceOp.PREMUL_SUM without a factor");
    reduction.factor = supplement->tensor_factor.defined() ? supplement->tensor_factor.to(at::kCPU).reshape({})
                                                           : at::scalar_tensor(supplement->double_factor, at::kDouble);
  }
  return reduction;
}

// LITERALINCLUDE START: OCCL_REDUCE_EACH_VIEW
// The body of allreduce, allreduce_coalesced and reduce: every rank
// contributes its views; where keeps, each view becomes its reduction over
// the ranks (a reduce's other ranks only contribute).
CollectiveBody reduceEachView(std::string signature, Reduction reduction, bool keeps) {
  return [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    Contributions all = transport.exchange(name, {views, signature, {}}, timeout);
    if (!keeps) return;
    std::vector<std::vector<at::Tensor>> byRank;
    for (const at::Tensor& bytes : all.bytes) byRank.push_back(unpackAll(bytes, views));
    for (size_t i = 0; i < views.size(); ++i) {
      std::vector<at::Tensor> parts;
      for (const auto& tensorsOfRank : byRank) parts.push_back(tensorsOfRank[i]);
      reduceInto(views[i], parts, reduction.op, reduction.factor);
    }
  };
}
// LITERALINCLUDE END: OCCL_REDUCE_EACH_VIEW

}  // namespace

OcclBackend::Collective OcclBackend::collective(const char* op, c10d::OpType type, std::vector<at::Tensor> inputs,
                                                std::vector<at::Tensor> outputs,
                                                const std::vector<at::Tensor>& contributed,
                                                std::chrono::milliseconds requested) const {
  Collective c{op, type, std::move(inputs), std::move(outputs)};
  c.contributionBytes = packedBytes(contributed);
  c.contributed = contributed;
  c.timeout = timeoutOf(requested);
  return c;
}

c10::intrusive_ptr<c10d::Work> OcclBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  checkCount("broadcast", tensors.size(), 1, "tensor");
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == getRank();
  Collective c = collective("broadcast", c10d::OpType::BROADCAST, {}, tensors, isRoot ? tensors : std::vector<at::Tensor>{},
                            opts.timeout);
  std::string signature = signatureOf("broadcast", tensors, "root " + std::to_string(root));
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    Contributions all = transport.exchange(name, {isRoot ? views : std::vector<at::Tensor>{}, signature, {}}, timeout);
    if (!isRoot) views[0].copy_(unpackAll(all.bytes[root], views)[0]);
  };
  return launch(std::move(c));
}

// LITERALINCLUDE START: OCCL_ALLREDUCE
c10::intrusive_ptr<c10d::Work> OcclBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  checkCount("allreduce", tensors.size(), 1, "tensor");
  checkReduceOp(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
  Collective c = collective("allreduce", c10d::OpType::ALLREDUCE, {}, tensors, tensors, opts.timeout);
  Reduction reduction = reductionOf(opts.reduceOp);
  std::string signature = signatureOf("allreduce", tensors, reduction.name);
  c.body = reduceEachView(signature, reduction, /*keeps=*/true);
  // The speed layer's seam (Note [occl's deletable speed layer]): it replaces the body when it applies.
  AllreduceSpeedLayer faster = allreduceSpeedLayer();
  if (faster != nullptr && !runsOnTheHost(c)) {  // a host run takes the plain body (runOnTheHost)
    if (auto body = faster(*transport_, tensors[0], signature, reduction.op, reduction.factor)) c.body = *body;
  }
  return launch(std::move(c));
}
// LITERALINCLUDE END: OCCL_ALLREDUCE

c10::intrusive_ptr<c10d::Work> OcclBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                const c10d::AllreduceCoalescedOptions& opts) {
  for (const at::Tensor& t : tensors) checkReduceOp(opts.reduceOp, t.scalar_type(), "allreduce_coalesced");
  Collective c = collective("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, {}, tensors, tensors,
                            opts.timeout);
  Reduction reduction = reductionOf(opts.reduceOp);
  c.body = reduceEachView(signatureOf("allreduce_coalesced", tensors, reduction.name), reduction, /*keeps=*/true);
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  checkCount("reduce", tensors.size(), 1, "tensor");
  checkReduceOp(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  Collective c = collective("reduce", c10d::OpType::REDUCE, {}, tensors, tensors, opts.timeout);
  int root = static_cast<int>(opts.rootRank);
  Reduction reduction = reductionOf(opts.reduceOp);
  std::string signature = signatureOf("reduce", tensors, reduction.name + " root " + std::to_string(root));
  c.body = reduceEachView(signature, reduction, /*keeps=*/root == getRank());
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const c10d::AllgatherOptions& opts) {
  checkCount("allgather", outputs.size(), inputs.size(), "output lists (one per input)");
  int world = getSize();
  std::vector<at::Tensor> flat;
  for (size_t i = 0; i < outputs.size(); ++i) {
    checkCount("allgather", outputs[i].size(), world, "output tensors per input (one per rank)");
    for (const at::Tensor& out : outputs[i]) {
      TORCH_CHECK(out.numel() == inputs[i].numel() && out.scalar_type() == inputs[i].scalar_type(),
                  "occl: allgather output tensors must match the input in dtype and number of elements");
    }
    flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
  }
  Collective c = collective("allgather", c10d::OpType::ALLGATHER, inputs, flat, inputs, opts.timeout);
  std::string signature = signatureOf("allgather", inputs);
  size_t count = inputs.size();
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    std::vector<at::Tensor> mine = slice(views, 0, count);
    Contributions all = transport.exchange(name, {mine, signature, {}}, timeout);
    for (int r = 0; r < world; ++r) {
      std::vector<at::Tensor> theirs = unpackAll(all.bytes[r], mine);
      for (size_t i = 0; i < count; ++i) views[count + i * world + r].view_as(theirs[i]).copy_(theirs[i]);
    }
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  checkCount("allgather", inputs.size(), 1, "input tensor");
  return allgather_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> OcclBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                            std::vector<at::Tensor>& inputs,
                                                                            const c10d::AllgatherOptions& opts) {
  checkCount("all_gather_into_tensor", outputs.size(), inputs.size(), "outputs (one per input)");
  int world = getSize();
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * world && outputs[i].scalar_type() == inputs[i].scalar_type(),
                "occl: all_gather_into_tensor needs an output of the input's dtype with world size (", world,
                ") times its elements; got ", outputs[i].numel(), " for an input of ", inputs[i].numel());
  }
  Collective c = collective("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, inputs, outputs, inputs,
                            opts.timeout);
  std::string signature = signatureOf("all_gather_into_tensor", inputs);
  size_t count = inputs.size();
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    std::vector<at::Tensor> mine = slice(views, 0, count);
    Contributions all = transport.exchange(name, {mine, signature, {}}, timeout);
    for (int r = 0; r < world; ++r) {
      std::vector<at::Tensor> theirs = unpackAll(all.bytes[r], mine);
      for (size_t i = 0; i < count; ++i) chunk(views[count + i], r, world).copy_(theirs[i].reshape(-1));
    }
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return allgather_into_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> OcclBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  checkCount("gather", inputs.size(), 1, "input tensor");
  int root = static_cast<int>(opts.rootRank), world = getSize();
  bool isRoot = root == getRank();
  std::vector<at::Tensor> flat = isRoot && !outputs.empty() ? outputs[0] : std::vector<at::Tensor>{};
  if (isRoot) checkCount("gather", flat.size(), world, "output tensors on the root (one per rank)");
  checkEachLike("gather", flat, inputs[0], "output tensors", "input");
  Collective c = collective("gather", c10d::OpType::GATHER, inputs, flat, inputs, opts.timeout);
  std::string signature = signatureOf("gather", inputs, "root " + std::to_string(root));
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    std::vector<at::Tensor> mine = slice(views, 0, 1);
    Contributions all = transport.exchange(name, {mine, signature, {}}, timeout);
    if (!isRoot) return;
    for (int r = 0; r < world; ++r) views[1 + r].view_as(views[0]).copy_(unpackAll(all.bytes[r], mine)[0]);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  checkCount("scatter", outputs.size(), 1, "output tensor");
  int root = static_cast<int>(opts.rootRank), world = getSize(), rank = getRank();
  bool isRoot = root == rank;
  std::vector<at::Tensor> sources = isRoot && !inputs.empty() ? inputs[0] : std::vector<at::Tensor>{};
  if (isRoot) checkCount("scatter", sources.size(), world, "input tensors on the root (one per rank)");
  checkEachLike("scatter", sources, outputs[0], "input tensors", "output");
  Collective c = collective("scatter", c10d::OpType::SCATTER, sources, outputs, sources, opts.timeout);
  std::string signature = signatureOf("scatter", outputs, "root " + std::to_string(root));
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    std::vector<at::Tensor> mine = slice(views, 0, isRoot ? world : 0);
    at::Tensor out = views.back();
    Contributions all = transport.exchange(name, {mine, signature, {}}, timeout);
    out.copy_(unpackAll(all.bytes[root], std::vector<at::Tensor>(world, out))[rank].view_as(out));
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ReduceScatterOptions& opts) {
  checkCount("reduce_scatter", outputs.size(), 1, "output tensor");
  checkCount("reduce_scatter", inputs.size(), 1, "input list");
  int world = getSize(), rank = getRank();
  checkCount("reduce_scatter", inputs[0].size(), world, "input tensors (one per rank)");
  checkReduceOp(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
  checkEachLike("reduce_scatter", inputs[0], outputs[0], "input tensors", "output");
  Collective c = collective("reduce_scatter", c10d::OpType::REDUCE_SCATTER, inputs[0], outputs, inputs[0],
                            opts.timeout);
  Reduction reduction = reductionOf(opts.reduceOp);
  std::string signature = signatureOf("reduce_scatter", inputs[0], reduction.name);
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    std::vector<at::Tensor> mine = slice(views, 0, world);
    Contributions all = transport.exchange(name, {mine, signature, {}}, timeout);
    std::vector<at::Tensor> parts;
    for (const at::Tensor& bytes : all.bytes) parts.push_back(unpackAll(bytes, mine)[rank]);
    reduceInto(views.back(), parts, reduction.op, reduction.factor);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                            std::vector<at::Tensor>& inputs,
                                                                            const c10d::ReduceScatterOptions& opts) {
  checkCount("reduce_scatter_tensor", outputs.size(), inputs.size(), "outputs (one per input)");
  int world = getSize(), rank = getRank();
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkReduceOp(opts.reduceOp, inputs[i].scalar_type(), "reduce_scatter_tensor");
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * world && outputs[i].scalar_type() == inputs[i].scalar_type(),
                "occl: reduce_scatter_tensor needs an input of the output's dtype with world size (", world,
                ") times its elements; got ", inputs[i].numel(), " for an output of ", outputs[i].numel());
  }
  Collective c = collective("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, inputs, outputs, inputs,
                            opts.timeout);
  Reduction reduction = reductionOf(opts.reduceOp);
  std::string signature = signatureOf("reduce_scatter_tensor", inputs, reduction.name);
  size_t count = inputs.size();
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    std::vector<at::Tensor> mine = slice(views, 0, count);
    Contributions all = transport.exchange(name, {mine, signature, {}}, timeout);
    std::vector<std::vector<at::Tensor>> byRank;
    for (const at::Tensor& bytes : all.bytes) byRank.push_back(unpackAll(bytes, mine));
    for (size_t i = 0; i < count; ++i) {
      std::vector<at::Tensor> parts;
      for (const auto& tensorsOfRank : byRank) parts.push_back(chunk(tensorsOfRank[i], rank, world));
      reduceInto(views[count + i].view(-1), parts, reduction.op, reduction.factor);
    }
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return reduce_scatter_tensor_coalesced(outputs, inputs, opts);
}

// LITERALINCLUDE START: OCCL_ALLTOALL
c10::intrusive_ptr<c10d::Work> OcclBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions& opts) {
  int world = getSize(), rank = getRank();
  TORCH_CHECK(input.dim() > 0 && output.dim() > 0, "occl: all_to_all_single needs tensors of at least one dimension");
  auto evenSplits = [&](const at::Tensor& t) {
    TORCH_CHECK(t.size(0) % world == 0, "occl: all_to_all_single without split sizes needs dim 0 (", t.size(0),
                ") divisible by the world size (", world, ")");
    return std::vector<int64_t>(world, t.size(0) / world);
  };
  std::vector<int64_t> sendRows = inputSplits.empty() ? evenSplits(input) : inputSplits;
  std::vector<int64_t> receiveRows = outputSplits.empty() ? evenSplits(output) : outputSplits;
  checkCount("all_to_all_single", sendRows.size(), world, "input split sizes");
  checkCount("all_to_all_single", receiveRows.size(), world, "output split sizes");
  TORCH_CHECK(std::accumulate(sendRows.begin(), sendRows.end(), int64_t{0}) == input.size(0) &&
                  std::accumulate(receiveRows.begin(), receiveRows.end(), int64_t{0}) == output.size(0),
              "occl: all_to_all_single split sizes must add up to dim 0 of their tensor");
  // From the shape, not numel / rows: an input with no rows still has rows
  // of its shape, and the output may receive some.
  int64_t rowElements = c10::multiply_integers(input.sizes().slice(1));
  TORCH_CHECK(c10::multiply_integers(output.sizes().slice(1)) == rowElements &&
                  output.scalar_type() == input.scalar_type(),
              "occl: all_to_all_single needs an output whose rows are like the input's (", input.scalar_type(), " ",
              input.sizes().slice(1), "); got ", output.scalar_type(), " ", output.sizes().slice(1));
  int64_t outputRows = output.size(0);
  Collective c = collective("all_to_all_single", c10d::OpType::ALLTOALL_BASE, {input}, {output}, {input}, opts.timeout);
  std::string signature = signatureOf("all_to_all_single", {}, std::string(c10::toString(input.scalar_type())) +
                                                                   " rows of " + c10::str(input.sizes().slice(1)));
  std::vector<int64_t> counts = sendRows;
  counts.insert(counts.end(), receiveRows.begin(), receiveRows.end());
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    auto checkRows = [&](const auto& extras) { checkExchangeCounts(name, extras, world, "rows"); };
    Contributions all = transport.exchange(name, {{views[0]}, signature, counts, checkRows}, timeout);
    at::Tensor out = views[1].reshape({outputRows, rowElements});
    int64_t outRow = 0;
    for (int s = 0; s < world; ++s) {
      const std::vector<int64_t>& theirRows = all.extras[s];
      int64_t first = std::accumulate(theirRows.begin(), theirRows.begin() + rank, int64_t{0});
      int64_t total = std::accumulate(theirRows.begin(), theirRows.begin() + world, int64_t{0});
      at::Tensor theirs = unpack(all.bytes[s], 0, views[0].scalar_type(), {total, rowElements});
      out.narrow(0, outRow, receiveRows[s]).copy_(theirs.narrow(0, first, receiveRows[s]));
      outRow += receiveRows[s];
    }
  };
  return launch(std::move(c));
}
// LITERALINCLUDE END: OCCL_ALLTOALL

c10::intrusive_ptr<c10d::Work> OcclBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  int world = getSize(), rank = getRank();
  checkCount("all_to_all", inputs.size(), world, "input tensors (one per rank)");
  checkCount("all_to_all", outputs.size(), world, "output tensors (one per rank)");
  std::vector<int64_t> sizes;  // elements sent to each rank, then expected from each
  for (const at::Tensor& t : inputs) sizes.push_back(t.numel());
  for (const at::Tensor& t : outputs) sizes.push_back(t.numel());
  Collective c = collective("all_to_all", c10d::OpType::ALLTOALL, inputs, outputs, inputs, opts.timeout);
  std::string signature = signatureOf("all_to_all", {}, c10::toString(inputs[0].scalar_type()));
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    auto checkElements = [&](const auto& extras) { checkExchangeCounts(name, extras, world, "elements"); };
    Contributions all = transport.exchange(name, {slice(views, 0, world), signature, sizes, checkElements}, timeout);
    for (int s = 0; s < world; ++s) {
      std::vector<at::Tensor> likes;
      for (int r = 0; r < world; ++r) likes.push_back(at::empty({all.extras[s][r]}, views[0].options().device(at::kCPU)));
      views[world + s].view(-1).copy_(unpackAll(all.bytes[s], likes)[rank]);
    }
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  checkCount("send", tensors.size(), 1, "tensor");
  TORCH_CHECK(dstRank >= 0 && dstRank < getSize() && dstRank != getRank(), "occl: send to rank ", dstRank,
              ": not another rank of this group of ", getSize());
  Collective c = collective("send", c10d::OpType::SEND, tensors, {}, tensors, c10d::kUnsetTimeout);
  c.sendTo = dstRank;
  c.tag = tag;
  c.pointToPoint = true;
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    transport.send(name, views[0], dstRank, tag, timeout);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  checkCount("recv", tensors.size(), 1, "tensor");
  TORCH_CHECK(srcRank == -1 || (srcRank >= 0 && srcRank < getSize() && srcRank != getRank()), "occl: recv from rank ",
              srcRank, ": not another rank of this group of ", getSize());
  Collective c = collective(srcRank < 0 ? "recv_anysource" : "recv",
                            srcRank < 0 ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV, {}, tensors, {},
                            c10d::kUnsetTimeout);
  c.pointToPoint = true;
  c.source = std::make_shared<std::atomic<int>>(srcRank);
  auto source = c.source;
  c.body = [=](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    source->store(transport.recv(name, views[0], srcRank, tag, timeout));
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> OcclBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return recv(tensors, -1, tag);
}

c10::intrusive_ptr<c10d::Work> OcclBackend::barrier(const c10d::BarrierOptions& opts) {
  Collective c = collective("barrier", c10d::OpType::BARRIER, {}, {}, {}, opts.timeout);
  c.blocksHost = true;
  c.body = [](Transport& transport, const CollectiveName& name, std::vector<at::Tensor>& views, auto timeout) {
    transport.exchange(name, {{}, "barrier", {}}, timeout);
  };
  return launch(std::move(c));
}

AllreduceSpeedLayer& allreduceSpeedLayer() {
  static AllreduceSpeedLayer installed = nullptr;
  return installed;
}

}  // namespace occl
