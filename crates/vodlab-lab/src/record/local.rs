//! Where the player plays from and what it needs on this machine: the
//! target (loopback, or a lab's private address from inside its
//! namespace), the first title of a file set, a `vodlab serve` child, and
//! the directory of the browser side's node modules.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vodlab_client::config::is_loopback;

use super::{io, RecordError};
use crate::servers::TlsFiles;

/// The file of `vodlab serve`'s statistics in the output directory.
pub const SERVE_STATS: &str = "serve-stats.json";

/// A private IPv4 address (RFC 1918), as a `vodlab lab` host has.
pub fn is_private(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v) if v.is_private())
}

/// `http://HOST:PORT` → (origin as given without a trailing `/`, address);
/// loopback only, or also private addresses when the browser runs in a
/// network namespace (`in_netns`).
pub fn parse_target(t: &str, in_netns: bool) -> Result<(String, SocketAddr), RecordError> {
    let bad = |m: String| Err(RecordError::Invalid(m));
    let origin = t.trim_end_matches('/');
    let Some(hostport) = origin.strip_prefix("http://") else {
        return bad(format!("--target {t}: expected http://HOST:PORT"));
    };
    if hostport.contains('/') {
        return bad(format!(
            "--target {t}: expected http://HOST:PORT without a path"
        ));
    }
    let Some(addr) = hostport
        .to_socket_addrs()
        .map_err(io(format!("--target {t}: cannot resolve")))?
        .next()
    else {
        return bad(format!("--target {t}: no address"));
    };
    if !(is_loopback(addr.ip()) || in_netns && is_private(addr.ip())) {
        return bad(format!(
            "--target {t} resolves to {}, not a loopback address{}: record plays from this machine only",
            addr.ip(),
            if in_netns {
                " nor a private one"
            } else {
                " (a lab's private address needs --netns)"
            }
        ));
    }
    Ok((origin.to_string(), addr))
}

/// The first title directory (sorted) under `root` with a manifest `name`.
pub fn first_manifest(root: &Path, name: &str) -> Result<String, RecordError> {
    let mut dirs: Vec<String> = std::fs::read_dir(root)
        .map_err(io(format!("reading {}", root.display())))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(name).is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    dirs.sort();
    match dirs.first() {
        Some(d) => Ok(format!("/{d}/{name}")),
        None => Err(RecordError::Invalid(format!(
            "{}: no {{title}}/{name} (create the set with `vodlab fileset create --media real`)",
            root.display(),
        ))),
    }
}

/// A `vodlab serve` child, stopped on drop: SIGTERM (by its own PID), so
/// that it flushes its access log, then killed if it has not exited
/// within 10 s.
pub struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: signalling the child this process started, by its PID
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `vodlab serve` (the program `vodlab`) on `root` at a free
/// loopback port, its output in `out/serve.log`, its access log (each
/// request's CMCD parsed, docs/serve.md) in `out/access.log` and its
/// statistics (every second and at its end) in `out/serve-stats.json`, and
/// waits until it listens (15 s at most). With `h3` it also serves TLS with
/// those files and HTTP/3 on the UDP port of the same number, and is
/// waited for on both.
pub fn start_serve(
    vodlab: &Path,
    root: &Path,
    out: &Path,
    h3: Option<&TlsFiles>,
) -> Result<(Serve, SocketAddr), RecordError> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let log = std::fs::File::create(out.join("serve.log"))?;
    let mut cmd = Command::new(vodlab);
    cmd.args(["serve", "--root"])
        .arg(root)
        .args([
            "--listen",
            &addr.to_string(),
            "--io",
            "vanilla",
            "--access-log",
        ])
        .arg(out.join("access.log"))
        .arg("--stats-file")
        .arg(out.join(SERVE_STATS));
    if let Some(t) = h3 {
        cmd.arg("--tls-cert")
            .arg(&t.cert)
            .arg("--tls-key")
            .arg(&t.key)
            .arg("--h3");
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .map_err(io("starting vodlab serve"))?;
    let mut serve = Serve(child);
    let t = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
        || (h3.is_some() && !crate::servers::udp_bound(addr))
    {
        if let Some(st) = serve.0.try_wait()? {
            return Err(RecordError::Invalid(format!(
                "vodlab serve exited ({st}) before listening; see {}",
                out.join("serve.log").display()
            )));
        }
        if t.elapsed() > Duration::from_secs(15) {
            return Err(RecordError::Invalid(format!(
                "vodlab serve did not listen on {addr} within 15 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((serve, addr))
}

/// The directory holding the browser side's `node_modules`: `dir` if
/// given, else `$VODLAB_RECORD_DIR`, else `~/.cache/vodlab-record`.
pub fn record_dir(dir: Option<&Path>) -> PathBuf {
    dir.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("VODLAB_RECORD_DIR").map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/vodlab-record")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_loopback_only() {
        assert!(parse_target("http://127.0.0.1:8080", false).is_ok());
        assert!(parse_target("http://[::1]:8080/", false).is_ok());
        assert!(parse_target("https://127.0.0.1:8080", false).is_err());
        assert!(parse_target("http://127.0.0.1:8080/x", false).is_err());
        let e = parse_target("http://192.0.2.1:80", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a loopback"), "{e}");
        // a lab's server: only from inside a namespace
        let e = parse_target("http://10.77.0.1:8080", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs --netns"), "{e}");
        assert!(parse_target("http://10.77.0.1:8080", true).is_ok());
        let e = parse_target("http://192.0.2.1:80", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nor a private"), "{e}");
    }
}
