//! `vodlab box`: run a command on emulated hardware (a cgroup with a memory
//! limit that includes the page cache, and either an emulated drive —
//! `--disk`, `vodlab disk mount` outside the box — or a throttled block
//! device, cgroup io.max). The work is [`vodlab_lab::hwbox::command`]'s;
//! this module prints and maps the command's exit status.

use std::process::ExitCode;

pub use vodlab_lab::hwbox::BoxArgs;

/// Prints the box's notices on stderr; ignores Ctrl-C once the command runs.
struct Printer;

impl vodlab_lab::hwbox::command::BoxObserver for Printer {
    fn note(&mut self, line: &str) {
        eprintln!("{line}");
    }
    fn spawned(&mut self) {
        // the child shares our terminal and process group, so Ctrl-C reaches it;
        // we ignore it (after the spawn, so the child does not inherit that) and
        // tear the box down once the child has ended
        // SAFETY: changes this process's SIGINT disposition only
        unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    }
}

pub fn run(a: BoxArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let exe = std::env::current_exe()?;
    let status = vodlab_lab::hwbox::command::run(&a, &cwd, &exe, &mut Printer)?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        None => ExitCode::from(1),
    })
}
