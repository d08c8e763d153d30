//! `vodlab k8s`: its manifests validated offline against the Kubernetes
//! schemas (the PyPI `kubernetes-validate` package), and the container's
//! entrypoint (deploy/entrypoint.sh) run as an Indexed Job would run it — N
//! local processes with JOB_COMPLETION_INDEX set, the ConfigMap's settings as
//! their environment, the start time apply.sh writes — then the merge Job's
//! wait and merge steps, against an in-process `vodlab serve` on loopback.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use common::{vodlab_ok, Running};

const SHARDS: usize = 4;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn k8s(out: &Path, extra: &[&str]) {
    let mut a = vec![
        "k8s",
        "--shards",
        "4",
        "--target",
        "http://vod.default.svc.cluster.local:8080",
        "--workload-path",
        "/workload",
        "--rate",
        "40",
        "-o",
        out.to_str().unwrap(),
    ];
    a.extend(extra);
    vodlab_ok(&a);
}

fn yaml(p: &Path) -> serde_yaml::Value {
    serde_yaml::from_str(&fs::read_to_string(p).unwrap()).unwrap()
}

/// The Python that has kubernetes-validate: the project's test venv
/// (`$VODLAB_TEST_VENV`, else `target/test-venv`, where
/// scripts/install-test-deps.sh puts it), else `python3` on `PATH`.
fn python() -> PathBuf {
    let venv = std::env::var_os("VODLAB_TEST_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv"),
        PathBuf::from,
    );
    let p = venv.join("bin/python3");
    if p.exists() {
        p
    } else {
        PathBuf::from("python3")
    }
}

/// Runs kubernetes-validate --strict on `files` (as `python3 -m`, wherever
/// pip put its script); fails (never skips) when it is not installed.
fn validate(files: &[PathBuf]) -> Output {
    let found = Command::new(python())
        .args(["-m", "kubernetes_validate", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "kubernetes-validate is not installed: run scripts/install-test-deps.sh \
         (it installs it into target/test-venv); it bundles the Kubernetes schemas \
         this test validates the manifests against offline"
    );
    // 1.33: the earliest version whose schema has backoffLimitPerIndex GA
    // (k8s-openapi feature v1_33); 1.37: the newest kubernetes-validate knows
    Command::new(python())
        .args(["-m", "kubernetes_validate", "--strict", "-k", "1.33.0"])
        .args(files)
        .output()
        .unwrap()
}

#[test]
fn manifests_validate_offline_against_the_kubernetes_schemas() {
    let t = tempfile::tempdir().unwrap();
    for (sub, extra) in [
        ("pvc", vec!["--", "--no-pacing", "--interval", "1"]),
        ("hostpath", vec!["--results", "hostpath:/var/vodlab"]),
        (
            "s3",
            vec!["--results", "s3:s3://b/p", "--s3-secret", "creds"],
        ),
    ] {
        let out = t.path().join(sub);
        k8s(&out, &extra);
        let files: Vec<PathBuf> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        let expect = if sub == "pvc" { 5 } else { 4 };
        assert_eq!(files.len(), expect, "{files:?}");
        let o = validate(&files);
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{sub}: {text}");
        assert_eq!(
            text.matches(" passed for resource ").count(),
            expect,
            "{text}"
        );
    }

    // the validator does reject what the API would: a negative control
    let job = t.path().join("pvc/shards-job.yaml");
    let bad = t.path().join("bad-job.yaml");
    let text = fs::read_to_string(&job).unwrap();
    assert!(text.contains("completions: 4\n"));
    fs::write(
        &bad,
        text.replace("completions: 4\n", "completions: four\n"),
    )
    .unwrap();
    assert!(!validate(std::slice::from_ref(&bad)).status.success());
    fs::write(
        &bad,
        text.replace("parallelism: 4\n", "parallelism: 4\n  workers: 4\n"),
    )
    .unwrap();
    assert!(
        !validate(&[bad]).status.success(),
        "--strict rejects an unknown field"
    );
}

/// An unpaced youtube-2011 workload of `sessions` sessions in 2 script
/// shards, and sparse files for its catalog (as tests/shards.rs).
fn workload(dir: &Path, sessions: u32) -> (PathBuf, PathBuf) {
    common::unpaced_workload(dir, "youtube-2011", sessions, 60, 2, 3)
}

/// The container of a Job's manifest: its args and the ConfigMap its
/// environment comes from; `init` picks the first init container.
fn container(job: &serde_yaml::Value, init: bool) -> (Vec<String>, String, String) {
    let spec = &job["spec"]["template"]["spec"];
    let c = if init {
        &spec["initContainers"][0]
    } else {
        &spec["containers"][0]
    };
    let args = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let cm = c["envFrom"][0]["configMapRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let mount = c["volumeMounts"][0]["mountPath"]
        .as_str()
        .unwrap()
        .to_string();
    (args, cm, mount)
}

/// The entrypoint as the image runs it (ENTRYPOINT + the container's args),
/// with the ConfigMap's data as environment and the volume at `volume`.
fn entrypoint(args: &[String], env: &BTreeMap<String, String>, volume: &Path) -> Command {
    let mut c = Command::new(repo().join("deploy/entrypoint.sh"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .envs(env)
        .env("VODLAB_RESULTS", volume)
        .env("VODLAB_BIN", env!("CARGO_BIN_EXE_vodlab"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn ok(o: Output) -> String {
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    text
}

/// `vodlab k8s` for a loopback run of `w` against `target` in `shards`
/// shards, results as `results`, written to `out`.
fn generate(w: &Path, target: &str, shards: usize, out: &Path, results: &[&str]) {
    let shards = shards.to_string();
    let mut a = vec![
        "k8s",
        "--shards",
        &shards,
        "--target",
        target,
        "--workload-path",
        w.to_str().unwrap(),
        "--rate",
        "24",
        "--seed",
        "1",
        "--start-delay",
        "3",
        "-o",
        out.to_str().unwrap(),
    ];
    a.extend(results);
    a.extend([
        "--",
        "--arrivals",
        "constant",
        "--no-shaping",
        "--no-pacing",
        "--check-bytes",
        "0",
        "--interval",
        "1",
        "--ramp-up",
        "2",
        "--ramp-down",
        "1",
        // 4 shard processes and the server share 2 cores with this
        // binary's other tests: a start 10 ms late (the default) made a
        // CI run INVALID; the merge, not the schedule, is under test
        "--late-threshold-ms",
        "250",
    ]);
    vodlab_ok(&a);
}

/// Writes an executable shell script.
fn script(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    fs::set_permissions(path, mode).unwrap();
}

/// Runs `out`/apply.sh with a kubectl that records its calls and the
/// ConfigMap it is given; checks the calls and returns the ConfigMap's data
/// as applied (the start time counted at apply time).
fn apply(out: &Path, scratch: &Path) -> BTreeMap<String, String> {
    let fake = scratch.join("kubectl");
    let log = scratch.join("kubectl.log");
    let applied = scratch.join("applied-config.yaml");
    script(
        &fake,
        &format!(
            "#!/bin/sh\necho \"$*\" >> {}\nif [ \"$*\" = \"apply -f -\" ]; then cat > {}; fi\n",
            log.display(),
            applied.display()
        ),
    );
    let before = unix_now();
    ok(Command::new(out.join("apply.sh"))
        .env("KUBECTL", &fake)
        .output()
        .unwrap());
    let calls = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert!(lines[0].starts_with("apply -f namespace.yaml"), "{calls}");
    assert!(lines[1].starts_with("-n vodlab delete job vodlab-shards vodlab-merge"));
    assert_eq!(lines[2], "apply -f -");
    assert_eq!(lines[3], "apply -f shards-job.yaml -f merge-job.yaml");
    let cm = yaml(&applied);
    assert_eq!(cm["metadata"]["name"], "vodlab-config");
    let data: BTreeMap<String, String> = serde_yaml::from_value(cm["data"].clone()).unwrap();
    let start: u64 = data["VODLAB_START_AT"].parse().unwrap();
    assert!(
        start >= before + 3 && start <= unix_now() + 3,
        "start {start}"
    );
    data
}

#[test]
fn the_entrypoint_as_an_indexed_job_on_loopback_merges_every_shard() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), 48);
    let server = Running::start(&root, |_| {});
    let out = t.path().join("k8s");
    generate(
        &w,
        &server.url(""),
        SHARDS,
        &out,
        &["--results", "hostpath:/var/vodlab"],
    );
    let data = apply(&out, t.path());
    let start: u64 = data["VODLAB_START_AT"].parse().unwrap();

    let job = yaml(&out.join("shards-job.yaml"));
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], SHARDS);
    let (args, cm_name, mount) = container(&job, false);
    assert_eq!(cm_name, "vodlab-config");
    assert_eq!(data["VODLAB_RESULTS"], mount);
    // the volume: a directory standing for the hostPath mounted at /results
    let volume = t.path().join("volume");
    let kids: Vec<Child> = (0..SHARDS)
        .map(|i| {
            entrypoint(&args, &data, &volume)
                .env("JOB_COMPLETION_INDEX", i.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in kids {
        ok(k.wait_with_output().unwrap());
    }
    let run_dir = volume.join(format!("vodlab-{start}"));
    for i in 0..SHARDS {
        let d = run_dir.join(format!("shard-{i}"));
        assert_eq!(fs::read_to_string(d.join("exit-code")).unwrap().trim(), "0");
        assert_eq!(common::results(&d)["shard"]["index"], i);
    }

    // the merge Job: its init container waits, its container merges
    let merge_job = yaml(&out.join("merge-job.yaml"));
    let (wait_args, ..) = container(&merge_job, true);
    let (merge_args, ..) = container(&merge_job, false);
    let text = ok(entrypoint(&wait_args, &data, &volume).output().unwrap());
    assert!(text.contains("all 4 shards finished"), "{text}");
    ok(entrypoint(&merge_args, &data, &volume).output().unwrap());
    let m = common::results(&run_dir.join("merged"));
    assert_eq!(m["complete"], true, "{m}");
    assert_eq!(m["valid"], true, "{}", m["invalid_reasons"]);
    assert_eq!(m["merge"]["merged"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(m["started_sessions"], 48, "every session of the workload");
    assert_eq!(m["failed_sessions"], 0);
    let shard_sum = |f: &str| -> u64 {
        (0..SHARDS)
            .map(|i| {
                common::results(&run_dir.join(format!("shard-{i}")))[f]
                    .as_u64()
                    .unwrap()
            })
            .sum()
    };
    for f in ["started_sessions", "measured_sessions"] {
        assert_eq!(m[f].as_u64().unwrap(), shard_sum(f), "{f}");
    }
    let skew = m["merge"]["start_skew_s"].as_f64().unwrap();
    eprintln!(
        "start skew of {SHARDS} entrypoint processes: {:.2} ms",
        skew * 1e3
    );
    assert!(skew <= 0.100, "skew {skew} s");

    // a shard whose pod died (nothing written): the wait times out and the
    // merge names it
    fs::remove_dir_all(run_dir.join("shard-3")).unwrap();
    let mut short = data.clone();
    short.insert("VODLAB_MERGE_TIMEOUT".into(), "1".into());
    let text = ok(entrypoint(&wait_args, &short, &volume)
        .env("VODLAB_POLL_S", "1")
        .output()
        .unwrap());
    assert!(text.contains("shards not finished: 3"), "{text}");
    ok(entrypoint(&merge_args, &short, &volume).output().unwrap());
    let m = common::results(&run_dir.join("merged"));
    assert_eq!(m["complete"], false);
    assert_eq!(m["merge"]["missing"], serde_json::json!([3]));
}

#[test]
fn the_entrypoint_refuses_a_shard_index_out_of_range_and_missing_settings() {
    let t = tempfile::tempdir().unwrap();
    let mut env = BTreeMap::from([
        ("VODLAB_NAME".to_string(), "v".to_string()),
        ("VODLAB_SHARDS".to_string(), "2".to_string()),
        (
            "VODLAB_TARGET".to_string(),
            "http://127.0.0.1:9".to_string(),
        ),
        ("VODLAB_WORKLOAD".to_string(), "/nonexistent".to_string()),
        ("VODLAB_START_AT".to_string(), (unix_now() + 60).to_string()),
    ]);
    let o = entrypoint(&["shard".into()], &env, t.path())
        .env("JOB_COMPLETION_INDEX", "2")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("JOB_COMPLETION_INDEX=2"));
    env.remove("VODLAB_START_AT");
    let o = entrypoint(&[], &env, t.path())
        .env("JOB_COMPLETION_INDEX", "0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("VODLAB_START_AT is not set"));
}

/// A stand-in for the `aws` CLI's `s3 cp [--recursive]` and `s3 ls`, with
/// s3://X kept in $FAKE_S3/X.
const FAKE_AWS: &str = r#"#!/bin/sh
set -eu
mkdir -p "$FAKE_S3"
if [ "$1" = --endpoint-url ]; then echo "$2" >"$FAKE_S3/.endpoint"; shift 2; fi
[ "$1" = s3 ] || exit 2
op=$2
shift 2
src=
dst=
rec=0
skip=
for a in "$@"; do
  if [ -n "$skip" ]; then skip=; continue; fi
  case $a in
  --recursive) rec=1 ;;
  --exclude) skip=1 ;;
  --*) ;;
  *) if [ -z "$src" ]; then src=$a; else dst=$a; fi ;;
  esac
done
map() { case $1 in s3://*) echo "$FAKE_S3/${1#s3://}" ;; *) echo "$1" ;; esac; }
s=$(map "$src")
case $op in
cp)
  d=$(map "$dst")
  if [ $rec = 1 ]; then
    [ -d "$s" ] || exit 0
    mkdir -p "$d"
    for f in "$s"/*; do [ "$(basename "$f")" = exit-code ] || cp -R "$f" "$d/"; done
  else
    mkdir -p "$(dirname "$d")"
    cp "$s" "$d"
  fi
  ;;
ls) [ -e "$s" ] ;;
*) exit 2 ;;
esac
"#;

/// Results through an object store: every pod has its own scratch volume (an
/// emptyDir), the shards upload, the merge downloads and uploads the merge.
#[test]
fn with_s3_results_the_pods_share_nothing_but_the_bucket() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), 24);
    let server = Running::start(&root, |_| {});
    let out = t.path().join("k8s");
    let results = [
        "--results",
        "s3:s3://bucket/runs",
        "--s3-endpoint",
        "http://minio.local:9000",
    ];
    generate(&w, &server.url(""), 2, &out, &results);
    let data = apply(&out, t.path());
    let start = &data["VODLAB_START_AT"];
    assert_eq!(data["VODLAB_RESULTS_URL"], "s3://bucket/runs");
    let aws = t.path().join("aws");
    script(&aws, FAKE_AWS);
    let bucket = t.path().join("s3");
    let job = yaml(&out.join("shards-job.yaml"));
    assert!(job["spec"]["template"]["spec"]["volumes"][0]["emptyDir"].is_mapping());
    let (args, ..) = container(&job, false);
    let pod = |name: &str, args: &[String]| {
        let mut c = entrypoint(args, &data, &t.path().join(name));
        c.env("VODLAB_AWS", &aws).env("FAKE_S3", &bucket);
        c
    };
    let kids: Vec<Child> = (0..2)
        .map(|i| {
            pod(&format!("pod-{i}"), &args)
                .env("JOB_COMPLETION_INDEX", i.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in kids {
        ok(k.wait_with_output().unwrap());
    }
    let run = bucket.join(format!("bucket/runs/vodlab-{start}"));
    for i in 0..2 {
        assert_eq!(
            fs::read_to_string(run.join(format!("shard-{i}/exit-code")))
                .unwrap()
                .trim(),
            "0"
        );
    }
    let merge_job = yaml(&out.join("merge-job.yaml"));
    let (wait_args, ..) = container(&merge_job, true);
    let (merge_args, ..) = container(&merge_job, false);
    let text = ok(pod("merge-pod", &wait_args).output().unwrap());
    assert!(text.contains("all 2 shards finished"), "{text}");
    ok(pod("merge-pod", &merge_args).output().unwrap());
    let m = common::results(&run.join("merged"));
    assert_eq!(m["complete"], true, "{m}");
    assert_eq!(m["merge"]["merged"], serde_json::json!([0, 1]));
    assert_eq!(m["started_sessions"], 24);
    assert_eq!(
        fs::read_to_string(bucket.join(".endpoint")).unwrap().trim(),
        "http://minio.local:9000"
    );
}
