#!/usr/bin/env bash
# Helper of pacing.sh (PCAP=1): the 100 ms window accuracy computed from a
# packet capture taken on the client host's interface, i.e. from the times
# the segments reached the client's machine, independent of when the client
# read them. Same definition as the client's (crates/vodlab-client/src/
# delivery.rs): per connection, the windows (p + i·w, p + (i+1)·w] after the
# packet that completed the first BUFFER_BYTES, every full window until the
# connection's last data packet, each compared with TARGET bytes (K × bit
# rate × 100 ms); within when |bytes − TARGET| <= 5 % of TARGET. The bytes
# are TCP payload (the response head, ~200 B, counts towards the buffer:
# the anchor moves by a fraction of a millisecond).
#   pacing-pcap.sh FILE.pcap BUFFER_BYTES TARGET_BYTES > pcap_windows.json
set -euo pipefail
pcap=$1 need=$2 target=$3
# "1700000000.123456 IP 10.77.0.1.8080 > 10.77.0.10.40000: tcp 125"
tcpdump -r "$pcap" -tt -nn -q 2>/dev/null | awk -v need="$need" -v target="$target" '
  $2 == "IP" && $NF > 0 {
    t = $1; flow = $5; n = $NF
    cum[flow] += n
    if (!(flow in anchor)) {
      if (cum[flow] >= need) { anchor[flow] = t; wend[flow] = t + 0.1; wbytes[flow] = 0 }
      next
    }
    while (t > wend[flow]) { emit(wbytes[flow]); wbytes[flow] = 0; wend[flow] += 0.1 }
    wbytes[flow] += n
  }
  function emit(b,   d) {
    d = (b - target) / target
    dev[nw++] = d
    if (d <= 0.05 && d >= -0.05) ok++
  }
  END {
    # sort the deviations for p5/p50/p95 (insertion into buckets would do;
    # n is at most ~200,000 here, asort is gawk-only, so a simple heap sort)
    n = nw
    for (i = int(n / 2) - 1; i >= 0; i--) sift(i, n)
    for (e = n - 1; e > 0; e--) { x = dev[0]; dev[0] = dev[e]; dev[e] = x; sift(0, e) }
    printf "{\"windows\": %d, \"within_5pct\": %d, \"within_5pct_pct\": %.2f, ", n, ok, n ? 100 * ok / n : 0
    printf "\"deviation_p5\": %.4f, \"deviation_p50\": %.4f, \"deviation_p95\": %.4f, \"flows\": %d}\n", \
      q(0.05), q(0.5), q(0.95), length(anchor)
  }
  function q(p) { return nw ? dev[int(p * (nw - 1))] : 0 }
  function sift(i, m,   c, x) {
    while ((c = 2 * i + 1) < m) {
      if (c + 1 < m && dev[c + 1] > dev[c]) c++
      if (dev[i] >= dev[c]) return
      x = dev[i]; dev[i] = dev[c]; dev[c] = x; i = c
    }
  }'
