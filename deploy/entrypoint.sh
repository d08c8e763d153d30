#!/bin/sh
# vodlab's container entrypoint for a run split over Kubernetes pods
# (`vodlab k8s`, docs/scale-out.md). The settings come from the run's
# ConfigMap as environment variables:
#   VODLAB_NAME, VODLAB_SHARDS (N), VODLAB_TARGET, VODLAB_WORKLOAD,
#   VODLAB_RESULTS (the results volume), VODLAB_RUN_ARGS (more `vodlab run`
#   flags, split on spaces), VODLAB_START_AT (Unix seconds: the barrier),
#   VODLAB_MERGE_TIMEOUT (seconds); with an object store, VODLAB_RESULTS_URL
#   (s3://BUCKET/PREFIX, through the `aws` CLI; VODLAB_AWS overrides it) and
#   VODLAB_S3_ENDPOINT (its --endpoint-url)
# Modes:
#   shard  JOB_COMPLETION_INDEX=I (set by an Indexed Job) -> vodlab run --shard I/N
#          --start-at VODLAB_START_AT into RUN/shard-I, then RUN/shard-I/exit-code
#   wait   until every shard wrote exit-code or VODLAB_MERGE_TIMEOUT passed
#   merge  vodlab merge RUN/shard-0 .. RUN/shard-(N-1) -o RUN/merged
# where RUN = VODLAB_RESULTS/VODLAB_NAME-VODLAB_START_AT (one directory per run).
# With VODLAB_RESULTS_URL the volume is the pod's own scratch: a shard uploads
# its directory to URL/NAME-START/shard-I (exit-code last), wait polls for the
# markers there, merge downloads the shards and uploads URL/NAME-START/merged.
# No mode: shard when JOB_COMPLETION_INDEX is set. Anything else runs vodlab
# with those arguments. VODLAB_BIN overrides the vodlab binary.
set -eu
set -f # VODLAB_RUN_ARGS is split on spaces, never globbed

vodlab=${VODLAB_BIN:-vodlab}
me=vodlab-entrypoint

die() {
  echo "$me: $*" >&2
  exit 2
}
need() {
  eval "v=\${$1:-}"
  [ -n "$v" ] || die "$1 is not set ($2)"
}
count() {
  case $2 in '' | *[!0-9]*) die "$1=$2 is not a whole number" ;; esac
}
common() {
  need VODLAB_NAME "the run's name, from its ConfigMap"
  need VODLAB_SHARDS "the number of shards N"
  need VODLAB_RESULTS "the results volume's mount point"
  need VODLAB_START_AT "the common start, Unix seconds, written by apply.sh"
  count VODLAB_SHARDS "$VODLAB_SHARDS"
  count VODLAB_START_AT "$VODLAB_START_AT"
  [ "$VODLAB_SHARDS" -ge 1 ] || die "VODLAB_SHARDS=$VODLAB_SHARDS: at least 1"
  run_dir="$VODLAB_RESULTS/$VODLAB_NAME-$VODLAB_START_AT"
  url=${VODLAB_RESULTS_URL:-}
  run_url="$url/$VODLAB_NAME-$VODLAB_START_AT"
}
# aws s3 ARGS..., at VODLAB_S3_ENDPOINT when set
s3() {
  if [ -n "${VODLAB_S3_ENDPOINT:-}" ]; then
    "${VODLAB_AWS:-aws}" --endpoint-url "$VODLAB_S3_ENDPOINT" s3 "$@"
  else
    "${VODLAB_AWS:-aws}" s3 "$@"
  fi
}

mode=${1:-}
if [ -z "$mode" ]; then
  [ -n "${JOB_COMPLETION_INDEX:-}" ] || die "no mode (shard, wait, merge) and no JOB_COMPLETION_INDEX"
  mode=shard
fi

case $mode in
shard)
  common
  need JOB_COMPLETION_INDEX "set by Kubernetes in the pods of an Indexed Job"
  need VODLAB_TARGET "the server, http://HOST:PORT"
  need VODLAB_WORKLOAD "the workload's path in the container"
  i=$JOB_COMPLETION_INDEX
  n=$VODLAB_SHARDS
  count JOB_COMPLETION_INDEX "$i"
  [ "$i" -lt "$n" ] || die "JOB_COMPLETION_INDEX=$i: the run has $n shards (0..$((n - 1)))"
  dir="$run_dir/shard-$i"
  mkdir -p "$dir"
  rm -f "$dir/exit-code"
  now=$(date +%s)
  if [ "$now" -gt $((VODLAB_START_AT + 1)) ]; then
    echo "$me: shard $i/$n: the start ($VODLAB_START_AT) passed $((now - VODLAB_START_AT)) s ago;" \
      "this pod started later than the start delay allowed (scheduling, image pull):" \
      "run apply.sh again with a larger VODLAB_START_DELAY" >&2
  else
    echo "$me: shard $i/$n of $VODLAB_NAME starts at $VODLAB_START_AT (in $((VODLAB_START_AT - now)) s), results in $dir"
  fi
  code=0
  # shellcheck disable=SC2086 # VODLAB_RUN_ARGS is a list of flags
  "$vodlab" run "$VODLAB_WORKLOAD" --target "$VODLAB_TARGET" --allow-remote --quiet \
    --shard "$i/$n" --start-at "$VODLAB_START_AT" -o "$dir" ${VODLAB_RUN_ARGS:-} || code=$?
  # the marker the merge waits for, written whole (rename) after the results
  echo "$code" >"$dir/exit-code.tmp"
  mv "$dir/exit-code.tmp" "$dir/exit-code"
  if [ -n "$url" ]; then
    s3 cp --recursive --quiet --exclude exit-code "$dir" "$run_url/shard-$i" &&
      s3 cp --quiet "$dir/exit-code" "$run_url/shard-$i/exit-code" ||
      die "shard $i: uploading the results to $run_url/shard-$i failed"
  fi
  exit "$code"
  ;;
wait)
  common
  timeout=${VODLAB_MERGE_TIMEOUT:-3600}
  count VODLAB_MERGE_TIMEOUT "$timeout"
  poll=${VODLAB_POLL_S:-5}
  deadline=$(($(date +%s) + timeout))
  while :; do
    missing=""
    i=0
    while [ "$i" -lt "$VODLAB_SHARDS" ]; do
      if [ -n "$url" ]; then
        s3 ls "$run_url/shard-$i/exit-code" >/dev/null 2>&1 || missing="$missing $i"
      else
        [ -f "$run_dir/shard-$i/exit-code" ] || missing="$missing $i"
      fi
      i=$((i + 1))
    done
    if [ -z "$missing" ]; then
      echo "$me: all $VODLAB_SHARDS shards finished"
      exit 0
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "$me: waited ${timeout} s; shards not finished:$missing (the merge names them missing)" >&2
      exit 0
    fi
    sleep "$poll"
  done
  ;;
merge)
  common
  set --
  i=0
  while [ "$i" -lt "$VODLAB_SHARDS" ]; do
    if [ -n "$url" ]; then
      s3 cp --recursive --quiet "$run_url/shard-$i" "$run_dir/shard-$i" ||
        echo "$me: downloading $run_url/shard-$i failed: merged as missing" >&2
    fi
    # a pod that never ran left no directory: an empty one is merged as missing
    [ -d "$run_dir/shard-$i" ] || mkdir -p "$run_dir/shard-$i"
    set -- "$@" "$run_dir/shard-$i"
    i=$((i + 1))
  done
  [ -n "$url" ] || exec "$vodlab" merge "$@" -o "$run_dir/merged"
  code=0
  "$vodlab" merge "$@" -o "$run_dir/merged" || code=$?
  s3 cp --recursive --quiet "$run_dir/merged" "$run_url/merged" ||
    die "uploading the merged results to $run_url/merged failed"
  exit "$code"
  ;;
*)
  exec "$vodlab" "$@"
  ;;
esac
