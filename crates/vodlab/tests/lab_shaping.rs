//! Kernel shaping vs in-process link emulation, end to end: the youtube-2011
//! client classes (10, 3.5 and 1 Mbit/s) run in a lab of 4 client hosts and
//! a server host, once shaped by the kernel per connection (`vodlab lab run
//! --flow-down`, `vodlab run --no-shaping`) and once by `vodlab run`'s own
//! link emulation (no kernel shaping), with the same sessions; each class's
//! mean session duration must agree within 10 %.
//!
//! Why 10 %: it is the issue's bound, and the expected gap is about 4.5 %:
//! htb charges every byte on the wire (a 1,448-byte segment is a 1,514-byte
//! frame with Ethernet, IP and TCP headers and timestamps), the in-process
//! token bucket only body bytes, so the kernel-shaped session is slower by
//! 1514/1448 = 1.046; the rest is connection setup and TCP's start
//! (docs/scale-out.md has the measured figures).
//!
//! Needs root (CI runs as root); without it only the plain refusal is
//! checked, and the test says so (as tests/lab_net.rs).

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{sparse_fileset, vodlab, vodlab_ok};
use vodlab_lab::hwbox::is_root;

const CLASSES: [&str; 3] = ["10mbit", "3.5mbit", "1mbit"];

fn lab_namespaces(name: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("vl-{name}-")))
        .map(str::to_string)
        .collect()
}

/// youtube-2011 with unpaced sessions of 20 s titles watched whole (two
/// 0.5 MiB chunks each: 8.4 s at 1 Mbit/s), no ramps, one-way delay 0 (the
/// kernel here has no netem, so the in-process side gets none either).
fn spec(dir: &Path) -> std::path::PathBuf {
    let preset = vodlab_ok(&["gen", "--show-preset", "youtube-2011"]);
    let cut = |s: &str, from: &str, to: &str, with: &str| {
        let a = s
            .find(from)
            .unwrap_or_else(|| panic!("preset lacks {from}"));
        let b = a + s[a..]
            .find(to)
            .unwrap_or_else(|| panic!("preset lacks {to}"));
        format!("{}{with}{}", &s[..a], &s[b..])
    };
    let s = cut(
        &preset,
        "[catalog.duration]",
        "[[catalog.representations]]",
        "[catalog.duration]\nkind = \"constant\"\nvalue = 20.0\n\n",
    );
    let s = cut(
        &s,
        "[sessions.viewing_fraction]",
        "[sessions.start]",
        "[sessions.viewing_fraction]\nkind = \"constant\"\nvalue = 1.0\n\n",
    );
    let s = s
        .replace("pacing_s = 10.0", "pacing_s = 0.0")
        .replace("delay_ms = 50.0", "delay_ms = 0.0")
        .replace("ramp_up_sessions = 200", "ramp_up_sessions = 0")
        .replace("ramp_down_sessions = 100", "ramp_down_sessions = 0");
    for c in CLASSES {
        assert!(s.contains(&format!("name = \"{c}\"")), "class {c}");
    }
    let p = dir.join("spec.toml");
    fs::write(&p, s).unwrap();
    p
}

/// One lab run of the workload; `kernel`: per-connection htb at the
/// host's class rate and no in-process emulation, else the reverse.
/// Returns each host's requests.csv text.
fn lab_run(dir: &Path, work: &Path, root: &Path, kernel: bool) -> Vec<String> {
    let out = dir.join(if kernel { "kernel" } else { "inproc" });
    fs::create_dir_all(&out).unwrap();
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 4;
    let bin = env!("CARGO_BIN_EXE_vodlab");
    // host 0 and 3: 10mbit (shards 0/2 and 1/2 of it), 1: 3.5mbit, 2: 1mbit
    let client = format!(
        r#"case $VODLAB_LAB_CLIENT in 0) c=10mbit s=0/2;; 1) c=3.5mbit s=0/1;; 2) c=1mbit s=0/1;; 3) c=10mbit s=1/2;; esac
exec {bin} run {work} --target http://$VODLAB_LAB_SERVER:8080 --allow-remote --rate 2 --seed 1 \
  --no-pacing --check-bytes 0 --requests-csv --quiet --only-class $c --shard $s --start-at {start} {shaping} \
  -o {out}/c$VODLAB_LAB_CLIENT > {out}/c$VODLAB_LAB_CLIENT.txt 2>&1"#,
        work = work.display(),
        out = out.display(),
        shaping = if kernel { "--no-shaping" } else { "" },
    );
    let server = format!(
        "exec {bin} serve --root {} --listen 10.77.0.1:8080 --stats-interval 0",
        root.display()
    );
    let mut args = vec![
        "lab",
        "run",
        "--name",
        "ts",
        "--clients",
        "4",
        "--port",
        "8080",
        "--timeout",
        "120",
        "--server",
        &server,
        "--client",
        &client,
    ];
    if kernel {
        args.extend(["--flow-down", "10mbit,3.5mbit,1mbit,10mbit"]);
    }
    let o = vodlab(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("starting 4 client(s)"), "{err}");
    assert!(err.contains("lab: removed vl-ts-"), "{err}");
    // each host's results say who shaped it: the lab's htb class at the
    // host's rate (as `tc` was told: 3.5mbit is 3500kbit), or vodlab itself
    let rates = ["10mbit", "3500kbit", "1mbit", "10mbit"];
    for (i, rate) in rates.iter().enumerate() {
        let p = out.join(format!("c{i}/results.json"));
        let r: serde_json::Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
        if kernel {
            assert_eq!(r["shaping_mode"], "kernel", "host {i}");
            assert_eq!(r["kernel_shaping_rate"], *rate, "host {i}");
        } else {
            assert_eq!(r["shaping_mode"], "in_process", "host {i}");
            assert!(r.get("kernel_shaping_rate").is_none(), "host {i}");
        }
    }
    (0..4)
        .map(|i| {
            let p = out.join(format!("c{i}/requests.csv"));
            fs::read_to_string(&p).unwrap_or_else(|e| {
                let log = fs::read_to_string(out.join(format!("c{i}.txt"))).unwrap_or_default();
                panic!("host {i} wrote no {}: {e}\n{log}", p.display())
            })
        })
        .collect()
}

/// Per class: session id -> (duration s, body bytes), from the hosts'
/// requests.csv (first send to last byte; every request must have succeeded).
fn sessions(hosts: &[String]) -> BTreeMap<String, BTreeMap<String, (f64, u64)>> {
    let mut spans: BTreeMap<(String, String), (f64, f64, u64)> = BTreeMap::new();
    for (h, text) in hosts.iter().enumerate() {
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |n: &str| head.iter().position(|c| *c == n).unwrap();
        let (cs, cc, csent, cresp, cbytes, cerr) = (
            col("session"),
            col("class"),
            col("sent_s"),
            col("response_ms"),
            col("bytes"),
            col("error"),
        );
        for l in lines {
            let f: Vec<&str> = l.split(',').collect();
            assert!(f[cerr].is_empty(), "host {h}: a request failed: {l}");
            let t0: f64 = f[csent].parse().unwrap();
            let t1 = t0 + f[cresp].parse::<f64>().unwrap() / 1e3;
            let e = spans
                .entry((f[cc].to_string(), f[cs].to_string()))
                .or_insert((f64::MAX, 0.0, 0));
            e.0 = e.0.min(t0);
            e.1 = e.1.max(t1);
            e.2 += f[cbytes].parse::<u64>().unwrap();
        }
    }
    let mut out: BTreeMap<String, BTreeMap<String, (f64, u64)>> = BTreeMap::new();
    for ((class, id), (t0, t1, b)) in spans {
        out.entry(class).or_default().insert(id, (t1 - t0, b));
    }
    out
}

fn mean_duration(s: &BTreeMap<String, (f64, u64)>) -> f64 {
    s.values().map(|v| v.0).sum::<f64>() / s.len() as f64
}

#[test]
fn kernel_and_in_process_shaping_agree_per_youtube_class_in_a_4_host_lab() {
    if !is_root() {
        let o = vodlab(&["lab", "up", "--name", "ts", "--flow-down", "1mbit"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("needs root"));
        eprintln!("not root: checked only that vodlab lab refuses plainly");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path());
    let work = dir.path().join("w");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "--sessions",
        "16",
        "--titles",
        "10",
        "--shards",
        "1",
        "--seed",
        "1",
        "-o",
        work.to_str().unwrap(),
    ]);
    let root = dir.path().join("root");
    sparse_fileset(&work, &root);

    let kernel = sessions(&lab_run(dir.path(), &work, &root, true));
    assert!(
        lab_namespaces("ts").is_empty(),
        "{:?}",
        lab_namespaces("ts")
    );
    let inproc = sessions(&lab_run(dir.path(), &work, &root, false));
    assert!(
        lab_namespaces("ts").is_empty(),
        "{:?}",
        lab_namespaces("ts")
    );

    // the same sessions ran both times, every class on its hosts
    let total: usize = kernel.values().map(BTreeMap::len).sum();
    assert_eq!(total, 16, "{kernel:?}");
    let mut report = String::new();
    for c in CLASSES {
        let (k, p) = (&kernel[c], &inproc[c]);
        assert!(!k.is_empty(), "no {c} sessions");
        assert_eq!(
            k.keys().collect::<Vec<_>>(),
            p.keys().collect::<Vec<_>>(),
            "{c}: different sessions"
        );
        for (id, (_, b)) in k {
            assert_eq!(*b, p[id].1, "{c} session {id}: bytes differ");
        }
        let (dk, dp) = (mean_duration(k), mean_duration(p));
        report.push_str(&format!(
            "{c}: {} sessions, mean duration kernel {dk:.3} s, in-process {dp:.3} s, ratio {:.3}\n",
            k.len(),
            dk / dp
        ));
        // both really shaped: a session moves 1 MiB (2 chunks), which at the
        // class rate takes 8 Mbit / rate; unshaped on a veth it takes ms
        let rate = match c {
            "10mbit" => 10e6,
            "3.5mbit" => 3.5e6,
            _ => 1e6,
        };
        let ideal = 2.0 * 524_288.0 * 8.0 / rate;
        for (who, d) in [("kernel", dk), ("in-process", dp)] {
            assert!(
                d > 0.9 * ideal && d < 1.4 * ideal,
                "{c} {who}: mean {d:.3} s, the link alone needs {ideal:.3} s"
            );
        }
        assert!(
            (0.9..=1.1).contains(&(dk / dp)),
            "{c}: kernel {dk:.3} s vs in-process {dp:.3} s"
        );
    }
    eprint!("{report}");
}

/// `--flows-per-host` above 256 (two hash levels): curl fetches 256 KiB
/// from a client host with its local port set, at the first port of the
/// range, one in the second table and the last one, each through its own
/// 2 Mbit/s class (about 1 s), and once from a port outside the range,
/// which no class holds (unshaped: milliseconds on the veth). Then two
/// fetches at once from ports 256 apart (the same low byte, so the same
/// bucket of a one-level table, which would halve their rates): each must
/// still take about 1 s.
#[test]
fn every_table_of_a_1024_flow_host_shapes_its_ports() {
    if !is_root() {
        eprintln!("not root: the lab needs network namespaces (checked in the test above)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("f"), vec![7u8; 256 * 1024]).unwrap();
    let out = dir.path().join("times.txt");
    let bin = env!("CARGO_BIN_EXE_vodlab");
    // 40960: table 3, bucket 0; 41300: table 4; 41983: the last port
    let client = format!(
        r#"get() {{ printf '%s ' $1; curl -s -o /dev/null --local-port $2 -w '%{{time_total}}\n' http://$VODLAB_LAB_SERVER:8080/f || echo fail; }}
for p in 40960 41300 41983 30000; do get $p $p; done > {out} 2>&1
get pair-a 40961 > {out}.a 2>&1 & get pair-b 41217 > {out}.b 2>&1 & wait
cat {out}.a {out}.b >> {out}"#,
        out = out.display()
    );
    let server = format!(
        "exec {bin} serve --root {} --listen 10.77.0.1:8080 --stats-interval 0",
        root.display()
    );
    let o = vodlab(&[
        "lab",
        "run",
        "--name",
        "tf",
        "--flow-down",
        "2mbit",
        "--flows-per-host",
        "1024",
        "--port",
        "8080",
        "--timeout",
        "60",
        "--server",
        &server,
        "--client",
        &client,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        lab_namespaces("tf").is_empty(),
        "{:?}",
        lab_namespaces("tf")
    );
    let text = fs::read_to_string(&out).unwrap();
    let times: BTreeMap<&str, f64> = text
        .lines()
        .map(|l| {
            let (p, t) = l.split_once(' ').unwrap_or_else(|| panic!("{text}"));
            let t = t
                .parse()
                .unwrap_or_else(|_| panic!("port {p}: {t}\n{text}"));
            (p, t)
        })
        .collect();
    // 256 KiB of body and ~4.6 % of headers on the wire at 2 Mbit/s: 1.1 s
    for p in ["40960", "41300", "41983", "pair-a", "pair-b"] {
        assert!(
            (0.9..1.6).contains(&times[p]),
            "{p}: {} s, its class alone needs ~1.1 s (2.2 s if two share it)\n{text}",
            times[p]
        );
    }
    assert!(
        times["30000"] < 0.5,
        "an unclassified port was shaped\n{text}"
    );
}
