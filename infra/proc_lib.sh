# Process helpers for the service scripts (infra/prefect_server.sh, infra/ray_cluster.sh); sourced, not run.
#
# Every service is started in its own session (`setsid`), so it is the leader of a process group that
# can be signalled whole. Children that leave that group (Prefect starts each flow run in a new session;
# Ray may too) are still found: as descendants by parent pid, collected BEFORE anything is signalled,
# since a child whose parent died is re-parented and can no longer be traced back.
# Nothing here matches processes by name alone: a pid is only trusted after its command line (and,
# where given, its environment) has been checked, so a recycled pid is never signalled.

# proc_spawn LOG CMD...: start CMD detached in a session of its own (its pid = its process group =
# its session), output appended to LOG (earlier runs' lines stay for a post-mortem), set SPAWNED_PID. Two details matter:
#  - a non-interactive bash starts background commands with SIGINT/SIGQUIT ignored, and Python keeps
#    an ignored SIGINT ignored: Prefect's worker turns SIGTERM into SIGINT to itself, so it would
#    never stop. The subshell restores the default dispositions before exec.
#  - fd 9 is the callers' lock (flock): a daemon that inherited it would hold the lock forever.
proc_spawn() {
  local log=$1
  shift
  echo "=== $(date -Is) $*" >>"$log"
  ( trap - INT QUIT; exec setsid "$@" </dev/null >>"$log" 2>&1 9>&- ) &
  SPAWNED_PID=$!
}

# proc_alive PID: the process exists and is not a zombie (a dead child nobody reaped yet is gone for us).
proc_alive() {
  local stat
  stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ -n "$stat" && "$stat" != Z* ]]
}

# proc_cmdline PID: its argv joined by spaces (empty when gone or unreadable).
proc_cmdline() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" || true; }

# proc_has_env PID NAME=VALUE: the process was started with exactly that variable.
proc_has_env() { tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qxF -- "$2"; }

# proc_is PID PATTERN... : alive, and its command line contains every PATTERN (fixed strings).
proc_is() {
  local pid=$1 cmd pattern
  shift
  [[ "$pid" =~ ^[0-9]+$ ]] && proc_alive "$pid" || return 1
  cmd=$(proc_cmdline "$pid")
  for pattern in "$@"; do [[ "$cmd" == *"$pattern"* ]] || return 1; done
}

# proc_pidfile FILE PATTERN... : print the pid in FILE when that process is alive and matches.
proc_pidfile() {
  local file=$1 pid
  shift
  [[ -s "$file" ]] || return 1
  pid=$(<"$file")
  proc_is "$pid" "$@" || return 1
  echo "$pid"
}

# proc_find ENV_ASSIGNMENT PATTERN... : pids whose command line has every PATTERN and whose
# environment holds ENV_ASSIGNMENT (e.g. PREFECT_HOME=/x): strays of this state dir without a pid file.
proc_find() {
  local env=$1 pid
  shift
  for pid in $(pgrep -f -- "$1" || true); do
    [[ "$pid" == "$$" || "$pid" == "$BASHPID" ]] && continue
    proc_is "$pid" "$@" && proc_has_env "$pid" "$env" && echo "$pid"
  done
  return 0
}

# proc_tree PID...: the given pids and all their live descendants.
proc_tree() {
  ps -e -o pid=,ppid= | awk -v roots="$*" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END {
      do { grew = 0; for (c in parent) if (!(c in keep) && (parent[c] in keep)) { keep[c] = 1; grew = 1 } } while (grew)
      for (k in keep) if (k in parent) print k
    }'
}

# proc_signal SIG PID...: signal each pid; a pid that leads its own process group (what setsid gives
# us) gets the signal for its whole group. Never the group of this script or its caller.
proc_signal() {
  local sig=$1 pid pgid own
  shift
  own=$(ps -o pgid= -p $$ | tr -d ' ')
  for pid in "$@"; do
    pgid=$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ') || continue
    if [[ -n "$pgid" && "$pgid" == "$pid" && "$pgid" != "$own" ]]; then
      kill "-$sig" -- "-$pgid" 2>/dev/null || true
    else
      kill "-$sig" "$pid" 2>/dev/null || true
    fi
  done
}

# proc_stop NAME TIMEOUT_S PID...: SIGTERM the pids, their groups and every descendant (flow runs in
# sessions of their own too), wait until all have exited, SIGKILL what is left after TIMEOUT_S.
# Returns 1 only if something survived SIGKILL.
proc_stop() {
  local name=$1 timeout=$2 deadline pid
  shift 2
  local -a tree alive
  mapfile -t tree < <(proc_tree "$@")
  ((${#tree[@]})) || return 0
  proc_signal TERM "${tree[@]}"
  deadline=$((SECONDS + timeout))
  while :; do
    # Descendants born during the shutdown (or re-parented ones we already know) stay tracked.
    mapfile -t tree < <(proc_tree "${tree[@]}")
    alive=()
    for pid in "${tree[@]}"; do proc_alive "$pid" && alive+=("$pid"); done
    ((${#alive[@]})) || return 0
    if ((SECONDS >= deadline)); then break; fi
    sleep 0.2
  done
  echo "[$name] still running after ${timeout} s (pids ${alive[*]}): SIGKILL" >&2
  proc_signal KILL "${alive[@]}"
  deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    local left=()
    for pid in "${alive[@]}"; do proc_alive "$pid" && left+=("$pid"); done
    ((${#left[@]})) || return 0
    sleep 0.2
  done
  echo "[$name] could not end pids ${left[*]}" >&2
  return 1
}
