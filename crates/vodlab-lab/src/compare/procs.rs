//! The processes of one compare row: the server, and for a proxy row
//! (nghttpx) its backend `vodlab serve`, both in the row's box; stopped
//! server first (then the backend) when dropped.

use std::process::Child;
use std::time::Duration;

use super::error::CompareError;
use crate::hwbox::HwBox;
use crate::servers::{self, ServerSetup};

/// A row's running processes.
pub(super) struct Procs {
    server: Option<Child>,
    backend: Option<Child>,
    label: String,
    workdir: std::path::PathBuf,
}

impl Procs {
    /// Starts the backend (if the row has one) and the server in `b`, each
    /// waited for until it listens; what started is stopped again if a
    /// later step fails.
    pub fn start(
        setup: &ServerSetup,
        b: Option<&HwBox>,
        label: &str,
    ) -> Result<Self, CompareError> {
        let mut p = Self {
            server: None,
            backend: None,
            label: label.to_string(),
            workdir: setup.workdir.clone(),
        };
        if let (Some(mut cmd), Some(bs)) = (
            servers::backend_command(setup)?,
            servers::backend_setup(setup),
        ) {
            if let Some(b) = b {
                b.command(&mut cmd);
            }
            servers::ensure_port_free(&bs).map_err(|source| CompareError::Backend {
                label: label.to_string(),
                source,
            })?;
            let child = cmd.spawn().map_err(|source| CompareError::Start {
                what: format!("{label}'s backend (vodlab serve)"),
                source,
            })?;
            let c = p.backend.insert(child);
            servers::wait_listening(&bs, c, Duration::from_secs(15)).map_err(|source| {
                CompareError::Backend {
                    label: label.to_string(),
                    source,
                }
            })?;
        }
        servers::ensure_port_free(setup)?;
        let mut cmd = servers::command(setup)?;
        if let Some(b) = b {
            b.command(&mut cmd);
        }
        let child = cmd.spawn().map_err(|source| CompareError::Start {
            what: label.to_string(),
            source,
        })?;
        let c = p.server.insert(child);
        servers::wait_listening(setup, c, Duration::from_secs(15))?;
        Ok(p)
    }

    /// An error if the server or its backend has exited.
    pub fn check(&mut self) -> Result<(), CompareError> {
        for (what, c) in [("", &mut self.server), (" backend", &mut self.backend)] {
            if let Some(st) = c.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(CompareError::Exited(format!(
                    "{}{what} exited ({st}); see {}",
                    self.label,
                    self.workdir.display()
                )));
            }
        }
        Ok(())
    }

    /// Stops the server, then its backend (SIGTERM, SIGKILL after 10 s).
    pub fn stop(&mut self) {
        for c in [self.server.take(), self.backend.take()]
            .into_iter()
            .flatten()
        {
            let mut c = c;
            servers::stop(&mut c, Duration::from_secs(10));
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.stop();
    }
}
