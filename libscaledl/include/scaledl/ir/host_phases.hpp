#pragma once
// The host's share of an eager iteration, phase by phase (docs/parallel.md, "The host's cost per
// node"). One stream of kernels: the host issues each graph node in order at a cost per node, and
// the GPU runs a node's kernels once they are issued and the previous node's are done. Within a
// phase whose nodes are alike the slower of the two sets the pace; across phases they do not
// average out: the host cannot issue the backward's nodes before the forward's, so the idle GPU of
// a host-bound forward is not made up by a GPU-bound backward. A slot therefore takes
// sum over phases of max(GPU time, nodes x cost per node), not max(sum of GPU time, all nodes x
// cost), and never less than the latter.
#include <algorithm>
#include <array>
#include <cstddef>

#include "scaledl/ir/layer_types.hpp"

namespace scaledl {

struct HostPhases {
  /// GPU time (ms) and nodes the host issues of each phase, in issue order: the forward, the
  /// backward (with the recomputed forward nodes it interleaves), the optimizer's update
  /// (indexed by Direction).
  std::array<double, 3> gpu_ms{}, nodes{};

  void add(Direction d, double ms, double n = 1.0) {
    gpu_ms[static_cast<size_t>(d)] += ms;
    nodes[static_cast<size_t>(d)] += n;
  }
  double gpu_total() const { return gpu_ms[0] + gpu_ms[1] + gpu_ms[2]; }
  double nodes_total() const { return nodes[0] + nodes[1] + nodes[2]; }

  /// A slot of `gpu` ms and `n` nodes, split into phases as these phases split theirs, at
  /// `node_ms` per node. Without phases (all zero), max(gpu, n x node_ms).
  double slot_ms(double gpu, double n, double node_ms) const {
    const double g = gpu_total(), m = nodes_total();
    if (node_ms <= 0) return gpu;
    if (g <= 0 || m <= 0) return std::max(gpu, n * node_ms);
    double t = 0;
    for (size_t i = 0; i < 3; ++i) t += std::max(gpu * gpu_ms[i] / g, n * nodes[i] / m * node_ms);
    return t;
  }
  /// These phases' own slot at `node_ms` per node.
  double slot_ms(double node_ms) const { return slot_ms(gpu_total(), nodes_total(), node_ms); }
};

}  // namespace scaledl
