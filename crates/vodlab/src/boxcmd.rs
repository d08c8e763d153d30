//! `vodlab box`: run a command on emulated hardware (a cgroup with a memory
//! limit that includes the page cache and a throttled block device).

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use vodlab_lab::hwbox::{self, parse_size, BoxSpec, Dev, HwBox, Profile};

/// Hardware settings shared by `box` and `compare`.
#[derive(Debug, Clone, Args)]
pub struct HwArgs {
    /// Disk to emulate: hdd-5400, hdd-7200 or ssd (docs/experiments.md
    /// lists the numbers and their sources). Without it only --mem and the
    /// explicit limits apply.
    #[arg(long)]
    pub profile: Option<String>,
    /// Memory limit, page cache included (K, M, G suffixes).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub mem: Option<u64>,
    /// The block device to throttle is the one holding this path
    /// (default: the current directory).
    #[arg(long, value_name = "PATH")]
    pub device_of: Option<PathBuf>,
    /// Read bytes/s limit (overrides the profile's).
    #[arg(long, value_parser = parse_size, value_name = "BYTES")]
    pub read_bps: Option<u64>,
    /// Read operations/s limit (overrides the profile's).
    #[arg(long, value_name = "IOPS")]
    pub read_iops: Option<u64>,
    /// Device read-ahead while the box lives, KiB (profiles set 128, Linux's
    /// default for a disk; `keep` leaves the device's own). Restored after.
    #[arg(long, value_name = "KIB|keep")]
    pub readahead_kb: Option<String>,
}

impl HwArgs {
    /// The profile, if named.
    pub fn profile(&self) -> anyhow::Result<Option<Profile>> {
        Ok(match &self.profile {
            Some(p) => Some(hwbox::profile(p)?),
            None => None,
        })
    }

    /// The box these settings describe, named `name`.
    pub fn spec(&self, name: &str, default_path: &std::path::Path) -> anyhow::Result<BoxSpec> {
        let p = self.profile()?;
        let read_bps = self.read_bps.or(p.map(|p| p.read_bps));
        let read_iops = self.read_iops.or(p.map(|p| p.read_iops));
        let readahead_kb = match self.readahead_kb.as_deref() {
            Some("keep") => None,
            Some(v) => Some(
                v.parse::<u32>()
                    .with_context(|| format!("--readahead-kb `{v}`: give KiB or `keep`"))?,
            ),
            None => p.map(|p| p.readahead_kb),
        };
        let needs_dev = read_bps.is_some() || read_iops.is_some() || readahead_kb.is_some();
        let device = if needs_dev {
            let path = self.device_of.as_deref().unwrap_or(default_path);
            Some(Dev::of_path(path)?)
        } else {
            None
        };
        anyhow::ensure!(
            self.mem.is_some() || needs_dev,
            "the box has no limits: give --profile, --mem, --read-bps or --read-iops"
        );
        Ok(BoxSpec {
            name: name.to_string(),
            mem_bytes: self.mem,
            device,
            read_bps,
            read_iops,
            readahead_kb,
        })
    }
}

/// Arguments of `vodlab box`.
#[derive(Debug, Args)]
pub struct BoxArgs {
    #[command(flatten)]
    pub hw: HwArgs,
    /// Cgroup name.
    #[arg(long, default_value = "vodlab-box")]
    pub name: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// One line describing a box.
pub fn describe(b: &HwBox) -> String {
    let s = &b.spec;
    let mut parts = vec![format!("cgroup {} {}", b.cgroups.version(), s.name)];
    if let Some(m) = s.mem_bytes {
        parts.push(format!("memory {} MiB (page cache included)", m >> 20));
    }
    if let Some(d) = s.device {
        let mut t = format!("device {d}");
        if let Some(v) = s.read_bps {
            t += &format!(" reads {:.1} MB/s", v as f64 / 1e6);
        }
        if let Some(v) = s.read_iops {
            t += &format!(" {v} IOPS");
        }
        if let Some(v) = s.readahead_kb {
            t += &format!(" read-ahead {v} KiB");
        }
        parts.push(t);
    }
    parts.join(", ")
}

pub fn run(a: BoxArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let spec = a.hw.spec(&a.name, &cwd)?;
    let mut b = HwBox::create(spec)?;
    eprintln!(
        "vodlab box: {} (limits read back and verified)",
        describe(&b)
    );
    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]);
    b.command(&mut cmd);
    let before = b.usage()?;
    let t = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", a.command[0]))?;
    // the child shares our terminal and process group, so Ctrl-C reaches it;
    // we ignore it (after the spawn, so the child does not inherit that) and
    // tear the box down once the child has ended
    // SAFETY: changes this process's SIGINT disposition only
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let status = child.wait()?;
    let secs = t.elapsed().as_secs_f64();
    let after = b.usage()?;
    let read = after.read_bytes.saturating_sub(before.read_bytes);
    let ios = after.read_ios.saturating_sub(before.read_ios);
    eprintln!(
        "vodlab box: {} after {secs:.1} s; device reads {:.1} MB ({:.1} MB/s, {ios} reads{}), CPU {}, memory peak {}",
        status,
        read as f64 / 1e6,
        read as f64 / 1e6 / secs.max(1e-9),
        if ios > 0 { format!(", {:.0} KiB each", read as f64 / ios as f64 / 1024.0) } else { String::new() },
        after.cpu_ns.map_or("n/a".into(), |c| format!("{:.2} s", c.saturating_sub(before.cpu_ns.unwrap_or(0)) as f64 / 1e9)),
        after.memory_peak_bytes.map_or("n/a".into(), |m| format!("{} MiB", m >> 20)),
    );
    b.teardown()?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        None => ExitCode::from(1),
    })
}
