//! `vodlab disk mount`: the emulated disk (docs/disk.md, "Mount"). The
//! settings and the work are the library's ([`vodlab_diskfs::command`]);
//! this prints.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use vodlab_disk::profile;
pub use vodlab_diskfs::command::MountArgs;
use vodlab_diskfs::command::{MountObserver, MountedSet, StatsError};
use vodlab_diskfs::sys;

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

/// Prints what the mount reports.
struct Printer<'a>(&'a MountArgs);

impl MountObserver for Printer<'_> {
    fn stale_cleaned(&mut self, mountpoint: &Path) {
        eprintln!(
            "vodlab disk: {} was a stale mount (its daemon died: ENOTCONN); cleaned with {} -u -z",
            mountpoint.display(),
            sys::FUSERMOUNT
        );
    }

    fn mounted(&mut self, s: &MountedSet<'_>) {
        println!("{}", s.summary(self.0));
        let _ = std::io::stdout().flush();
    }

    fn stats_not_written(&mut self, e: StatsError) {
        eprintln!("vodlab disk: {:#}", anyhow::Error::new(e));
    }
}

fn mount(a: MountArgs) -> anyhow::Result<ExitCode> {
    let done = vodlab_diskfs::command::mount(&a, &mut Printer(&a))?;
    println!("{}", done.summary(&a.mountpoint));
    Ok(ExitCode::SUCCESS)
}
