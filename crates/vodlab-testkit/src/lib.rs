//! Helpers the integration tests and the benchmarks of `vodlab` share:
//! running a `vodlab` binary, starting real peers (nginx) on loopback, free
//! ports, bounded waits, reading results. A missing peer fails with the
//! package to install; it never skips. Test-only (`publish = false`): the
//! `vodlab` package's tests and benches take it as a dev-dependency and
//! pass their binary's path (`env!("CARGO_BIN_EXE_vodlab")`).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs a given `vodlab` binary (e.g. a baseline build) with arguments.
pub fn vodlab_at(bin: &Path, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().expect("run vodlab")
}

/// Runs a given `vodlab` binary and asserts success, returning stdout.
pub fn vodlab_at_ok(bin: &Path, args: &[&str]) -> String {
    let out = vodlab_at(bin, args);
    assert!(
        out.status.success(),
        "{} {args:?} failed:\nstdout: {}\nstderr: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Path of a required external program, or a panic naming the Debian package.
pub fn require(program: &str, package: &str) -> PathBuf {
    for dir in [
        "/usr/sbin",
        "/usr/bin",
        "/usr/local/bin",
        "/usr/local/sbin",
        "/sbin",
        "/bin",
    ] {
        let p = Path::new(dir).join(program);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "this test needs `{program}`, which is not installed: run `sudo apt-get install -y {package}` \
         (or `.ci/run`, which installs every peer the tests use)"
    );
}

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// nginx serving `root` on 127.0.0.1, killed (by its PID) on drop.
pub struct Nginx {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx in the foreground, single process, no access log.
    pub fn start(root: &Path) -> Self {
        Self::start_logged(root, None)
    }

    /// Starts nginx; with `log`, writes `uri status body_bytes_sent range` per request there.
    pub fn start_logged(root: &Path, log: Option<&Path>) -> Self {
        match log {
            Some(p) => Self::start_log_format(
                root,
                p,
                "log_format vl '$request_uri $status $body_bytes_sent \"$http_range\"';",
            ),
            None => Self::start_conf(root, "access_log off;".to_string()),
        }
    }

    /// Starts nginx logging to `log` with `log_format` (a whole
    /// `log_format NAME '...';` line).
    pub fn start_log_format(root: &Path, log: &Path, log_format: &str) -> Self {
        let name = log_format
            .split_whitespace()
            .nth(1)
            .expect("log_format NAME");
        Self::start_conf(
            root,
            format!("{log_format}\n  access_log {} {name};", log.display()),
        )
    }

    fn start_conf(root: &Path, access: String) -> Self {
        let bin = require("nginx", "nginx-light");
        let dir = tempfile::tempdir().expect("tempdir");
        for _ in 0..5 {
            let port = free_port();
            let conf = dir.path().join("nginx.conf");
            std::fs::write(
                &conf,
                format!(
                    "daemon off;\nmaster_process off;\nworker_processes 1;\npid {pid};\nerror_log stderr warn;\n\
                     worker_rlimit_nofile 65536;\n\
                     events {{ worker_connections 32768; }}\n\
                     http {{\n  {access}\n  sendfile on;\n  keepalive_timeout 60s;\n  keepalive_requests 100000;\n\
                       client_body_temp_path {tmp};\n  proxy_temp_path {tmp};\n  fastcgi_temp_path {tmp};\n\
                       uwsgi_temp_path {tmp};\n  scgi_temp_path {tmp};\n\
                       server {{\n    listen 127.0.0.1:{port};\n    root {root};\n  }}\n}}\n",
                    pid = dir.path().join("nginx.pid").display(),
                    tmp = dir.path().display(),
                    root = root.display(),
                ),
            )
            .expect("write nginx.conf");
            let mut child = Command::new(&bin)
                .arg("-c")
                .arg(&conf)
                .arg("-p")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start nginx");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // exited: port taken, try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Nginx {
                        port,
                        child,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("nginx did not start on loopback");
    }
}

impl Nginx {
    /// PID of the nginx process (single process: it serves too).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates every file of a `vodlab gen` workload's catalog under `root` as a
/// sparse file of the right size (zeros: fine for tests that do not check bytes).
pub fn sparse_fileset(workload: &Path, root: &Path) {
    let text = std::fs::read(workload.join("catalog.json")).expect("catalog.json");
    let catalog: vodlab_workload::construct::Catalog =
        serde_json::from_slice(&text).expect("catalog");
    for (rel, size) in catalog.files() {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::File::create(&p)
            .expect("create")
            .set_len(size)
            .expect("set_len");
    }
}

/// The `results.json` a `vodlab run -o DIR` wrote.
pub fn results(dir: &Path) -> serde_json::Value {
    let p = dir.join("results.json");
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .expect("results.json is JSON")
}

/// Runs a script against `port` with every session started at once, pacing,
/// shaping and byte checks off (the benchmarks' raw-throughput mode) with the
/// `vodlab` binary `bin`; asserts no session failed and returns
/// (results.json, measured window in seconds).
pub fn run_unpaced_at(
    bin: &Path,
    script: &Path,
    port: u16,
    out: &Path,
) -> (serde_json::Value, f64) {
    vodlab_at_ok(
        bin,
        &[
            "run",
            script.to_str().expect("utf-8 path"),
            "--target",
            &format!("http://127.0.0.1:{port}"),
            "--rate",
            "1000000",
            "--arrivals",
            "constant",
            "--no-shaping",
            "--no-pacing",
            "--check-bytes",
            "0",
            "--quiet",
            "-o",
            out.to_str().expect("utf-8 path"),
        ],
    );
    let r = results(out);
    assert_eq!(r["failed_sessions"], 0, "{r}");
    let w = r["measured_window_s"].as_array().expect("window");
    let secs = w[1].as_f64().expect("number") - w[0].as_f64().expect("number");
    (r, secs)
}

/// Raises this process's descriptor limit to its hard limit (a server started
/// afterwards inherits it); returns the limit now in force.
pub fn raise_nofile() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live rlimit struct
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
    }
    l.rlim_cur
}

/// Polls `cond` every 10 ms until it holds, at most `limit`; panics naming
/// `what` when it never does. For a test that waits for a state it can
/// observe, instead of sleeping a guessed time.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a socket listens on TCP `port` of this host (a LISTEN entry in
/// /proc/net/tcp or tcp6): a server's listener can be seen to close
/// without connecting to it (a probing connection would be one more client).
pub fn listening(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&suffix) && cols[3] == "0A"
            })
        })
    })
}

/// Whether a UDP socket is bound to `port` of this host (an entry in
/// /proc/net/udp or udp6): a QUIC server can be seen to be up without
/// sending it a packet.
pub fn udp_bound(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 1 && cols[1].ends_with(&suffix)
            })
        })
    })
}

/// The sum of `field` over a results.json's `intervals` (counts that every
/// run, shard, checkpoint and merge carries per interval).
pub fn interval_sum(r: &serde_json::Value, field: &str) -> u64 {
    r["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| {
            i[field]
                .as_u64()
                .unwrap_or_else(|| panic!("not a count: {}", i[field]))
        })
        .sum()
}

/// One capacity point of 2 sessions/s over 2 s, unpaced and unshaped, with
/// a lenient lateness rule: the search flags the `capacity` and `compare`
/// tests share.
pub const ONE_POINT: [&str; 15] = [
    "--no-pacing",
    "--no-shaping",
    "--window",
    "2",
    "--drain",
    "10",
    "--start",
    "2",
    "--max-points",
    "1",
    "--pause",
    "0.2",
    "--quiet",
    "--late-threshold-ms",
    "1000",
];

/// The median of `v` (the upper middle of an even count), as the benchmarks
/// report their rounds. Panics on an empty `v`.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A benchmark's count from the environment variable `name`, else `default`
/// (a value that is not a number is `default` too).
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One reading of a process's resident memory: when (Unix seconds) and
/// `VmRSS` in KiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RssSample {
    /// Wall-clock time of the reading, Unix seconds.
    pub unix_s: f64,
    /// Resident set size, KiB.
    pub kib: u64,
}

/// Runs `bin` with `args` to completion, reading its `VmRSS` from
/// /proc/PID/status every `every`; asserts success and returns stdout and
/// the readings (what a user's machine pays for the process, allocator
/// caches, binary and all).
pub fn vodlab_rss_sampled(bin: &Path, args: &[&str], every: Duration) -> (String, Vec<RssSample>) {
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run vodlab");
    let status = format!("/proc/{}/status", child.id());
    let mut samples = Vec::new();
    // the pipes are drained by threads so a chatty child never blocks
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let code = loop {
        if let Some(code) = child.try_wait().expect("wait vodlab") {
            break code;
        }
        if let Some(kib) = std::fs::read_to_string(&status)
            .ok()
            .and_then(|s| status_kib(&s, "VmRSS:"))
        {
            let unix_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            samples.push(RssSample { unix_s, kib });
        }
        std::thread::sleep(every);
    };
    let (out, err) = (
        out_t.join().expect("stdout reader"),
        err_t.join().expect("stderr reader"),
    );
    assert!(
        code.success(),
        "{} {args:?} failed:\nstdout: {out}\nstderr: {err}",
        bin.display()
    );
    (out, samples)
}

/// A field of /proc/PID/status in KiB (`VmRSS:`, `VmHWM:`).
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// Process memory per concurrent session, KiB, as a user pays it: the
/// whole process's resident set over the sessions it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RssPerSession {
    /// Peak concurrent sessions (results.json `health.peak_active_sessions`).
    pub sessions: f64,
    /// Median RSS while the sessions were all running (the readings in
    /// intervals whose active sessions were at least 95 % of the peak)
    /// over the peak sessions; `None` without such a reading.
    pub steady_kib: Option<f64>,
    /// Peak RSS (the larger of the highest reading and the run's own
    /// `health.peak_rss_mb`, its VmHWM) over the peak sessions.
    pub peak_kib: f64,
}

/// [`RssPerSession`] of a run from its RSS readings and its results.json
/// (which gives when the schedule started, the interval length and each
/// interval's active sessions).
pub fn rss_per_session(samples: &[RssSample], r: &serde_json::Value) -> RssPerSession {
    let h = &r["health"];
    let sessions = h["peak_active_sessions"].as_f64().expect("peak sessions");
    let hwm_kib = h["peak_rss_mb"].as_f64().unwrap_or(0.0) * 1024.0;
    let t0 = r["started_at_unix_s"].as_f64().expect("start");
    let w = r["interval_s"].as_f64().expect("interval");
    let active: Vec<f64> = r["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["active_sessions"].as_f64().unwrap_or(0.0))
        .collect();
    let steady: Vec<f64> = samples
        .iter()
        .filter(|s| {
            let t = s.unix_s - t0;
            t >= 0.0
                && active
                    .get((t / w) as usize)
                    .is_some_and(|&a| a >= 0.95 * sessions)
        })
        .map(|s| s.kib as f64)
        .collect();
    let top = samples.iter().map(|s| s.kib as f64).fold(hwm_kib, f64::max);
    let per = |kib: f64| kib / sessions.max(1.0);
    RssPerSession {
        sessions,
        steady_kib: (!steady.is_empty()).then(|| per(median(steady))),
        peak_kib: per(top),
    }
}

/// Pages of a file held in the page cache by a test (`mlock` of a shared
/// mapping), so that nothing outside the test evicts them while it lasts;
/// unlocked and unmapped when dropped.
///
/// Why a test needs it: this VM gives memory back to its host (virtio-mem),
/// and the kernel then drops clean page-cache pages in the blocks it hands
/// back, whatever their age. Measured here (2026-12-06): 15 of 1,024 pages
/// a prefetch had read gone within ~0.1 s, in 1 run of 8 while `apt`
/// wrote; `free` showed the cache shrinking ~1.6 MB/s on an idle machine.
#[derive(Debug)]
pub struct ResidentPin {
    addr: *mut libc::c_void,
    len: usize,
}

impl Drop for ResidentPin {
    fn drop(&mut self) {
        // SAFETY: the mapping made by `pin_resident`, unmapped once here
        unsafe {
            libc::munlock(self.addr, self.len);
            libc::munmap(self.addr, self.len);
        }
    }
}

/// Checks that `[off, off + len)` of `path` is wholly in the page cache
/// (`mincore(2)` of a shared mapping, which faults nothing in) and, if so,
/// pins it there ([`ResidentPin`]). `Err(n)`: `n` of its pages were not
/// resident, and nothing is pinned (the test, not the code under test,
/// would otherwise have read them). `off` must be a multiple of 4 KiB.
pub fn pin_resident(path: &Path, off: u64, len: u64) -> Result<ResidentPin, u64> {
    use std::os::unix::io::AsRawFd;
    let page = 4096usize;
    assert!(
        off % page as u64 == 0 && len > 0,
        "pin_resident({off}, {len})"
    );
    let f = std::fs::File::open(path).expect("open the file to pin");
    let len = len as usize;
    // SAFETY: a new read-only shared mapping of an open file; the pointer
    // is only used by mincore/mlock/munmap below and in Drop
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            off as libc::off_t,
        )
    };
    assert!(addr != libc::MAP_FAILED, "mmap {}", path.display());
    let pin = ResidentPin { addr, len };
    let resident = |pin: &ResidentPin| -> u64 {
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: `vec` has one byte per page of the live mapping
        let rc = unsafe { libc::mincore(pin.addr, pin.len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        vec.iter().filter(|&&b| b & 1 == 1).count() as u64
    };
    let pages = len.div_ceil(page) as u64;
    let before = resident(&pin);
    if before < pages {
        return Err(pages - before);
    }
    // SAFETY: locks the live mapping. Every page was resident, so this reads
    // nothing; a page dropped in the microseconds since the check is read
    // back, but the check has already shown the code under test read it
    let rc = unsafe { libc::mlock(pin.addr, pin.len) };
    assert_eq!(
        rc,
        0,
        "mlock of {len} bytes: {}",
        std::io::Error::last_os_error()
    );
    Ok(pin)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file's pages read a moment ago are pinned; once dropped from the
    /// cache (synced, then `POSIX_FADV_DONTNEED`) the check counts them
    /// missing and pins nothing (it would have read them itself).
    #[test]
    fn pin_resident_pins_only_what_is_in_the_cache() {
        use std::os::unix::io::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![7u8; 64 << 10]).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        f.sync_all().unwrap();
        // SAFETY: advice on an open descriptor
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(pin_resident(&p, 0, 64 << 10).err(), Some(16));
        // read the second half back: its 8 pages are resident, the first
        // half's 8 are not
        let mut buf = vec![0u8; 32 << 10];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 32 << 10).unwrap();
        assert!(pin_resident(&p, 32 << 10, 32 << 10).is_ok());
        assert_eq!(pin_resident(&p, 0, 64 << 10).err(), Some(8));
    }

    #[test]
    fn rss_per_session_takes_the_steady_readings_and_the_peak() {
        let r = serde_json::json!({
            "started_at_unix_s": 1000.0,
            "interval_s": 5.0,
            "health": { "peak_active_sessions": 100, "peak_rss_mb": 2.0 },
            "intervals": [
                { "active_sessions": 50 },
                { "active_sessions": 100 },
                { "active_sessions": 96 },
                { "active_sessions": 10 },
            ],
        });
        let s = |t: f64, kib: u64| RssSample {
            unix_s: 1000.0 + t,
            kib,
        };
        // before the start, ramp-up, three steady readings, tail, one past the end
        let samples = [
            s(-1.0, 900),
            s(2.0, 1000),
            s(6.0, 1500),
            s(9.0, 1700),
            s(12.0, 1600),
            s(17.0, 3000),
            s(30.0, 100),
        ];
        let got = rss_per_session(&samples, &r);
        assert_eq!(got.sessions, 100.0);
        assert_eq!(got.steady_kib, Some(16.0)); // median of 1500, 1700, 1600
        assert_eq!(got.peak_kib, 30.0); // the reading beats VmHWM's 2,048 KiB
        let none = rss_per_session(&samples[..2], &r);
        assert_eq!(none.steady_kib, None);
        assert_eq!(none.peak_kib, 20.48); // VmHWM: 2 MiB over 100
    }

    #[test]
    fn status_fields_parse() {
        let st = "Name:\tvodlab\nVmHWM:\t  151824 kB\nVmRSS:\t  140000 kB\n";
        assert_eq!(status_kib(st, "VmRSS:"), Some(140_000));
        assert_eq!(status_kib(st, "VmHWM:"), Some(151_824));
        assert_eq!(status_kib(st, "VmSwap:"), None);
    }
}
