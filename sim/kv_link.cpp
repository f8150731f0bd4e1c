#include "sim/kv_link.h"

#include <algorithm>
#include <cmath>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void KvLinkConfig::bind(OptionTable& t) {
  t.add("link.bandwidth_gbps", &bandwidth_gbps, "KV transfer bandwidth per GPU, one direction, GB/s");
  t.add("link.latency_s", &latency_s, "fixed cost of one KV transfer, seconds");
  t.add("link.layerwise", &layerwise, "overlap the KV transfer with the prefill, layer by layer");
}

void KvLinkConfig::validate() const {
  require(std::isfinite(bandwidth_gbps) && bandwidth_gbps > 0, "link.bandwidth_gbps", "must be a positive number");
  require(std::isfinite(latency_s) && latency_s >= 0, "link.latency_s", "must be >= 0");
}

KvTransferCost kv_transfer_cost(const KvLinkConfig& link, double bytes, int tp_from, int tp_to, int num_layers,
                                double overlap_s) {
  KvTransferCost c;
  c.bytes = bytes;
  const double streams = std::max(1, std::min(tp_from, tp_to));
  const double serial = bytes / (streams * link.bandwidth_gbps * 1e9);
  double exposed = serial;
  if (link.layerwise && num_layers > 1) {
    const double layers = num_layers;
    exposed = std::max(serial / layers, serial - std::max(0.0, overlap_s) * (layers - 1) / layers);
  }
  c.seconds = link.latency_s + exposed;
  return c;
}

}  // namespace testbed
