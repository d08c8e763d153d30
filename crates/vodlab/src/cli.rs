//! Command-line surface: clap definitions and dispatch.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// vodlab: how many viewers can this server stream to without stalling them?
///
/// New here? `vodlab bench` measures the embedded server end to end in a few
/// minutes. The parts: build a streaming workload (`gen`), write the files a
/// server streams (`fileset`), replay the workload against a server (`run`),
/// find its capacity (`capacity`), emulate hardware (`box`), compare servers
/// (`compare`), draw the figures (`report`), serve video (`serve`), convert
/// session scripts (`script`). See docs/ in the repository for the formats and
/// the method.
#[derive(Debug, Parser)]
#[command(name = "vodlab", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start here: build a small youtube-2011 workload, write its files to a
    /// temporary directory, start the embedded reference server, find how many
    /// new sessions per second it serves without a failed session (a few
    /// minutes), print the answer and write an HTML report.
    ///
    /// As root with /dev/fuse it runs the disk experiment instead: the
    /// youtube-2011-unchunked file set on an emulated 10,000 rpm drive
    /// (ch3-sas-10k) in a 490 MiB box, vodlab serve (ASAP) against nginx
    /// from a cold cache, in about 4-5 minutes (measured here: ASAP 20/s,
    /// nginx 12-13/s). --cached forces the page-cache smoke test.
    ///
    /// Its viewers are unpaced (each fetches its chunks back to back), so
    /// the answer is how sequentially each server reads the drive under
    /// concurrency, not the failure-free rate of paced viewers: that one
    /// needs real time and 30 minutes or more here (docs/experiments.md,
    /// "Why the root bench stays unpaced").
    ///
    /// Examples:
    ///   vodlab bench
    ///   vodlab bench --servers vodlab-asap,vodlab-vanilla,nginx
    ///   vodlab bench --io vanilla -o results/bench-vanilla
    ///   vodlab bench --scale 0.05 --window 30 --repeats 3
    #[command(verbatim_doc_comment)]
    Bench(crate::bench::BenchArgs),
    /// Construct a workload: catalog, session scripts and statistics.
    ///
    /// Examples:
    ///   vodlab gen --list-presets
    ///   vodlab gen --preset youtube-2011 --seed 1 -o work/yt
    ///   vodlab gen --preset youtube-2011 --scale 0.1 -o work/small
    ///   vodlab gen --spec my-workload.toml --shards 4 -o work/mine
    ///   vodlab gen --show-preset cloudsuite-2016 > my-workload.toml
    #[command(verbatim_doc_comment)]
    Gen(crate::gen::GenArgs),
    /// Write, verify, warm, cool and read the files a workload streams.
    #[command(subcommand)]
    Fileset(crate::fileset::FilesetCommand),
    /// Replay a workload against an HTTP server, as viewers would.
    ///
    /// Sessions arrive open-loop (Poisson by default) and each replays its
    /// script over persistent connections with pacing, per-request timeouts and
    /// its client class's emulated access link. A session fails when a request
    /// misses its deadline. Results: results.json (docs/run.md, schema docs/results.schema.json), summary.txt.
    /// Each result file is replaced atomically; one that cannot be written (a
    /// full disk) keeps its previous content and the run exits 4 (docs/results.md).
    ///
    /// Examples:
    ///   vodlab run work/yt --target http://127.0.0.1:8080 --rate 10 -o results/yt-10
    ///   vodlab run work/yt --target http://127.0.0.1:8080 --steps 300:5,300:10 --strict
    ///   vodlab run s.vsl --target http://[::1]:8080 --rate 2 --no-shaping --requests-csv
    ///   vodlab run work/yt --target http://10.0.0.5:8080 --allow-remote --rate 40 --shard 0/4 --start-at 2025-01-31T12:00:00Z -o results/s0
    ///   vodlab run work/yt --target https://localhost:8443 --protocol h2 --ca ca.pem --rate 10
    ///   vodlab run work/yt --target https://localhost:8443 --protocol h3 --ca ca.pem --rate 10 --no-shaping
    ///   vodlab run work/yt --target https://localhost:8443 --protocol h3 --ca ca.pem --rate 10 --link-loss 2 --link-jitter 5ms
    ///   vodlab run work/yt --target http://127.0.0.1:8080 --protocol h2c --h2-window-bits 16 --rate 10
    ///   vodlab run --timing-script bbc.txt --clients 91 --stagger 1000 --target http://127.0.0.1:8080 --protocol h2c
    ///   vodlab run work/dash --target http://127.0.0.1:8080 --rate 5 --player dash --abr dynamic
    ///   vodlab run work/dash --target http://127.0.0.1:8080 --rate 5 --player hls --abr bba --max-buffer 30 --p1203
    ///   vodlab run work/dash --target http://127.0.0.1:8080 --rate 5 --player dash --player-timelines 20 -o results/dash
    ///   vodlab run work/dash --target https://localhost:8443 --protocol h3 --ca ca.pem --rate 5 --player dash --no-shaping
    ///   vodlab run work/many --target http://127.0.0.1:8080 --rate 1000 --no-shaping --client-processes 6 --source-address 127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4 -o results/100k
    #[command(verbatim_doc_comment)]
    Run(crate::run::RunArgs),
    /// Merge the results of a run split over processes or hosts (`vodlab run
    /// --shard I/N`) exactly: counts and bytes summed, HdrHistograms added
    /// (never percentiles averaged), per-interval series aligned by
    /// wall-clock time. The merged run is invalid when a shard was (named),
    /// incomplete when a shard was or is missing (named); the shards' start
    /// skew is reported (docs/scale-out.md).
    ///
    /// Examples:
    ///   vodlab merge results/s0 results/s1 results/s2 results/s3 -o results/merged
    ///   vodlab merge results/s* -o results/merged --strict
    #[command(verbatim_doc_comment)]
    Merge(crate::merge::MergeArgs),
    /// Rebuild sessions, chains and phases from access logs, as chapter 5
    /// of the thesis does for Netflix's: requests and bytes by form (Table
    /// 5.2), parallel requests per file (5.3), chains by form (5.4), chain
    /// lengths with a piecewise power-law survival fit and growth factor
    /// d/x, and phase shares. Reads `vodlab serve --access-log`, nginx with
    /// the `vodlab_analyze` log_format (--print-nginx-format), or CSV, one
    /// line at a time (docs/analyze.md).
    ///
    /// Examples:
    ///   vodlab analyze access.log
    ///   vodlab analyze nginx-access.log --workload work/yt -o analysis/
    ///   vodlab analyze trace.csv --chain-window 60 --fit-breaks 1e6,2e8 --survival-p 0.45
    ///   vodlab analyze --print-nginx-format
    #[command(verbatim_doc_comment)]
    Analyze(crate::analyze::AnalyzeArgs),
    /// Kubernetes manifests for a run split over pods: an Indexed Job (pod I
    /// runs `vodlab run --shard I/N`), a start time in a ConfigMap set at
    /// apply time, a results volume, and a merge Job (docs/scale-out.md).
    ///
    /// Examples:
    ///   vodlab k8s --shards 8 --target http://vod.default.svc:8080 --workload-path /workload --rate 400 -o k8s/
    ///   vodlab k8s --shards 2 --target http://172.18.0.1:8080 --workload-path /workload --rate 20 --results hostpath:/var/vodlab -o k8s/ -- --no-pacing
    #[command(verbatim_doc_comment)]
    K8s(crate::k8s::K8sArgs),
    /// Serve a directory over HTTP/1.1, HTTP/2 and (with --h3) HTTP/3, built
    /// for video: sendfile, byte ranges, and ASAP prefetching (docs/serve.md).
    ///
    /// Examples:
    ///   vodlab serve --root /srv/video --listen 127.0.0.1:8080
    ///   vodlab serve --root /srv/video --io vanilla --access-log access.log
    ///   vodlab serve --root /srv/video --listen 127.0.0.1:8443 --tls-self-signed --tls-cert-out ca.pem --h3
    ///   vodlab serve --root /srv/video --listen 127.0.0.1:8443 --tls-self-signed --h3 --pace 1.5 --default-bitrate 4000
    ///   vodlab serve --root /srv/video --listen 127.0.0.1:8080 --workers 4 --max-connections 19000
    #[command(verbatim_doc_comment)]
    Serve(Box<crate::serve::ServeArgs>),
    /// Find the highest session rate a server sustains: step the rate up until
    /// the criterion trips, then bisect (thesis 4.4.3). Every point is a real
    /// run; capacity.json keeps each point with its runs (docs/experiments.md).
    ///
    /// Examples:
    ///   vodlab capacity work/yt --target http://127.0.0.1:8080 -o results/cap
    ///   vodlab capacity work/yt --target http://127.0.0.1:8080 --step +2 --start 2 --repeats 3
    ///   vodlab capacity work/yt --target http://127.0.0.1:8080 --criterion qoe:5:2 --window 120
    ///   vodlab capacity work/yt --target http://127.0.0.1:8080 --cool /srv/yt --no-pacing
    #[command(verbatim_doc_comment)]
    Capacity(crate::capacity::CapacityArgs),
    /// Run a command on emulated hardware: a cgroup memory limit that
    /// includes the page cache, and a block device throttled in bytes/s and
    /// reads/s (cgroup v2 or v1). Needs root. Limits are read back before the
    /// command starts; the box is removed when it ends.
    ///
    /// Examples:
    ///   vodlab box --throttle-profile hdd-5400 --mem 1G --device-of /srv/yt -- vodlab serve --root /srv/yt
    ///   vodlab box --mem 512M --read-bps 60M --read-iops 120 -- vodlab fileset seqread work/yt --root /srv/yt
    #[command(verbatim_doc_comment)]
    Box(crate::boxcmd::BoxArgs),
    /// Compare servers on one workload, each in the same box from a cold
    /// cache: vodlab serve (vanilla, asap), nginx, apache2, lighttpd; failure-free
    /// rate, disk throughput, read size and time, CPU per GB, and the
    /// sequential-read bound (docs/experiments.md).
    ///
    /// Examples:
    ///   vodlab compare work/yt --root /srv/yt --throttle-profile hdd-5400 --mem 1G -o results/cmp
    ///   vodlab compare work/yt --root /srv/yt --servers vodlab-asap,nginx --no-pacing --window 30
    #[command(verbatim_doc_comment)]
    Compare(crate::compare::CompareArgs),
    /// A network lab on this machine (root): a namespace for the server and
    /// one per client host, joined by veth pairs on a bridge, links shaped
    /// in the kernel with htb (no delay or loss: this kernel has no netem).
    /// Nothing is configured outside the lab's namespaces (docs/lab.md).
    ///
    /// Examples:
    ///   vodlab lab run --server-egress 100mbit --port 8080 --server 'vodlab serve --root /srv/v --listen 10.77.0.1:8080' --client 'curl -so /dev/null http://10.77.0.1:8080/a.mp4'
    ///   vodlab lab up --clients 4 --client-down 8mbit && vodlab lab exec client-2 -- ip addr
    ///   vodlab lab down
    #[command(subcommand, verbatim_doc_comment)]
    Lab(crate::lab::LabCommand),
    /// An emulated disk: a workload's file set served through FUSE with a
    /// seek, rotation and transfer model, without disk space (docs/disk.md).
    ///
    /// Examples:
    ///   vodlab disk mount work/yt /mnt/yt --disk-profile hitachi-5k3000
    ///   vodlab disk mount work/yt /mnt/yt --disk-profile st1000dm003 --time-compression 10 --stats disk.json
    ///   vodlab disk profiles
    #[command(subcommand, verbatim_doc_comment)]
    Disk(crate::disk::DiskCommand),
    /// Render results (compare.json, capacity.json, results.json) into one
    /// self-contained HTML file with SVG figures: throughput and failures
    /// against load, response-time CDFs and box plots by client class,
    /// per-interval series, per-request response times, stalls, start-up delays.
    /// Also thesis chapter 5's outputs: `vodlab analyze -o DIR` (Tables 5.2-5.4
    /// beside the thesis's, chain-length survival with its power-law fit,
    /// phase shares) and `vodlab simulate --prefetch --sweep ... --out DIR`
    /// (peak utilisation against peak memory per policy, Figs 5.22-5.23).
    ///
    /// Examples:
    ///   vodlab report results/cmp
    ///   vodlab report results/cmp-2mb results/cmp-unchunked -o report.html
    ///   vodlab report analysis/ sim/ -o chapter5.html
    #[command(verbatim_doc_comment)]
    Report(crate::report::ReportArgs),
    /// Check, summarise and export session scripts.
    #[command(subcommand)]
    Script(crate::script::ScriptCommand),
    /// Run the client's own code in virtual time. `--player`: one ABR player
    /// (throughput, bola, bba, dynamic, bolae, dynamicdash) over a bandwidth trace, in
    /// the movie and trace formats of the Sabre simulator; one JSON line per
    /// segment, then a summary line (docs/abr.md). `--prefetch`: chapter 5's
    /// prefetch policies (fixed, proportional, sqrt, first-grow,
    /// first-grow-sr; the controllers `vodlab serve` runs) over an access
    /// log's chains: peak disk utilisation and memory per policy
    /// (docs/simulate.md).
    ///
    /// Examples:
    ///   vodlab simulate --player --abr bola --movie movie.json --trace trace.json
    ///   vodlab simulate --player --abr dynamic --movie movie.json --trace trace.json --summary-only
    ///   vodlab simulate --player --abr throughput --max-buffer 60 --half-life 2,5 --no-abandon --movie m.json --trace t.json
    ///   vodlab simulate --player --abr bba --reservoir 5 --cushion 10 --movie m.json --trace t.json --p1203 p1203.json
    ///   vodlab simulate --prefetch --log access.log --policy fixed:7MB --policy first-grow-sr:16MB
    ///   vodlab simulate --prefetch --log trace.csv --workload work/nf --drives 36 --sweep 1MB,4MB,7MB,16MB -o sim/
    #[command(verbatim_doc_comment)]
    Simulate(crate::simulate::SimulateArgs),
    /// Record a real player: dash.js (or hls.js, --player hls) in headless
    /// Chromium plays a real-media file set (`fileset create --media real`)
    /// through Chromium's network emulation or a `vodlab lab` host's kernel-
    /// shaped link (--netns); writes what it requested as a vodlab session
    /// script and an h2load timing script, plus the player's metrics
    /// (docs/record.md).
    ///
    /// Examples:
    ///   vodlab record --root /srv/tiny --duration 30s --down-kbps 3500 --latency-ms 20 -o rec
    ///   vodlab record --player hls --root /srv/tiny --duration 30s --down-kbps 3500 -o rec-hls
    ///   vodlab record --root /srv/tiny --cmcd header --duration 30s -o rec-cmcd   # dash.js's CMCD on
    ///   vodlab record --netns vl-lab-c0 --target http://10.77.0.1:8080 --manifest /t00000/manifest.mpd -o rec-lab
    ///   vodlab run rec/recording.vsl --target http://127.0.0.1:8080 --check-bytes 0 --late-pacing burst
    #[command(verbatim_doc_comment)]
    Record(crate::record::RecordArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Gen(a) => crate::gen::run(a),
        Command::Fileset(c) => crate::fileset::run(c),
        Command::Run(a) => crate::run::run(a),
        Command::Merge(a) => crate::merge::run(a),
        Command::Analyze(a) => crate::analyze::run(a),
        Command::K8s(a) => crate::k8s::run(a),
        Command::Serve(a) => crate::serve::run(*a),
        Command::Script(c) => crate::script::run(c),
        Command::Capacity(a) => crate::capacity::run(a),
        Command::Box(a) => crate::boxcmd::run(a),
        Command::Bench(a) => crate::bench::run(a),
        Command::Report(a) => crate::report::run(a),
        Command::Compare(a) => crate::compare::run(a),
        Command::Lab(c) => crate::lab::run(c),
        Command::Disk(c) => crate::disk::run(c),
        Command::Simulate(a) => crate::simulate::run(a),
        Command::Record(a) => crate::record::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::PathBuf;

    fn parse(args: &[&str]) -> Command {
        Cli::try_parse_from(std::iter::once("vodlab").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .command
    }

    fn long_help(path: &[&str]) -> String {
        let mut c = Cli::command();
        for p in path {
            c = c.find_subcommand(p).expect(p).clone();
        }
        c.render_long_help().to_string()
    }

    #[test]
    fn out_is_o_everywhere_and_output_still_works() {
        for flag in ["-o", "--out", "--output"] {
            let Command::Merge(m) = parse(&["merge", "a", flag, "d"]) else {
                panic!()
            };
            assert_eq!(m.output, PathBuf::from("d"));
            let Command::Analyze(a) = parse(&["analyze", "x.log", flag, "d"]) else {
                panic!()
            };
            assert_eq!(a.output, Some(PathBuf::from("d")));
            let Command::Record(r) = parse(&["record", "--root", ".", flag, "d"]) else {
                panic!()
            };
            assert_eq!(r.output, PathBuf::from("d"));
            let Command::Script(crate::script::ScriptCommand::Export { output, .. }) =
                parse(&["script", "export", "w", "--to", "httperf", flag, "d"])
            else {
                panic!()
            };
            assert_eq!(output, PathBuf::from("d"));
            let Command::Simulate(s) = parse(&["simulate", "--prefetch", flag, "d"]) else {
                panic!()
            };
            assert_eq!(s.prefetch_args.out, Some(PathBuf::from("d")));
        }
        for cmd in [
            &["merge"][..],
            &["analyze"],
            &["record"],
            &["k8s"],
            &["script", "export"],
            &["simulate"],
        ] {
            let h = long_help(cmd);
            assert!(h.contains("-o, --out <"), "{cmd:?}: {h}");
            assert!(!h.contains("--output <"), "{cmd:?} shows the old name: {h}");
        }
    }

    #[test]
    fn record_cmcd_is_off_query_when_bare_or_the_mode_named() {
        use vodlab_lab::record::RecordCmcd;
        let cmcd = |extra: &[&str]| {
            let mut a = vec!["record", "--root", "."];
            a.extend_from_slice(extra);
            a.extend_from_slice(&["-o", "d"]);
            let Command::Record(r) = parse(&a) else {
                panic!()
            };
            r.cmcd
        };
        assert_eq!(cmcd(&[]), None);
        assert_eq!(cmcd(&["--cmcd"]), Some(RecordCmcd::Query));
        assert_eq!(cmcd(&["--cmcd", "query"]), Some(RecordCmcd::Query));
        assert_eq!(cmcd(&["--cmcd", "header"]), Some(RecordCmcd::Header));
        assert!(long_help(&["record"]).contains("--cmcd [<query|header>]"));
    }

    #[test]
    fn renamed_flags_keep_their_old_names_hidden() {
        for old in [
            ["--seconds", "45"],
            ["--duration", "45"],
            ["--duration", "45s"],
        ] {
            let Command::Record(r) = parse(&["record", "--root", ".", old[0], old[1], "-o", "d"])
            else {
                panic!()
            };
            assert_eq!(r.seconds, 45.0, "{old:?}");
        }
        for flag in ["--profile", "--throttle-profile"] {
            let Command::Box(b) = parse(&["box", flag, "hdd-5400", "--", "true"]) else {
                panic!()
            };
            assert_eq!(b.hw.profile.as_deref(), Some("hdd-5400"));
        }
        for flag in ["--profile", "--disk-profile"] {
            let Command::Disk(crate::disk::DiskCommand::Mount(m)) =
                parse(&["disk", "mount", "w", "/mnt", flag, "nvme"])
            else {
                panic!()
            };
            assert_eq!(m.profile.as_deref(), Some("nvme"));
        }
        for flag in ["--h2-max-streams", "--h2-max-concurrent-streams"] {
            let Command::Serve(s) = parse(&["serve", "--root", "/srv", flag, "64"]) else {
                panic!()
            };
            assert_eq!(s.proto.h2_max_streams, 64);
        }
        let h = long_help(&["record"]);
        assert!(
            h.contains("--duration <DURATION>") && !h.contains("--seconds <"),
            "{h}"
        );
        let h = long_help(&["box"]);
        assert!(h.contains("--throttle-profile <PROFILE>"), "{h}");
        assert!(!h.contains("--profile <"), "{h}");
        let h = long_help(&["disk", "mount"]);
        assert!(h.contains("--disk-profile <NAME|FILE>"), "{h}");
        assert!(!h.contains("--profile <"), "{h}");
        let h = long_help(&["serve"]);
        assert!(h.contains("--h2-max-concurrent-streams <N>"), "{h}");
        assert!(!h.contains("--h2-max-streams <"), "{h}");
    }

    #[test]
    fn sizes_rates_and_durations_share_one_grammar() {
        let Command::Box(b) = parse(&[
            "box",
            "--mem",
            "1.5G",
            "--read-bps",
            "100MB/s",
            "--",
            "true",
        ]) else {
            panic!()
        };
        assert_eq!(
            (b.hw.mem, b.hw.read_bps),
            (Some(3 << 29), Some(100_000_000))
        );
        let Command::Box(b) = parse(&["box", "--mem", "512M", "--read-bps", "60M", "--", "true"])
        else {
            panic!()
        };
        assert_eq!((b.hw.mem, b.hw.read_bps), (Some(512 << 20), Some(60 << 20)));
        let Command::Box(b) = parse(&["box", "--read-bps", "800Mbit", "--", "true"]) else {
            panic!()
        };
        assert_eq!(b.hw.read_bps, Some(100_000_000));
        let e = Cli::try_parse_from(["vodlab", "box", "--mem", "4X", "--", "true"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`4X`: not a size") && e.contains("4M = 4MiB"),
            "{e}"
        );
        let e = Cli::try_parse_from(["vodlab", "box", "--read-bps", "55mbps", "--", "true"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ambiguous"), "{e}");
        let Command::Lab(crate::lab::LabCommand::Up(s)) = parse(&[
            "lab",
            "up",
            "--server-egress",
            "1Gbit",
            "--client-down",
            "55MB/s",
        ]) else {
            panic!()
        };
        assert_eq!(
            (s.server_egress.map(|r| r.0), s.client_down.map(|r| r.0)),
            (Some(1_000_000_000), Some(440_000_000))
        );
        let Command::Analyze(a) = parse(&[
            "analyze",
            "x.log",
            "--chain-window",
            "1m",
            "--fit-breaks",
            "1MB,2e8",
        ]) else {
            panic!()
        };
        assert_eq!(a.chain_window, Some(60.0));
        assert_eq!(a.fit_breaks, Some(vec![1e6, 2e8]));
        let Command::Simulate(s) = parse(&[
            "simulate",
            "--player",
            "--movie",
            "m",
            "--trace",
            "t",
            "--max-buffer",
            "1m",
            "--half-life",
            "3,8s",
        ]) else {
            panic!()
        };
        assert_eq!((s.max_buffer, s.half_life), (60.0, vec![3.0, 8.0]));
    }
}
