// Rendezvous.cpp - meeting through the store (Rendezvous.h). Keys are
// "<prefix>/<seq>/<rank>"; each rank deletes its own key of the previous
// collective once everyone has posted the next one (everyone has then read
// it), so the store does not grow with the number of collectives.
#include "Rendezvous.h"

#include <sstream>
#include <thread>

namespace occl {

namespace {

std::string text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> bytesOf(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

std::string joinFields(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) out += (i ? "\n" : "") + fields[i];
  return out;
}

std::vector<std::string> splitFields(const std::string& record) {
  std::vector<std::string> fields;
  std::stringstream in(record);
  for (std::string field; std::getline(in, field, '\n');) fields.push_back(field);
  return fields;
}

std::string joinInts(const std::vector<int64_t>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

std::vector<int64_t> splitInts(const std::string& text) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::stoll(item));
  return values;
}

Rendezvous::Rendezvous(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::string prefix)
    : store_(std::move(store)), rank_(rank), size_(size), prefix_(std::move(prefix)) {}

std::string Rendezvous::key(uint64_t seq, int rank) const {
  return prefix_ + "/" + std::to_string(seq) + "/" + std::to_string(rank);
}

std::string Rendezvous::missingRanks(const std::vector<std::string>& keys, const std::vector<int>& ranks) {
  std::string missing;
  try {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!store_->check({keys[i]})) missing += (missing.empty() ? "" : ", ") + std::to_string(ranks[i]);
    }
  } catch (const std::exception& e) {
    return "unknown: the store cannot be reached (" + std::string(e.what()).substr(0, 200) +
           "); the rank hosting it may have died";
  }
  return missing;
}

// LITERALINCLUDE START: OCCL_RENDEZVOUS_MEET
std::vector<std::string> Rendezvous::meet(const CollectiveName& name, const std::string& record,
                                          std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int r = 0; r < size_; ++r) keys.push_back(key(name.seq, r)), ranks.push_back(r);
  std::vector<std::vector<uint8_t>> records;
  try {
    store_->set(keys[rank_], bytesOf(record));
    store_->setTimeout(timeout);  // multiGet waits for every key, up to the store's timeout
    records = store_->multiGet(keys);
  } catch (const std::exception& e) {
    throw CollectiveError("occl: " + name.str() + " did not complete within " + std::to_string(timeout.count()) +
                          " ms on rank " + std::to_string(rank_) + ": rank(s) that did not join: " +
                          missingRanks(keys, ranks) + ". A rank that died or skipped the collective "
                          "leaves the group unusable: destroy it and restart the job.");
  }
  std::vector<std::string> out;
  for (const auto& r : records) out.push_back(text(r));
  // Everyone has posted this collective's record, so everyone has read the
  // previous one: this rank's old key can go.
  if (name.seq > 0) store_->deleteKey(key(name.seq - 1, rank_));
  std::string mine = splitFields(record).at(0);
  for (int r = 0; r < size_; ++r) {
    std::string theirs = splitFields(out[r]).at(0);
    if (theirs != mine) {
      throw CollectiveError("occl: " + name.str() + ": ranks disagree on the tensors: rank " +
                            std::to_string(rank_) + " has " + mine + ", rank " + std::to_string(r) + " has " +
                            theirs + ". Every rank must pass tensors of the same dtype and shape (and the same "
                            "root and reduce op) to a collective.");
    }
  }
  return out;
}
// LITERALINCLUDE END: OCCL_RENDEZVOUS_MEET

void Rendezvous::post(const std::string& key, const std::string& record) {
  store_->set(prefix_ + "/" + key, bytesOf(record));
}

bool Rendezvous::consume(const std::string& key) {
  std::string full = prefix_ + "/" + key;
  if (!store_->check({full})) return false;
  store_->deleteKey(full);
  return true;
}

size_t Rendezvous::takeAny(const CollectiveName& name, const std::vector<std::string>& keys,
                           const std::vector<int>& peers, std::string* record, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(20);
  try {
    while (true) {
      for (size_t i = 0; i < keys.size(); ++i) {
        std::string full = prefix_ + "/" + keys[i];
        // One key: let the store block instead of polling.
        if (keys.size() == 1) store_->wait({full}, timeout);
        if (store_->check({full})) {
          *record = text(store_->get(full));
          store_->deleteKey(full);
          return i;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  } catch (const std::exception&) {
  }
  std::string missing;
  for (int peer : peers) missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
  throw CollectiveError("occl: " + name.str() + " did not complete within " + std::to_string(timeout.count()) +
                        " ms on rank " + std::to_string(rank_) + ": rank(s) that did not join: " + missing +
                        " (no matching send). A rank that died or skipped the send leaves the group unusable: "
                        "destroy it and restart the job.");
}

}  // namespace occl
