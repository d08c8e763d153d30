#!/usr/bin/env python3
"""The soak of scripts/soak.sh (standard library only; docs/serve.md, "Soak").

`vodlab serve` on a free loopback port for --minutes, in phases of --period
seconds: benign clients in every phase (paced scripted viewers, `vodlab run
WORKLOAD --rate`, and closed-loop DASH players, `vodlab run --player dash`,
each a run of the phase's length), attacks in every other phase (slowloris,
slow readers, HTTP/2 floods, then all three, in turn), and one server
restart (SIGTERM, then a new server on the same port) at the middle of the
run. Every --sample seconds the server's resident memory, open descriptors,
threads and CPU (/proc/PID) and its /vodlab/stats counters go to
samples.csv; each phase's benign QoE (from the runs' results.json) to
phases.csv. At the end: summary.txt (min, max and slope of RSS and fds over
the last half, which is one server process) and soak.html with SVG plots.
Every process it starts is ended by its PID.
"""

import argparse
import csv
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
# the attacks, in turn, of the attacked phases
ATTACKS = ["slowloris", "slow-readers", "h2-floods", "all"]
H2_FLOODS = ["rapid_reset", "continuation_flood", "settings_flood", "ping_flood",
             "window_update_flood", "small_data_flood"]
BIG = "soak-big.bin"
SAMPLE_FIELDS = ["t_s", "phase", "attack", "pid", "rss_kib", "fds", "threads", "cpu_pct",
                 "open_connections", "requests", "header_timeouts", "send_timeouts", "shed",
                 "h2_abuse_closes", "h2_refused_banned"]
PHASE_FIELDS = ["phase", "start_s", "end_s", "attack", "restart",
                "viewers_started", "viewers_measured", "viewers_failed", "viewers_errors",
                "viewers_p50_ms", "viewers_p99_ms", "viewers_stalled",
                "players_sessions", "players_failed", "players_rebuffers", "players_startup_p50_ms",
                "players_bitrate_kbps", "attack_report"]


def log(msg):
    print(f"soak: {msg}", flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def listening(port, limit=20.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def stop(p, what, wait=60.0):
    """SIGTERM to a child we started (by its PID), SIGKILL after `wait` s."""
    if p.poll() is not None:
        return p.returncode
    os.kill(p.pid, signal.SIGTERM)
    try:
        return p.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        log(f"{what} (pid {p.pid}) still running {wait:.0f} s after SIGTERM: SIGKILL")
        os.kill(p.pid, signal.SIGKILL)
        return p.wait()


class Server:
    """`vodlab serve` and its restarts, on one port."""

    def __init__(self, a, root, port, out):
        self.a, self.root, self.port, self.out = a, root, port, out
        self.proc = None
        self.starts = 0
        self.lock = threading.Lock()

    def start(self):
        self.starts += 1
        logf = open(os.path.join(self.out, f"serve-{self.starts}.log"), "w")
        args = [self.a.vodlab, "serve", "--root", self.root, "--listen", f"127.0.0.1:{self.port}",
                "--stats-interval", "0"] + (["--h2-abuse-ban", "0"] if self.a.h2_penalty == "off" else []) \
            + self.a.serve_arg
        p = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not listening(self.port):
            stop(p, "vodlab serve")
            sys.exit(f"soak: vodlab serve did not listen on {self.port} (serve-{self.starts}.log)")
        with self.lock:
            self.proc = p
        log(f"server pid {p.pid} on 127.0.0.1:{self.port}")

    def restart(self):
        with self.lock:
            p = self.proc
        t0 = time.monotonic()
        rc = stop(p, "vodlab serve")
        down = time.monotonic() - t0
        self.start()
        return {"stopped_rc": rc, "stop_s": round(down, 2), "down_s": round(time.monotonic() - t0, 2)}

    def pid(self):
        with self.lock:
            return self.proc.pid if self.proc and self.proc.poll() is None else None


class Sampler(threading.Thread):
    """Samples the server process every `every` seconds into samples.csv."""

    def __init__(self, server, path, every, t0, phase_of):
        super().__init__(daemon=True)
        self.server, self.every, self.t0, self.phase_of = server, every, t0, phase_of
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=SAMPLE_FIELDS)
        self.w.writeheader()
        self.halt = threading.Event()
        self.last = {}  # pid -> (t, ticks)
        self.rows = []

    def sample(self):
        pid = self.server.pid()
        if pid is None:
            return
        t = time.monotonic()
        try:
            status = open(f"/proc/{pid}/status").read()
            stat = open(f"/proc/{pid}/stat").read()
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            return  # the process just ended (a restart)
        field = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in status.splitlines() if ":" in l}
        rss = int(field["VmRSS"].split()[0])
        threads = int(field["Threads"])
        # fields after the command's closing parenthesis: utime and stime are 14 and 15
        rest = stat[stat.rindex(")") + 2:].split()
        ticks = int(rest[11]) + int(rest[12])
        cpu = ""
        if pid in self.last:
            lt, lticks = self.last[pid]
            cpu = round(100.0 * (ticks - lticks) / CLK_TCK / max(t - lt, 1e-6), 1)
        self.last[pid] = (t, ticks)
        row = {"t_s": round(t - self.t0, 1), "pid": pid, "rss_kib": rss, "fds": fds,
               "threads": threads, "cpu_pct": cpu}
        phase, attack = self.phase_of(t - self.t0)
        row.update(phase=phase, attack=attack)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.server.port}/vodlab/stats", timeout=2) as r:
                s = json.load(r)
            h2 = s.get("h2", {})
            row.update(open_connections=s["open_connections"], requests=s["requests"],
                       header_timeouts=s["header_timeouts"], send_timeouts=s["send_timeouts"],
                       shed=s["shed"],
                       h2_abuse_closes=sum(h2.get(k, 0) for k in H2_FLOODS),
                       h2_refused_banned=h2.get("refused_banned", 0))
        except (OSError, ValueError, KeyError):
            pass  # no answer within 2 s is itself visible as a gap
        self.w.writerow(row)
        self.f.flush()
        self.rows.append(row)

    def run(self):
        while not self.halt.is_set():
            t = time.monotonic()
            self.sample()
            self.halt.wait(max(0.0, self.every - (time.monotonic() - t)))


def stats_of(d, key):
    v = d.get(key) or {}
    return v


def viewers_qoe(path):
    try:
        r = json.load(open(os.path.join(path, "results.json")))
    except (OSError, ValueError):
        return {}
    rt = stats_of(r, "response_time_ms")
    return {"viewers_started": r.get("started_sessions"), "viewers_measured": r.get("measured_sessions"),
            "viewers_failed": r.get("failed_sessions"),
            "viewers_errors": sum((r.get("errors") or {}).values()),
            "viewers_p50_ms": rt.get("p50"), "viewers_p99_ms": rt.get("p99"),
            "viewers_stalled": r.get("stalled_sessions")}


def players_qoe(path):
    try:
        r = json.load(open(os.path.join(path, "results.json")))
    except (OSError, ValueError):
        return {}
    o = (r.get("players") or {}).get("overall") or {}
    return {"players_sessions": o.get("sessions"), "players_failed": o.get("failed"),
            "players_rebuffers": o.get("rebuffer_events"),
            "players_startup_p50_ms": stats_of(o, "startup_delay_ms").get("p50"),
            "players_bitrate_kbps": stats_of(o, "mean_bitrate_kbps").get("mean")}


def slope_per_hour(rows, key):
    pts = [(float(r["t_s"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
    if len(pts) < 3:
        return float("nan")
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    return 3600.0 * sum((t - mt) * (v - mv) for t, v in pts) / den if den else float("nan")


def summary(rows, phases, total_s, restart_at, restart_info, a):
    last = [r for r in rows if float(r["t_s"]) >= total_s / 2 and r.get("rss_kib") not in (None, "")]
    lines = [f"vodlab soak: {a.minutes:g} min, phases of {a.period:g} s, samples every {a.sample:g} s, "
             f"server restarted at {restart_at:.0f} s ({json.dumps(restart_info)})",
             f"benign: viewers {a.viewers_rate:g}/s, DASH players {a.players_rate:g}/s; attacks: slowloris "
             f"{a.slowloris}, slow readers {a.slow_readers}, h2 flooder {a.h2_threads} thread(s), "
             f"per-address h2 penalty {a.h2_penalty}", ""]
    lines.append("server, last half (t >= %.0f s, one process):" % (total_s / 2))
    for key, unit, scale in [("rss_kib", "MiB", 1 / 1024), ("fds", "fds", 1), ("threads", "threads", 1),
                             ("open_connections", "connections", 1)]:
        vals = [float(r[key]) for r in last if r.get(key) not in (None, "")]
        if not vals:
            lines.append(f"  {key}: no samples")
            continue
        sl = slope_per_hour(last, key) * scale
        quiet_sl = slope_per_hour([r for r in last if r["attack"] == "off"], key) * scale
        lines.append(f"  {key:17} min {min(vals) * scale:9.1f}  max {max(vals) * scale:9.1f}  "
                     f"mean {sum(vals) / len(vals) * scale:9.1f} {unit:11}  slope {sl:+9.1f} {unit}/h, "
                     f"unattacked phases only {quiet_sl:+9.1f} {unit}/h")
    # the benign phases of the last half: where the attacks left nothing behind
    quiet = [p for p in phases if p["attack"] == "off" and p["start_s"] >= total_s / 2]
    if quiet:
        lines.append("")
        lines.append("end of each unattacked phase in the last half (what attacks left behind):")
        for p in quiet:
            at = [r for r in last if p["start_s"] <= float(r["t_s"]) <= p["end_s"]
                  and r.get("rss_kib") not in (None, "")]
            if at:
                e = at[-1]
                lines.append(f"  phase {p['phase']:2} t={e['t_s']:>7}s rss {int(e['rss_kib']) / 1024:7.1f} MiB "
                             f"fds {e['fds']:>5} threads {e['threads']:>3} open_connections {e.get('open_connections', '')}")
    cpu = [float(r["cpu_pct"]) for r in rows if r.get("cpu_pct") not in (None, "")]
    if cpu:
        lines.append("")
        lines.append(f"server CPU: mean {sum(cpu) / len(cpu):.1f} %, max {max(cpu):.1f} % (of one core)")
    lines.append("")
    lines.append("benign QoE per phase (viewers: vodlab run, players: vodlab run --player dash):")
    lines.append(f"  {'phase':>5} {'attack':13} {'v.started':>9} {'v.failed':>8} {'v.errors':>8} "
                 f"{'v.p50ms':>8} {'v.p99ms':>8} {'p.sess':>6} {'p.failed':>8} {'p.rebuf':>7} {'p.kbps':>7}")

    def f(v, fmt="{:.0f}"):
        return "-" if v is None or v == "" else fmt.format(v)
    for p in phases:
        lines.append(f"  {p['phase']:>5} {p['attack'] + (' +restart' if p['restart'] else ''):13} "
                     f"{f(p.get('viewers_started')):>9} {f(p.get('viewers_failed')):>8} {f(p.get('viewers_errors')):>8} "
                     f"{f(p.get('viewers_p50_ms'), '{:.1f}'):>8} {f(p.get('viewers_p99_ms'), '{:.1f}'):>8} "
                     f"{f(p.get('players_sessions')):>6} {f(p.get('players_failed')):>8} "
                     f"{f(p.get('players_rebuffers')):>7} {f(p.get('players_bitrate_kbps')):>7}")
    return "\n".join(lines) + "\n"


COLOURS = {"off": "#ffffff", "slowloris": "#fde2e2", "slow-readers": "#e2ecfd", "h2-floods": "#e6f5e0",
           "all": "#f3e2fd"}


def nice_step(raw):
    """1, 2 or 5 times a power of ten, at least `raw`."""
    if raw <= 0:
        return 1.0
    p = 10 ** math.floor(math.log10(raw))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= raw)


def svg_panel(rows, phases, total_s, restart_at, key, label, scale=1.0, width=900, height=150):
    pad_l, pad_r, pad_t, pad_b = 60, 30, 20, 22
    pw, ph = width - pad_l - pad_r, height - pad_t - pad_b
    pts = [(float(r["t_s"]), float(r[key]) * scale, r["pid"]) for r in rows if r.get(key) not in (None, "")]
    vmax = max([v for _, v, _ in pts] + [1e-9]) * 1.1
    x = lambda t: pad_l + pw * t / max(total_s, 1e-9)
    y = lambda v: pad_t + ph * (1 - v / vmax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">']
    for p in phases:
        out.append(f'<rect x="{x(p["start_s"]):.1f}" y="{pad_t}" width="{x(p["end_s"]) - x(p["start_s"]):.1f}" '
                   f'height="{ph}" fill="{COLOURS.get(p["attack"], "#eee")}"/>')
    out.append(f'<rect x="{pad_l}" y="{pad_t}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    step = nice_step(vmax / 4)
    v = 0.0
    while v <= vmax:
        out.append(f'<text x="{pad_l - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        out.append(f'<line x1="{pad_l}" x2="{pad_l + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        v = round(v + step, 9)
    minutes = total_s / 60
    tick = next((m for m in [0.5, 1, 2, 5, 10, 15, 30, 60, 120] if minutes / m <= 8), 240)
    m = 0.0
    while m * 60 <= total_s + 1e-6:
        out.append(f'<text x="{x(m * 60):.1f}" y="{height - 6}" text-anchor="middle">{m:g} min</text>')
        m += tick
    # one polyline per server process (a restart starts a new one)
    by_pid = {}
    for t, v, pid in pts:
        by_pid.setdefault(pid, []).append(f"{x(t):.1f},{y(v):.1f}")
    for seg in by_pid.values():
        out.append(f'<polyline fill="none" stroke="#c0392b" stroke-width="1.5" points="{" ".join(seg)}"/>')
    if restart_at is not None:
        out.append(f'<line x1="{x(restart_at):.1f}" x2="{x(restart_at):.1f}" y1="{pad_t}" y2="{pad_t + ph}" '
                   f'stroke="#000" stroke-dasharray="4,3"/>')
        out.append(f'<text x="{x(restart_at) + 3:.1f}" y="{pad_t + 10}">restart</text>')
    out.append(f'<text x="{pad_l}" y="{pad_t - 6}" font-weight="bold">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)


def html(rows, phases, total_s, restart_at, text):
    panels = [("rss_kib", "server RSS, MiB", 1 / 1024), ("fds", "open descriptors", 1),
              ("cpu_pct", "server CPU, % of one core", 1), ("open_connections", "open connections", 1),
              ("threads", "threads", 1)]
    svgs = [svg_panel(rows, phases, total_s, restart_at, k, l, s) for k, l, s in panels]
    legend = " ".join(f'<span style="background:{c};border:1px solid #999;padding:0 6px">{a}</span>'
                      for a, c in COLOURS.items())
    esc = text.replace("&", "&amp;").replace("<", "&lt;")
    return ("<!doctype html><meta charset=utf-8><title>vodlab soak</title>"
            "<h1>vodlab soak</h1><p>phases: " + legend + "</p>" + "<br>".join(svgs)
            + "<pre>" + esc + "</pre>")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vodlab", default=os.path.join(REPO, "target", "release", "vodlab"),
                    help="the vodlab binary (default target/release/vodlab)")
    ap.add_argument("--minutes", type=float, default=60, help="length of the soak (default 60)")
    ap.add_argument("--period", type=float, default=None,
                    help="seconds per phase (default 180, or a tenth of the run when shorter than 30 min)")
    ap.add_argument("--sample", type=float, default=5, help="seconds between samples of the server (default 5)")
    ap.add_argument("--out", default=None, help="output directory (default target/soak/<time>)")
    ap.add_argument("--port", type=int, default=0, help="the server's loopback port (default a free one)")
    ap.add_argument("--viewers-rate", type=float, default=1.0, help="paced viewers' sessions/s")
    ap.add_argument("--players-rate", type=float, default=0.5, help="DASH players' sessions/s")
    ap.add_argument("--slowloris", type=int, default=500, help="slowloris connections")
    ap.add_argument("--slow-readers", type=int, default=100, help="slow readers")
    ap.add_argument("--h2-threads", type=int, default=1, help="threads of the h2 flooder")
    ap.add_argument("--h2-penalty", choices=["on", "off"], default="off",
                    help="the server's per-address penalty for HTTP/2 floods (--h2-abuse-ban): off (the default) "
                         "lets every flood connection reach the HTTP/2 layer, as floods from many addresses "
                         "would; on bans the flooder's one address, so most of its connections are refused at accept")
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="an extra `vodlab serve` argument (repeat), e.g. --serve-arg=--header-timeout=5")
    a = ap.parse_args()
    if a.minutes <= 0:
        sys.exit("soak: --minutes must be > 0")
    total_s = a.minutes * 60
    if a.period is None:
        a.period = 180.0 if a.minutes >= 30 else total_s / 10
    if a.period < 20:
        sys.exit(f"soak: phases of {a.period:g} s are too short (at least 20 s: clients need time to play)")
    if not os.access(a.vodlab, os.X_OK):
        sys.exit(f"soak: no vodlab binary at {a.vodlab} (cargo build --release -p vodlab, or --vodlab)")
    n_phases = max(1, int(round(total_s / a.period)))
    total_s = n_phases * a.period
    # the middle of the phase before the half way point: the last half is
    # one server process
    restart_at = max(0.0, total_s / 2 - a.period / 2)
    out = os.path.abspath(a.out or os.path.join(REPO, "target", "soak", time.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(os.path.join(out, "clients"), exist_ok=True)
    log(f"{n_phases} phases of {a.period:g} s ({total_s / 60:g} min) into {out}")

    # the workload and its file set (synthetic bytes, DASH/HLS manifests),
    # with a 256 MiB sparse file for the slow readers
    work = os.path.join(out, "work")
    sessions = int(math.ceil(max(a.viewers_rate, a.players_rate) * a.period * 1.2)) + 20
    subprocess.run([a.vodlab, "gen", "--spec", os.path.join(HERE, "spec.toml"), "--sessions", str(sessions),
                    "-o", work], check=True, stdout=subprocess.DEVNULL)
    root = os.path.join(out, "root")
    subprocess.run([a.vodlab, "fileset", "create", work, "--root", root], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(root, BIG), "wb") as f:
        f.truncate(256 << 20)

    port = a.port or free_port()
    server = Server(a, root, port, out)
    server.start()
    t0 = time.monotonic()
    phase_attack = [("off" if i % 2 == 0 else ATTACKS[(i // 2) % len(ATTACKS)]) for i in range(n_phases)]

    def phase_of(t):
        i = min(int(t // a.period), n_phases - 1)
        return i, phase_attack[i]
    sampler = Sampler(server, os.path.join(out, "samples.csv"), a.sample, t0, phase_of)
    sampler.start()

    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    children = []
    phases = []
    restart_info = None
    try:
        for i in range(n_phases):
            start = i * a.period
            end = start + a.period
            attack = phase_attack[i]
            now = time.monotonic() - t0
            if now < start:
                time.sleep(start - now)
            log(f"phase {i} at {time.monotonic() - t0:.0f} s: attack {attack}")
            run_s = a.period - 3  # the clients' runs end before the next phase starts
            procs = []
            attack_logs = []
            if attack in ("slowloris", "all"):
                attack_logs.append(os.path.join(out, "clients", f"phase-{i:02}-slowloris.json"))
                procs.append(("slowloris", subprocess.Popen(
                    [py, os.path.join(HERE, "attack.py"), "slowloris", "127.0.0.1", str(port),
                     "--conns", str(a.slowloris), "--seconds", str(run_s), "--bind", "127.0.0.3", "--path", "/" + BIG],
                    stdout=open(attack_logs[-1], "w"), stderr=subprocess.STDOUT)))
            if attack in ("slow-readers", "all"):
                attack_logs.append(os.path.join(out, "clients", f"phase-{i:02}-slowread.json"))
                procs.append(("slowread", subprocess.Popen(
                    [py, os.path.join(HERE, "attack.py"), "slowread", "127.0.0.1", str(port),
                     "--conns", str(a.slow_readers), "--seconds", str(run_s), "--bind", "127.0.0.4", "--path", "/" + BIG],
                    stdout=open(attack_logs[-1], "w"), stderr=subprocess.STDOUT)))
            if attack in ("h2-floods", "all"):
                # each flood phase the next flood, so an hour sees all six
                k = sum(1 for j in range(i) if phase_attack[j] in ("h2-floods", "all"))
                flood = H2_FLOODS[k % len(H2_FLOODS)]
                attack_logs.append(os.path.join(out, "clients", f"phase-{i:02}-h2-{flood}.json"))
                procs.append(("h2 " + flood, subprocess.Popen(
                    [py, os.path.join(REPO, "scripts", "h2probe", "h2probe.py"), "127.0.0.1", str(port),
                     "--bind", "127.0.0.2", "--loop", str(run_s), "--threads", str(a.h2_threads), flood],
                    stdout=open(attack_logs[-1], "w"), stderr=subprocess.STDOUT)))
            vdir = os.path.join(out, "clients", f"phase-{i:02}-viewers")
            pdir = os.path.join(out, "clients", f"phase-{i:02}-players")
            common = ["--target", f"http://127.0.0.1:{port}", "--duration", str(run_s), "--check-bytes", "0",
                      "--quiet", "--seed", str(i + 1), "--ramp-up", "0", "--ramp-down", "0"]
            procs.append(("viewers", subprocess.Popen(
                [a.vodlab, "run", work, "--rate", str(a.viewers_rate), "-o", vdir] + common,
                stdout=open(vdir + ".log", "w"), stderr=subprocess.STDOUT)))
            procs.append(("players", subprocess.Popen(
                [a.vodlab, "run", work, "--rate", str(a.players_rate), "--player", "dash",
                 "--max-segments", "8", "-o", pdir] + common,
                stdout=open(pdir + ".log", "w"), stderr=subprocess.STDOUT)))
            children[:] = procs
            restarted = False
            if start <= restart_at < end:
                now = time.monotonic() - t0
                if now < restart_at:
                    time.sleep(restart_at - now)
                log(f"restarting the server at {time.monotonic() - t0:.0f} s")
                restart_info = server.restart()
                restart_info["at_s"] = round(time.monotonic() - t0, 1)
                log(f"restart: {restart_info}")
                restarted = True
            # every child of the phase ends by itself before the phase does;
            # one that does not is ended by its PID
            for name, p in procs:
                left = max(1.0, t0 + end - time.monotonic())
                try:
                    p.wait(timeout=left)
                except subprocess.TimeoutExpired:
                    log(f"phase {i}: {name} (pid {p.pid}) overran its phase: SIGTERM")
                    stop(p, name, wait=10)
                if p.returncode not in (0, None) and name in ("viewers", "players"):
                    log(f"phase {i}: {name} exited {p.returncode} (see its .log)")
            reports = []
            for path in attack_logs:
                try:
                    lines = [l for l in open(path).read().splitlines() if l.startswith("{")]
                    reports.append(lines[-1] if lines else "")
                except OSError:
                    pass
            row = {"phase": i, "start_s": start, "end_s": end, "attack": attack, "restart": restarted,
                   "attack_report": " ".join(reports)}
            row.update(viewers_qoe(vdir))
            row.update(players_qoe(pdir))
            phases.append(row)
    finally:
        for name, p in children:
            if p.poll() is None:
                stop(p, name, wait=10)
        sampler.halt.set()
        sampler.join()
        rc = stop(server.proc, "vodlab serve")
        log(f"server stopped (exit {rc})")

    with open(os.path.join(out, "phases.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=PHASE_FIELDS)
        w.writeheader()
        for p in phases:
            w.writerow(p)
    text = summary(sampler.rows, phases, total_s, restart_at, restart_info, a)
    open(os.path.join(out, "summary.txt"), "w").write(text)
    open(os.path.join(out, "soak.html"), "w").write(html(sampler.rows, phases, total_s, restart_at, text))
    for k, l, s in [("rss_kib", "server RSS, MiB", 1 / 1024), ("fds", "open descriptors", 1)]:
        open(os.path.join(out, f"{k}.svg"), "w").write(svg_panel(sampler.rows, phases, total_s, restart_at, k, l, s))
    print(text, end="")
    log(f"samples.csv, phases.csv, summary.txt, soak.html, rss_kib.svg, fds.svg in {out}")


if __name__ == "__main__":
    main()
