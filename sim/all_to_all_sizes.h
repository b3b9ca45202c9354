// The bytes each member of an all-to-all sends to each other member, without materialising an
// n x n matrix when the sizes have structure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace upsim {

/// Sizes of an all-to-all(v): an n x n matrix over the group's member indices (row i = sender,
/// column j = receiver) whose element (i, j) is the number of bytes member i sends to member j.
/// An immutable value type; copies share the storage, so a collective repeated every iteration
/// costs O(1) per copy.
///
/// Forms:
///  - not given (default constructed): empty(), members() == 0. The collective's own size applies
///    (CollectiveDesc::bytes / n to every pair).
///  - dense: the matrix row-major, element [i * n + j]. O(n^2) memory; for small groups (expert
///    and context parallelism) and sizes read from measured traces.
///  - outer product: bytes(i, j) = per_sender[i] x per_receiver[j]. O(n) memory. The embedding
///    all-to-all of a model-parallel recommendation model has this form (DLRM forward: rank i
///    sends its pooled embeddings, b x T_i x D values, to every rank: per_sender[i] = that,
///    per_receiver = 1; the backward is the transpose).
///
/// The diagonal (a member's chunk to itself) is part of the matrix: at(i, i), sent_by(i) and
/// received_by(i) include it (sent_by / received_by are the member's send and receive buffer
/// sizes, the sums of torch.distributed.all_to_all_single's split sizes). for_each_nonzero
/// skips it: nothing crosses a link. The bytes member i sends to others are
/// sent_by(i) - at(i, i).
///
/// Construction throws std::invalid_argument, with a message naming the problem, for a negative
/// size, a dense vector whose length is not n x n, factor vectors of different lengths, or sizes
/// whose products or row / column sums do not fit int64_t.
class AllToAllSizes {
 public:
  /// Not given.
  AllToAllSizes() = default;
  /// The n x n matrix in row-major order: row_major[i * n + j] = bytes member i sends to j.
  static AllToAllSizes dense(size_t n, std::vector<int64_t> row_major);
  /// bytes(i, j) = per_sender[i] * per_receiver[j], n = per_sender.size() ==
  /// per_receiver.size().
  static AllToAllSizes outer(std::vector<int64_t> per_sender, std::vector<int64_t> per_receiver);

  /// True when the sizes were not given.
  bool empty() const { return data_ == nullptr; }
  /// n, or 0 when empty().
  size_t members() const { return data_ == nullptr ? 0 : data_->n; }
  /// True for the outer-product form.
  bool is_outer() const { return data_ != nullptr && data_->outer; }

  /// Bytes member i sends to member j. Throws std::out_of_range unless i, j < members().
  int64_t at(size_t i, size_t j) const;
  /// Bytes member i sends, to itself included (row sum). O(1). Throws std::out_of_range unless
  /// i < members().
  int64_t sent_by(size_t i) const;
  /// Bytes member j receives, from itself included (column sum). O(1). Throws
  /// std::out_of_range unless j < members().
  int64_t received_by(size_t j) const;
  /// Whether some member sends a positive number of bytes to another member. O(1).
  bool moves_bytes() const { return data_ != nullptr && data_->moves; }

  /// Calls f(i, j, bytes) for every pair i != j with bytes > 0, in row-major order (i, then
  /// j, ascending). Dense: O(n^2). Outer: O(rows x columns) over the rows with per_sender != 0
  /// and the columns with per_receiver != 0. Nothing when empty().
  template <typename F>
  void for_each_nonzero(F&& f) const;

  /// Hash of the matrix's values: equal matrices hash equal whatever their form. Computed at
  /// construction.
  size_t hash() const { return data_ == nullptr ? 0 : data_->hash; }
  /// Equal when both are empty, or both have the same n and the same bytes for every pair,
  /// whatever their forms.
  friend bool operator==(const AllToAllSizes& a, const AllToAllSizes& b);

 private:
  struct Data {
    size_t n = 0;
    bool outer = false;
    bool moves = false;
    uint64_t hash = 0;
    std::vector<int64_t> values;        // dense: n x n row-major
    std::vector<int64_t> row_sums;      // dense: per sender
    std::vector<int64_t> column_sums;   // dense: per receiver
    std::vector<int64_t> per_sender;    // outer
    std::vector<int64_t> per_receiver;  // outer
    int64_t sender_total = 0;           // outer: sum of per_sender
    int64_t receiver_total = 0;         // outer: sum of per_receiver
    std::vector<uint32_t> rows;         // outer: indices with per_sender != 0, ascending
    std::vector<uint32_t> columns;      // outer: indices with per_receiver != 0, ascending
  };
  explicit AllToAllSizes(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  void check_index(size_t i) const;

  std::shared_ptr<const Data> data_;
};

template <typename F>
void AllToAllSizes::for_each_nonzero(F&& f) const {
  if (data_ == nullptr) return;
  const Data& d = *data_;
  if (d.outer) {
    for (uint32_t i : d.rows) {
      const int64_t s = d.per_sender[i];
      for (uint32_t j : d.columns) {
        if (i != j) f(size_t{i}, size_t{j}, s * d.per_receiver[j]);
      }
    }
    return;
  }
  const size_t n = d.n;
  for (size_t i = 0; i < n; ++i) {
    if (d.row_sums[i] == 0) continue;
    const int64_t* row = d.values.data() + i * n;
    for (size_t j = 0; j < n; ++j) {
      if (row[j] > 0 && i != j) f(i, j, row[j]);
    }
  }
}

}  // namespace upsim

template <>
struct std::hash<upsim::AllToAllSizes> {
  size_t operator()(const upsim::AllToAllSizes& s) const noexcept { return s.hash(); }
};
