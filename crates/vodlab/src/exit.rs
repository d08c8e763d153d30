//! vodlab's exit statuses (one table, README "Exit statuses"), the error
//! that means "could not run", and `--fail-on` for the commands that
//! measure.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | ran, and every check passed |
//! | 1 | ran, and a check failed: a `--fail-on` rule, no session succeeded, `--strict` |
//! | 2 | bad usage or input (a flag, a spec, a file) |
//! | 3 | could not run: the server unreachable, a peer program missing |
//! | 4 | ran, but a result file could not be written (no space left on the device, a read-only or missing directory); that file keeps its previous content |
//! | 130 | interrupted by SIGINT (143: SIGTERM); the results so far are written |

use std::process::ExitCode;

use vodlab_client::out::thresholds::{Breach, Rule};

/// Ran; every check passed.
pub const OK: u8 = 0;
/// Ran; a check failed.
pub const CHECK_FAILED: u8 = 1;
/// Bad usage or input.
pub const USAGE: u8 = 2;
/// Could not run.
pub const COULD_NOT_RUN: u8 = 3;
/// Ran, but a result file could not be written
/// ([`vodlab_client::out::atomic::AtomicWriteError`] anywhere in the
/// error's chain).
pub const NOT_WRITTEN: u8 = 4;
/// Interrupted by SIGINT (128 + 2).
pub const INTERRUPTED: u8 = 130;
/// Stopped by SIGTERM (128 + 15).
pub const TERMINATED: u8 = 143;

/// An error that means the measurement could not happen at all (the server
/// unreachable, a peer program missing): exit status 3, not 2.
#[derive(Debug)]
pub struct CouldNotRun(pub String);

impl std::fmt::Display for CouldNotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CouldNotRun {}

/// `anyhow::Error` for [`CouldNotRun`].
pub fn could_not_run(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(CouldNotRun(msg.into()))
}

/// The exit status of a failed command: 3 for [`CouldNotRun`] anywhere in
/// the chain, 4 for a result file that could not be written
/// ([`vodlab_client::out::atomic::AtomicWriteError`]), else 2.
pub fn status_of(e: &anyhow::Error) -> u8 {
    use vodlab_client::out::atomic::AtomicWriteError;
    if e.chain().any(|c| c.downcast_ref::<CouldNotRun>().is_some()) {
        COULD_NOT_RUN
    } else if e
        .chain()
        .any(|c| c.downcast_ref::<AtomicWriteError>().is_some())
    {
        NOT_WRITTEN
    } else {
        USAGE
    }
}

/// Names each breach on stderr, as `vodlab CMD: --fail-on RULE: breached
/// (the figure is X)`.
pub fn announce(cmd: &str, breaches: &[Breach]) {
    for b in breaches {
        eprintln!("vodlab {cmd}: {b}");
    }
}

/// Evaluates `rules` over `result` (as its JSON) and names each breach.
pub fn judge<T: serde::Serialize>(
    cmd: &str,
    rules: &[Rule],
    result: &T,
) -> anyhow::Result<Vec<Breach>> {
    let breaches =
        vodlab_client::out::thresholds::evaluate_all(rules, &serde_json::to_value(result)?)?;
    announce(cmd, &breaches);
    Ok(breaches)
}

/// 1 when any rule was breached, else 0.
pub fn of_breaches(breaches: &[Breach]) -> ExitCode {
    ExitCode::from(if breaches.is_empty() {
        OK
    } else {
        CHECK_FAILED
    })
}

/// A signal that stops a command: SIGINT (Ctrl-C) or SIGTERM (kill, a
/// supervisor, a CI timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT.
    Int,
    /// SIGTERM.
    Term,
}

impl StopSignal {
    /// Its name, as the messages say it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Int => "SIGINT",
            Self::Term => "SIGTERM",
        }
    }

    /// The exit status it stands for ([`INTERRUPTED`], [`TERMINATED`]).
    pub fn status(self) -> u8 {
        match self {
            Self::Int => INTERRUPTED,
            Self::Term => TERMINATED,
        }
    }
}

/// Calls `on` each time SIGINT or SIGTERM arrives, from a thread of its
/// own (no work in a signal handler). The handlers are installed before
/// this returns; from then on the signals no longer end the process by
/// themselves.
pub fn on_stop_signals(mut on: impl FnMut(StopSignal) + Send + 'static) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut int, mut term) = {
        let _in_runtime = rt.enter();
        let install = |kind: tokio::signal::unix::SignalKind, name: &str| {
            tokio::signal::unix::signal(kind).map_err(|e| {
                std::io::Error::new(e.kind(), format!("installing the {name} handler: {e}"))
            })
        };
        (
            install(tokio::signal::unix::SignalKind::interrupt(), "SIGINT")?,
            install(tokio::signal::unix::SignalKind::terminate(), "SIGTERM")?,
        )
    };
    std::thread::spawn(move || {
        rt.block_on(async move {
            loop {
                let sig = tokio::select! {
                    r = int.recv() => r.map(|_| StopSignal::Int),
                    r = term.recv() => r.map(|_| StopSignal::Term),
                };
                let Some(sig) = sig else { return };
                on(sig);
            }
        })
    });
    Ok(())
}
