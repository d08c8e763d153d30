//! The manifests of `vodlab k8s`: Kubernetes manifests for a run split over pods — an Indexed
//! Job whose pod I runs `vodlab run --shard I/N`, a start time in a ConfigMap
//! (the barrier), a results volume with one directory per shard, and a merge
//! Job that waits for the shards and runs `vodlab merge` (docs/scale-out.md).
//!
//! The manifests are typed (`k8s-openapi` structs, serialised with
//! `serde_yaml`), so every field name and nesting is the API's own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapEnvSource, Container, EmptyDirVolumeSource, EnvFromSource,
    HostPathVolumeSource, Namespace, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretEnvSource, TopologySpreadConstraint, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use thiserror::Error;

/// Why the manifests could not be made or written.
#[derive(Debug, Error)]
pub enum K8sError {
    /// A setting is invalid; the text names it.
    #[error("{0}")]
    Invalid(String),
    /// A manifest could not be serialised.
    #[error("serialising a manifest: {0}")]
    Yaml(String),
    /// A file could not be written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(K8sError::Invalid(format!($($fmt)+)));
        }
    };
}

macro_rules! bail {
    ($($fmt:tt)+) => {
        return Err(K8sError::Invalid(format!($($fmt)+)))
    };
}

/// Where the results volume is mounted in every pod.
pub const RESULTS_MOUNT: &str = "/results";
/// Most shards one Indexed Job may have here (a sanity bound, not the API's).
const MAX_SHARDS: u32 = 10_000;

/// The settings of `vodlab k8s` (its flags, with the `cli` feature).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct K8sArgs {
    /// Number of shards N: pods of the Indexed Job, each `vodlab run --shard I/N`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub shards: u32,
    /// Server to load, `http://HOST:PORT` or `https://HOST:PORT` (pass the
    /// protocol flags after `--`), as the pods reach it (a Service
    /// name, a node address, ...).
    #[cfg_attr(feature = "cli", arg(long, value_name = "URL"))]
    pub target: String,
    /// The workload (a `vodlab gen` directory or one script) as a path inside
    /// the container: baked into the image or on the results volume.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PATH"))]
    pub workload_path: String,
    /// Container image holding vodlab and deploy/entrypoint.sh (deploy/Dockerfile).
    #[cfg_attr(feature = "cli", arg(long, default_value = "vodlab:latest"))]
    pub image: String,
    /// Namespace of every object (a Namespace manifest is written for it).
    #[cfg_attr(feature = "cli", arg(long, default_value = "vodlab"))]
    pub namespace: String,
    /// Prefix of the objects' names and of the run's results directory.
    #[cfg_attr(feature = "cli", arg(long, default_value = "vodlab"))]
    pub name: String,
    /// Time from `apply.sh` to the shards' common start, whole seconds (a
    /// bare number is seconds: 120, 2m): long enough for every pod to be
    /// scheduled, pull the image and load the workload.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 120, value_name = "DURATION", value_parser = whole_seconds))]
    pub start_delay: u64,
    /// Where results go: `pvc:NAME` (a ReadWriteMany claim; pvc.yaml
    /// creates it), `hostpath:DIR` (a node directory: one-node kind/k3s
    /// clusters) or `s3:s3://BUCKET/PREFIX` (an object store through the `aws`
    /// CLI, which the image must hold: deploy/Dockerfile's WITH_AWSCLI=1).
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value = "pvc:vodlab-results",
            value_name = "pvc:NAME|hostpath:DIR|s3:URL"
        )
    )]
    pub results: String,
    /// With s3: results, the object store's endpoint (MinIO, Ceph, R2, ...;
    /// default: AWS's).
    #[cfg_attr(feature = "cli", arg(long, value_name = "URL"))]
    pub s3_endpoint: Option<String>,
    /// With s3: results, a Secret whose keys become the pods' environment
    /// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME"))]
    pub s3_secret: Option<String>,
    /// Size requested by pvc.yaml.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "1Gi", value_name = "QUANTITY")
    )]
    pub pvc_size: String,
    /// How long the merge Job waits for every shard's results before
    /// merging what there is (missing shards are named), whole seconds (a
    /// bare number is seconds: 5400, 90m). Default: start delay +
    /// --duration (or an hour) + 10 minutes.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = whole_seconds))]
    pub merge_timeout: Option<u64>,
    /// CPU request of each shard pod (sizing: docs/scale-out.md).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "1", value_name = "QUANTITY")
    )]
    pub cpu: String,
    /// Memory request of each shard pod.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "512Mi", value_name = "QUANTITY")
    )]
    pub memory: String,
    /// Aggregate session rate over all shards (`vodlab run --rate`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SESSIONS_PER_S"))]
    pub rate: Option<f64>,
    /// `vodlab run --steps`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "STEPS"))]
    pub steps: Option<String>,
    /// `vodlab run --ramp-rate`.
    #[cfg_attr(
        feature = "cli",
        arg(long = "ramp-rate", value_name = "FROM:TO:SECONDS")
    )]
    pub ramp_rate: Option<String>,
    /// `vodlab run --seed` (the same in every shard).
    #[cfg_attr(feature = "cli", arg(long))]
    pub seed: Option<u64>,
    /// `vodlab run --sessions`.
    #[cfg_attr(feature = "cli", arg(long))]
    pub sessions: Option<usize>,
    /// `vodlab run --duration` (a bare number is seconds: 600, 10m).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub duration: Option<f64>,
    /// Directory for the manifests and apply.sh (`--output` is an older
    /// name).
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: PathBuf,
    /// More `vodlab run` options for every shard, after `--`, e.g.
    /// `-- --no-pacing --interval 1` (not --shard, --start-at, --target or -o:
    /// the entrypoint sets them).
    #[cfg_attr(feature = "cli", arg(last = true, value_name = "RUN_ARGS"))]
    pub run_args: Vec<String>,
}

/// How the results volume is provided.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Results {
    /// A PersistentVolumeClaim (ReadWriteMany) of this name.
    Pvc(String),
    /// A directory on the node.
    HostPath(String),
    /// An object store URL (`s3://BUCKET/PREFIX`); pods keep results in an
    /// emptyDir and copy them with the `aws` CLI.
    S3(String),
}

fn parse_results(s: &str) -> Result<Results, K8sError> {
    if let Some(name) = s.strip_prefix("pvc:") {
        ensure!(is_dns_label(name), "--results `{s}`: `{name}` is not a valid claim name (lower-case letters, digits and `-`)");
        return Ok(Results::Pvc(name.to_string()));
    }
    if let Some(dir) = s.strip_prefix("hostpath:") {
        ensure!(
            dir.starts_with('/'),
            "--results `{s}`: the host path must be absolute"
        );
        return Ok(Results::HostPath(dir.to_string()));
    }
    if let Some(url) = s.strip_prefix("s3:") {
        let rest = url.strip_prefix("s3://").unwrap_or(url);
        let bucket = rest.split('/').next().unwrap_or("");
        ensure!(
            !bucket.is_empty()
                && !rest.contains(|c: char| c.is_whitespace() || "'\"\\$`*?".contains(c)),
            "--results `{s}`: expected s3:s3://BUCKET/PREFIX (no spaces or quotes)"
        );
        return Ok(Results::S3(format!("s3://{}", rest.trim_end_matches('/'))));
    }
    bail!("--results `{s}`: expected pvc:NAME, hostpath:DIR or s3:s3://BUCKET/PREFIX")
}

/// An RFC 1123 label: what object names, namespaces and claim names may be.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A duration in whole seconds ([`vodlab_units::parse_duration`]; a bare
/// number is seconds).
pub fn whole_seconds(s: &str) -> Result<u64, String> {
    let d = vodlab_units::parse_duration(s).map_err(|e| e.to_string())?;
    if d.subsec_nanos() != 0 {
        return Err(format!("`{}`: give whole seconds", s.trim()));
    }
    Ok(d.as_secs())
}

/// Flags the entrypoint sets itself, refused in the pass-through arguments.
const RESERVED: [&str; 7] = [
    "--shard",
    "--start-at",
    "--target",
    "-o",
    "--out",
    "--output",
    "--allow-remote",
];

/// The `vodlab run` arguments every shard gets besides those the entrypoint sets.
fn run_args(a: &K8sArgs) -> Result<Vec<String>, K8sError> {
    let mut v = Vec::new();
    let mut push = |k: &str, val: Option<String>| {
        if let Some(x) = val {
            v.push(k.to_string());
            v.push(x);
        }
    };
    push("--rate", a.rate.map(|r| r.to_string()));
    push("--steps", a.steps.clone());
    push("--ramp-rate", a.ramp_rate.clone());
    push("--seed", a.seed.map(|s| s.to_string()));
    push("--sessions", a.sessions.map(|s| s.to_string()));
    push("--duration", a.duration.map(|d| d.to_string()));
    ensure!(
        a.rate.is_some() || a.steps.is_some() || a.ramp_rate.is_some(),
        "give the aggregate load: --rate, --steps or --ramp-rate"
    );
    for arg in &a.run_args {
        let flag = arg.split('=').next().unwrap_or(arg);
        ensure!(
            !RESERVED.contains(&flag),
            "run argument `{arg}`: the entrypoint sets {flag} itself"
        );
        ensure!(
            !arg.is_empty()
                && !arg
                    .chars()
                    .any(|c| c.is_whitespace() || "*?[]'\"\\$`".contains(c)),
            "run argument `{arg}`: the entrypoint splits the arguments on spaces; use no spaces, quotes or glob characters"
        );
        v.push(arg.clone());
    }
    Ok(v)
}

/// The manifests of one split run, as file name and YAML text.
#[derive(Debug)]
pub struct Manifests {
    /// (file name, contents) in the order `kubectl apply` should take them.
    pub files: Vec<(String, String)>,
}

fn meta(a: &K8sArgs, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(a.namespace.clone()),
        labels: Some(labels(a)),
        ..Default::default()
    }
}

fn labels(a: &K8sArgs) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "vodlab".to_string()),
        ("app.kubernetes.io/instance".to_string(), a.name.clone()),
    ])
}

fn yaml<T: serde::Serialize>(v: &T) -> Result<String, K8sError> {
    serde_yaml::to_string(v).map_err(|e| K8sError::Yaml(e.to_string()))
}

/// One container of `image` running the entrypoint in `mode`.
fn container(a: &K8sArgs, name: &str, mode: &str, res: Option<ResourceRequirements>) -> Container {
    Container {
        name: name.to_string(),
        image: Some(a.image.clone()),
        // `:latest` would default to Always, which a kind-loaded image fails
        image_pull_policy: Some("IfNotPresent".to_string()),
        args: Some(vec![mode.to_string()]),
        env_from: Some(env_from(a)),
        volume_mounts: Some(vec![VolumeMount {
            name: "results".to_string(),
            mount_path: RESULTS_MOUNT.to_string(),
            ..Default::default()
        }]),
        resources: res,
        ..Default::default()
    }
}

/// The ConfigMap, and the object store's credentials when given.
fn env_from(a: &K8sArgs) -> Vec<EnvFromSource> {
    let mut v = vec![EnvFromSource {
        config_map_ref: Some(ConfigMapEnvSource {
            name: format!("{}-config", a.name),
            optional: Some(false),
        }),
        ..Default::default()
    }];
    if let Some(secret) = &a.s3_secret {
        v.push(EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: secret.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        });
    }
    v
}

fn volume(r: &Results) -> Volume {
    let mut v = Volume {
        name: "results".to_string(),
        ..Default::default()
    };
    match r {
        Results::Pvc(claim) => {
            v.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: Some(false),
            })
        }
        Results::HostPath(dir) => {
            v.host_path = Some(HostPathVolumeSource {
                path: dir.clone(),
                type_: Some("DirectoryOrCreate".to_string()),
            })
        }
        Results::S3(_) => v.empty_dir = Some(EmptyDirVolumeSource::default()),
    }
    v
}

/// Builds the manifests; `now_unix` is the wall clock (Unix seconds) the
/// ConfigMap's start time is counted from (apply.sh recounts it at apply time).
pub fn manifests(a: &K8sArgs, now_unix: u64) -> Result<Manifests, K8sError> {
    ensure!(
        (1..=MAX_SHARDS).contains(&a.shards),
        "--shards {}: give 1 to {MAX_SHARDS}",
        a.shards
    );
    vodlab_client::config::parse_target(&a.target).map_err(K8sError::Invalid)?;
    ensure!(
        is_dns_label(&a.namespace),
        "--namespace `{}`: lower-case letters, digits and `-`, at most 63",
        a.namespace
    );
    ensure!(
        is_dns_label(&a.name) && a.name.len() <= 40,
        "--name `{}`: lower-case letters, digits and `-`, at most 40 (the objects add suffixes)",
        a.name
    );
    ensure!(!a.image.is_empty(), "--image: empty");
    ensure!(
        !a.workload_path.is_empty() && !a.workload_path.contains(char::is_whitespace),
        "--workload-path `{}`: a path inside the container, without spaces",
        a.workload_path
    );
    ensure!(
        (1..=86_400).contains(&a.start_delay),
        "--start-delay {}: give 1 to 86400 seconds",
        a.start_delay
    );
    if let Some(d) = a.duration {
        ensure!(d.is_finite() && d > 0.0, "--duration {d}: must be > 0");
    }
    let results = parse_results(&a.results)?;
    if !matches!(results, Results::S3(_)) {
        ensure!(
            a.s3_endpoint.is_none() && a.s3_secret.is_none(),
            "--s3-endpoint and --s3-secret go with --results s3:URL"
        );
    }
    if let Some(secret) = &a.s3_secret {
        ensure!(
            is_dns_label(secret),
            "--s3-secret `{secret}`: not a Secret name"
        );
    }
    if let Some(e) = &a.s3_endpoint {
        ensure!(
            (e.starts_with("http://") || e.starts_with("https://"))
                && !e.contains(char::is_whitespace),
            "--s3-endpoint `{e}`: an http(s) URL"
        );
    }
    let args = run_args(a)?;
    let timeout = a
        .merge_timeout
        .unwrap_or_else(|| a.start_delay + a.duration.map_or(3_600, |d| d.ceil() as u64) + 600);
    ensure!(timeout > 0, "--merge-timeout: must be > 0");
    let n = a.shards as i32;
    let mut files = Vec::new();

    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(a.namespace.clone()),
            labels: Some(labels(a)),
            ..Default::default()
        },
        ..Default::default()
    };
    files.push(("namespace.yaml".to_string(), yaml(&ns)?));

    if let Results::Pvc(claim) = &results {
        let pvc = PersistentVolumeClaim {
            metadata: meta(a, claim.clone()),
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteMany".to_string()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(a.pvc_size.clone()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        files.push(("pvc.yaml".to_string(), yaml(&pvc)?));
    }

    let mut data = BTreeMap::from([
        ("VODLAB_NAME".to_string(), a.name.clone()),
        ("VODLAB_SHARDS".to_string(), a.shards.to_string()),
        ("VODLAB_TARGET".to_string(), a.target.clone()),
        ("VODLAB_WORKLOAD".to_string(), a.workload_path.clone()),
        ("VODLAB_RESULTS".to_string(), RESULTS_MOUNT.to_string()),
        ("VODLAB_RUN_ARGS".to_string(), args.join(" ")),
        ("VODLAB_START_DELAY".to_string(), a.start_delay.to_string()),
        (
            "VODLAB_START_AT".to_string(),
            (now_unix + a.start_delay).to_string(),
        ),
        ("VODLAB_MERGE_TIMEOUT".to_string(), timeout.to_string()),
    ]);
    if let Results::S3(url) = &results {
        data.insert("VODLAB_RESULTS_URL".to_string(), url.clone());
        if let Some(e) = &a.s3_endpoint {
            data.insert("VODLAB_S3_ENDPOINT".to_string(), e.clone());
        }
    }
    let cm = ConfigMap {
        metadata: meta(a, format!("{}-config", a.name)),
        data: Some(data),
        ..Default::default()
    };
    files.push(("config.yaml".to_string(), yaml(&cm)?));

    let requests = ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity(a.cpu.clone())),
            ("memory".to_string(), Quantity(a.memory.clone())),
        ])),
        ..Default::default()
    };
    let shards = Job {
        metadata: meta(a, format!("{}-shards", a.name)),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".to_string()),
            completions: Some(n),
            parallelism: Some(n),
            // a failed shard is not retried (its start time has passed) and
            // does not end the others: the merge names it missing
            backoff_limit_per_index: Some(0),
            max_failed_indexes: Some(n),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(a)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_string()),
                    containers: vec![container(a, "shard", "shard", Some(requests))],
                    volumes: Some(vec![volume(&results)]),
                    // one shard per node where the cluster has nodes to spare
                    topology_spread_constraints: Some(vec![TopologySpreadConstraint {
                        max_skew: 1,
                        topology_key: "kubernetes.io/hostname".to_string(),
                        when_unsatisfiable: "ScheduleAnyway".to_string(),
                        label_selector: Some(LabelSelector {
                            match_labels: Some(BTreeMap::from([(
                                "batch.kubernetes.io/job-name".to_string(),
                                format!("{}-shards", a.name),
                            )])),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    files.push(("shards-job.yaml".to_string(), yaml(&shards)?));

    let merge = Job {
        metadata: meta(a, format!("{}-merge", a.name)),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(timeout as i64 + 600),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(a)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_string()),
                    init_containers: Some(vec![container(a, "wait", "wait", None)]),
                    containers: vec![container(a, "merge", "merge", None)],
                    volumes: Some(vec![volume(&results)]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    files.push(("merge-job.yaml".to_string(), yaml(&merge)?));
    let location = match &results {
        Results::S3(url) => url.clone(),
        _ => RESULTS_MOUNT.to_string(),
    };
    files.push(("apply.sh".to_string(), apply_script(a, &files, &location)));
    Ok(Manifests { files })
}

/// apply.sh: sets the start time to now + delay (the barrier counted from
/// apply, not from `vodlab k8s`), replaces an earlier run's Jobs and applies.
fn apply_script(a: &K8sArgs, files: &[(String, String)], results: &str) -> String {
    let has_pvc = files.iter().any(|(f, _)| f == "pvc.yaml");
    let ns = &a.namespace;
    let name = &a.name;
    format!(
        r#"#!/bin/sh
# Applies a split vodlab run (written by `vodlab k8s`; docs/scale-out.md).
# The shards start together at now + VODLAB_START_DELAY, counted here, at
# apply time. KUBECTL overrides the kubectl command.
set -eu
cd "$(dirname "$0")"
kubectl=${{KUBECTL:-kubectl}}
delay=${{VODLAB_START_DELAY:-{delay}}}
start=$(( $(date +%s) + delay ))
$kubectl apply -f namespace.yaml{pvc}
# Jobs are immutable: an earlier run's go first (their results stay on the volume)
$kubectl -n {ns} delete job {name}-shards {name}-merge --ignore-not-found
sed -e "s/^  VODLAB_START_AT: .*/  VODLAB_START_AT: '$start'/" \
    -e "s/^  VODLAB_START_DELAY: .*/  VODLAB_START_DELAY: '$delay'/" config.yaml | $kubectl apply -f -
$kubectl apply -f shards-job.yaml -f merge-job.yaml
echo "shards start at $start ($(date -u -d "@$start" 2>/dev/null || echo "in $delay s")); results: {results}/{name}-$start/merged"
echo "follow: $kubectl -n {ns} get pods -l app.kubernetes.io/instance={name} -w"
"#,
        delay = a.start_delay,
        pvc = if has_pvc { " -f pvc.yaml" } else { "" },
    )
}

/// Writes the manifests into `dir` (apply.sh executable).
pub fn write(dir: &Path, m: &Manifests) -> Result<(), K8sError> {
    let io = |what: String| move |source| K8sError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    for (f, text) in &m.files {
        let p = dir.join(f);
        std::fs::write(&p, text).map_err(io(format!("writing {}", p.display())))?;
        if f.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .map_err(io(format!("chmod {}", p.display())))?;
        }
    }
    Ok(())
}
