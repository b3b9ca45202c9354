# bash completion for upsim (installed to share/bash-completion/completions/upsim).
# Commands, their options, and YAML files / folders where a command takes a path; after --set of
# `run`, `plan` or `shard`, the key paths of the scenario on the line (`upsim run SCENARIO --keys`).
_upsim() {
  local cur prev
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  local commands="init schema run plan shard sweep diff plot validate calibrate convert --help --version"
  if [[ ${COMP_CWORD} -eq 1 ]]; then
    COMPREPLY=($(compgen -W "${commands}" -- "${cur}"))
    return
  fi
  local command="${COMP_WORDS[1]}"
  case "${prev}" in
    --out|-o|--trace|--csv) COMPREPLY=($(compgen -f -- "${cur}")); return ;;
    --trace-format) COMPREPLY=($(compgen -W "chrome kineto" -- "${cur}")); return ;;
    --set|-s)
      # The scenario: the first argument after the command that is not an option or its value.
      local i scenario=""
      for ((i = 2; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i-1]}" in --set|-s|--out|-o|--trace|--trace-format|--csv|--gpus|--top|--jobs|-j) continue ;; esac
        [[ "${COMP_WORDS[i]}" == -* ]] && continue
        scenario="${COMP_WORDS[i]}"
        break
      done
      if [[ -n "${scenario}" && -f "${scenario}" ]]; then
        local keys
        keys=$(upsim run "${scenario}" --keys 2>/dev/null | grep -v ' ')
        compopt -o nospace 2>/dev/null
        COMPREPLY=($(compgen -W "${keys}" -S '=' -- "${cur}"))
      fi
      return ;;
  esac
  case "${command}" in
    init)
      if [[ ${COMP_CWORD} -eq 2 ]]; then
        COMPREPLY=($(compgen -W "dlrm transformer trace --help" -- "${cur}"))
      else
        COMPREPLY=($(compgen -W "--force" -- "${cur}") $(compgen -d -- "${cur}"))
      fi ;;
    run)
      COMPREPLY=($(compgen -W "--set --out --trace --trace-format --trace-ranks --trace-iterations \
        --trace-gzip --no-trace --force --quiet --dry-run --keys --help" -- "${cur}") \
        $(compgen -f -X '!*.yaml' -- "${cur}") $(compgen -d -- "${cur}")) ;;
    plan) COMPREPLY=($(compgen -W "--set --gpus --top --jobs --max-simulations --out --force \
        --resume --no-memory-savers --refine --batch --help" -- "${cur}") \
        $(compgen -f -X '!*.yaml' -- "${cur}") $(compgen -d -- "${cur}")) ;;
    shard) COMPREPLY=($(compgen -W "--set --out --force --jobs --help" -- "${cur}") \
        $(compgen -f -X '!*.yaml' -- "${cur}") $(compgen -d -- "${cur}")) ;;
    sweep) COMPREPLY=($(compgen -W "--out --jobs --force --plot --point-outputs --help" -- "${cur}") \
        $(compgen -f -X '!*.yaml' -- "${cur}") $(compgen -d -- "${cur}")) ;;
    diff) COMPREPLY=($(compgen -W "--top --csv --force --help" -- "${cur}") \
        $(compgen -d -- "${cur}")) ;;
    plot) COMPREPLY=($(compgen -W "--x --out --force --help" -- "${cur}") \
        $(compgen -f -X '!*.csv' -- "${cur}") $(compgen -d -- "${cur}")) ;;
    validate)
      if [[ ${COMP_CWORD} -eq 2 ]]; then
        COMPREPLY=($(compgen -W "kernels collectives traces workloads memory --help" -- "${cur}"))
      else
        COMPREPLY=($(compgen -W "--help" -- "${cur}") $(compgen -d -- "${cur}"))
      fi ;;
    calibrate)
      if [[ ${COMP_CWORD} -eq 2 ]]; then
        COMPREPLY=($(compgen -W "kernels collectives host-overheads launch" -- "${cur}"))
      else
        COMPREPLY=($(compgen -W "--out --force --help" -- "${cur}") $(compgen -f -- "${cur}"))
      fi ;;
    convert) COMPREPLY=($(compgen -W "kernels traces --help" -- "${cur}")) ;;
  esac
}
complete -F _upsim upsim
