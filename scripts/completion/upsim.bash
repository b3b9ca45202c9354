# bash completion for upsim (installed to share/bash-completion/completions/upsim).
# Commands, their options, and YAML files / folders where a command takes a path.
_upsim() {
  local cur prev
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  local commands="run plan shard sweep diff plot validate calibrate convert --help --version"
  if [[ ${COMP_CWORD} -eq 1 ]]; then
    COMPREPLY=($(compgen -W "${commands}" -- "${cur}"))
    return
  fi
  local command="${COMP_WORDS[1]}"
  case "${prev}" in
    --out|-o|--trace|--csv) COMPREPLY=($(compgen -f -- "${cur}")); return ;;
    --set|-s) return ;;
  esac
  case "${command}" in
    run)
      COMPREPLY=($(compgen -W "--set --out --trace --trace-ranks --trace-iterations --trace-gzip \
        --no-trace --force --quiet --help" -- "${cur}") $(compgen -f -X '!*.yaml' -- "${cur}") \
        $(compgen -d -- "${cur}")) ;;
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
        COMPREPLY=($(compgen -W "kernels collectives traces workloads" -- "${cur}"))
      else
        COMPREPLY=($(compgen -W "--help" -- "${cur}") $(compgen -d -- "${cur}"))
      fi ;;
    calibrate)
      if [[ ${COMP_CWORD} -eq 2 ]]; then
        COMPREPLY=($(compgen -W "kernels collectives host-overheads launch" -- "${cur}"))
      else
        COMPREPLY=($(compgen -W "--out --force --help" -- "${cur}") $(compgen -f -- "${cur}"))
      fi ;;
    convert) COMPREPLY=($(compgen -W "kernels --help" -- "${cur}")) ;;
  esac
}
complete -F _upsim upsim
