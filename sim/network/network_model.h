// NetworkModel: time of collectives and point-to-point transfers on a topology, with link sharing.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "sim/base/units.h"
#include "sim/network/calibration.h"
#include "sim/network/collective.h"
#include "sim/network/schedule.h"
#include "sim/topology/topology.h"

namespace ts::network {

using Group = std::vector<std::int32_t>;  // global GPU indices, in rank order

// One collective run at the same time by several disjoint groups of the same shape (e.g. every
// TP group of the cluster). `bytes` follows nccl-tests: the whole buffer for all-reduce,
// broadcast, all-to-all and send/recv, the full gathered output for all-gather and the full
// input for reduce-scatter (each rank holds bytes / n before the all-gather and after the
// reduce-scatter).
struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Bytes bytes;
  std::vector<Group> groups;  // all concurrent groups; at least one, all of equal size
  Algorithm algorithm = Algorithm::kAuto;
  // All-to-all only: set (experts > 0) for a hierarchical token dispatch, which runs the
  // dispatch schedule (dispatch_schedule) across nodes instead of the direct one.
  TokenRouting routing;
};

struct CollectiveCost {
  Duration time;  // of the slowest group
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  std::string_view variant;  // inside a hierarchical algorithm ("nvls+tree"), else empty
  Duration latency;          // the size-independent part of `time`
};

// How a collective loads the NICs it crosses, for sharing them with other network tasks in
// flight at the same time (nic_sharing.h). A NIC is its NIC-to-leaf link in one direction (the
// link ids of Topology::links(), kind kNetwork). `nics`: those the request's first group crosses
// (the communicator the replay runs; the other groups are its equivalents, running the same
// collective at the same time); `share`: the largest over them of the share of the link's
// achievable bandwidth used with every group of the request running, averaged over the steps
// weighted by their duration. Empty `nics` when the group crosses none (inside a domain).
struct NicLoad {
  std::vector<std::int32_t> nics;
  double share = 0;
};

// Collectives are costed as NCCL runs them: the algorithm's schedule (schedule.h) is mapped onto
// every concurrent group's GPUs, each step's transfers are routed on the topology and share the
// links max-min fairly at the links' achievable bandwidth, and the protocol's latencies are
// added: time = fixed + Σ hops · step latency + bytes · Σ_steps repeat · max_transfer
// (fraction / rate) / protocol bandwidth fraction. With no algorithm given, the fastest of the
// algorithms NCCL would consider and of the enabled protocols is used, as NCCL's tuner picks by
// its own cost model. The size-independent part of each schedule's cost is cached per
// (op, algorithm, groups), so later calls for other sizes cost a few hundred nanoseconds.
// Thread-safe.
class NetworkModel {
 public:
  // Uncalibrated: links at line rate, no protocol latency (ideal_profile()).
  explicit NetworkModel(const topology::Topology& topo);
  // The profile of `calibration` that lists the cluster's GPU; InputError when none does.
  NetworkModel(const topology::Topology& topo, const NetworkCalibration& calibration);
  NetworkModel(const topology::Topology& topo, NetworkProfile profile);
  ~NetworkModel();
  NetworkModel(NetworkModel&&) noexcept;
  NetworkModel& operator=(NetworkModel&&) = delete;
  NetworkModel(const NetworkModel&) = delete;
  NetworkModel& operator=(const NetworkModel&) = delete;

  CollectiveCost collective(const CollectiveRequest& request) const;
  // One transfer with the links to itself.
  Duration send_recv(std::int32_t src, std::int32_t dst, Bytes bytes) const;

  // The NICs `request` crosses run as `cost` (one of candidates(request): its algorithm and
  // variant), and its share of them (NicLoad). Not cached: it routes and solves every step again.
  NicLoad nic_load(const CollectiveRequest& request, const CollectiveCost& cost) const;

  // Every applicable algorithm (and hierarchical variant) with its best protocol, fastest first;
  // request.algorithm restricts to one algorithm unless kAuto.
  std::vector<CollectiveCost> candidates(const CollectiveRequest& request) const;

  // Where `group` sits (node by node); collectives require every group of a request to have the
  // same shape, else they fall back to flat (shape-independent) schedules.
  GroupShape shape_of(const Group& group) const;
  bool nvls_available() const;
  const NetworkProfile& profile() const { return profile_; }
  const topology::Topology& topology() const { return topo_; }

  void set_caching(bool on) { caching_ = on; }

  struct Evaluated;
  struct State;

 private:
  const topology::Topology& topo_;
  NetworkProfile profile_;
  bool caching_ = true;
  std::unique_ptr<State> state_;
};

}  // namespace ts::network
