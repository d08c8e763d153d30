//! `vodlab box`'s work: a command run in a box, with the emulated drive's
//! daemon outside it when `--disk` is given, and what the box measured.

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::settings::{describe, BoxArgs};
use super::{BoxError, HwBox};
use crate::diskd::{describe_disk, DiskDaemon, DiskdError};
use crate::point::error_chain;

pub use vodlab_workload::TIME_COMPRESSION_ENV;

/// Why a boxed command could not run, or its drive failed under it.
#[derive(Debug, Error)]
pub enum BoxRunError {
    /// The box could not be made, read or torn down.
    #[error(transparent)]
    Box(#[from] BoxError),
    /// The emulated drive could not be started or stopped.
    #[error(transparent)]
    Disk(#[from] DiskdError),
    /// The command could not be started.
    #[error("starting {program}")]
    Spawn {
        /// Its program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Waiting for the command failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The emulated drive's daemon ended while the command ran.
    #[error("the emulated disk died under the command")]
    DiskDied(#[source] DiskdError),
}

/// What `vodlab box` tells while it runs.
pub trait BoxObserver {
    /// A notice, one line.
    fn note(&mut self, _line: &str) {}
    /// The command started: from now on the terminal's Ctrl-C is the
    /// command's to handle (the caller ignores it and tears the box down
    /// once the command has ended).
    fn spawned(&mut self) {}
}

/// Runs `a`'s command in its box (with its emulated drive, run as `exe disk
/// mount`), in `cwd` for the device default; returns its exit status.
pub fn run(
    a: &BoxArgs,
    cwd: &Path,
    exe: &Path,
    obs: &mut dyn BoxObserver,
) -> Result<ExitStatus, BoxRunError> {
    let spec = a.hw.spec(&a.name, cwd)?;
    let disk = a.disk.spec(a.workload.as_deref(), a.time_compression)?;
    let mut b = HwBox::create(spec)?;
    obs.note(&format!(
        "vodlab box: {} (limits read back and verified)",
        describe(&b)
    ));
    // the drive's daemon outside the box: its CPU and memory are not the server's
    let mut daemon = match &disk {
        Some(d) => Some(DiskDaemon::start(d, a.disk.mount.as_deref(), exe)?),
        None => None,
    };
    if let Some(d) = &daemon {
        obs.note(&format!("vodlab box: emulated disk: {}", d.mounted()));
    }
    let mount = daemon.as_ref().map(|d| d.mountpoint().to_path_buf());
    let k = a.time_compression.to_string();
    let args: Vec<String> = match &mount {
        Some(m) => a
            .command
            .iter()
            .map(|x| {
                x.replace("{mount}", &m.display().to_string())
                    .replace("{k}", &k)
            })
            .collect(),
        None => a.command.clone(),
    };
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..]);
    if let Some(m) = &mount {
        cmd.env("VODLAB_DISK_MOUNT", m);
        cmd.env(TIME_COMPRESSION_ENV, &k);
    }
    b.command(&mut cmd);
    let before = b.usage()?;
    let t = Instant::now();
    let mut child = cmd.spawn().map_err(|source| BoxRunError::Spawn {
        program: args[0].clone(),
        source,
    })?;
    obs.spawned();
    let mut daemon_died = None;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if let Some(d) = &mut daemon {
            if let Err(e) = d.check() {
                // the server's files are gone: end the command (and all in the box)
                obs.note(&format!(
                    "vodlab box: {}; ending the command",
                    error_chain(&e)
                ));
                // SAFETY: signals our own child by its pid
                unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
                daemon_died = Some(e);
                break child.wait()?;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let secs = t.elapsed().as_secs_f64();
    let after = b.usage()?;
    let read = after.read_bytes.saturating_sub(before.read_bytes);
    let ios = after.read_ios.saturating_sub(before.read_ios);
    let device = if b.spec.device.is_some() {
        format!(
            "device reads {:.1} MB ({:.1} MB/s, {ios} reads{}), ",
            read as f64 / 1e6,
            read as f64 / 1e6 / secs.max(1e-9),
            if ios > 0 {
                format!(", {:.0} KiB each", read as f64 / ios as f64 / 1024.0)
            } else {
                String::new()
            },
        )
    } else {
        String::new()
    };
    obs.note(&format!(
        "vodlab box: {} after {secs:.1} s; {device}CPU {}, memory peak {}",
        status,
        after.cpu_ns.map_or("n/a".into(), |c| format!(
            "{:.2} s",
            c.saturating_sub(before.cpu_ns.unwrap_or(0)) as f64 / 1e9
        )),
        after
            .memory_peak_bytes
            .map_or("n/a".into(), |m| format!("{} MiB", m >> 20)),
    ));
    // the box's processes end before the drive goes (a lazy unmount under
    // a live reader would keep the daemon's files busy)
    b.teardown()?;
    if let Some(d) = daemon.take() {
        match d.stop() {
            Ok(r) => obs.note(&format!("vodlab box: {}", describe_disk(&r))),
            Err(e) if daemon_died.is_some() => obs.note(&format!(
                "vodlab box: no final disk statistics: {}",
                error_chain(&e)
            )),
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(e) = daemon_died {
        return Err(BoxRunError::DiskDied(e));
    }
    Ok(status)
}
