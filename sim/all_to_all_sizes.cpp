#include "sim/all_to_all_sizes.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace upsim {
namespace {

// Hash of a matrix M: the bilinear form sum_ij M[i][j] x^i y^j in the ring of integers modulo
// 2^64 (unsigned wrap-around), then mixed. An outer product s r^T gives (sum_i s_i x^i) x
// (sum_j r_j y^j), so both forms hash the same values to the same number, the outer one in
// O(n).
constexpr uint64_t kHashX = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kHashY = 0xc2b2ae3d27d4eb4fULL;

uint64_t mix(uint64_t h) {
  // splitmix64's finaliser.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

uint64_t finish_hash(uint64_t form, size_t n) {
  return mix(form ^ mix(static_cast<uint64_t>(n)));
}

/// sum_k v[k] base^k modulo 2^64.
uint64_t polynomial(const std::vector<int64_t>& v, uint64_t base) {
  uint64_t sum = 0;
  uint64_t power = 1;
  for (int64_t x : v) {
    sum += static_cast<uint64_t>(x) * power;
    power *= base;
  }
  return sum;
}

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("all-to-all sizes: " + what);
}

/// a + b, or a failure naming what `describe()` returns when the sum does not fit int64_t.
template <typename Describe>
int64_t checked_add(int64_t a, int64_t b, Describe&& describe) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) fail(describe() + " overflows int64");
  return sum;
}

void check_factors(const std::vector<int64_t>& v, const char* name) {
  for (size_t k = 0; k < v.size(); ++k) {
    if (v[k] < 0) {
      fail(std::string(name) + "[" + std::to_string(k) + "] = " + std::to_string(v[k]) +
           " is negative");
    }
  }
}

}  // namespace

AllToAllSizes AllToAllSizes::dense(size_t n, std::vector<int64_t> row_major) {
  if (n > std::numeric_limits<uint32_t>::max() || row_major.size() != n * n) {
    fail("a dense matrix of " + std::to_string(n) + " members needs n x n = " +
         std::to_string(n * n) + " sizes, got " + std::to_string(row_major.size()));
  }
  auto d = std::make_shared<Data>();
  d->n = n;
  d->row_sums.assign(n, 0);
  d->column_sums.assign(n, 0);
  std::vector<uint64_t> y_power(n);
  uint64_t power = 1;
  for (size_t j = 0; j < n; ++j) {
    y_power[j] = power;
    power *= kHashY;
  }
  uint64_t form = 0;
  uint64_t x_power = 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t row_form = 0;
    for (size_t j = 0; j < n; ++j) {
      const int64_t b = row_major[i * n + j];
      if (b < 0) {
        fail("member " + std::to_string(i) + " sends a negative size " + std::to_string(b) +
             " to member " + std::to_string(j));
      }
      d->row_sums[i] = checked_add(d->row_sums[i], b, [i] {
        return "the row sum of member " + std::to_string(i) + " (bytes it sends)";
      });
      d->column_sums[j] = checked_add(d->column_sums[j], b, [j] {
        return "the column sum of member " + std::to_string(j) + " (bytes it receives)";
      });
      d->moves = d->moves || (b > 0 && i != j);
      row_form += static_cast<uint64_t>(b) * y_power[j];
    }
    form += row_form * x_power;
    x_power *= kHashX;
  }
  d->hash = finish_hash(form, n);
  d->values = std::move(row_major);
  return AllToAllSizes(std::move(d));
}

AllToAllSizes AllToAllSizes::outer(std::vector<int64_t> per_sender,
                                   std::vector<int64_t> per_receiver) {
  const size_t n = per_sender.size();
  if (per_receiver.size() != n || n > std::numeric_limits<uint32_t>::max()) {
    fail("an outer product needs as many receiver factors as sender factors, got " +
         std::to_string(n) + " senders and " + std::to_string(per_receiver.size()) + " receivers");
  }
  check_factors(per_sender, "per_sender");
  check_factors(per_receiver, "per_receiver");
  auto d = std::make_shared<Data>();
  d->n = n;
  d->outer = true;
  int64_t max_sender = 0;
  int64_t max_receiver = 0;
  for (size_t k = 0; k < n; ++k) {
    max_sender = std::max(max_sender, per_sender[k]);
    max_receiver = std::max(max_receiver, per_receiver[k]);
    d->sender_total = checked_add(d->sender_total, per_sender[k],
                                  [] { return std::string("the sum of per_sender"); });
    d->receiver_total = checked_add(d->receiver_total, per_receiver[k],
                                    [] { return std::string("the sum of per_receiver"); });
    if (per_sender[k] != 0) d->rows.push_back(static_cast<uint32_t>(k));
    if (per_receiver[k] != 0) d->columns.push_back(static_cast<uint32_t>(k));
  }
  int64_t product = 0;
  if (__builtin_mul_overflow(max_sender, max_receiver, &product)) {
    fail("the largest per_sender (" + std::to_string(max_sender) +
         ") x the largest per_receiver (" + std::to_string(max_receiver) + ") overflows int64");
  }
  // Row and column sums: per_sender[i] x sum(per_receiver), sum(per_sender) x per_receiver[j].
  if (__builtin_mul_overflow(max_sender, d->receiver_total, &product) ||
      __builtin_mul_overflow(d->sender_total, max_receiver, &product)) {
    fail("a row or column sum (bytes a member sends or receives) overflows int64");
  }
  // Some pair i != j moves bytes unless at most one row and one column are non-zero and they
  // meet on the diagonal.
  d->moves = !d->rows.empty() && !d->columns.empty() &&
             !(d->rows.size() == 1 && d->columns.size() == 1 && d->rows[0] == d->columns[0]);
  d->hash = finish_hash(polynomial(per_sender, kHashX) * polynomial(per_receiver, kHashY), n);
  d->per_sender = std::move(per_sender);
  d->per_receiver = std::move(per_receiver);
  return AllToAllSizes(std::move(d));
}

void AllToAllSizes::check_index(size_t i) const {
  if (i >= members()) {
    throw std::out_of_range("all-to-all sizes: member " + std::to_string(i) + " of " +
                            std::to_string(members()));
  }
}

int64_t AllToAllSizes::at(size_t i, size_t j) const {
  check_index(i);
  check_index(j);
  const Data& d = *data_;
  return d.outer ? d.per_sender[i] * d.per_receiver[j] : d.values[i * d.n + j];
}

int64_t AllToAllSizes::sent_by(size_t i) const {
  check_index(i);
  const Data& d = *data_;
  return d.outer ? d.per_sender[i] * d.receiver_total : d.row_sums[i];
}

int64_t AllToAllSizes::received_by(size_t j) const {
  check_index(j);
  const Data& d = *data_;
  return d.outer ? d.sender_total * d.per_receiver[j] : d.column_sums[j];
}

bool operator==(const AllToAllSizes& a, const AllToAllSizes& b) {
  if (a.data_ == b.data_) return true;
  if (a.empty() || b.empty()) return false;
  const AllToAllSizes::Data& x = *a.data_;
  const AllToAllSizes::Data& y = *b.data_;
  if (x.n != y.n || x.hash != y.hash) return false;
  if (!x.outer && !y.outer) return x.values == y.values;
  if (x.outer && y.outer) {
    if (x.per_sender == y.per_sender && x.per_receiver == y.per_receiver) return true;
    // Two rank-one matrices are equal when they agree on one row and one column that cross
    // at a non-zero element (every other element is row x column / that element), or when
    // both are zero.
    if (x.rows.empty() || x.columns.empty()) return y.rows.empty() || y.columns.empty();
    const size_t i0 = x.rows.front();
    const size_t j0 = x.columns.front();
    for (size_t k = 0; k < x.n; ++k) {
      if (a.at(i0, k) != b.at(i0, k) || a.at(k, j0) != b.at(k, j0)) return false;
    }
    return true;
  }
  for (size_t i = 0; i < x.n; ++i) {
    for (size_t j = 0; j < x.n; ++j) {
      if (a.at(i, j) != b.at(i, j)) return false;
    }
  }
  return true;
}

}  // namespace upsim
