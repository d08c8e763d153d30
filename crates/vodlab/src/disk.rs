//! `vodlab disk mount`: the emulated disk (docs/disk.md, "Mount").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use vodlab_disk::{profile, DiskOptions, Origin, PlacementConfig, Profile, Scheduler, SsdParams};
use vodlab_diskfs::{sys, Ended, FileSet, MountConfig, Report, STATS_FILE};

/// Emulated-disk subcommands.
#[derive(Debug, Subcommand)]
pub enum DiskCommand {
    /// Mount a workload's file set as an emulated drive (FUSE): the paths and
    /// sizes `vodlab fileset create` writes, bytes synthesized on demand (no
    /// disk space), every page-cache miss answered when the modelled drive
    /// has read it. Runs in the foreground; Ctrl-C, SIGTERM or
    /// `fusermount3 -u MOUNTPOINT` unmounts. Statistics: MOUNTPOINT/.vodlab-disk-stats.json
    /// while mounted, --stats FILE every second and at unmount. Needs
    /// /dev/fuse and fusermount3 (Debian: fuse3).
    ///
    /// Examples:
    ///   vodlab disk mount work/yt /mnt/yt --disk-profile hitachi-5k3000
    ///   vodlab disk mount work/yt /mnt/yt --disk-profile st1000dm003 --placement high --scheduler tagged:32 --stats disk.json
    ///   vodlab disk mount work/yt /mnt/yt --disk-profile wd10efrx --time-compression 10
    ///   vodlab disk mount work/yt /mnt/yt --disk-profile my-drive.toml --backing /srv/yt
    ///   vodlab disk mount - /mnt/video --disk-profile st1000dm003 --backing /srv/real-video
    ///   vodlab disk mount work/yt /mnt/yt --zero-time        # the daemon's own speed
    #[command(verbatim_doc_comment)]
    Mount(MountArgs),
    /// List the shipped drive profiles, or print one as TOML (a starting
    /// point for a custom profile file).
    ///
    /// Examples:
    ///   vodlab disk profiles
    ///   vodlab disk profiles hitachi-5k3000 > my-drive.toml
    #[command(verbatim_doc_comment)]
    Profiles {
        /// A shipped profile to print.
        name: Option<String>,
    },
}

/// `vodlab disk mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// A `vodlab gen` directory, or `-` with --backing to serve every file
    /// under the backing directory (path order).
    pub workload: PathBuf,
    /// An existing empty directory. A stale mount left there by a killed
    /// daemon is cleaned first.
    pub mountpoint: PathBuf,
    /// A shipped profile (`vodlab disk profiles`) or a profile TOML file
    /// (`--profile` is an older name).
    #[arg(
        long = "disk-profile",
        alias = "profile",
        value_name = "NAME|FILE",
        required_unless_present = "zero_time"
    )]
    pub profile: Option<String>,
    /// Where the file set sits on the drive: from address 0 (outer, fast
    /// tracks) or ending at the last address (inner, slow).
    #[arg(long, default_value = "low", value_parser = parse_origin)]
    pub placement: Origin,
    /// The drive's queue: fifo, clook (elevator) or tagged:N (the drive
    /// picks the shortest positioning time among the first N).
    #[arg(long, default_value = "clook", value_parser = parse_scheduler)]
    pub scheduler: Scheduler,
    /// Time compression k: every modelled time is divided by k.
    #[arg(long, default_value_t = 1.0, value_name = "K")]
    pub time_compression: f64,
    /// Seed of the platter's initial phase and head position.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Serve real files from DIR through the model: the workload's paths
    /// under DIR, or with WORKLOAD `-`, every regular file under DIR.
    #[arg(long, value_name = "DIR")]
    pub backing: Option<PathBuf>,
    /// Rewrite the statistics (JSON) to FILE every second and at unmount.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// The mount's read-ahead, KiB (default: the profile's
    /// mount_readahead_kib, 128 unless it says otherwise).
    #[arg(long, value_name = "KIB")]
    pub readahead_kib: Option<u32>,
    /// A drive that takes no time (0 latency, unbounded bandwidth), to
    /// measure the daemon itself. Replaces --disk-profile.
    #[arg(long, conflicts_with = "profile")]
    pub zero_time: bool,
    /// FUSE worker threads (default: one per CPU, 2 to 4).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Do not ask fusermount3 to unmount if the daemon dies (tests use it
    /// to leave a stale mount on purpose).
    #[arg(long, hide = true)]
    pub no_auto_unmount: bool,
}

fn parse_origin(s: &str) -> Result<Origin, String> {
    s.parse().map_err(|e: vodlab_disk::DiskError| e.to_string())
}

fn parse_scheduler(s: &str) -> Result<Scheduler, String> {
    s.parse().map_err(|e: vodlab_disk::DiskError| e.to_string())
}

/// A drive on which every read takes no time.
fn zero_time_profile() -> Profile {
    Profile {
        name: "zero-time".into(),
        description: "no latency, unbounded bandwidth: the FUSE daemon's own speed".into(),
        mount_readahead_kib: 128,
        hdd: None,
        ssd: Some(SsdParams {
            capacity_bytes: 1 << 60,
            read_latency_us: 0.0,
            bandwidth_mb_s: 1e12,
            parallelism: 4096,
        }),
    }
}

pub fn run(cmd: DiskCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DiskCommand::Mount(a) => mount(a),
        DiskCommand::Profiles { name: None } => {
            for n in profile::builtin_names() {
                let p = profile::builtin(n)?;
                println!("{n:16} {}", p.description);
            }
            Ok(ExitCode::SUCCESS)
        }
        DiskCommand::Profiles { name: Some(n) } => {
            let p = profile::builtin(&n)?;
            print!("{}", toml::to_string(&p).context("printing the profile")?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn write_stats(path: &Path, r: &Report) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(r)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

fn gib(b: u64) -> f64 {
    b as f64 / 1073741824.0
}

fn mount(a: MountArgs) -> anyhow::Result<ExitCode> {
    let profile = match &a.profile {
        _ if a.zero_time => zero_time_profile(),
        Some(p) => Profile::resolve(p)?,
        None => unreachable!("clap requires --disk-profile or --zero-time"),
    };
    if !(a.time_compression.is_finite() && a.time_compression > 0.0) {
        anyhow::bail!(
            "--time-compression must be a finite number > 0, got {}",
            a.time_compression
        );
    }
    let set = match (a.workload.as_os_str() == "-", &a.backing) {
        (true, Some(dir)) => FileSet::from_dir(dir)?,
        (true, None) => anyhow::bail!("WORKLOAD `-` needs --backing DIR"),
        (false, backing) => {
            let (m, c) = crate::fileset::load(&a.workload)?;
            match backing {
                None => FileSet::from_catalog(&m.name, m.seed, &c),
                Some(dir) => FileSet::from_catalog_backed(&m.name, m.seed, &c, dir)?,
            }
        }
    };
    if !a.mountpoint.is_dir() && !sys::is_stale(&a.mountpoint) {
        anyhow::bail!("{}: not a directory", a.mountpoint.display());
    }
    if sys::clean_stale(&a.mountpoint)? {
        eprintln!(
            "vodlab disk: {} was a stale mount (its daemon died: ENOTCONN); cleaned with {} -u -z",
            a.mountpoint.display(),
            sys::FUSERMOUNT
        );
    }
    let mut cfg = MountConfig::new(profile);
    cfg.options = DiskOptions {
        scheduler: a.scheduler,
        time_compression: a.time_compression,
        seed: a.seed,
        rotation: None,
    };
    cfg.placement = PlacementConfig {
        origin: a.placement,
        ..PlacementConfig::default()
    };
    cfg.readahead_kib = a.readahead_kib;
    cfg.auto_unmount = !a.no_auto_unmount;
    if let Some(t) = a.threads {
        cfg.threads = t;
    }
    let (files, bytes) = (set.files.len(), set.bytes());
    let label = set.label.clone();
    let m = vodlab_diskfs::mount(set, &a.mountpoint, &cfg)?;
    let r = m.report();
    println!(
        "mounted {} files, {:.2} GiB ({label}) at {} on {} (k = {}, {:?}, placement {}: bytes {}..{} of the drive); read-ahead {} KiB (/sys/class/bdi/{}/read_ahead_kb); statistics in {}/{STATS_FILE}; synthesized bytes made with {}; Ctrl-C to unmount",
        files,
        gib(bytes),
        a.mountpoint.display(),
        cfg.profile.name,
        a.time_compression,
        a.scheduler,
        r.mount.placement,
        r.mount.set_start,
        r.mount.set_start + r.mount.set_span,
        m.readahead_kib(),
        m.bdi(),
        a.mountpoint.display(),
        vodlab_diskfs::synth::chosen(),
    );
    let _ = std::io::stdout().flush();
    let stats = a.stats.clone();
    let mut tick = |r: &Report| {
        if let Some(p) = &stats {
            if let Err(e) = write_stats(p, r) {
                eprintln!("vodlab disk: {e:#}");
            }
        }
    };
    let ended = m.wait(&mut tick)?;
    let report = m.unmount().context("unmounting")?;
    if let Some(p) = &a.stats {
        write_stats(p, &report)?;
    }
    let how = match ended {
        Ended::Signal(s) => format!("signal {s}"),
        Ended::Unmounted => "unmounted from outside".to_string(),
    };
    println!(
        "unmounted {} ({how}): {} FUSE reads, {:.1} MiB; drive: {} reads, {:.1} MB/s over {:.1} s of model time, mean read {:.0} KiB in {:.2} ms, {} seeks (mean {:.1} MB), busy {:.0} %",
        a.mountpoint.display(),
        report.fuse.reads,
        report.fuse.bytes as f64 / 1048576.0,
        report.disk.reads,
        report.derived.throughput_mb_s,
        report.disk.elapsed_ns / 1e9,
        report.derived.mean_read_bytes / 1024.0,
        report.derived.mean_service_ms,
        report.disk.seeks,
        report.derived.mean_seek_distance_bytes / 1e6,
        report.derived.busy_fraction * 100.0,
    );
    Ok(ExitCode::SUCCESS)
}
