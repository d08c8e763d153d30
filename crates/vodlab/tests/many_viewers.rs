//! Many viewers from one machine, in small: `vodlab run --client-processes
//! N` spread over child processes and merged exactly (checked against
//! `vodlab merge` of the same shards and against the server's own
//! counts), the descriptor limit said plainly before a run (a child's hard
//! limit lowered with setrlimit) and during one (lowered with prlimit(2)
//! mid-run), the server's out-of-descriptors accepts counted without a
//! busy loop, and `vodlab serve --workers N` sharing a port, merging its
//! statistics and restarting a worker that dies. Everything on loopback;
//! every process started here is stopped by its PID.

mod common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{interval_sum, results, vodlab, vodlab_ok, Running};

/// Bytes of each range request.
const RANGE: u64 = 16_384;
/// Requests per session.
const REQUESTS: u64 = 3;

/// A root with `v.bin` (1 MiB) and a script of `n` sessions, each
/// [`REQUESTS`] paced range requests of [`RANGE`] bytes one second apart
/// (so a session lasts 2 s at least): (script, root).
fn setup(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    let root = dir.join("root");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("v.bin"), vec![5u8; 1 << 20]).unwrap();
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!("#@session id={i}\n"));
        for k in 0..REQUESTS {
            let from = (i as u64 * 7 + k) % 60 * RANGE;
            let pace = if k == 0 { "" } else { " pacing=1" };
            text.push_str(&format!(
                "/v.bin range={from}-{} timeout=10{pace}\n",
                from + RANGE - 1
            ));
        }
        text.push('\n');
    }
    let script = dir.join("s.vsl");
    fs::write(&script, text).unwrap();
    (script, root)
}

/// `vodlab run` arguments for the script: `rate` sessions/s, unshaped, no
/// byte checks (the file is not a file set's), lenient lateness (several
/// processes share two cores with the server and other builds).
fn run_args(script: &Path, target: &str, out: &Path, rate: &str) -> Vec<String> {
    [
        "run",
        script.to_str().unwrap(),
        "--target",
        target,
        "--rate",
        rate,
        "--arrivals",
        "constant",
        "--no-shaping",
        "--check-bytes",
        "0",
        "--ramp-up",
        "0",
        "--ramp-down",
        "0",
        "--late-threshold-ms",
        "1000",
        "-o",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Runs this package's `vodlab` with `args`, its RLIMIT_NOFILE (soft and
/// hard) set to `nofile` when given (children inherit it).
fn vodlab_limited(args: &[String], nofile: Option<u64>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vodlab"));
    c.args(args);
    if let Some(n) = nofile {
        // SAFETY: setrlimit only, between fork and exec
        unsafe {
            c.pre_exec(move || {
                let l = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Sets the soft RLIMIT_NOFILE of a running process (prlimit(2)), its
/// hard limit unchanged (raising a hard limit needs a capability this
/// sandbox does not give even root; the process raised its soft limit to
/// the hard one when it started, so a lower soft limit now is in force).
fn set_nofile(pid: u32, n: u64) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit of a process this test started, with live structs
    let r = unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
    let l = libc::rlimit {
        rlim_cur: n.min(old.rlim_max),
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above
    let r = unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, &l, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// 200 sessions that all run at once need more descriptors than a process
/// limited to 150 may hold: `vodlab run` refuses before it starts, naming
/// the need, the limit and the processes it takes; the same run with
/// `--client-processes 3` under the same limit (each child inherits it)
/// runs, and its merged results equal `vodlab merge` of its shards and the
/// server's own counts.
#[test]
fn over_the_limit_is_refused_and_three_processes_hold_it_merged_exactly() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (script, root) = setup(t.path(), 200);
    let server = Running::start(&root, |c| c.max_connections = 1000);
    let out = t.path().join("one");
    // 1000/s: all 200 start within 0.2 s and last 2 s
    let args = run_args(&script, &server.url(""), &out, "1000");
    let o = vodlab_limited(&args, Some(150));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        e.contains("200 sessions at once need about 264 descriptors"),
        "{e}"
    );
    assert!(e.contains("this process may hold 150"), "{e}");
    // room per process (150 - 64) * 0.9 = 77: 3 processes
    assert!(e.contains("use --client-processes 3"), "{e}");
    assert_eq!(
        server.server().state.stats().connections,
        0,
        "refused before any connection"
    );

    let out = t.path().join("three");
    let mut args = run_args(&script, &server.url(""), &out, "1000");
    args.extend(["--client-processes", "3"].map(String::from));
    let o = vodlab_limited(&args, Some(150));
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for i in 0..3 {
        assert!(
            stdout.contains(&format!("client process {i}/3: valid;")),
            "{stdout}"
        );
    }
    let m = results(&out);
    assert_eq!(m["valid"], true, "{}", m["invalid_reasons"]);
    assert_eq!(m["complete"], true);
    assert_eq!(u(&m["started_sessions"]), 200);
    assert_eq!(u(&m["failed_sessions"]), 0);
    assert_eq!(m["merge"]["merged"], serde_json::json!([0, 1, 2]));
    // the server's ground truth: every request and byte, and one
    // connection per session plus the parent's one check
    let s = server.server().state.stats();
    assert_eq!(interval_sum(&m, "completed_requests"), 200 * REQUESTS);
    assert_eq!(s.requests, 200 * REQUESTS);
    assert_eq!(s.bytes, 200 * REQUESTS * RANGE);
    let bytes: u64 = m["classes"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| u(&c["bytes"]))
        .sum();
    assert_eq!(bytes, s.bytes);
    assert_eq!(s.connections, 200 + 1);
    // each child stayed under the limit: about a third of the sessions
    for i in 0..3 {
        let r = results(&out.join(format!("shard-{i}")));
        let peak = u(&r["health"]["peak_active_sessions"]);
        assert!((60..=70).contains(&peak), "shard {i}: {peak} at once");
        assert_eq!(u(&r["health"]["descriptor_errors"]), 0);
    }
    // merged exactly: the figures `vodlab merge` makes of the same shards
    let merged = t.path().join("merged");
    let dirs: Vec<String> = (0..3)
        .map(|i| out.join(format!("shard-{i}")).display().to_string())
        .collect();
    let mut a: Vec<&str> = vec!["merge"];
    a.extend(dirs.iter().map(String::as_str));
    a.extend(["-o", merged.to_str().unwrap()]);
    vodlab_ok(&a);
    assert_eq!(results(&merged), m, "run --client-processes = vodlab merge");
}

/// Descriptors running out mid-run (the limit lowered under a running
/// `vodlab run` with prlimit(2)): the sessions that could not connect
/// fail as `descriptors`, counted, printed and named in the invalid
/// reasons with the way out, never as generic connect failures; the
/// server saw exactly the connections that were made.
#[test]
fn descriptors_running_out_mid_run_are_their_own_failure() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (script, root) = setup(t.path(), 240);
    let server = Running::start(&root, |c| c.max_connections = 1000);
    let out = t.path().join("run");
    // 60 sessions/s for 4 s, each lasting 2 s: about 120 at once
    let args = run_args(&script, &server.url(""), &out, "60");
    let mut c = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_until("30 sessions connected", Duration::from_secs(20), || {
        server.server().state.stats().connections >= 30
    });
    // fewer than it holds now: every later connect gets EMFILE
    set_nofile(c.id(), 40);
    let t0 = Instant::now();
    common::wait_until("the run to end", Duration::from_secs(60), || {
        c.try_wait().unwrap().is_some()
    });
    eprintln!(
        "ran {:.1} s after the limit fell",
        t0.elapsed().as_secs_f64()
    );
    let o = c.wait_with_output().unwrap();
    let r = results(&out);
    let errors = &r["errors"];
    let emfile = u(&errors["descriptors"]);
    assert!(emfile > 0, "{}", text(&o));
    assert_eq!(u(&r["health"]["descriptor_errors"]), emfile);
    for k in ["refused", "reset", "timeout", "other", "ports"] {
        assert_eq!(errors.get(k).map_or(0, u), 0, "{k}: {errors}");
    }
    assert_eq!(r["valid"], false);
    let why = r["invalid_reasons"].to_string();
    assert!(
        why.contains(&format!("ran out of file descriptors {emfile} times"))
            && why.contains("--client-processes"),
        "{why}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("client out of descriptors"), "{stdout}");
    // the server counted the connections that were made (and the check)
    let s = server.server().state.stats();
    assert_eq!(s.connections, u(&r["transport"]["connections"]) + 1);
    assert!(u(&r["failed_sessions"]) > 0);
}

/// A `vodlab serve` child with piped stderr, stopped by SIGTERM (its PID)
/// on drop.
struct Serve {
    child: std::process::Child,
    port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: signalling the child this test started, by its PID
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn serve(root: &Path, extra: &[&str]) -> Serve {
    let port = common::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--root", root.to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Serve { child, port }
}

fn json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&fs::read(p).ok()?).ok()
}

/// CPU seconds (user + system) of a process, from /proc/PID/stat.
fn cpu_s(pid: u32) -> f64 {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf reads a constant
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// `vodlab serve` out of descriptors: accepts that fail are counted in its
/// statistics and said on stderr at most once per interval, and the
/// accept loop backs off (a few % of a core while connections wait in the
/// backlog), then serves them once descriptors free up.
#[test]
fn serve_counts_accepts_out_of_descriptors_without_spinning() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (_, root) = setup(t.path(), 1);
    let stats = t.path().join("stats.json");
    let mut s = serve(
        &root,
        &[
            "--stats-interval",
            "1",
            "--stats-file",
            stats.to_str().unwrap(),
        ],
    );
    common::wait_until("serve listening", Duration::from_secs(10), || {
        common::listening(s.port)
    });
    common::wait_until("its first statistics", Duration::from_secs(10), || {
        stats.exists()
    });
    let pid = s.child.id();
    let open = fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count() as u64;
    set_nofile(pid, open + 4);
    // more connections than it may accept now
    let conns: Vec<std::net::TcpStream> = (0..30)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    let cpu0 = cpu_s(pid);
    std::thread::sleep(Duration::from_secs(3));
    let busy = (cpu_s(pid) - cpu0) / 3.0;
    drop(conns);
    set_nofile(pid, 20_000);
    common::wait_until(
        "the count in its statistics",
        Duration::from_secs(10),
        || json(&stats).is_some_and(|v| v["accept_descriptor_errors"].as_u64().unwrap_or(0) > 0),
    );
    let v = json(&stats).unwrap();
    let n = u(&v["accept_descriptor_errors"]);
    // SAFETY: signalling the child this test started, by its PID
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let o = std::mem::replace(&mut s.child, Command::new("true").spawn().unwrap())
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let lines = err.matches("out of file descriptors").count();
    eprintln!(
        "{n} failed accepts, {lines} lines, {:.1} % of a core",
        busy * 100.0
    );
    // backing off 50 ms per failure: about 20 a second, not a spin
    assert!((2..=200).contains(&n), "{n} failed accepts in ~3 s");
    assert!(
        busy < 0.15,
        "{:.1} % of a core while out of descriptors",
        busy * 100.0
    );
    // once per second at most, over the ~3-4 s it lasted
    assert!((1..=6).contains(&lines), "{lines} lines: {err}");
    assert!(err.contains("--workers N"), "{err}");
}

/// The PIDs and state of `vodlab serve --workers` from its merged file.
fn workers_state(p: &Path) -> Option<(Vec<u32>, u64, u64)> {
    let v = json(p)?;
    let pids = v["per_worker"]
        .as_array()?
        .iter()
        .filter_map(|w| w["pid"].as_u64().map(|p| p as u32))
        .collect();
    Some((pids, v["alive"].as_u64()?, v["restarts"].as_u64()?))
}

/// `vodlab serve --workers 3`: three processes share the port (SO_REUSEPORT),
/// the merged statistics count every request of a run spread over two
/// client processes, a worker killed is reported and restarted, and
/// SIGTERM to the parent stops every worker.
#[test]
fn serve_workers_share_the_port_merge_their_statistics_and_restart() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (script, root) = setup(t.path(), 60);
    let dir = t.path().join("workers");
    let mut s = serve(
        &root,
        &[
            "--workers",
            "3",
            "--workers-dir",
            dir.to_str().unwrap(),
            "--stats-interval",
            "0",
            "--threads",
            "1",
        ],
    );
    let merged = dir.join("workers.json");
    common::wait_until("3 workers", Duration::from_secs(30), || {
        workers_state(&merged).is_some_and(|(p, alive, _)| p.len() == 3 && alive == 3)
    });
    let (pids, _, _) = workers_state(&merged).unwrap();
    for p in &pids {
        let stat = fs::read_to_string(format!("/proc/{p}/stat")).unwrap();
        let ppid: u32 = stat[stat.rfind(')').unwrap() + 2..]
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(ppid, s.child.id(), "worker {p} is the parent's child");
    }
    let out = t.path().join("run");
    let mut args = run_args(
        &script,
        &format!("http://127.0.0.1:{}", s.port),
        &out,
        "100",
    );
    args.extend(["--client-processes", "2"].map(String::from));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    vodlab_ok(&a);
    let r = results(&out);
    assert_eq!(u(&r["failed_sessions"]), 0);
    let want = 60 * REQUESTS;
    common::wait_until("the merged statistics", Duration::from_secs(10), || {
        json(&merged).is_some_and(|v| v["total"]["requests"].as_u64() == Some(want))
    });
    let v = json(&merged).unwrap();
    assert_eq!(u(&v["total"]["bytes"]), want * RANGE);
    // 60 sessions' connections and the run's check, spread by the kernel
    assert_eq!(u(&v["total"]["connections"]), 61);
    let per: Vec<u64> = v["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| u(&w["stats"]["requests"]))
        .collect();
    assert_eq!(per.iter().sum::<u64>(), want);
    assert!(
        per.iter().filter(|n| **n > 0).count() >= 2,
        "one worker took every connection: {per:?}"
    );
    // a worker that dies is restarted (a new PID) and said so
    // SAFETY: a worker of the server this test started, by its PID
    unsafe { libc::kill(pids[1] as i32, libc::SIGKILL) };
    common::wait_until("the worker restarted", Duration::from_secs(20), || {
        workers_state(&merged).is_some_and(|(p, alive, restarts)| {
            alive == 3 && restarts == 1 && p[1] != pids[1] && p.len() == 3
        })
    });
    let (now, _, _) = workers_state(&merged).unwrap();
    // SAFETY: signalling the child this test started, by its PID
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let o = std::mem::replace(&mut s.child, Command::new("true").spawn().unwrap())
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("worker 1 (PID {}) exited", pids[1]))
            && err.contains("restarting it"),
        "{err}"
    );
    for p in now {
        let gone = fs::read_to_string(format!("/proc/{p}/stat"))
            .map_or(true, |s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'));
        assert!(gone, "worker {p} still running");
    }
}

/// The flags are documented with examples and checked.
#[test]
fn the_flags_are_documented_and_checked() {
    let run = vodlab_ok(&["run", "--help"]);
    for f in ["--client-processes <N>", "--source-address"] {
        assert!(run.contains(f), "{f}: {run}");
    }
    assert!(run.contains("--client-processes 6"), "an example: {run}");
    let serve = vodlab_ok(&["serve", "--help"]);
    for f in [
        "--workers <N>",
        "--reuse-port",
        "--stats-file",
        "--workers 4",
    ] {
        assert!(serve.contains(f), "{f}: {serve}");
    }
    let t = tempfile::tempdir().unwrap();
    let (script, root) = setup(t.path(), 2);
    let server = Running::start(&root, |_| {});
    for (extra, says) in [
        (
            vec!["--client-processes", "0"],
            "--client-processes must be from 1 to 1024",
        ),
        (vec!["--client-processes", "2", "--shard", "0/2"], "--shard"),
        (
            vec!["--source-address", "192.0.2.7"],
            "not an address of this host",
        ),
        (
            vec!["--source-address", "::1"],
            "not of the target's address family",
        ),
    ] {
        let mut a = run_args(&script, &server.url(""), &t.path().join("x"), "10");
        a.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = vodlab(&a);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(says), "{extra:?}: {e}");
    }
    for (extra, says) in [
        (
            vec!["--workers", "2", "--listen", "127.0.0.1:0"],
            "fixed --listen port",
        ),
        (vec!["--workers", "0"], "--workers must be from 1 to 256"),
    ] {
        let mut a = vec!["serve", "--root", root.to_str().unwrap()];
        a.extend(extra.iter());
        let o = vodlab(&a);
        assert!(!o.status.success(), "{extra:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(says), "{extra:?}: {e}");
    }
}

/// Connections from two source addresses (`--source-address`) reach a
/// real peer from both in turn: nginx's access log (`$remote_addr`) names
/// each.
#[test]
fn connections_come_from_each_source_address_in_turn() {
    let t = common::readable_tempdir("srcaddr");
    let (script, root) = setup(t.path(), 8);
    let log = t.path().join("access.log");
    let nginx = common::Nginx::start_log_format(
        &root,
        &log,
        "log_format src '$remote_addr $request_uri $status';",
    );
    let out = t.path().join("run");
    let mut a = run_args(
        &script,
        &format!("http://127.0.0.1:{}", nginx.port),
        &out,
        "100",
    );
    a.extend(["--source-address", "127.0.0.2,127.0.0.3"].map(String::from));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    vodlab_ok(&a);
    assert_eq!(u(&results(&out)["failed_sessions"]), 0);
    drop(nginx); // its log is written per request
    let text = fs::read_to_string(&log).unwrap();
    let from = |ip: &str| text.lines().filter(|l| l.starts_with(ip)).count() as u64;
    // 8 sessions, one connection each, alternating: 4 x 3 requests each
    assert_eq!(from("127.0.0.2 "), 4 * REQUESTS, "{text}");
    assert_eq!(from("127.0.0.3 "), 4 * REQUESTS, "{text}");
}
