//! The emulated disk in `vodlab box --disk` and `vodlab compare --disk`, end
//! to end at a tiny scale. Needs root, /dev/fuse and fusermount3 (CI runs as
//! root); not root, only the refusal is checked.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{readable_tempdir, require, vodlab, vodlab_ok};

fn is_root() -> bool {
    // SAFETY: no arguments, cannot fail
    unsafe { libc::geteuid() == 0 }
}

fn fuse_ready() -> bool {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: load the module (`modprobe fuse`) or give the container the device"
    );
    require("fusermount3", "fuse3");
    true
}

fn gen(dir: &Path, sessions: u32) -> String {
    let w = dir.join("w");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011-2mb",
        "--scale",
        "0.002",
        "--sessions",
        &sessions.to_string(),
        "-o",
        w.to_str().unwrap(),
    ]);
    w.to_str().unwrap().to_string()
}

fn is_mounted(mp: &Path) -> bool {
    let canon = mp.canonicalize().unwrap_or(mp.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(canon.to_str().unwrap()))
}

/// No cgroup of this name under either hierarchy.
fn no_cgroup(name: &str) -> bool {
    [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/blkio",
    ]
    .iter()
    .all(|d| !Path::new(d).join(name).exists())
}

/// The number before `what` in `text` ("... 2552 reads, ...").
fn number_before(text: &str, what: &str) -> Option<f64> {
    let i = text.find(what)?;
    text[..i].split_whitespace().last()?.parse().ok()
}

#[test]
fn box_with_an_emulated_disk_reports_the_drive_and_leaves_nothing() {
    let d = readable_tempdir("vodlab-diskbox-");
    let w = gen(d.path(), 20);
    let mp = d.path().join("mnt");
    let o = vodlab(&[
        "box",
        "--disk",
        "hitachi-5k3000",
        "--mem",
        "256M",
        "--workload",
        &w,
        "--mount",
        mp.to_str().unwrap(),
        "--name",
        "vodlab-test-diskbox",
        "--",
        "sh",
        "-c",
        // 20 files read through the mount, then the cgroup we run in
        "find \"$VODLAB_DISK_MOUNT\" -type f -name '*.m4s' | head -20 | xargs cat > /dev/null && cat /proc/self/cgroup && test -d '{mount}'",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    if !is_root() {
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("needs root"), "{err}");
        eprintln!("not root: checked only that vodlab box --disk refuses plainly");
        return;
    }
    fuse_ready();
    assert!(o.status.success(), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("vodlab-test-diskbox"),
        "the command ran inside the cgroup: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let line = err
        .lines()
        .find(|l| l.contains("emulated disk hitachi-5k3000"))
        .unwrap_or_else(|| panic!("no disk statistics: {err}"));
    let reads = number_before(line, "reads,").unwrap_or_else(|| panic!("{line}"));
    assert!(reads > 0.0, "{line}");
    for what in ["seeks", "busy", "service ms p50", "MB/s"] {
        assert!(line.contains(what), "{what} missing: {line}");
    }
    // the box's usage report is still there, beside the drive's
    assert!(err.contains("memory peak"), "{err}");
    assert!(!is_mounted(&mp), "the mount is left behind");
    assert!(
        no_cgroup("vodlab-test-diskbox"),
        "the cgroup is left behind"
    );
}

#[test]
fn box_ends_the_command_when_the_disk_daemon_dies() {
    if !is_root() {
        eprintln!("not root: nothing to check");
        return;
    }
    fuse_ready();
    let d = readable_tempdir("vodlab-diskbox-");
    let w = gen(d.path(), 20);
    let mp = d.path().join("mnt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["box", "--disk", "hitachi-5k3000", "--mem", "128M"])
        .args(["--name", "vodlab-test-diskdie", "--workload", &w, "--mount"])
        .arg(&mp)
        .args(["--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the daemon: the `vodlab disk mount` process of this mount point
    let t = Instant::now();
    let canon = loop {
        if is_mounted(&mp) {
            break mp.canonicalize().unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "never mounted");
        std::thread::sleep(Duration::from_millis(50));
    };
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                args.windows(2).any(|w| w == [&b"disk"[..], &b"mount"[..]])
                    && args.contains(&canon.as_os_str().as_encoded_bytes())
            })
        })
        .expect("the daemon's process");
    // SAFETY: kills the daemon our own child started, found by its mount point
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the box did not end after its drive died"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!st.success(), "{err}");
    assert!(err.contains("emulated disk"), "{err}");
    assert!(!is_mounted(&mp), "a stale mount is left behind");
    assert!(
        no_cgroup("vodlab-test-diskdie"),
        "the cgroup is left behind"
    );
}

#[test]
fn compare_on_an_emulated_disk_records_the_drives_figures() {
    if !is_root() {
        let o = vodlab(&["compare", "w", "--disk", "hitachi-5k3000", "--mem", "64M"]);
        assert!(!o.status.success());
        eprintln!("not root: compare --disk is not run");
        return;
    }
    fuse_ready();
    require("nginx", "nginx-light");
    let d = readable_tempdir("vodlab-diskbox-");
    let w = gen(d.path(), 100);
    let out = d.path().join("cmp");
    let port = common::free_port().to_string();
    let mut args = vec![
        "compare",
        &w,
        "--disk",
        "hitachi-5k3000",
        "--mem",
        "256M",
        "--servers",
        "vodlab-asap,nginx",
        "--port",
        &port,
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend(common::ONE_POINT);
    let stdout = vodlab_ok(&args);
    assert!(stdout.contains("emulated drive hitachi-5k3000"), "{stdout}");
    let cmp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(cmp["complete"], true);
    assert_eq!(cmp["disk"]["profile"], "hitachi-5k3000");
    assert!(cmp["seqread"]["mb_s"].as_f64().unwrap() > 0.0, "{cmp}");
    for name in ["vodlab-asap", "nginx"] {
        let row = cmp["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["server"] == name)
            .unwrap_or_else(|| panic!("no row for {name}"));
        assert!(row["error"].is_null(), "{name}: {row}");
        // the one point passed or failed, but it has the drive's figures
        let f = if row["at_capacity"].is_null() {
            &row["at_overload"]
        } else {
            &row["at_capacity"]
        };
        for k in ["disk_mb_s", "mean_read_kib", "device_ms_per_read"] {
            assert!(f[k].as_f64().is_some_and(|v| v > 0.0), "{name} {k}: {f}");
        }
        let points = out.join(name).join("points");
        let run = std::fs::read_dir(&points).unwrap().next().unwrap().unwrap();
        let disk: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.path().join("disk.json")).unwrap()).unwrap();
        assert!(disk["disk"]["reads"].as_u64().unwrap() > 0, "{disk}");
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains("vodlab-compare-"),
        "a mount is left behind: {mounts}"
    );
}

#[test]
fn bench_as_root_compares_servers_on_an_emulated_disk() {
    let d = readable_tempdir("vodlab-diskbox-");
    let out = d.path().join("out");
    let o = vodlab(&[
        "bench",
        "--scale",
        "0.002",
        "--sessions",
        "100",
        "--disk",
        "hitachi-5k3000",
        "--mem",
        "256M",
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
        "--work-dir",
        d.path().join("work").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let (stdout, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stdout}\n{err}");
    if !is_root() {
        assert!(
            err.contains("not root: cannot create a cgroup memory box"),
            "{err}"
        );
        assert!(err.contains("running the cached smoke test"), "{err}");
        assert!(out.join("capacity.json").exists());
        return;
    }
    fuse_ready();
    require("nginx", "nginx-light");
    assert!(
        stdout.contains(
            "answer: on an emulated 5,400 rpm disk (hitachi-5k3000) with 256 MiB of memory"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("vodlab serve (ASAP)") && stdout.contains("nginx"),
        "{stdout}"
    );
    let cmp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(cmp["disk"]["profile"], "hitachi-5k3000");
    assert_eq!(cmp["servers"].as_array().unwrap().len(), 2, "{cmp}");
    assert!(out.join("report.html").exists());
}
