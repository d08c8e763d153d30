//! A scripted HTTP/1.1 server that can be stopped and started again on the
//! same port, writing down what it did (tests/results_survive.rs): every
//! request for `PATH` (a `range=0-(SIZE-1)` of a file of `size` bytes) is
//! answered 206 with its body in `chunks` writes `gap` apart. [`stop`]
//! resets every connection whose answer is not complete (SO_LINGER 0: the
//! client sees a reset), closes the others, drains the listener's accept
//! queue (resetting what it held) and closes the listener, so that a
//! connection attempt is refused until [`start_again`].
//!
//! [`stop`]: Restartable::stop
//! [`start_again`]: Restartable::start_again

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the server did.
#[derive(Debug, Clone, Default)]
pub struct Log {
    /// Each request's path and when its head arrived (the first request
    /// for a path only).
    pub arrived: BTreeMap<String, Instant>,
    /// Paths whose answer was written whole.
    pub completed: BTreeSet<String>,
    /// Paths whose answer a stop cut off with a reset.
    pub reset: BTreeSet<String>,
    /// Connections a stop reset before their request head arrived (open,
    /// or still in the accept queue).
    pub reset_before_request: u64,
}

struct Up {
    stop: watch::Sender<bool>,
    accept: JoinHandle<std::io::Result<TcpListener>>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// The server; it stops when dropped.
pub struct Restartable {
    /// Its loopback port (the same after a restart).
    pub port: u16,
    log: Arc<Mutex<Log>>,
    rt: tokio::runtime::Runtime,
    up: Option<Up>,
    size: u64,
    chunks: u64,
    gap: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Closes `fd`'s socket with a reset (SO_LINGER 0) when it is closed.
fn linger_zero(fd: i32) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this server owns, with a valid linger
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// The path of a request head's first line.
fn path_of(head: &[u8]) -> Option<String> {
    let line = head.split(|&b| b == b'\r').next()?;
    let text = std::str::from_utf8(line).ok()?;
    text.split_whitespace().nth(1).map(str::to_string)
}

fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

impl Restartable {
    /// Starts on a free loopback port.
    pub fn start(size: u64, chunks: u64, gap: Duration) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut s = Self {
            port,
            log: Arc::new(Mutex::new(Log::default())),
            rt,
            up: None,
            size,
            chunks,
            gap,
        };
        s.serve(listener);
        s
    }

    /// A copy of what it did so far.
    pub fn log(&self) -> Log {
        lock(&self.log).clone()
    }

    /// Listens again on the same port.
    pub fn start_again(&mut self) {
        assert!(self.up.is_none(), "already running");
        // tokio sets SO_REUSEADDR: connections that ended here do not hold
        // the port
        let listener = self
            .rt
            .block_on(TcpListener::bind(("127.0.0.1", self.port)))
            .expect("bind the same port again");
        self.serve(listener);
    }

    fn serve(&mut self, listener: TcpListener) {
        let (stop, stopped) = watch::channel(false);
        let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (log, tasks) = (self.log.clone(), conns.clone());
        let (size, chunks, gap) = (self.size, self.chunks, self.gap);
        let mut until = stopped.clone();
        let accept = self.rt.spawn(async move {
            loop {
                tokio::select! {
                    r = listener.accept() => {
                        let (sock, _) = r?;
                        let t = tokio::spawn(conn(sock, log.clone(), stopped.clone(), size, chunks, gap));
                        lock(&tasks).push(t);
                    }
                    _ = until.wait_for(|s| *s) => return Ok(listener),
                }
            }
        });
        self.up = Some(Up {
            stop,
            accept,
            conns,
        });
    }

    /// Stops: resets the unfinished answers, drains the accept queue and
    /// closes the listener. Returns when all of that is done.
    pub fn stop(&mut self) {
        let up = self.up.take().expect("running");
        let _ = up.stop.send(true);
        let listener = self
            .rt
            .block_on(up.accept)
            .expect("accept task")
            .expect("accept");
        let tasks: Vec<_> = std::mem::take(&mut *lock(&up.conns));
        for t in tasks {
            let _ = self.rt.block_on(t);
        }
        // what the kernel accepted that the loop had not taken yet: reset,
        // counted (by path when its request is already there)
        let _in_runtime = self.rt.enter();
        let listener = listener.into_std().expect("std listener");
        listener.set_nonblocking(true).expect("nonblocking");
        while let Ok((mut s, _)) = listener.accept() {
            let _ = s.set_nonblocking(true);
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            linger_zero(s.as_raw_fd());
            let mut log = lock(&self.log);
            match head_end(&buf[..n]).and_then(|e| path_of(&buf[..e])) {
                Some(p) => {
                    log.arrived.entry(p.clone()).or_insert_with(Instant::now);
                    log.reset.insert(p);
                }
                None => log.reset_before_request += 1,
            }
        }
        drop(listener);
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        if self.up.is_some() {
            self.stop();
        }
    }
}

/// One connection: requests answered in turn until the client closes or a
/// stop comes.
async fn conn(
    mut s: TcpStream,
    log: Arc<Mutex<Log>>,
    mut stop: watch::Receiver<bool>,
    size: u64,
    chunks: u64,
    gap: Duration,
) {
    let mut buf = Vec::new();
    let mut answered = false;
    loop {
        // a request head
        let path = loop {
            if let Some(e) = head_end(&buf) {
                let p = path_of(&buf[..e]);
                buf.drain(..e + 4);
                break p;
            }
            let mut tmp = [0u8; 4096];
            tokio::select! {
                r = s.read(&mut tmp) => match r {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                },
                _ = stop.wait_for(|s| *s) => {
                    if answered && buf.is_empty() {
                        // idle after a whole answer: closed, not reset
                        return;
                    }
                    linger_zero(s.as_raw_fd());
                    lock(&log).reset_before_request += 1;
                    return;
                }
            }
        };
        let Some(path) = path else { return };
        lock(&log)
            .arrived
            .entry(path.clone())
            .or_insert_with(Instant::now);
        let head = format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 0-{}/{size}\r\nContent-Length: {size}\r\n\r\n",
            size - 1
        );
        let per = size.div_ceil(chunks) as usize;
        let body = vec![0u8; size as usize];
        let cut = async {
            s.write_all(head.as_bytes()).await?;
            for (i, c) in body.chunks(per).enumerate() {
                if i > 0 {
                    tokio::time::sleep(gap).await;
                }
                s.write_all(c).await?;
            }
            std::io::Result::Ok(())
        };
        let stopped = tokio::select! {
            r = cut => {
                if r.is_err() {
                    return;
                }
                false
            }
            _ = stop.wait_for(|s| *s) => true,
        };
        if stopped {
            linger_zero(s.as_raw_fd());
            lock(&log).reset.insert(path);
            return;
        }
        lock(&log).completed.insert(path);
        answered = true;
    }
}
