//! `vodlab lab`: namespaces joined by a bridge, a kernel-shaped server
//! egress, `vodlab serve` and curl inside them, and nothing left behind.
//! Needs root (CI runs as root); without it only the plain refusal is
//! checked, and the test says so.

mod common;

use std::fs;
use std::process::Command;

use common::{require, vodlab};
use vodlab_lab::hwbox::is_root;

fn lab_namespaces(name: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("vl-{name}-")))
        .map(str::to_string)
        .collect()
}

/// One curl of a 2,500,000-byte file through the lab: its time, seconds.
fn fetch_time(name: &str, egress: Option<&str>) -> f64 {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f.bin"), vec![7u8; 2_500_000]).unwrap();
    let out = root.path().join("time.txt");
    let serve = format!(
        "exec {} serve --root {} --listen 10.77.0.1:8080 --stats-interval 0",
        env!("CARGO_BIN_EXE_vodlab"),
        root.path().display()
    );
    let client = format!(
        "curl -sS -o /dev/null -w '%{{time_total}} %{{size_download}}' http://$VODLAB_LAB_SERVER:8080/f.bin > {}",
        out.display()
    );
    let mut args = vec![
        "lab",
        "run",
        "--name",
        name,
        "--port",
        "8080",
        "--timeout",
        "60",
        "--server",
        &serve,
        "--client",
        &client,
    ];
    if let Some(r) = egress {
        args.extend(["--server-egress", r]);
    }
    let o = vodlab(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("lab: removed vl-"), "{err}");
    let t = fs::read_to_string(&out).unwrap();
    let mut it = t.split_whitespace();
    let secs: f64 = it.next().unwrap().parse().unwrap();
    assert_eq!(it.next(), Some("2500000"), "{t}");
    secs
}

#[test]
fn a_shaped_lab_runs_server_and_client_and_leaves_nothing() {
    if !is_root() {
        let o = vodlab(&["lab", "up", "--name", "t0"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("needs root"));
        eprintln!("not root: checked only that vodlab lab refuses plainly");
        return;
    }
    require("curl", "curl");
    // 20 Mbit/s: 2.5 MB takes 1.0 s of payload (plus headers and TCP's
    // ramp-up); unshaped on a veth it takes a few ms
    let shaped = fetch_time("t1", Some("20mbit"));
    let free = fetch_time("t1", None);
    eprintln!("2.5 MB through the lab: {shaped:.3} s at 20 Mbit/s, {free:.3} s unshaped");
    assert!(
        (0.95..1.6).contains(&shaped),
        "htb at 20 Mbit/s: expected about 1.0 s, took {shaped} s"
    );
    assert!(
        free * 5.0 < shaped,
        "unshaped {free} s vs shaped {shaped} s"
    );
    assert!(
        lab_namespaces("t1").is_empty(),
        "{:?}",
        lab_namespaces("t1")
    );
}

#[test]
fn a_stale_lab_is_replaced_and_down_removes_it() {
    if !is_root() {
        eprintln!("not root: see the other test for the refusal");
        return;
    }
    let o = vodlab(&["lab", "up", "--name", "t2", "--clients", "3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(lab_namespaces("t2").len(), 5); // hub, server, 3 clients
                                               // the addresses are the lab's, in the client namespace only
    let o = vodlab(&[
        "lab", "exec", "--name", "t2", "client-2", "--", "ip", "-4", "addr",
    ]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("10.77.0.12/24"));
    // a crashed owner: its pid file names a process that is gone
    fs::write("/run/vodlab/lab-t2.pid", "999999999").unwrap();
    let o = vodlab(&["lab", "up", "--name", "t2", "--clients", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("removing stale namespace vl-t2-c2"), "{err}");
    assert_eq!(lab_namespaces("t2").len(), 3);
    let o = vodlab(&["lab", "down", "--name", "t2"]);
    assert!(o.status.success());
    assert!(lab_namespaces("t2").is_empty());
    // a host that does not exist is a clear error
    let o = vodlab(&["lab", "exec", "--name", "t2", "server", "--", "true"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no host server"));
}
