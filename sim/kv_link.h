// The link a disaggregated deployment moves KV over, from a prefill pool into
// a decode pool (link.* keys, or pool.NAME.link.* for the link into pool NAME).
//
// A transfer of B bytes (the whole model's K and V for the blocks the
// receiver lacks) between a prefill instance of TP degree p and a decode
// instance of degree d runs over min(p, d) GPU links in parallel: each sender
// GPU holds B / p and each receiver B / d, so the busier side of the pair
// moves B / min(p, d) over its own link. Its duration is
//
//   T = latency_s + B / (min(p, d) * bandwidth_gbps * 1e9)
//
// With layerwise = true, layer i's KV leaves while layer i + 1 is prefilled
// (Splitwise, Patel et al., ISCA 2024, transfers
// layer by layer; DistServe, Zhong et al., OSDI 2024, weighs the same cost): of the transfer, only what the
// last prefill step's remaining layers cannot hide is exposed after the first
// token, and never less than one layer's share:
//
//   exposed = latency_s + max(S / L, S - overlap_s * (L - 1) / L),   S = B / (min(p, d) * bandwidth)
//
// where overlap_s is the duration of the step that completed the prefill and
// L the model's layers. Earlier prefill chunks' KV is treated as sent with the
// last one (a conservative simplification).
#pragma once

#include <cstdint>

namespace testbed {

class OptionTable;

struct KvLinkConfig {
  // Defaults: one 400 Gb/s InfiniBand NDR NIC per GPU, as on DGX H100 (8x
  // ConnectX-7, the machines Splitwise models), i.e. 50 GB/s each way.
  double bandwidth_gbps = 50.0;  // per GPU, one direction, 1e9 bytes/s
  double latency_s = 20e-6;      // per transfer (connection set-up, RDMA round trip)
  bool layerwise = false;        // overlap the transfer with the prefill, layer by layer
  void bind(OptionTable& table);  // link.*
  void validate() const;
};

struct KvTransferCost {
  double seconds = 0.0;  // from the first token until the decode side holds the KV
  double bytes = 0.0;
};

// The transfer of `bytes` between instances of TP `tp_from` and `tp_to`
// (see the header comment); overlap_s and num_layers matter only with layerwise.
KvTransferCost kv_transfer_cost(const KvLinkConfig& link, double bytes, int tp_from, int tp_to, int num_layers,
                                double overlap_s);

}  // namespace testbed
