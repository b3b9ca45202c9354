// `upsim validate collectives`: the flow network's all-reduce against measured sweeps.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Returns 0 when every system is within its bounds, 1 otherwise; bad input throws.
int validate_collectives_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
