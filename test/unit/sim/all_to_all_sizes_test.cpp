// AllToAllSizes: the dense and outer-product forms agree on every query, equality and hashing
// follow the values whatever the form, and malformed sizes are rejected with a message.
#include "sim/all_to_all_sizes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace upsim {
namespace {

using Pairs = std::vector<std::tuple<size_t, size_t, int64_t>>;

Pairs nonzero(const AllToAllSizes& s) {
  Pairs out;
  s.for_each_nonzero([&](size_t i, size_t j, int64_t b) { out.emplace_back(i, j, b); });
  return out;
}

std::vector<int64_t> expand(const std::vector<int64_t>& per_sender,
                            const std::vector<int64_t>& per_receiver) {
  const size_t n = per_sender.size();
  std::vector<int64_t> m(n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j)
      m[i * n + j] = per_sender[i] * per_receiver[j];
  }
  return m;
}

/// The message of the std::invalid_argument that `f` throws ("" when it throws nothing).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(AllToAllSizes, FormsAgreeOnEveryQuery) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const size_t n = 1 + rng() % 12;
    std::vector<int64_t> s(n);
    std::vector<int64_t> r(n);
    // Zero rows and columns are the point of the outer form (DLRM: ranks without tables).
    for (auto& x : s)
      x = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 100'000);
    for (auto& x : r)
      x = rng() % 4 == 0 ? 0 : static_cast<int64_t>(1 + rng() % 9);
    const std::vector<int64_t> m = expand(s, r);
    const AllToAllSizes outer = AllToAllSizes::outer(s, r);
    const AllToAllSizes dense = AllToAllSizes::dense(n, m);
    EXPECT_TRUE(outer.is_outer());
    EXPECT_FALSE(dense.is_outer());
    ASSERT_EQ(outer.members(), n);
    ASSERT_EQ(dense.members(), n);

    Pairs expected;
    bool moves = false;
    for (size_t i = 0; i < n; ++i) {
      int64_t row = 0;
      int64_t column = 0;
      for (size_t j = 0; j < n; ++j) {
        EXPECT_EQ(outer.at(i, j), m[i * n + j]);
        EXPECT_EQ(dense.at(i, j), m[i * n + j]);
        row += m[i * n + j];
        column += m[j * n + i];
        if (i != j && m[i * n + j] > 0) {
          expected.emplace_back(i, j, m[i * n + j]);
          moves = true;
        }
      }
      // Row and column sums count the diagonal (the member's own chunk).
      EXPECT_EQ(outer.sent_by(i), row);
      EXPECT_EQ(dense.sent_by(i), row);
      EXPECT_EQ(outer.received_by(i), column);
      EXPECT_EQ(dense.received_by(i), column);
    }
    // Off-diagonal non-zero pairs, row-major.
    EXPECT_EQ(nonzero(outer), expected);
    EXPECT_EQ(nonzero(dense), expected);
    EXPECT_EQ(outer.moves_bytes(), moves);
    EXPECT_EQ(dense.moves_bytes(), moves);
    EXPECT_EQ(outer, dense);
    EXPECT_EQ(dense, outer);
    EXPECT_EQ(outer.hash(), dense.hash());
    EXPECT_EQ(std::hash<AllToAllSizes>{}(outer), dense.hash());
  }
}

TEST(AllToAllSizes, EqualityFollowsTheValues) {
  // The same matrix factored two ways.
  const AllToAllSizes a = AllToAllSizes::outer({2, 4, 0}, {3, 0, 6});
  const AllToAllSizes b = AllToAllSizes::outer({1, 2, 0}, {6, 0, 12});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  const AllToAllSizes copy = a;  // shares storage
  EXPECT_EQ(copy, a);
  EXPECT_EQ(copy.at(1, 2), 24);
  // One element differs: (2, 0) is 0 in `a`, 3 here.
  EXPECT_NE(a, AllToAllSizes::outer({2, 4, 1}, {3, 0, 6}));
  EXPECT_NE(a, AllToAllSizes::dense(3, {6, 0, 12, 12, 0, 24, 0, 0, 1}));
  EXPECT_EQ(a, AllToAllSizes::dense(3, {6, 0, 12, 12, 0, 24, 0, 0, 0}));
  // Zero matrices, however factored.
  EXPECT_EQ(AllToAllSizes::outer({0, 0}, {5, 7}), AllToAllSizes::outer({3, 1}, {0, 0}));
  EXPECT_EQ(AllToAllSizes::outer({0, 0}, {5, 7}), AllToAllSizes::dense(2, {0, 0, 0, 0}));
  EXPECT_NE(AllToAllSizes::outer({0, 1}, {5, 7}), AllToAllSizes::outer({3, 1}, {0, 0}));
  // Sizes over another member count, and not given.
  EXPECT_NE(AllToAllSizes::outer({1, 1}, {1, 1}), AllToAllSizes::outer({1, 1, 1}, {1, 1, 1}));
  EXPECT_NE(AllToAllSizes::outer({1}, {1}), AllToAllSizes{});
  EXPECT_EQ(AllToAllSizes{}, AllToAllSizes{});
}

TEST(AllToAllSizes, NotGivenIsEmpty) {
  const AllToAllSizes none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.members(), 0U);
  EXPECT_FALSE(none.moves_bytes());
  EXPECT_TRUE(nonzero(none).empty());
  EXPECT_THROW((void)none.at(0, 0), std::out_of_range);
  EXPECT_THROW((void)none.sent_by(0), std::out_of_range);
}

TEST(AllToAllSizes, OnlyTheDiagonalMovesNothing) {
  const AllToAllSizes self = AllToAllSizes::outer({0, 5, 0}, {0, 2, 0});
  EXPECT_FALSE(self.moves_bytes());
  EXPECT_TRUE(nonzero(self).empty());
  EXPECT_EQ(self.sent_by(1), 10);
  EXPECT_EQ(self.received_by(1), 10);
  EXPECT_FALSE(AllToAllSizes::dense(2, {4, 0, 0, 9}).moves_bytes());
  EXPECT_TRUE(AllToAllSizes::dense(2, {4, 0, 1, 9}).moves_bytes());
  EXPECT_TRUE(AllToAllSizes::outer({0, 5, 0}, {0, 2, 1}).moves_bytes());
}

TEST(AllToAllSizes, OutOfRangeMembersThrow) {
  const AllToAllSizes s = AllToAllSizes::outer({1, 2}, {3, 4});
  EXPECT_THROW((void)s.at(2, 0), std::out_of_range);
  EXPECT_THROW((void)s.at(0, 2), std::out_of_range);
  EXPECT_THROW((void)s.received_by(2), std::out_of_range);
}

TEST(AllToAllSizes, MalformedSizesAreRejectedWithAMessage) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(error_of([] {
              AllToAllSizes::dense(2, {0, 1, 2});
            }),
            "all-to-all sizes: a dense matrix of 2 members needs n x n = 4 sizes, got 3");
  EXPECT_EQ(error_of([] {
              AllToAllSizes::dense(2, {0, 1, -2, 0});
            }),
            "all-to-all sizes: member 1 sends a negative size -2 to member 0");
  EXPECT_EQ(error_of([] {
              AllToAllSizes::outer({1, -1}, {1, 1});
            }),
            "all-to-all sizes: per_sender[1] = -1 is negative");
  EXPECT_EQ(error_of([] {
              AllToAllSizes::outer({1, 1}, {-3, 1});
            }),
            "all-to-all sizes: per_receiver[0] = -3 is negative");
  EXPECT_EQ(error_of([] {
              AllToAllSizes::outer({1, 1}, {1});
            }),
            "all-to-all sizes: an outer product needs as many receiver factors as sender "
            "factors, got 2 senders and 1 receivers");
  // One element past int64.
  EXPECT_EQ(error_of([] {
              AllToAllSizes::outer({kMax / 2 + 1, 0}, {0, 2});
            }),
            "all-to-all sizes: the largest per_sender (4611686018427387904) x the largest "
            "per_receiver (2) overflows int64");
  // Every element fits, a row sum does not.
  EXPECT_EQ(error_of([] {
              AllToAllSizes::outer({kMax / 2, 0, 0}, {1, 1, 1});
            }),
            "all-to-all sizes: a row or column sum (bytes a member sends or receives) overflows "
            "int64");
  EXPECT_EQ(error_of([] {
              AllToAllSizes::dense(2, {kMax, 1, 0, 0});
            }),
            "all-to-all sizes: the row sum of member 0 (bytes it sends) overflows int64");
  EXPECT_EQ(error_of([] {
              AllToAllSizes::dense(2, {kMax, 0, 1, 0});
            }),
            "all-to-all sizes: the column sum of member 0 (bytes it receives) overflows int64");
  // The largest sizes that fit are fine.
  EXPECT_EQ(AllToAllSizes::outer({kMax, 0}, {1, 0}).sent_by(0), kMax);
}

}  // namespace
}  // namespace upsim
