// JSON libraries against upsim's own reader (sim/formats/json_reader.h) on the synthetic 200 MB
// Kineto trace of the ingestion benchmark (bench/synthetic_kineto_trace.h). Every contender
// walks the same document: each member of each trace event, strings read unescaped, numbers as
// their raw text, `args` objects walked member by member. Throughput counts the text's bytes.
//   BM_UpsimJsonCursor     upsim's pull reader (one pass, no allocation per value)
//   BM_UpsimKinetoReader   upsim's Kineto reader on it (the events built, as `upsim run` reads)
//   BM_SimdjsonOnDemand    simdjson 3 On-Demand (Debian's libsimdjson-dev): a first pass indexes
//                          every structural character (4 bytes each), the walk is the second
//   BM_SimdjsonDom         simdjson's DOM: the whole document parsed into a tape, then walked
//   BM_NlohmannSax         nlohmann-json 3 SAX with handlers that do nothing (a bound on any
//                          reader built on it)
// Besides speed, what decides between them for traces: simdjson reads documents of at most
// 4 GiB (upsim reads traces up to 16 GiB), and both simdjson parsers hold an index or tape of
// several bytes per value beside the text; upsim's reader and a SAX pass hold nothing.
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "bench/synthetic_kineto_trace.h"
#include "sim/formats/json_reader.h"
#include "workloads/trace/kineto_trace.h"

namespace upsim {
namespace {

const std::string& trace_text() {
  static const std::string text = synthetic_kineto_trace();
  return text;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * trace_text().size()));
}

// --- upsim ----------------------------------------------------------------------------------

size_t walk_cursor_value(JsonCursor& cur) {
  size_t n = 0;
  switch (cur.peek()) {
    case JsonType::kObject: {
      cur.begin_object();
      std::string_view key;
      while (cur.next_member(key))
        n += key.size() + walk_cursor_value(cur);
      return n;
    }
    case JsonType::kArray:
      cur.begin_array();
      while (cur.next_element())
        n += walk_cursor_value(cur);
      return n;
    case JsonType::kString:
      return cur.string().size();
    case JsonType::kNumber:
      return cur.number().size();
    case JsonType::kBool:
      return cur.boolean() ? 1 : 0;
    case JsonType::kNull:
      cur.null();
      return 0;
  }
  return n;
}

void BM_UpsimJsonCursor(benchmark::State& state) {
  for (auto _ : state) {
    JsonCursor cur(trace_text(), "synthetic.json");
    benchmark::DoNotOptimize(walk_cursor_value(cur));
  }
  set_bytes(state);
}

void BM_UpsimKinetoReader(benchmark::State& state) {
  for (auto _ : state) {
    const KinetoTrace t = parse_kineto_trace(trace_text(), "synthetic.json");
    benchmark::DoNotOptimize(t.events.size());
  }
  set_bytes(state);
}

// --- simdjson -------------------------------------------------------------------------------

template <typename Value>
size_t walk_ondemand_value(Value&& v) {
  size_t n = 0;
  switch (v.type().value()) {
    case simdjson::ondemand::json_type::object:
      for (auto field : v.get_object()) {
        n += std::string_view(field.unescaped_key()).size() + walk_ondemand_value(field.value());
      }
      return n;
    case simdjson::ondemand::json_type::array:
      for (auto element : v.get_array())
        n += walk_ondemand_value(element.value());
      return n;
    case simdjson::ondemand::json_type::string:
      return std::string_view(v.get_string()).size();
    case simdjson::ondemand::json_type::number:
      return std::string_view(v.raw_json_token()).size();
    case simdjson::ondemand::json_type::boolean:
      return bool(v.get_bool()) ? 1 : 0;
    case simdjson::ondemand::json_type::null:
      return 0;
  }
  return n;
}

// A reader reads one trace per parser: the parser (its index) and the padded copy of the text are
// made per iteration, as they would be per file.
void BM_SimdjsonOnDemand(benchmark::State& state) {
  for (auto _ : state) {
    const simdjson::padded_string padded(trace_text());
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc = parser.iterate(padded);
    size_t n = 0;
    for (auto field : doc.get_object()) {
      n += std::string_view(field.unescaped_key()).size() + walk_ondemand_value(field.value());
    }
    benchmark::DoNotOptimize(n);
  }
  set_bytes(state);
}

size_t walk_dom(simdjson::dom::element e) {
  size_t n = 0;
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
      for (const auto field : simdjson::dom::object(e))
        n += field.key.size() + walk_dom(field.value);
      return n;
    case simdjson::dom::element_type::ARRAY:
      for (const simdjson::dom::element x : simdjson::dom::array(e))
        n += walk_dom(x);
      return n;
    case simdjson::dom::element_type::STRING:
      return std::string_view(e).size();
    default:
      return 1;
  }
}

void BM_SimdjsonDom(benchmark::State& state) {
  for (auto _ : state) {
    const simdjson::padded_string padded(trace_text());
    simdjson::dom::parser parser;
    const simdjson::dom::element root = parser.parse(padded);
    benchmark::DoNotOptimize(walk_dom(root));
  }
  set_bytes(state);
}

// --- nlohmann-json --------------------------------------------------------------------------

struct NoOpSax : nlohmann::json_sax<nlohmann::json> {
  size_t values = 0;
  bool null() override { return ++values, true; }
  bool boolean(bool) override { return ++values, true; }
  bool number_integer(number_integer_t) override { return ++values, true; }
  bool number_unsigned(number_unsigned_t) override { return ++values, true; }
  bool number_float(number_float_t, const string_t&) override { return ++values, true; }
  bool string(string_t&) override { return ++values, true; }
  bool binary(binary_t&) override { return ++values, true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return ++values, true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

void BM_NlohmannSax(benchmark::State& state) {
  for (auto _ : state) {
    NoOpSax sax;
    nlohmann::json::sax_parse(trace_text(), &sax);
    benchmark::DoNotOptimize(sax.values);
  }
  set_bytes(state);
}

BENCHMARK(BM_UpsimJsonCursor)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_UpsimKinetoReader)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimdjsonOnDemand)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimdjsonDom)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_NlohmannSax)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();
