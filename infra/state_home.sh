# Sourced by the service scripts: the state dir, by the rule of skillgate_core/base/paths.py default_home().
#
# skillgate_home REPO: $SKILLGATE_HOME when set (~ expanded, made absolute against the CURRENT
# directory, as Path.resolve() does: call this before any cd), else REPO/.skillgate.
skillgate_home() {
  if [[ -n "${SKILLGATE_HOME:-}" ]]; then
    realpath -m -- "${SKILLGATE_HOME/#\~/$HOME}"
  else
    echo "$1/.skillgate"
  fi
}
