//! `vodlab serve --prefetch-policy auto --prefetch-log FILE.csv`: a short
//! real run (1 s intervals) writes the header and one row per interval,
//! scored rows once ranges of an uncached file are served.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, wait_until};

/// The server process, killed (by its PID) on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get_range(port: u16, from: u64, to: u64) -> usize {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /sd.mp4 HTTP/1.1\r\nHost: t\r\nConnection: close\r\nRange: bytes={from}-{to}\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    buf.len() - end - 4
}

#[test]
fn prefetch_log_writes_a_header_and_a_row_per_interval() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("sd.mp4");
    std::fs::write(&path, vec![5u8; 16 << 20]).unwrap();
    let f = File::open(&path).unwrap();
    f.sync_all().unwrap(); // DONTNEED drops clean pages only
    let csv = dir.path().join("auto.csv");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--root"])
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--prefetch-policy",
            "auto:interval=1,ramp=0,busy=0,step=256K,start=1M,min=256K,max=8M",
            "--default-bitrate",
            "419",
            "--stats-interval",
            "0",
            "--prefetch-log",
        ])
        .arg(&csv)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let _serve = Serve(child);
    wait_until("serve listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let read = || std::fs::read_to_string(&csv).unwrap_or_default();
    let mut i = 0u64;
    wait_until("two scored rows", Duration::from_secs(60), || {
        // SAFETY: advisory call on an open descriptor
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let off = ((i * 3) << 20) % (14 << 20);
        i += 1;
        assert_eq!(get_range(port, off, off + (256 << 10) - 1), 256 << 10);
        let text = read();
        text.lines()
            .skip(1)
            .filter(|l| l.split(',').nth(3).is_some_and(|s| !s.is_empty()))
            .count()
            >= 2
    });
    let text = read();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert_eq!(
        header,
        "t_s,p_bytes,target_bytes,score,mspt,miss_ratio,busy,evicted_ratio,evictions,eviction_time_s,bitrate_kbps,decision"
    );
    let known = [
        "inactive",
        "no_data",
        "eviction_jump",
        "move_larger",
        "move_smaller",
        "try_larger",
        "try_smaller",
        "minimum",
    ];
    let mut last_t = -1.0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 12, "{l}");
        let t: f64 = f[0].parse().unwrap();
        assert!(t > last_t, "rows in time order: {l}");
        last_t = t;
        let p: u64 = f[1].parse().unwrap();
        assert!((256 << 10..=8 << 20).contains(&p), "{l}");
        assert!(known.contains(&f[11]), "{l}");
        if !f[3].is_empty() {
            let (score, mspt, miss): (f64, f64, f64) = (
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
                f[5].parse().unwrap(),
            );
            assert!((score - mspt * miss).abs() <= 1e-9 * score.max(1.0), "{l}");
            let kbps: f64 = f[10].parse().unwrap();
            assert!((kbps - 419.0).abs() < 1e-6, "{l}");
        }
    }
}
