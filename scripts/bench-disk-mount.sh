#!/usr/bin/env bash
# The emulated disk's own speed (docs/disk.md, "Measured"): page-cache misses
# served by `vodlab disk mount --zero-time`, against the fastest HDD profile's
# model rate and against the same reads from tmpfs, and the daemon's CPU
# while a modelled drive streams at its own rate.
#
#   scripts/bench-disk-mount.sh
#
# Every figure is the median of ROUNDS (default 3) rounds. One round: drop
# the mount's cached pages of every file (posix_fadvise DONTNEED, no global
# drop_caches), then READERS (default 4) threads of one python3 process read
# every file once, each into a preallocated 1 MiB buffer (misses); the peer
# is the same readers over the same files on tmpfs (/dev/shm, a copy made by
# `vodlab fileset create`), in the same round. Large buffers and several
# readers so that the reader is not the bottleneck; READERS=1 shows a single
# stream. Then the same files again through the mount (now all cached) and
# from tmpfs. The daemon's CPU is the sum of its threads'
# /proc/PID/task/*/schedstat run times (ns resolution) over the misses.
#
# Environment: ROUNDS, READERS, CONFIGS (zero-time mounts to measure, each
# READ_AHEAD_KIB:SYNTH, SYNTH `best` or a VODLAB_DISK_SYNTH value; default
# "128:best 1024:best 128:baseline": a Linux disk's read-ahead, 1 MiB, and
# the content function compiled for baseline x86-64 as the peer of the
# vectorized one), CPU_PROFILE (default hitachi-5k3000),
# SCALE (workload scale, default 0.002: 20 files, 0.33 GiB), SKIP_BUILD=1,
# VODLAB (binary), DIR (work directory, default a new one under /tmp).
# Needs /dev/fuse and fusermount3; run as root or a user allowed to mount.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
READERS=${READERS:-4}
CONFIGS=${CONFIGS:-128:best 1024:best 128:baseline}
CPU_PROFILE=${CPU_PROFILE:-hitachi-5k3000}
SCALE=${SCALE:-0.002}
# st1000dm003's 2 MB sequential rate on the model, MB/s (docs/disk.md,
# "Other profiles"; printed by `cargo test -p vodlab-disk --release --
# --nocapture calibration`): the fastest HDD profile
FASTEST_HDD_MB_S=208.1
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release -q -p vodlab --bin vodlab
fi
VODLAB=${VODLAB:-$PWD/target/release/vodlab}
DIR=${DIR:-$(mktemp -d /tmp/vodlab-bench-disk-mount.XXXXXX)}
SHM=/dev/shm/vodlab-bench-disk-mount.$$
MNT=$DIR/mnt
mkdir -p "$MNT"
DAEMON=
cleanup() {
    if [[ -n "$DAEMON" ]] && kill -0 "$DAEMON" 2>/dev/null; then
        kill -INT "$DAEMON"; wait "$DAEMON" 2>/dev/null || true
    fi
    if grep -q " $MNT " /proc/mounts; then fusermount3 -u "$MNT" || true; fi
    rm -rf "$SHM"
}
trap cleanup EXIT

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
[[ -f $DIR/wu/catalog.json ]] ||
    "$VODLAB" gen --preset youtube-2011-unchunked --scale "$SCALE" --sessions 20 -o "$DIR/wu" >/dev/null
"$VODLAB" fileset create "$DIR/wu" --root "$SHM" >/dev/null

mount_it() { # args of vodlab disk mount after the workload and mount point
    VODLAB_DISK_SYNTH=${SYNTH:-} "$VODLAB" disk mount "$DIR/wu" "$MNT" "$@" >"$DIR/mount.log" 2>&1 &
    DAEMON=$!
    for _ in $(seq 100); do
        [[ -f $MNT/fileset.json ]] && grep -q " $MNT " /proc/mounts && break
        sleep 0.1
    done
    grep -q " $MNT " /proc/mounts || { cat "$DIR/mount.log"; exit 1; }
    cat "$DIR/mount.log"
}
unmount_it() {
    kill -INT "$DAEMON"; wait "$DAEMON" || true; DAEMON=
    if grep -q " $MNT " /proc/mounts; then echo "still mounted: $MNT" >&2; exit 1; fi
}
# rounds.py PID MNT SHM READERS ROUNDS: the measurement (python3: threads
# reading into preallocated 1 MiB buffers, no process per file)
cat >"$DIR/rounds.py" <<'PY'
import glob, os, sys, threading, time
pid, mnt, shm, readers, rounds = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def files(root):
    return sorted(p for p in glob.glob(root + '/**/*.mp4', recursive=True) if os.path.isfile(p))
def cpu_s():  # the daemon's threads' run time, ns resolution
    t = 0
    for f in glob.glob(f'/proc/{pid}/task/*/schedstat'):
        try: t += int(open(f).read().split()[0])
        except OSError: pass
    return t / 1e9
def drop(fs):  # the mount's cached pages of these files only
    for f in fs:
        fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
def read_all(fs):  # -> (MB/s, daemon CPU-s)
    got = []
    def one(part):
        buf = memoryview(bytearray(1 << 20)); n = 0
        for f in part:
            fd = os.open(f, os.O_RDONLY)
            while (k := os.readv(fd, [buf])) > 0: n += k
            os.close(fd)
        got.append(n)
    th = [threading.Thread(target=one, args=(fs[i::readers],)) for i in range(readers)]
    c0, t0 = cpu_s(), time.perf_counter()
    for t in th: t.start()
    for t in th: t.join()
    dt, c1 = time.perf_counter() - t0, cpu_s()
    return sum(got) / dt / 1e6, c1 - c0, sum(got)
med = lambda v: sorted(v)[(len(v) - 1) // 2]
fm, fs = files(mnt), files(shm)
assert len(fm) == len(fs) > 0, (len(fm), len(fs))
rows = []
for r in range(rounds):
    drop(fm)
    miss, cpu, n = read_all(fm)
    tmp, _, _ = read_all(fs)
    warm, _, _ = read_all(fm)
    tmpw, _, _ = read_all(fs)
    rows.append((miss, tmp, warm, tmpw, n / cpu / 1e9 if cpu > 0 else float('inf'), cpu / (n / miss / 1e6) * 100))
    print(f'  round {r + 1}: misses {miss:.0f} MB/s (daemon {rows[-1][4]:.2f} GB per CPU-s, {rows[-1][5]:.0f} % of a core), tmpfs {tmp:.0f}; cached {warm:.0f}, tmpfs {tmpw:.0f}', file=sys.stderr)
m = [med([x[i] for x in rows]) for i in range(6)]
print(f'{m[0]:.0f} {m[1]:.0f} {m[2]:.0f} {m[3]:.0f} {m[4]:.2f} {m[5]:.1f}')
PY
FASTEST=$FASTEST_HDD_MB_S
x() { echo "$1 / $2" | bc -l | xargs printf '%.2f'; }
echo "workload: $(find "$SHM" -name '*.mp4' | wc -l) files, $(du -sm --apparent-size "$SHM" | cut -f1) MiB;" \
    "readers: $READERS threads reading into 1 MiB buffers; $ROUNDS rounds"
for c in $CONFIGS; do
    ra=${c%%:*} SYNTH=${c#*:}
    [[ $SYNTH == best ]] && SYNTH=
    mount_it --zero-time --readahead-kib "$ra"
    read -r M S W SW G _ < <(python3 "$DIR/rounds.py" "$DAEMON" "$MNT" "$SHM" "$READERS" "$ROUNDS" | tail -1)
    made=$(grep -o 'made with [a-z0-9:_]*' "$DIR/mount.log" | head -1)
    echo "zero-time misses, read-ahead $ra KiB, bytes $made: $M MB/s = $(x "$M" "$FASTEST") x st1000dm003's model rate ($FASTEST MB/s; target >= 10 x);" \
        "$(x "$M" "$S") x the same reads from tmpfs ($S MB/s); the daemon makes $G GB per CPU-second = $(x "$G * 1000" "$FASTEST") x that rate per core (medians)"
    echo "cached reads, read-ahead $ra KiB, bytes $made: $W MB/s, tmpfs $SW MB/s: ratio $(x "$W" "$SW") (target >= 0.90)"
    unmount_it
done
SYNTH=

# the daemon's CPU while one reader streams at the modelled drive's rate
mount_it --profile "$CPU_PROFILE"
read -r M _ _ _ G P < <(python3 "$DIR/rounds.py" "$DAEMON" "$MNT" "$SHM" 1 "$ROUNDS" | tail -1)
echo "daemon CPU at the modelled rate ($CPU_PROFILE, k = 1, one reader): $P % of a core at $M MB/s (medians; target < 25 % at 125 MB/s)"
unmount_it
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if grep -q " $MNT " /proc/mounts; then echo "a mount is left at $MNT" >&2; exit 1; fi
echo "no mount left at $MNT"
