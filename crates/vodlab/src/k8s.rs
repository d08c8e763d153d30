//! `vodlab k8s`: writes the manifests of a run split over pods and apply.sh
//! (the library makes them: [`vodlab_lab::k8s`]; docs/scale-out.md).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
pub use vodlab_lab::k8s::K8sArgs;
#[cfg(test)]
use vodlab_lab::k8s::*;

/// `vodlab k8s`: writes the manifests and apply.sh.
pub fn run(a: K8sArgs) -> anyhow::Result<std::process::ExitCode> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("clock before 1970")?
        .as_secs();
    let m = vodlab_lab::k8s::manifests(&a, now)?;
    vodlab_lab::k8s::write(&a.output, &m)?;
    for (f, _) in &m.files {
        println!("{}", a.output.join(f).display());
    }
    println!(
        "apply: {}/apply.sh (needs kubectl; the image {} must hold the workload at {} — docs/scale-out.md)",
        a.output.display(),
        a.image,
        a.workload_path
    );
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::PathBuf;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: K8sArgs,
    }

    fn args(extra: &[&str]) -> K8sArgs {
        let mut v = vec![
            "t",
            "--shards",
            "4",
            "--target",
            "http://vod.example:8080",
            "--workload-path",
            "/workload",
            "--rate",
            "40",
            "-o",
            "out",
        ];
        v.extend(extra);
        T::try_parse_from(v).unwrap().a
    }

    fn file<'a>(m: &'a Manifests, f: &str) -> &'a str {
        &m.files.iter().find(|(n, _)| n == f).unwrap().1
    }

    #[test]
    fn indexed_job_has_n_completions_and_the_start_is_now_plus_delay() {
        let m = manifests(&args(&["--start-delay", "90", "--", "--no-pacing"]), 1_000).unwrap();
        let job: serde_yaml::Value = serde_yaml::from_str(file(&m, "shards-job.yaml")).unwrap();
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["apiVersion"], "batch/v1");
        assert_eq!(job["spec"]["completionMode"], "Indexed");
        assert_eq!(job["spec"]["completions"], 4);
        assert_eq!(job["spec"]["parallelism"], 4);
        let cm: serde_yaml::Value = serde_yaml::from_str(file(&m, "config.yaml")).unwrap();
        assert_eq!(cm["data"]["VODLAB_START_AT"], "1090");
        assert_eq!(cm["data"]["VODLAB_RUN_ARGS"], "--rate 40 --no-pacing");
        assert_eq!(
            cm["data"]["VODLAB_MERGE_TIMEOUT"],
            (90 + 3600 + 600).to_string()
        );
        // apply.sh's sed finds the line serde_yaml writes
        assert!(file(&m, "config.yaml").contains("\n  VODLAB_START_AT: '1090'\n"));
        assert!(file(&m, "pvc.yaml").contains("ReadWriteMany"));
    }

    #[test]
    fn hostpath_results_write_no_claim() {
        let m = manifests(&args(&["--results", "hostpath:/var/vodlab"]), 0).unwrap();
        assert!(m.files.iter().all(|(f, _)| f != "pvc.yaml"));
        assert!(file(&m, "merge-job.yaml").contains("path: /var/vodlab"));
        assert!(!file(&m, "apply.sh").contains("pvc.yaml"));
    }

    #[test]
    fn s3_results_use_an_empty_dir_the_url_and_the_secret() {
        let m = manifests(
            &args(&[
                "--results",
                "s3:s3://bucket/runs/",
                "--s3-secret",
                "creds",
                "--s3-endpoint",
                "http://minio:9000",
            ]),
            0,
        )
        .unwrap();
        assert!(m.files.iter().all(|(f, _)| f != "pvc.yaml"));
        let cm: serde_yaml::Value = serde_yaml::from_str(file(&m, "config.yaml")).unwrap();
        assert_eq!(cm["data"]["VODLAB_RESULTS_URL"], "s3://bucket/runs");
        assert_eq!(cm["data"]["VODLAB_S3_ENDPOINT"], "http://minio:9000");
        let job: serde_yaml::Value = serde_yaml::from_str(file(&m, "shards-job.yaml")).unwrap();
        let pod = &job["spec"]["template"]["spec"];
        assert!(pod["volumes"][0]["emptyDir"].is_mapping());
        assert_eq!(
            pod["containers"][0]["envFrom"][1]["secretRef"]["name"],
            "creds"
        );
        let m = manifests(&args(&["--results", "s3:bucket"]), 0).unwrap();
        assert!(file(&m, "config.yaml").contains("VODLAB_RESULTS_URL: s3://bucket\n"));
    }

    #[test]
    fn durations_take_units_and_out_takes_its_old_name() {
        let a = args(&[
            "--start-delay",
            "2m",
            "--merge-timeout",
            "90m",
            "--duration",
            "10m",
        ]);
        assert_eq!(
            (a.start_delay, a.merge_timeout, a.duration),
            (120, Some(5400), Some(600.0))
        );
        let a = args(&["--start-delay", "30", "--duration", "1.5"]);
        assert_eq!((a.start_delay, a.duration), (30, Some(1.5)));
        let parse = |v: &[&str]| T::try_parse_from(v.iter().copied()).map(|t| t.a);
        let base = [
            "t",
            "--shards",
            "1",
            "--target",
            "http://x:1",
            "--workload-path",
            "/w",
        ];
        for o in [["--out", "d"], ["--output", "d"], ["-o", "d"]] {
            let v: Vec<&str> = base.iter().chain(o.iter()).copied().collect();
            assert_eq!(parse(&v).unwrap().output, PathBuf::from("d"), "{o:?}");
        }
        let v: Vec<&str> = base
            .iter()
            .chain(["-o", "d", "--start-delay", "1.5s"].iter())
            .copied()
            .collect();
        assert!(parse(&v).is_err());
    }

    #[test]
    fn bad_input_names_the_flag() {
        let err = |extra: &[&str]| format!("{:#}", manifests(&args(extra), 0).unwrap_err());
        assert!(err(&["--results", "s3:"]).contains("--results"));
        assert!(err(&["--s3-secret", "creds"]).contains("--s3-secret"));
        assert!(err(&["--results", "nfs:x"]).contains("--results"));
        assert!(err(&["--results", "hostpath:rel"]).contains("absolute"));
        assert!(err(&["--namespace", "Big"]).contains("--namespace"));
        assert!(err(&["--", "--shard", "1/2"]).contains("--shard"));
        assert!(err(&["--", "--output=x"]).contains("--output"));
        assert!(err(&["--", "--out", "x"]).contains("--out"));
        assert!(err(&["--", "a b"]).contains("spaces"));
        assert!(err(&["--start-delay", "0"]).contains("--start-delay"));
        let mut a = args(&[]);
        a.shards = 0;
        assert!(format!("{:#}", manifests(&a, 0).unwrap_err()).contains("--shards"));
        a.shards = 2;
        a.rate = None;
        assert!(format!("{:#}", manifests(&a, 0).unwrap_err()).contains("--rate"));
        a.rate = Some(1.0);
        // https is a target the client speaks now; another scheme is not
        a.target = "https://x:8443".into();
        assert!(manifests(&a, 0).is_ok());
        a.target = "ftp://x".into();
        assert!(manifests(&a, 0).is_err());
    }
}
