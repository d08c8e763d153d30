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
