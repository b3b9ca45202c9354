#!/usr/bin/env bash
# The bash completion (scripts/completion/upsim.bash) against the built upsim: commands, init's
# starters, validate's subjects, and the --set keys of the scenario on the line.
# Usage: check_completion.sh BUILD_DIR SOURCE_ROOT
set -euo pipefail
export PATH="$1:$PATH"
cd "$2"
source scripts/completion/upsim.bash
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _upsim
  printf '%s\n' "${COMPREPLY[@]}"
}
fail() { echo "check_completion: $*" >&2; exit 1; }
commands=$(complete_words upsim "")
for c in init run plan shard sweep diff plot validate calibrate convert; do
  grep -qx "$c" <<<"$commands" || fail "command $c not completed: $commands"
done
grep -qx transformer <<<"$(complete_words upsim init "")" || fail "init starters"
grep -qx memory <<<"$(complete_words upsim validate "")" || fail "validate memory"
grep -qx -- --dry-run <<<"$(complete_words upsim run --d)" || fail "run --dry-run"
grep -qx -- --trace-format <<<"$(complete_words upsim run --trace-f)" || fail "run --trace-format"
[[ "$(complete_words upsim run configs/dlrm_4gpu.yaml --trace-format k)" == kineto ]] ||
  fail "--trace-format values"
keys=$(complete_words upsim run configs/dlrm_4gpu.yaml --set workload.glob)
[[ "$keys" == "workload.global_batch=" ]] || fail "--set keys of the scenario: '$keys'"
keys=$(complete_words upsim plan configs/llama3_70b_64gpu.yaml --set workload.parallelism.ten)
[[ "$keys" == "workload.parallelism.tensor=" ]] || fail "--set keys after plan: '$keys'"
echo "completion: ok"
