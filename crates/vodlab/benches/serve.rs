//! `vodlab serve` against nginx (sendfile on), both serving a cached file set
//! of 0.5 MiB range requests on loopback to the same client (`vodlab run`,
//! pacing and shaping off), in the same run (`cargo bench -p vodlab --bench serve`).
//! The figure is bytes per second per core the server used (its CPU time from
//! /proc over the run), so a server that uses more cores is not favoured.
//!
//! Environment: BENCH_ROUNDS (default 3), BENCH_REQUESTS (default 32000).

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use vodlab_client::io::engine::cpu_seconds_of;
use vodlab_testkit::{free_port, median, run_unpaced_at, vodlab_at_ok, Nginx};

/// Runs this package's `vodlab` and asserts success, returning stdout.
fn vodlab_ok(args: &[&str]) -> String {
    vodlab_at_ok(Path::new(env!("CARGO_BIN_EXE_vodlab")), args)
}

/// Runs the client; returns (bytes/s, server CPU cores used).
fn load(script: &Path, port: u16, pid: u32, out: &Path) -> (f64, f64) {
    let c0 = cpu_seconds_of(Some(pid));
    let (r, secs) = run_unpaced_at(Path::new(env!("CARGO_BIN_EXE_vodlab")), script, port, out);
    let c1 = cpu_seconds_of(Some(pid));
    (
        r["throughput_bytes_per_s"].as_f64().unwrap(),
        (c1 - c0) / secs,
    )
}

struct Serve(Child);
impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: signalling the child we started, by its PID
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let requests: usize = std::env::var("BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32000);
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = t.path().join("w");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011-unchunked",
        "--scale",
        "0.005",
        "-o",
        w.to_str().unwrap(),
    ]);
    let root = t.path().join("root");
    vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    // 16 sessions of 0.5 MiB ranges spread over the titles, every file read once to cache it
    let catalog: vodlab_workload::construct::Catalog =
        serde_json::from_slice(&fs::read(w.join("catalog.json")).unwrap()).unwrap();
    let files: Vec<(String, u64)> = catalog.files().collect();
    for (rel, _) in &files {
        let _ = fs::read(root.join(rel)).unwrap();
    }
    let per = requests / 16;
    let mut text = String::new();
    let mut k = 0usize;
    for s in 0..16 {
        text.push_str(&format!("#@session id={s}\n"));
        for _ in 0..per {
            let (rel, size) = &files[k % files.len()];
            let chunks = size / 524_288;
            let c = (k as u64 * 7919) % chunks.max(1);
            text.push_str(&format!(
                "/{rel} range={}-{}\n",
                c * 524_288,
                c * 524_288 + 524_287
            ));
            k += 1;
        }
        text.push('\n');
    }
    let script = t.path().join("ranges.vsl");
    fs::write(&script, text).unwrap();

    let nginx = Nginx::start(&root);
    let port = free_port();
    let serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_vodlab"))
            .args([
                "serve",
                "--root",
                root.to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .args(["--stats-interval", "0"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (nb, nc) = load(
            &script,
            nginx.port,
            nginx.pid(),
            &t.path().join(format!("n{round}")),
        );
        let (vb, vc) = load(
            &script,
            port,
            serve.0.id(),
            &t.path().join(format!("v{round}")),
        );
        let (n, v) = (nb / nc.max(1e-3), vb / vc.max(1e-3));
        println!(
            "round {round}: vodlab serve {:.0} MiB/s on {vc:.2} cores = {:.0} MiB/s per core; nginx {:.0} MiB/s on {nc:.2} cores = {:.0} MiB/s per core; ratio {:.3}",
            vb / 1048576.0, v / 1048576.0, nb / 1048576.0, n / 1048576.0, v / n
        );
        ours.push(v);
        theirs.push(n);
        ratios.push(v / n);
    }
    println!(
        "cached 0.5 MiB ranges, {} requests: median vodlab serve (asap) {:.0} MiB/s per core, nginx {:.0} MiB/s per core, median ratio {:.3} (target >= 1.0)",
        16 * per,
        median(ours) / 1048576.0,
        median(theirs) / 1048576.0,
        median(ratios)
    );
}
