// Rendezvous.h - how the ranks of a group meet for one collective through
// the c10d store: each posts a record (what it brings), waits for every
// other's, and learns in the same step who is late, who is gone and who
// disagrees. Not here: moving tensor data (the transports do).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "Transport.h"

namespace occl {

// Thrown inside a kernel when a collective fails; the kernel records its
// message as the group's failure (GroupFailure), never the device's.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Rendezvous {
 public:
  // store: a connection of this rendezvous's own (Store::clone()), since a
  // wait here blocks it for up to the timeout.
  Rendezvous(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::string prefix);

  // Posts this rank's record for collective name.seq and returns every
  // rank's, in rank order. Throws CollectiveError naming the ranks that did
  // not post theirs within timeout, or those whose signature differs.
  std::vector<std::string> meet(const CollectiveName& name, const std::string& record,
                                std::chrono::milliseconds timeout);

  // Point to point. post puts a record under key. takeAny waits for the
  // first of keys to appear (keys[i] is posted by peers[i]), deletes it and
  // returns i; throws CollectiveError naming the peers after timeout.
  // consume deletes key and says whether it was there.
  void post(const std::string& key, const std::string& record);
  size_t takeAny(const CollectiveName& name, const std::vector<std::string>& keys, const std::vector<int>& peers,
                 std::string* record, std::chrono::milliseconds timeout);
  bool consume(const std::string& key);

 private:
  std::string missingRanks(const std::vector<std::string>& keys, const std::vector<int>& ranks);
  std::string key(uint64_t seq, int rank) const;

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  std::string prefix_;
};

// Records: fields separated by '\n'. The first is the signature every rank
// must agree on; the rest are the transport's.
std::string joinFields(const std::vector<std::string>& fields);
std::vector<std::string> splitFields(const std::string& record);
std::string joinInts(const std::vector<int64_t>& values);
std::vector<int64_t> splitInts(const std::string& text);

}  // namespace occl
