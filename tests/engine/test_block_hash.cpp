#include <catch2/catch.hpp>

#include "engine/block_hash.h"

using namespace testbed;

TEST_CASE("block hashes chain their parent and tokens and salt", "[block_hash]") {
  std::vector<int32_t> a(64), b(64);
  for (int i = 0; i < 64; ++i) a[i] = b[i] = i * 7 + 3;
  std::vector<uint64_t> ha, hb;
  extend_block_hashes(ha, a, 16, 0);
  extend_block_hashes(hb, b, 16, 0);
  REQUIRE(ha.size() == 4);
  CHECK(ha == hb);

  b[20] += 1;  // second block differs: it and every later block change, the first does not
  hb.clear();
  extend_block_hashes(hb, b, 16, 0);
  CHECK(ha[0] == hb[0]);
  for (int i = 1; i < 4; ++i) CHECK(ha[i] != hb[i]);

  std::vector<uint64_t> salted;
  extend_block_hashes(salted, a, 16, 42);
  CHECK(salted[0] != ha[0]);

  // Same block content under another parent hashes differently.
  CHECK(hash_block(1, a.data(), 16) != hash_block(2, a.data(), 16));
}

TEST_CASE("block hashes extend incrementally", "[block_hash]") {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> incremental;
  for (int i = 0; i < 100; ++i) {
    tokens.push_back(i * 31 % 1000);
    extend_block_hashes(incremental, tokens, 16, 5);
  }
  std::vector<uint64_t> at_once;
  extend_block_hashes(at_once, tokens, 16, 5);
  CHECK(incremental == at_once);
  CHECK(at_once.size() == 6);  // partial block not hashed
}
