#include "sim/export/json_members.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

#include "sim/export/json_text.h"

namespace upsim {

namespace {

constexpr uint64_t kPsPerUs = 1'000'000;

}  // namespace

void append_us(std::string& out, int64_t ps) {
  const uint64_t magnitude =
      ps < 0 ? uint64_t{0} - static_cast<uint64_t>(ps) : static_cast<uint64_t>(ps);
  if (ps < 0) out.push_back('-');
  fmt::format_to(std::back_inserter(out), "{}.{:06}", magnitude / kPsPerUs, magnitude % kPsPerUs);
}

void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  append_json_escaped(out, text);
  out.push_back('"');
}

JsonMembers& JsonMembers::str(std::string_view key, std::string_view value) {
  this->key(key);
  append_json_string(out_, value);
  return *this;
}

JsonMembers& JsonMembers::str(std::string_view key, std::string_view prefix,
                              std::string_view value) {
  this->key(key);
  out_.push_back('"');
  append_json_escaped(out_, prefix);
  append_json_escaped(out_, value);
  out_.push_back('"');
  return *this;
}

JsonMembers& JsonMembers::integer(std::string_view key, int64_t value) {
  this->key(key);
  fmt::format_to(std::back_inserter(out_), "{}", value);
  return *this;
}

JsonMembers& JsonMembers::uinteger(std::string_view key, uint64_t value) {
  this->key(key);
  fmt::format_to(std::back_inserter(out_), "{}", value);
  return *this;
}

JsonMembers& JsonMembers::real(std::string_view key, double value) {
  this->key(key);
  if (std::isfinite(value)) {
    fmt::format_to(std::back_inserter(out_), "{}", value);
  } else {
    out_ += "null";
  }
  return *this;
}

JsonMembers& JsonMembers::boolean(std::string_view key, bool value) {
  this->key(key);
  out_ += value ? "true" : "false";
  return *this;
}

JsonMembers& JsonMembers::us(std::string_view key, int64_t ps) {
  this->key(key);
  append_us(out_, ps);
  return *this;
}

std::string& JsonMembers::object(std::string_view key) {
  this->key(key);
  out_.push_back('{');
  return out_;
}

void JsonMembers::key(std::string_view k) {
  if (!first_) out_.push_back(',');
  first_ = false;
  append_json_string(out_, k);
  out_.push_back(':');
}

}  // namespace upsim
