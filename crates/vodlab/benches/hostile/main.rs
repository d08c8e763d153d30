//! A benign client of `vodlab serve` with and without an attack running
//! beside it (`cargo bench -p vodlab --bench hostile`; needs h2load from
//! nghttp2-client): 10,000 slowloris connections, each sending a partial
//! request head and one more byte every 2 s, and 1,000 slow readers, each
//! asking for a 256 MiB file through a 4 KiB receive buffer and reading 8
//! bytes a second. Attackers the server closes (header deadline, send
//! timeout) reconnect at once, so the attack stays at its size; the starts
//! are spread over the timeouts so the server closes them evenly.
//!
//! The benign client is `h2load --h1 -c 16` fetching a cached 1 MiB file;
//! its per-request log gives the latency percentiles. Rounds alternate
//! unattacked and attacked in the same process and server; the figures are
//! the medians and the ratios attacked/unattacked (targets: throughput loss
//! < 5 %, p99 within 2x). The server's memory is its RSS before and during
//! the attack, per open connection. Nothing is asserted about the figures
//! (a shared machine is noisy); the bench fails if the server dies or the
//! benign client gets any error.
//!
//! Environment: BENCH_ROUNDS (3), BENCH_REQUESTS (benign requests per
//! round, 30000), BENCH_SLOWLORIS (10000), BENCH_SLOW_READERS (1000),
//! BENCH_HEADER_TIMEOUT (10 s), BENCH_SEND_TIMEOUT (10 s), BENCH_NOTSENT_LOWAT
//! (the server's `--notsent-lowat`, bytes; unset = its default),
//! BENCH_ATTACKER_NICE (0: the nice value of the attack's threads; 19 gives
//! the benign client and the server the CPU the attacker would take on a
//! machine too small to keep them apart, so the figure is the server's
//! defence rather than the box's CPU sharing; the attack's size is printed
//! either way), BENCH_SETUP (`shared`, `separated` or `both`; default
//! `both` as root, else `shared`: see [`setup`] — the separated set-up puts
//! the attacker on a lab host of its own with its own CPUs and a CPU quota,
//! so that the benign client's loss measures the server rather than the
//! shared CPU), BENCH_ATTACKER_CORES (the attacker's quota in the separated
//! set-up, cores; default 0.5 on machines under 6 CPUs, else the CPUs it
//! is given).

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vodlab_client::io::engine::cpu_seconds_of;

mod attack;
mod setup;

use attack::{Attack, AttackCounts, RemoteAttack};
use setup::Setup;
use vodlab_testkit::{env_count, free_port, median, raise_nofile, require};

const SMALL: &str = "/1m.bin";
const BIG: &str = "/256m.bin";
/// Benign connections.
const BENIGN_CONNS: usize = 16;
/// A slowloris connection sends one byte this often.
const DRIBBLE: Duration = Duration::from_secs(2);
/// A slow reader's receive buffer, and what it reads each second.
const READER_RCVBUF: u32 = 4096;
const READER_BYTES: usize = 8;

/// A `/proc/PID/status` field in KiB (VmRSS, VmHWM).
fn status_kib(pid: u32, field: &str) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).expect("server status");
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// Kernel memory of all TCP sockets on the machine, KiB (both ends of
/// loopback, and anything else running).
fn tcp_mem_kib() -> u64 {
    let s = fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == "mem")?;
            w.get(i + 1)?.parse::<u64>().ok()
        })
        .map_or(0, |pages| pages * 4)
}

struct Serve(Child);

impl Serve {
    fn alive(&mut self) {
        if let Ok(Some(st)) = self.0.try_wait() {
            panic!("vodlab serve died: {st}");
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: signalling the child we started, by its PID
        unsafe { libc::kill(self.0.id() as i32, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// `GET /vodlab/stats` (retried for up to 10 s: under attack a connect may
/// need a SYN retry).
fn stats(setup: &Setup, addr: SocketAddr) -> serde_json::Value {
    setup.on_client_host(move || stats_here(addr))
}

fn stats_here(addr: SocketAddr) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let got = (|| -> std::io::Result<serde_json::Value> {
            let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            c.write_all(b"GET /vodlab/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            let mut out = Vec::new();
            c.read_to_end(&mut out)?;
            let at = out
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .ok_or(std::io::ErrorKind::InvalidData)?;
            serde_json::from_slice(&out[at + 4..]).map_err(|e| e.into())
        })();
        match got {
            Ok(v) => return v,
            Err(e) => assert!(t.elapsed() < Duration::from_secs(10), "stats: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn counter(st: &serde_json::Value, k: &str) -> u64 {
    st[k].as_u64().unwrap_or_else(|| panic!("{k} in {st}"))
}

/// One benign run.
struct Benign {
    req_per_s: f64,
    mib_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Cores the server used while the benign client ran.
    server_cores: f64,
    /// Cores h2load used.
    client_cores: f64,
    /// Cores the machine spent busy outside niced processes (user, system,
    /// interrupts: everything but `nice` and idle) while it ran.
    busy_cores: f64,
}

/// CPU seconds of waited-for children (h2load runs) of this process.
fn children_cpu() -> f64 {
    // SAFETY: a zeroed rusage is a valid out-parameter
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a live rusage
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// The machine's busy (not idle, iowait or nice) CPU seconds so far.
fn machine_busy() -> f64 {
    let s = fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: f64 = [0, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    // SAFETY: sysconf has no preconditions
    busy / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

fn h2load(setup: &Setup, h2: &Path, addr: SocketAddr, pid: u32, n: usize, log: &Path) -> Benign {
    let (c0, t0) = (cpu_seconds_of(Some(pid)), Instant::now());
    let (h0, m0) = (children_cpu(), machine_busy());
    let out = setup
        .benign_command(h2)
        .args(["--h1", "-t", &setup.benign_threads().to_string()])
        .args(["-c", &BENIGN_CONNS.to_string()])
        .args(["-n", &n.to_string()])
        .arg(format!("--log-file={}", log.display()))
        .arg(format!("http://{addr}{SMALL}"))
        .output()
        .expect("run h2load");
    let wall = t0.elapsed().as_secs_f64();
    let server_cores = (cpu_seconds_of(Some(pid)) - c0) / wall;
    let client_cores = (children_cpu() - h0) / wall;
    let busy_cores = (machine_busy() - m0) / wall;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "h2load failed: {text}");
    let field = |line: &str, word: &str| -> Option<f64> {
        let l = text.lines().find(|l| l.starts_with(line))?;
        let w: Vec<&str> = l.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        let i = w.iter().position(|x| *x == word)?;
        w.get(i - 1)?.parse().ok()
    };
    // requests: N total, N started, N done, N succeeded, 0 failed, 0 errored, 0 timeout
    let ok = field("requests:", "succeeded").unwrap_or(0.0) as usize;
    let bad = ["failed", "errored", "timeout"]
        .iter()
        .map(|w| field("requests:", w).unwrap_or(f64::NAN))
        .sum::<f64>();
    assert!(
        ok == n && bad == 0.0,
        "the benign client got errors:\n{text}"
    );
    assert_eq!(field("status codes:", "2xx"), Some(n as f64), "{text}");
    // finished in 7.64s, 3928.63 req/s, 3.84GB/s (or 496.20ms)
    let secs = text
        .lines()
        .find_map(|l| {
            let d = l.strip_prefix("finished in ")?.split(',').next()?;
            match d.strip_suffix("ms") {
                Some(ms) => ms.parse::<f64>().ok().map(|v| v / 1000.0),
                None => d.strip_suffix('s')?.parse().ok(),
            }
        })
        .unwrap_or_else(|| panic!("no duration in h2load output:\n{text}"));
    let mut times: Vec<f64> = fs::read_to_string(log)
        .expect("h2load log")
        .lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            assert_eq!(c.get(1).copied(), Some("200"), "h2load log line {l}");
            c.get(2)?.parse::<f64>().ok()
        })
        .collect();
    assert_eq!(times.len(), n, "h2load log lines");
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)] / 1000.0;
    Benign {
        req_per_s: n as f64 / secs,
        mib_per_s: n as f64 / secs, // 1 MiB per request
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        server_cores,
        client_cores,
        busy_cores,
    }
}

/// The attack, in the bench's process or in a process of its own.
enum AnyAttack {
    Local(Attack),
    Remote(RemoteAttack),
}

impl AnyAttack {
    fn counts(&self) -> &Arc<AttackCounts> {
        match self {
            Self::Local(a) => &a.counts,
            Self::Remote(a) => &a.counts,
        }
    }

    /// CPU seconds the attack has used (for the local one, this whole
    /// process's: the attack's runtime and the bench's samplers).
    fn cpu(&self) -> f64 {
        match self {
            Self::Local(_) => cpu_seconds_of(None),
            Self::Remote(a) => cpu_seconds_of(Some(a.pid())),
        }
    }

    fn stop(self) {
        match self {
            Self::Local(a) => a.stop(),
            Self::Remote(a) => a.stop(),
        }
    }
}

/// The bench's settings (environment).
struct Cfg {
    rounds: usize,
    requests: usize,
    n_slowloris: usize,
    n_readers: usize,
    header_timeout: usize,
    send_timeout: usize,
    lowat: Option<String>,
    nice: i32,
    cap: usize,
    h2: std::path::PathBuf,
}

/// What one set-up's rounds gave: medians.
struct Summary {
    setup: &'static str,
    calm_rps: f64,
    hit_rps: f64,
    calm_p99: f64,
    hit_p99: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--attacker") {
        return attack::child_main(&args[2..]);
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    // SAFETY: geteuid has no preconditions
    let root_user = unsafe { libc::geteuid() } == 0;
    let setups = std::env::var("BENCH_SETUP")
        .unwrap_or_else(|_| if root_user { "both" } else { "shared" }.into());
    let setups: Vec<&str> = match setups.as_str() {
        "both" => vec!["shared", "separated"],
        "shared" => vec!["shared"],
        "separated" => vec!["separated"],
        other => panic!("BENCH_SETUP={other:?}: give shared, separated or both"),
    };
    let n_slowloris = env_count("BENCH_SLOWLORIS", 10_000);
    let n_readers = env_count("BENCH_SLOW_READERS", 1_000);
    let attackers = n_slowloris + n_readers;
    let cfg = Cfg {
        rounds: env_count("BENCH_ROUNDS", 3).max(1),
        requests: env_count("BENCH_REQUESTS", 30_000),
        n_slowloris,
        n_readers,
        header_timeout: env_count("BENCH_HEADER_TIMEOUT", 10),
        send_timeout: env_count("BENCH_SEND_TIMEOUT", 10),
        lowat: std::env::var("BENCH_NOTSENT_LOWAT").ok(),
        nice: env_count("BENCH_ATTACKER_NICE", 0).min(19) as i32,
        cap: attackers + attackers / 10 + 1_000,
        h2: require("h2load", "nghttp2-client"),
    };
    let limit = raise_nofile() as usize;
    // the server holds the attackers, their files and the benign client; so does this process
    assert!(
        limit > cfg.cap + n_readers + 256,
        "descriptor limit {limit} too low for {attackers} attackers (cap {})",
        cfg.cap
    );

    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let root = t.path().join("root");
    fs::create_dir(&root).expect("root");
    let block: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    fs::write(root.join(&SMALL[1..]), &block).expect("1 MiB file");
    {
        let mut f = fs::File::create(root.join(&BIG[1..])).expect("256 MiB file");
        for _ in 0..256 {
            f.write_all(&block).expect("write");
        }
    }
    // read once so both are cached
    for f in [SMALL, BIG] {
        let _ = fs::read(root.join(&f[1..])).expect("read");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut summaries = Vec::new();
    for name in setups {
        let setup = if name == "shared" {
            Setup::Shared
        } else {
            assert!(
                root_user,
                "the separated set-up needs root (network namespaces, cgroups)"
            );
            let split = setup::Cpus::split(cores);
            let quota = std::env::var("BENCH_ATTACKER_CORES")
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|c| *c > 0.0)
                .unwrap_or(if cores >= 6 {
                    split.attacker.len() as f64
                } else {
                    0.5
                });
            Setup::separated(cores, quota).unwrap_or_else(|e| panic!("{e}"))
        };
        summaries.push(run(&setup, &cfg, &root, t.path(), cores));
    }
    if summaries.len() > 1 {
        println!("set-ups side by side (medians):");
        for s in &summaries {
            println!(
                "  {:9}: unattacked {:.0} req/s, attacked {:.0} req/s, loss {:.1} %, p99 {:.2} -> {:.2} ms ({:.2}x)",
                s.setup,
                s.calm_rps,
                s.hit_rps,
                (1.0 - s.hit_rps / s.calm_rps) * 100.0,
                s.calm_p99,
                s.hit_p99,
                s.hit_p99 / s.calm_p99
            );
        }
    }
}

/// One set-up's rounds against a fresh server.
fn run(setup: &Setup, cfg: &Cfg, root: &Path, tmp: &Path, cores: usize) -> Summary {
    let Cfg {
        rounds,
        requests,
        n_slowloris,
        n_readers,
        header_timeout,
        send_timeout,
        ref lowat,
        nice,
        cap,
        ref h2,
    } = *cfg;
    let attackers = n_slowloris + n_readers;
    println!("{}", setup.describe());
    let port = free_port();
    let addr = setup.server_addr(port);
    let threads = setup.server_threads();
    let mut serve = Serve(
        setup
            .serve_command(Path::new(env!("CARGO_BIN_EXE_vodlab")))
            .args(["serve", "--root", root.to_str().expect("utf-8")])
            .args(["--listen", &addr.to_string()])
            .args(["--header-timeout", &header_timeout.to_string()])
            .args(["--send-timeout", &send_timeout.to_string()])
            .args(["--max-connections", &cap.to_string()])
            .args(["--stats-interval", "0"])
            .args(
                threads
                    .iter()
                    .flat_map(|n| ["--threads".to_string(), n.to_string()]),
            )
            .args(lowat.iter().flat_map(|l| ["--notsent-lowat", l.as_str()]))
            .stderr(Stdio::null())
            .spawn()
            .expect("start vodlab serve"),
    );
    let pid = serve.0.id();
    let t0 = Instant::now();
    while !setup.on_client_host(move || TcpStream::connect(addr).is_ok()) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "vodlab serve did not start"
        );
        serve.alive();
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "vodlab serve (asap, {} threads on {} cores): --header-timeout {header_timeout} \
         --send-timeout {send_timeout} --max-connections {cap}; attack: {n_slowloris} slowloris \
         (a byte every {}s), {n_readers} slow readers ({} B receive buffer, {READER_BYTES} B/s of {BIG}); \
         benign: h2load --h1 -t {} -c {BENIGN_CONNS} -n {requests} {SMALL}; \
         --notsent-lowat {}; attacker nice {nice}",
        threads.map_or("default".into(), |n| n.to_string()),
        cores,
        DRIBBLE.as_secs(),
        READER_RCVBUF,
        setup.benign_threads(),
        lowat.as_deref().unwrap_or("default"),
    );
    // warm-up: a short benign run, not counted
    let _ = h2load(
        setup,
        h2,
        addr,
        pid,
        requests / 10 + 1,
        &tmp.join(format!("{}-warm.log", setup.name())),
    );

    // the server's RSS before any attack: later rounds reuse what the allocator kept
    let rss_start = status_kib(pid, "VmRSS");
    let tcp_limits = {
        let v: Vec<u64> = fs::read_to_string("/proc/sys/net/ipv4/tcp_mem")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .map(|pages: u64| pages * 4)
            .collect();
        (
            v.first().copied().unwrap_or(0),
            v.get(1).copied().unwrap_or(0),
            v.get(2).copied().unwrap_or(0),
        )
    };
    let spread = Duration::from_secs(header_timeout.max(send_timeout) as u64);
    let (mut calm, mut hit) = (Vec::new(), Vec::new());
    let mut per_conn_kib = Vec::new();
    for round in 0..rounds {
        // unattacked
        let quiet = stats(setup, addr);
        let rss_before = status_kib(pid, "VmRSS");
        let tcp_before = tcp_mem_kib();
        let open_before = counter(&quiet, "open_connections");
        let b = h2load(
            setup,
            h2,
            addr,
            pid,
            requests,
            &tmp.join(format!("{}-c{round}.log", setup.name())),
        );
        serve.alive();
        println!(
            "round {round} unattacked: {:.0} req/s ({:.0} MiB/s), p50 {:.2} ms, p99 {:.2} ms; \
             server {:.2} cores, h2load {:.2}, machine busy {:.2} of {cores} (niced excluded)",
            b.req_per_s,
            b.mib_per_s,
            b.p50_ms,
            b.p99_ms,
            b.server_cores,
            b.client_cores,
            b.busy_cores
        );
        calm.push(b);

        // attacked: ramp up over the longer timeout, then until (nearly) all are open
        let st0 = stats(setup, addr);
        let attack = match setup.attacker_command() {
            None => AnyAttack::Local(Attack::start(addr, n_slowloris, n_readers, spread, nice)),
            Some(cmd) => {
                let a = RemoteAttack::start(cmd, addr, n_slowloris, n_readers, spread, nice);
                setup.attacker_started(a.pid());
                AnyAttack::Remote(a)
            }
        };
        let t_ramp = Instant::now();
        std::thread::sleep(spread + Duration::from_secs(1));
        while (attack.counts().open.load(Ordering::Relaxed) as usize) < attackers * 99 / 100 {
            assert!(
                t_ramp.elapsed() < spread + Duration::from_secs(60),
                "the attack did not reach {attackers} connections: {} open",
                attack.counts().open.load(Ordering::Relaxed)
            );
            serve.alive();
            std::thread::sleep(Duration::from_millis(200));
        }
        let under = stats(setup, addr);
        let rss_during = status_kib(pid, "VmRSS");
        let tcp_during = tcp_mem_kib();
        let open_during = counter(&under, "open_connections");
        // sample the attack's size while the benign client runs
        let sampling = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (c, go) = (attack.counts().clone(), sampling.clone());
            std::thread::spawn(move || {
                let (mut v, mut tcp_max) = (Vec::new(), 0);
                while go.load(Ordering::Relaxed) {
                    v.push(c.open.load(Ordering::Relaxed));
                    tcp_max = tcp_max.max(tcp_mem_kib());
                    std::thread::sleep(Duration::from_millis(100));
                }
                (v, tcp_max)
            })
        };
        let (me0, t_me) = (attack.cpu(), Instant::now());
        let b = h2load(
            setup,
            h2,
            addr,
            pid,
            requests,
            &tmp.join(format!("{}-a{round}.log", setup.name())),
        );
        sampling.store(false, Ordering::Relaxed);
        let attack_cores = (attack.cpu() - me0) / t_me.elapsed().as_secs_f64();
        let (sizes, tcp_max) = sampler.join().expect("sampler");
        serve.alive();
        let st1 = stats(setup, addr);
        let rss_peak = status_kib(pid, "VmRSS").max(rss_during);
        let d = |k: &str| counter(&st1, k) - counter(&st0, k);
        let kib = (rss_during as f64 - rss_start as f64)
            / (open_during as f64 - open_before as f64).max(1.0);
        println!(
            "round {round} attacked:   {:.0} req/s ({:.0} MiB/s), p50 {:.2} ms, p99 {:.2} ms; \
             server {:.2} cores, h2load {:.2}, attackers {attack_cores:.2}, machine busy {:.2} of \
             {cores} (niced excluded); attackers open min {} mean {:.0} (server open_connections {open_during}); \
             closed by the server this round: {} header timeouts, {} send timeouts, {} shed, \
             {} refused; attacker connects {}, slow readers got {} KiB",
            b.req_per_s,
            b.mib_per_s,
            b.p50_ms,
            b.p99_ms,
            b.server_cores,
            b.client_cores,
            b.busy_cores,
            sizes.iter().min().copied().unwrap_or(0),
            sizes.iter().sum::<i64>() as f64 / sizes.len().max(1) as f64,
            d("header_timeouts"),
            d("send_timeouts"),
            d("shed"),
            d("refused_at_cap"),
            attack.counts().connects.load(Ordering::Relaxed),
            attack.counts().reader_bytes.load(Ordering::Relaxed) / 1024,
        );
        println!(
            "round {round} memory: server RSS {rss_start} KiB before the first attack, \
             {rss_before} KiB with {open_before} connections before this one, {rss_during} KiB with {open_during} ({kib:.1} KiB per connection), {rss_peak} KiB \
             after the benign run; kernel TCP memory (whole machine, both ends) {tcp_before} -> \
             {tcp_during} KiB ({:.1} KiB per attacker connection, {:.0} KiB per slow reader if the slowloris \
             connections' share is negligible), at most {tcp_max} KiB during \
             the benign run (tcp_mem pressure / high: {} / {} KiB)",
            (tcp_during as f64 - tcp_before as f64) / attackers.max(1) as f64,
            (tcp_during as f64 - tcp_before as f64) / n_readers.max(1) as f64,
            tcp_limits.1,
            tcp_limits.2,
        );
        hit.push(b);
        per_conn_kib.push(kib);
        attack.stop();
        // let the server notice the closes before the next calm round
        let t_drain = Instant::now();
        while counter(&stats(setup, addr), "open_connections") > 8 {
            assert!(
                t_drain.elapsed() < Duration::from_secs(30),
                "attack connections still open on the server 30 s after the attack"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        serve.alive();
    }
    let m = |v: &[Benign], f: fn(&Benign) -> f64| median(v.iter().map(f).collect());
    let (c_rps, a_rps) = (m(&calm, |b| b.req_per_s), m(&hit, |b| b.req_per_s));
    let (c_p99, a_p99) = (m(&calm, |b| b.p99_ms), m(&hit, |b| b.p99_ms));
    let (c_p50, a_p50) = (m(&calm, |b| b.p50_ms), m(&hit, |b| b.p50_ms));
    let loss = 1.0 - a_rps / c_rps;
    let p99_ratio = a_p99 / c_p99;
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "median of {rounds} rounds: unattacked {c_rps:.0} req/s, p50 {c_p50:.2} ms, p99 {c_p99:.2} ms; \
         attacked ({n_slowloris} slowloris + {n_readers} slow readers) {a_rps:.0} req/s, \
         p50 {a_p50:.2} ms, p99 {a_p99:.2} ms"
    );
    println!(
        "throughput loss {:.1} % (target < 5 %: {}); p99 ratio {p99_ratio:.2} (target <= 2: {}); \
         server memory {:.1} KiB per open connection (median), peak RSS {} KiB",
        loss * 100.0,
        met(loss < 0.05),
        met(p99_ratio <= 2.0),
        median(per_conn_kib),
        status_kib(pid, "VmHWM"),
    );
    if let Setup::Separated(sep) = setup {
        let (n, secs) = sep.quota.throttled();
        println!("the attacker's CPU quota stopped it in {n} periods, {secs:.1} s in all");
    }
    Summary {
        setup: setup.name(),
        calm_rps: c_rps,
        hit_rps: a_rps,
        calm_p99: c_p99,
        hit_p99: a_p99,
    }
}
