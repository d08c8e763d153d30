//! Helpers shared by the integration tests: the shared kit
//! (`vodlab-testkit`: peers, ports, waits, results) and what needs this
//! package's own binary or target directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use vodlab_testkit::*;

pub mod restartable;

/// Runs `vodlab` with arguments.
pub fn vodlab(args: &[&str]) -> std::process::Output {
    vodlab_at(Path::new(env!("CARGO_BIN_EXE_vodlab")), args)
}

/// Runs `vodlab` and asserts success, returning stdout.
pub fn vodlab_ok(args: &[&str]) -> String {
    let out = vodlab(args);
    assert!(
        out.status.success(),
        "vodlab {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Asserts that `v` follows `docs/<schema>` (e.g. `results.schema.json`).
pub fn assert_follows_schema(schema: &str, v: &serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(schema);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&doc).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
}

/// An unpaced workload of `preset` (`pacing_s = 0`) made by `vodlab gen`
/// in `dir/w`, and sparse files for its catalog in `dir/root`: (workload,
/// root).
pub fn unpaced_workload(
    dir: &Path,
    preset: &str,
    sessions: u32,
    titles: u32,
    shards: u32,
    seed: u64,
) -> (PathBuf, PathBuf) {
    let spec_text =
        vodlab_ok(&["gen", "--show-preset", preset]).replace("pacing_s = 10.0", "pacing_s = 0.0");
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, spec_text).unwrap();
    let w = dir.join("w");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "--sessions",
        &sessions.to_string(),
        "--titles",
        &titles.to_string(),
        "--shards",
        &shards.to_string(),
        "--seed",
        &seed.to_string(),
        "-o",
        w.to_str().unwrap(),
    ]);
    let root = dir.join("root");
    sparse_fileset(&w, &root);
    (w, root)
}

/// Runs a script against `port` with every session started at once, pacing,
/// shaping and byte checks off (the benchmarks' raw-throughput mode); asserts
/// no session failed and returns (results.json, measured window in seconds).
pub fn run_unpaced(script: &Path, port: u16, out: &Path) -> (serde_json::Value, f64) {
    run_unpaced_at(Path::new(env!("CARGO_BIN_EXE_vodlab")), script, port, out)
}

/// An in-process `vodlab serve` on a loopback port with its own runtime,
/// shut down on drop (the integration tests' server).
pub struct Running {
    pub rt: tokio::runtime::Runtime,
    pub server: Option<vodlab_server::Server>,
    pub addr: std::net::SocketAddr,
}

impl Running {
    /// Starts a server for `root` (statistics lines off), `tweak` adjusting its config.
    pub fn start(root: &Path, tweak: impl FnOnce(&mut vodlab_server::Config)) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let mut cfg = vodlab_server::Config::new(root.to_path_buf());
        cfg.stats_interval = Duration::ZERO;
        tweak(&mut cfg);
        let server = rt
            .block_on(vodlab_server::Server::start(
                cfg,
                "127.0.0.1:0".parse().expect("addr"),
            ))
            .expect("server starts");
        let addr = server.addr;
        Self {
            rt,
            server: Some(server),
            addr,
        }
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The running server.
    pub fn server(&self) -> &vodlab_server::Server {
        self.server.as_ref().expect("running")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

/// A temporary directory under the target dir that www-data can traverse
/// (nginx, apache2 and lighttpd drop privileges), its name starting with
/// `prefix`.
pub fn readable_tempdir(prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Runs DASH players of `workload` against `target` (4 segments each, 50
/// sessions/s evenly spaced, no ramps, unshaped loopback, no byte checks)
/// with `extra` flags, writing to `out`; returns its results.json.
pub fn run_dash_players(
    workload: &Path,
    target: &str,
    out: &Path,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec![
        "run",
        workload.to_str().unwrap(),
        "--target",
        target,
        "--rate",
        "50",
        "--arrivals",
        "constant",
        "--check-bytes",
        "0",
        "--quiet",
        "--max-segments",
        "4",
        "--ramp-up",
        "0",
        "--ramp-down",
        "0",
        "--no-shaping",
        "--player",
        "dash",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    vodlab_ok(&args);
    results(out)
}

/// A `vodlab serve` child of this package's binary on a free loopback port
/// (`--stats-interval 0` and `extra`), waited for until it listens and
/// stopped by SIGTERM (its PID) on drop.
pub struct ServeChild {
    child: std::process::Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl ServeChild {
    /// Starts it on `root`.
    pub fn start(root: &Path, extra: &[&str]) -> Self {
        let port = free_port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_vodlab"))
            .args(["serve", "--root", root.to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--stats-interval", "0"])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_until("vodlab serve listening", Duration::from_secs(10), || {
            listening(port)
        });
        Self { child, port }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        // SAFETY: signalling the child we started, by its PID
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}
