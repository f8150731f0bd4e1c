// RunRecorder::expect_requests: room for the hinted finishes up front, capped,
// and no change to what is recorded.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "engine/metrics/run_recorder.h"
#include "engine/sequence.h"

using namespace testbed;

namespace {

// Finishes `n` sequences of growing lengths on instances 0..2 into `rec`.
void finish_some(RunRecorder& rec, int n) {
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = 1000 + i;
    r.arrival_s = 0.5 * i;
    r.prompt.assign(static_cast<size_t>(3 + i % 7), 11);
    r.max_output_tokens = 4;
    Sequence seq(std::move(r));
    seq.append_token(5);
    seq.first_token_s = 0.5 * i + 0.1;
    seq.num_cached_tokens = i % 3;
    rec.on_finish(i % 3, seq, 0.5 * i + 0.4);
  }
}

}  // namespace

TEST_CASE("expect_requests makes room for the hinted finishes and changes no record", "[metrics][recorder]") {
  RunRecorder hinted(false), plain(false);
  hinted.expect_requests(300);
  CHECK(hinted.requests().capacity() >= 300);
  CHECK(hinted.requests().empty());
  const auto* before = hinted.requests().data();
  finish_some(hinted, 300);
  finish_some(plain, 300);
  CHECK(hinted.requests().data() == before);  // never grown: no copy of the records
  REQUIRE(hinted.requests().size() == plain.requests().size());
  for (size_t i = 0; i < plain.requests().size(); ++i)
    CHECK(std::memcmp(&hinted.requests()[i], &plain.requests()[i], sizeof(RequestRecord)) == 0);
  // More finishes than the hint: they are kept too.
  finish_some(hinted, 5);
  CHECK(hinted.num_finished() == 305);
}

TEST_CASE("expect_requests ignores unknown sizes and caps huge ones", "[metrics][recorder]") {
  RunRecorder unknown(false);
  unknown.expect_requests(-1);  // a source that does not know its size
  unknown.expect_requests(0);
  CHECK(unknown.requests().capacity() == 0);
  RunRecorder huge(false);
  huge.expect_requests(int64_t{1} << 40);  // 128 TiB of records if taken at its word
  CHECK(huge.requests().capacity() == static_cast<size_t>(RunRecorder::kMaxExpectedRequests));
}
