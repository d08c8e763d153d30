#!/usr/bin/env python3
"""The workload of the player-against-Chromium experiments (dashjs-compare.sh,
hlsjs-profile.sh): one title of TITLE_S seconds on the dash-vod ladder, one
viewer who watches it all. Usage: one-title-spec.py TITLE_S NAME > spec.toml"""
import sys
title_s, name = float(sys.argv[1]), sys.argv[2]
ladder = [("240p", 235, "320x240"), ("384p", 750, "512x384"), ("480p", 1750, "720x480"),
          ("720p", 3000, "1280x720"), ("1080p", 4300, "1920x1080"), ("1080p-hi", 5800, "1920x1080")]
print(f'''name = "{name}"
description = "One title of the dash-vod ladder, one viewer: scripts/experiments/{name}.sh"
[catalog]
titles = 1
median_duration_top = 1
placement = "random"
ladder = "nested"
popularity = {{ kind = "zipf", alpha = 0.8 }}
storage = {{ layout = "chunked", chunk_s = 4.0 }}
manifests = {{ dash = true, hls = true, init_bytes = 1024 }}
[catalog.duration]
kind = "constant"
value = {title_s}''')
for n, k, r in ladder:
    print(f'[[catalog.representations]]\nname = "{n}"\nbitrate_kbps = {k}.0\nresolution = "{r}"')
print('''[sessions]
count = 1
request_s = 4.0
buffering_requests = 3
pacing_s = 4.0
timeout_s = 4.0
representation = { kind = "rule", headroom = 0.8 }
[sessions.viewing_fraction]
kind = "constant"
value = 1.0
[sessions.start]
kind = "beginning"
[[clients]]
name = "lab"
share = 1.0
down_kbps = 100000.0
up_kbps = 100000.0
delay_ms = 0.0
[measurement]
ramp_up_sessions = 0
ramp_down_sessions = 0
shard_sessions = 500
seed = 1''')
