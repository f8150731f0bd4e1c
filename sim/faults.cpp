#include "sim/faults.h"

#include <cmath>
#include <cstdlib>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {
namespace {

std::vector<std::string> items(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ' && c != '\t') {
      cur += c;
    }
  }
  return out;
}

// A whole finite number from text, or a ConfigError naming key and item.
double number(const std::string& text, const std::string& key, const std::string& item) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  require(!text.empty() && end == text.c_str() + text.size() && std::isfinite(v), key,
          "'" + item + "': '" + text + "' is not a finite number");
  return v;
}

int instance_id(const std::string& text, const std::string& key, const std::string& item) {
  const double v = number(text, key, item);
  require(v >= 0 && v == std::floor(v) && v < 1e6, key, "'" + item + "': instance '" + text + "' is not an id");
  return static_cast<int>(v);
}

}  // namespace

void FaultConfig::bind(OptionTable& t) {
  t.add("fault.fail", &fail, "instances that fail: I@T, ... (instance id @ seconds)");
  t.add("fault.on_failure", &on_failure, "reroute (recompute elsewhere) | lose: a failed instance's requests");
  t.add("fault.slow", &slow, "stragglers: I@T0-T1xK, ... (instance I runs K times slower in [T0, T1) s)");
  t.add("fault.kv_event_delay_s", &kv_event_delay_s, "seconds KV events take to reach the routers (stale state)");
}

std::vector<FaultConfig::Failure> FaultConfig::failures() const {
  std::vector<Failure> out;
  for (const std::string& item : items(fail)) {
    const size_t at = item.find('@');
    require(at != std::string::npos, "fault.fail", "'" + item + "' is not INSTANCE@TIME (e.g. 2@30)");
    Failure f;
    f.instance = instance_id(item.substr(0, at), "fault.fail", item);
    f.t = number(item.substr(at + 1), "fault.fail", item);
    require(f.t >= 0, "fault.fail", "'" + item + "': the time must be >= 0");
    for (const Failure& g : out)
      require(g.instance != f.instance, "fault.fail", "instance " + std::to_string(f.instance) + " fails twice");
    out.push_back(f);
  }
  return out;
}

std::vector<FaultConfig::Slowdown> FaultConfig::slowdowns() const {
  std::vector<Slowdown> out;
  for (const std::string& item : items(slow)) {
    const size_t at = item.find('@'), dash = item.find('-', at == std::string::npos ? 0 : at + 1),
                 x = item.find('x', dash == std::string::npos ? 0 : dash + 1);
    require(at != std::string::npos && dash != std::string::npos && x != std::string::npos, "fault.slow",
            "'" + item + "' is not INSTANCE@START-ENDxFACTOR (e.g. 1@10-40x3)");
    Slowdown s;
    s.instance = instance_id(item.substr(0, at), "fault.slow", item);
    s.t0 = number(item.substr(at + 1, dash - at - 1), "fault.slow", item);
    s.t1 = number(item.substr(dash + 1, x - dash - 1), "fault.slow", item);
    s.factor = number(item.substr(x + 1), "fault.slow", item);
    require(s.t0 >= 0 && s.t1 > s.t0, "fault.slow", "'" + item + "': needs 0 <= START < END");
    require(s.factor >= 1, "fault.slow", "'" + item + "': the factor must be >= 1 (a straggler is slower)");
    out.push_back(s);
  }
  return out;
}

void FaultConfig::validate(int num_instances) const {
  require(on_failure == "reroute" || on_failure == "lose", "fault.on_failure",
          "must be reroute or lose, got '" + on_failure + "'");
  require(kv_event_delay_s >= 0 && std::isfinite(kv_event_delay_s), "fault.kv_event_delay_s", "must be >= 0 and finite");
  const auto f = failures();
  for (const Failure& x : f)
    require(x.instance < num_instances, "fault.fail",
            "instance " + std::to_string(x.instance) + " does not exist (the fleet has " + std::to_string(num_instances) + ")");
  require(static_cast<int>(f.size()) < num_instances || lose(), "fault.fail",
          "every instance fails, so rerouted requests have nowhere to go: keep one, or set fault.on_failure = lose");
  for (const Slowdown& s : slowdowns())
    require(s.instance < num_instances, "fault.slow",
            "instance " + std::to_string(s.instance) + " does not exist (the fleet has " + std::to_string(num_instances) + ")");
}

}  // namespace testbed
