//! File-set benchmark on the disk holding the target directory
//! (`cargo bench -p vodlab --bench fileset`):
//!
//! - creation speed of `vodlab fileset create` vs `dd bs=4M conv=fdatasync`
//!   writing the same number of bytes, alternating, median ratio of rounds;
//!   for the chunked (0.5 MiB files) and unchunked layouts;
//! - `vodlab fileset seqread` (the thesis's `wc` bound) from a cold page
//!   cache, for the youtube-2011 2 MB and unchunked layouts.
//!
//! Environment: BENCH_ROUNDS (default 5), BENCH_SCALE (workload scale, 0.02),
//! BENCH_DIR (default: the target directory's disk; /dev/shm takes the disk out).

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use vodlab_testkit::{median, vodlab_at_ok};

/// Runs this package's `vodlab` and asserts success, returning stdout.
fn vodlab_ok(args: &[&str]) -> String {
    vodlab_at_ok(Path::new(env!("CARGO_BIN_EXE_vodlab")), args)
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    for e in fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let scale = std::env::var("BENCH_SCALE").unwrap_or_else(|_| "0.02".into());
    let base =
        std::env::var("BENCH_DIR").unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").to_string());
    println!("file sets under {base} (set BENCH_DIR=/dev/shm to take the disk out)");
    let t = tempfile::tempdir_in(&base).unwrap();
    for preset in ["youtube-2011", "youtube-2011-unchunked", "youtube-2011-2mb"] {
        let w = t.path().join(preset);
        vodlab_ok(&[
            "gen",
            "--preset",
            preset,
            "--scale",
            &scale,
            "-o",
            w.to_str().unwrap(),
        ]);
        let (mut ratios, mut oursv, mut ddv) = (Vec::new(), Vec::new(), Vec::new());
        let mut last_root = None;
        for round in 0..rounds {
            let root = t.path().join(format!("{preset}-{round}"));
            let ddfile = t.path().join("dd.out");
            let catalog: vodlab_workload::construct::Catalog =
                serde_json::from_slice(&fs::read(w.join("catalog.json")).unwrap()).unwrap();
            let expected: u64 = catalog.files().map(|f| f.1).sum();
            let blocks = expected.div_ceil(4 << 20);
            // each timed write starts from the same state: nothing of the other
            // tool's output left, everything synced, page cache dropped (when root)
            let settle = |keep_root: bool| {
                let _ = fs::remove_file(&ddfile);
                if !keep_root {
                    let _ = fs::remove_dir_all(&root);
                }
                let _ = Command::new("sync").status();
                let _ = fs::write("/proc/sys/vm/drop_caches", "1");
            };
            let create = || {
                settle(false);
                let start = Instant::now();
                vodlab_ok(&[
                    "fileset",
                    "create",
                    w.to_str().unwrap(),
                    "--root",
                    root.to_str().unwrap(),
                ]);
                start.elapsed().as_secs_f64()
            };
            let dd = || {
                settle(true);
                let start = Instant::now();
                let st = Command::new("dd")
                    .args(["if=/dev/zero", &format!("of={}", ddfile.display()), "bs=4M"])
                    .arg(format!("count={blocks}"))
                    .arg("conv=fdatasync")
                    .stderr(std::process::Stdio::null())
                    .status()
                    .unwrap();
                assert!(st.success());
                start.elapsed().as_secs_f64()
            };
            // alternate which goes first
            let (ours, dd) = if round % 2 == 0 {
                let o = create();
                (o, dd())
            } else {
                let d = dd();
                (create(), d)
            };
            let bytes = dir_bytes(&root);
            let (a, b) = (bytes as f64 / 1048576.0 / ours, (blocks * 4) as f64 / dd);
            println!(
                "{preset} round {round}: fileset create {a:.0} MiB/s, dd {b:.0} MiB/s, ratio {:.3}",
                a / b
            );
            ratios.push(a / b);
            oursv.push(a);
            ddv.push(b);
            let _ = fs::remove_file(&ddfile);
            if let Some(prev) = last_root.replace(root) {
                fs::remove_dir_all(prev).unwrap();
            }
        }
        let (mo, md) = (median(oursv), median(ddv));
        println!(
            "{preset}: median fileset create {mo:.0} MiB/s, median dd {md:.0} MiB/s, ratio of medians {:.3}, median of round ratios {:.3} (target >= 0.80)",
            mo / md,
            median(ratios)
        );
        if preset != "youtube-2011" {
            let root = last_root.as_ref().unwrap();
            let out = vodlab_ok(&[
                "fileset",
                "seqread",
                w.to_str().unwrap(),
                "--root",
                root.to_str().unwrap(),
            ]);
            println!("{preset}: seqread {}", out.trim());
        }
        if let Some(r) = last_root {
            fs::remove_dir_all(r).unwrap();
        }
    }
}
