//! Starting `vodlab serve` from its settings ([`crate::settings`]): the
//! runtime, the server, and the `--prefetch-log` writer beside it. Waiting
//! for a signal and printing stay with the caller.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::task::JoinHandle;

use crate::server::{Server, StartError, State};
use crate::settings::ServeArgs;
use crate::Config;

/// Why the server did not start.
#[derive(Debug, Error)]
pub enum LaunchError {
    /// The server could not start on its root and address.
    #[error("serving {} on {listen}", root.display())]
    Start {
        /// The root served.
        root: PathBuf,
        /// The address to listen on.
        listen: SocketAddr,
        /// Why.
        #[source]
        source: StartError,
    },
    /// The `--prefetch-log` file could not be created.
    #[error("--prefetch-log {}", path.display())]
    PrefetchLog {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The multi-threaded runtime of `vodlab serve` (`--threads` workers, else
/// one per core).
pub fn runtime(threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = threads {
        rt.worker_threads(n.max(1));
    }
    rt.enable_all().build()
}

/// A server started by [`start`], with its `--prefetch-log` writer.
pub struct Serving {
    /// The running server.
    pub server: Server,
    log: Option<JoinHandle<()>>,
}

/// Starts the server `cfg` ([`ServeArgs::config`] of `a`) on `a.listen`, and
/// with `--prefetch-log` the task writing its rows; `on_log_stop` gets the
/// message of a row that could not be written (no more rows follow).
pub async fn start(
    a: &ServeArgs,
    cfg: Config,
    on_log_stop: impl FnOnce(String) + Send + 'static,
) -> Result<Serving, LaunchError> {
    let server = Server::start(cfg, a.listen)
        .await
        .map_err(|source| LaunchError::Start {
            root: a.root.clone(),
            listen: a.listen,
            source,
        })?;
    let log = match &a.prefetch_log {
        Some(path) => Some(prefetch_log(path, server.state.clone(), on_log_stop)?),
        None => None,
    };
    Ok(Serving { server, log })
}

impl Serving {
    /// Stops the `--prefetch-log` writer, then the server (responses in
    /// flight finish: [`Server::shutdown`]).
    pub async fn shutdown(self) {
        if let Some(t) = self.log {
            t.abort();
        }
        self.server.shutdown().await;
    }
}

/// `--prefetch-log`: creates the CSV (header) and a task that writes the
/// automatic size's new intervals every second.
fn prefetch_log(
    path: &Path,
    state: Arc<State>,
    on_stop: impl FnOnce(String) + Send + 'static,
) -> Result<JoinHandle<()>, LaunchError> {
    use vodlab_prefetch::autolog::IntervalCsv;
    let failed = |source| LaunchError::PrefetchLog {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(path).map_err(failed)?;
    let mut csv = IntervalCsv::new(std::io::BufWriter::new(file)).map_err(failed)?;
    let shown = path.display().to_string();
    Ok(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let Some(view) = state.stats().prefetch_auto else {
                continue;
            };
            if let Err(e) = csv.write_new(&view) {
                on_stop(format!("--prefetch-log {shown}: {e}; no more rows"));
                return;
            }
        }
    }))
}
