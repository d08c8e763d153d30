//! Next-object prefetch (`vodlab serve --io asap --prefetch-next-object`):
//! a request whose CMCD names the next segment (`nor`) makes the server
//! read that segment into the page cache before anyone asks for it, as
//! `mincore(2)` sees it; without the flag it stays cold. The access log
//! carries the request's CMCD, which `vodlab analyze`'s parser reads back.
//! And closed-loop DASH players (`vodlab run --player dash`, which send
//! `nor`) make the server prefetch next objects.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, sparse_fileset, vodlab_ok, wait_until, Running};

const SEG: usize = 2 << 20;

/// The server process, stopped (SIGTERM by its PID, so it flushes its
/// access log) and reaped on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: a signal to the child this test started
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn serve(root: &Path, log: &Path, next_object: bool) -> (Serve, u16) {
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vodlab"));
    cmd.args(["serve", "--io", "asap", "--root"])
        .arg(root)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--stats-interval", "0", "--access-log"])
        .arg(log);
    if next_object {
        cmd.arg("--prefetch-next-object");
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let s = Serve(child);
    wait_until("serve listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (s, port)
}

/// One GET on a fresh connection; returns the status line and the body.
fn get(port: u16, path: &str, extra: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{extra}\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..end]).to_string();
    (
        head.lines().next().unwrap().to_string(),
        all[end..].to_vec(),
    )
}

fn stats(port: u16) -> serde_json::Value {
    let (status, body) = get(port, "/vodlab/stats", "");
    assert!(status.contains(" 200 "), "{status}");
    serde_json::from_slice(&body).unwrap()
}

fn drop_pages(path: &Path) {
    let f = File::open(path).unwrap();
    // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Fraction of the file's pages in the page cache (`mincore(2)` over a
/// read-only mapping, which reads nothing).
fn resident(path: &Path) -> f64 {
    let f = File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let page = 4096usize;
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: a fresh shared read-only mapping of the whole file, unmapped
    // below; mincore writes one byte per page into `vec`, sized for it
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
        libc::munmap(p, len);
    }
    vec.iter().filter(|b| *b & 1 == 1).count() as f64 / pages as f64
}

#[test]
fn nor_makes_the_server_read_the_next_segment_before_it_is_asked_for() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("t1/sd")).unwrap();
    let seg = |k: u32| root.join(format!("t1/sd/{k:05}.m4s"));
    for k in 1..=3 {
        std::fs::write(seg(k), vec![k as u8; SEG]).unwrap();
        File::open(seg(k)).unwrap().sync_all().unwrap(); // DONTNEED drops clean pages only
    }
    let cmcd = "CMCD-Object: br=2000\r\nCMCD-Request: bl=4000,nor=\"00002.m4s\"\r\n\
                CMCD-Session: sid=\"s1\"\r\n";
    for flag in [true, false] {
        let log = dir.path().join(format!("access-{flag}.log"));
        let (server, port) = serve(&root, &log, flag);
        (1..=3).for_each(|k| drop_pages(&seg(k)));
        assert!(resident(&seg(2)) < 0.1, "segment 2 is cold to begin with");
        let (status, body) = get(port, "/t1/sd/00001.m4s", cmcd);
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(body.len(), SEG);
        let s = if flag {
            // nobody asks for segment 2: the server reads it
            wait_until("segment 2 resident", Duration::from_secs(20), || {
                resident(&seg(2)) == 1.0
            });
            let s = stats(port);
            assert_eq!(s["next_object_prefetches"], 1, "{s:#}");
            assert_eq!(s["next_object_prefetch_bytes"], SEG as u64, "{s:#}");
            // a nor naming the file already read, one outside the root
            get(
                port,
                "/t1/sd/00001.m4s",
                "CMCD-Request: nor=\"00002.m4s\"\r\n",
            );
            get(
                port,
                "/t1/sd/00001.m4s",
                "CMCD-Request: nor=\"../../../../etc/passwd\"\r\n",
            );
            let s = stats(port);
            assert_eq!(s["next_object_prefetches"], 1, "{s:#}");
            assert_eq!(s["next_object_resident"], 1, "{s:#}");
            assert_eq!(s["next_object_refused"], 1, "{s:#}");
            s
        } else {
            // the server queues a next object's read before it closes the
            // connection (Connection: close): by now it would have; no
            // read is queued or waiting, and none was for segment 2
            let s = stats(port);
            assert!(
                s["devices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|d| d["queue_length"] == 0),
                "{s:#}"
            );
            assert!(resident(&seg(2)) < 0.1, "segment 2 stays cold");
            s
        };
        assert!(resident(&seg(3)) < 0.1, "segment 3 is never named");
        if !flag {
            assert_eq!(s["next_object_prefetches"], 0, "{s:#}");
        }
        drop(server); // flushes the access log

        // the access log's line carries the CMCD; analyze reads it back
        let text = std::fs::read_to_string(&log).unwrap();
        let first = text.lines().next().expect("a line");
        let f = vodlab_analyze::LogFormat::detect(first).unwrap();
        assert_eq!(f, vodlab_analyze::LogFormat::Vodlab);
        let c = vodlab_analyze::parse::vodlab_cmcd_of(first).expect("cmcd logged");
        assert_eq!(c.nor, vec!["00002.m4s".to_string()], "{first}");
        assert_eq!(
            (c.br, c.bl, c.sid.as_deref()),
            (Some(2000), Some(4000), Some("s1"))
        );
        match f.parse(first, 1).unwrap() {
            vodlab_analyze::parse::Line::Request(r, _) => assert_eq!(r.bitrate_kbps, Some(2000.0)),
            other => panic!("{other:?}"),
        }
        // the statistics page's request logs no CMCD
        assert!(text.lines().any(|l| l.ends_with(" -")), "{text}");
    }
}

#[test]
fn dash_players_make_the_server_prefetch_their_next_segments() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let spec_path = d.path().join("spec.toml");
    std::fs::write(&spec_path, vodlab_ok(&["gen", "--show-preset", "dash-vod"])).unwrap();
    let w = d.path().join("w");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec_path.to_str().unwrap(),
        "--sessions",
        "4",
        "--titles",
        "4",
        "-o",
        w.to_str().unwrap(),
    ]);
    let root = d.path().join("root");
    sparse_fileset(&w, &root);
    let c: vodlab_workload::Catalog =
        serde_json::from_slice(&std::fs::read(w.join("catalog.json")).unwrap()).unwrap();
    for m in vodlab_manifest::manifests(&c) {
        let p = root.join(&m.rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, m.text).unwrap();
    }
    let s = Running::start(&root, |c| c.next_object_bytes = Some(4 << 20));
    let out = d.path().join("out");
    let r = common::run_dash_players(&w, &s.url(""), &out, &[]);
    assert_eq!(r["failed_sessions"], 0, "{r:#}");
    let st = s.server().state.stats();
    eprintln!(
        "next objects: {} prefetches, {} bytes, {} resident, {} refused",
        st.next_object_prefetches,
        st.next_object_prefetch_bytes,
        st.next_object_resident,
        st.next_object_refused
    );
    assert!(
        st.next_object_prefetches > 0 && st.next_object_prefetch_bytes > 0,
        "prefetches {} bytes {} resident {} refused {}",
        st.next_object_prefetches,
        st.next_object_prefetch_bytes,
        st.next_object_resident,
        st.next_object_refused
    );
    // every nor the players sent named a file under the root
    assert_eq!(st.next_object_refused, 0);
}
