# Shared by the experiment scripts that drive `vodlab compare` from an output folder
# (sourced: `. "$HERE/scripts/experiments/lib.sh"` after HERE and VODLAB are set).

# enter_out DIR: make DIR, work in it, and keep a private copy of the binary there
# (compare starts the mount daemon and `vodlab serve` from its own binary, so a rebuild
# during a long experiment does not change what it runs).
enter_out() {
  mkdir -p "$1"
  cd "$1"
  [ -x ./vodlab ] || cp "$VODLAB" ./vodlab
}

# gen_once PRESET SCALE SESSIONS: the workload `w` (seed 1), unless it exists (resume).
gen_once() {
  [ -d w ] || ./vodlab gen --preset "$1" --scale "$2" --sessions "$3" --seed 1 -o w > gen.txt
}

# sample_loadavg: the load average every 10 s into loadavg.txt until the script exits.
sample_loadavg() {
  ( while sleep 10; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; done ) >> loadavg.txt &
  LOADPID=$!
  trap 'kill $LOADPID 2>/dev/null || true' EXIT
}
