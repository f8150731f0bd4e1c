// testbed export-trace CONFIG.ini --output FILE.csv [--section.key=value ...]
// Writes the requests CONFIG.ini's workload produces (a replayed trace or a
// generator), token contents included, as a trace another simulator replays:
// BLIS's trace CSV (arrival_time,request_id,model,prefill_tokens,decode_tokens,
// the token lists as JSON arrays). The prompts are exactly the ones this
// simulator runs, so both see the same prefix sharing.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/common/config_error.h"
#include "engine/common/pending_files.h"
#include "engine/model/model_config.h"
#include "experiments/cli/command.h"
#include "experiments/cli/huge_pages.h"
#include "experiments/cli/run_config.h"
#include "traces/workload.h"

namespace testbed {
namespace {

constexpr const char* kUsage = "export-trace CONFIG.ini --output FILE.csv [--section.key=value ...]";

void write_tokens(std::ofstream& out, const std::vector<int32_t>& tokens) {
  out << "\"[";
  for (size_t i = 0; i < tokens.size(); ++i) out << (i ? "," : "") << tokens[i];
  out << "]\"";
}

int export_trace_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("usage: testbed %s\n\nWrites the requests the config's workload produces, with their tokens, as BLIS's\n"
                "trace CSV (arrival_time,request_id,model,prefill_tokens,decode_tokens): the same\n"
                "prompts, arrivals and output lengths for another simulator (README: Comparing\n"
                "with another simulator). Clients that leave early are not exported.\n",
                kUsage);
    return args.empty() ? 2 : 0;
  }
  std::string output;
  RunConfig config;
  OptionTable table;
  table.add_flag("output", &output, "the trace CSV to write");
  load_run_config(args[0], {args.begin() + 1, args.end()}, config, table);
  apply_huge_pages(config.driver.huge_pages, /*simulates=*/false);
  print_warnings(config);
  require(!output.empty(), "--output", "the trace CSV to write is required");
  require(config.workload.cancel_fraction == 0, "workload.cancel_fraction",
          "a BLIS trace has no client that leaves early: export with workload.cancel_fraction = 0");
  const ModelConfig model = ModelConfig::from_json_file(require_file("model.config", config.model.config));
  WorkloadContext context;
  context.vocab_size = model.vocab_size;
  context.sampling = config.sampling;
  std::unique_ptr<RequestSource> source = make_workload(config.workload, context);

  PendingFile tmp(output + ".tmp");
  std::ofstream out(tmp.path());
  require(static_cast<bool>(out), "--output", "cannot write '" + tmp.path() + "'");
  out << "arrival_time,request_id,model,prefill_tokens,decode_tokens\n";
  int64_t n = 0, prompt_tokens = 0, output_tokens = 0;
  std::vector<int32_t> decode;
  while (std::optional<Request> r = source->next()) {
    // Output contents matter to neither simulator's timing; a scripted answer (multi-turn) is kept.
    decode = r->scripted_output;
    decode.resize(r->max_output_tokens, 0);
    char head[96];
    std::snprintf(head, sizeof head, "%.9f,request_%lld,%s,", r->arrival_s, static_cast<long long>(r->id),
                  model.name.c_str());
    out << head;
    write_tokens(out, r->prompt);
    out << ",";
    write_tokens(out, decode);
    out << "\n";
    ++n;
    prompt_tokens += static_cast<int64_t>(r->prompt.size());
    output_tokens += r->max_output_tokens;
  }
  out.close();
  require(static_cast<bool>(out), "--output", "cannot write '" + tmp.path() + "'");
  std::filesystem::rename(tmp.path(), output);
  tmp.done();
  std::printf("exported %lld requests (%lld prompt, %lld output tokens) to %s\n", static_cast<long long>(n),
              static_cast<long long>(prompt_tokens), static_cast<long long>(output_tokens), output.c_str());
  return 0;
}

}  // namespace

TESTBED_COMMAND("export-trace", kUsage, "a workload's requests, tokens included, as another simulator's trace (BLIS CSV)",
                export_trace_command);

}  // namespace testbed
