//! `vodlab serve`'s root (docs/serve.md, "The root"): a root replaced while
//! the server runs (removed and re-created, renamed over, a symlink
//! retargeted) is served from its new tree without a restart, in both I/O
//! modes; and what is not a regular file (a socket, a FIFO, a device, a
//! symlink to one) is refused with 403, counted as refused and never as a
//! server error, in the statistics and the access log.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{require, wait_until};
use vodlab_server::files::ROOT_RECHECK;

/// A `vodlab serve` child process on a free loopback port, ended (SIGTERM,
/// by its PID) on drop.
struct Serve {
    child: Child,
    port: u16,
}

impl Serve {
    fn start(root: &Path, io: &str, log: Option<&Path>) -> Self {
        let port = common::free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vodlab"));
        cmd.args(["serve", "--root", root.to_str().unwrap(), "--io", io])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--stats-interval", "0"])
            .stdout(Stdio::null());
        if let Some(l) = log {
            cmd.args(["--access-log", l.to_str().unwrap()]);
        }
        let child = cmd.spawn().expect("vodlab serve starts");
        let s = Self { child, port };
        wait_until("vodlab serve listening", Duration::from_secs(10), || {
            common::listening(port)
        });
        s
    }

    /// (status, body) of `GET path` by curl.
    fn get(&self, path: &str) -> (u16, String) {
        let dir = tempfile::tempdir().unwrap();
        let body = dir.path().join("body");
        let out = Command::new(require("curl", "curl"))
            .args(["-sS", "-o", body.to_str().unwrap(), "-w", "%{http_code}"])
            .arg(format!("http://127.0.0.1:{}{path}", self.port))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "curl {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let status = String::from_utf8_lossy(&out.stdout).parse().unwrap();
        (status, fs::read_to_string(body).unwrap_or_default())
    }

    fn stats(&self) -> serde_json::Value {
        let (status, body) = self.get("/vodlab/stats");
        assert_eq!(status, 200);
        serde_json::from_str(&body).unwrap()
    }

    /// Ends the server (SIGTERM, which flushes the access log) and waits.
    fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        // SAFETY: signalling the child this test started, by its PID
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "vodlab serve exited {status}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: as in `end`, our own child
            unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// A tree of two files whose content names `tag`, plus one only it has.
fn tree(dir: &Path, tag: &str) {
    fs::create_dir_all(dir.join("t1")).unwrap();
    fs::write(dir.join("a.mp4"), format!("{tag}-a")).unwrap();
    fs::write(dir.join("t1/seg.m4s"), format!("{tag}-seg")).unwrap();
    fs::write(dir.join(format!("only-{tag}.mp4")), tag).unwrap();
}

fn sees(s: &Serve, tag: &str) {
    assert_eq!(s.get("/a.mp4"), (200, format!("{tag}-a")));
    assert_eq!(s.get("/t1/seg.m4s"), (200, format!("{tag}-seg")));
    assert_eq!(s.get(&format!("/only-{tag}.mp4")), (200, tag.to_string()));
}

/// Renames `from` over `to` (rename(2): atomic, replaces a symlink or an
/// empty directory; `mv -T` does the same).
fn rename(from: &Path, to: &Path) {
    fs::rename(from, to).unwrap();
}

#[test]
fn a_replaced_root_is_served_from_its_new_tree() {
    for io in ["asap", "vanilla"] {
        let dir = tempfile::tempdir().unwrap();
        let root: PathBuf = dir.path().join("root");
        tree(&root, "one");
        let s = Serve::start(&root, io, None);
        sees(&s, "one");

        // (a) removed and re-created: the next request already sees the new
        // tree (the held directory is empty: its ENOENT looks the path up)
        fs::remove_dir_all(&root).unwrap();
        tree(&root, "two");
        sees(&s, "two");
        assert_eq!(s.get("/only-one.mp4").0, 404, "{io}");

        // (b) a deploy's swap by rename: the old tree stays whole, so it may
        // be served until the next look-up, at most ROOT_RECHECK later
        tree(&dir.path().join("root.new"), "three");
        rename(&root, &dir.path().join("root.old"));
        rename(&dir.path().join("root.new"), &root);
        let swapped = Instant::now();
        let (status, body) = s.get("/a.mp4");
        assert!(
            status == 200 && (body == "two-a" || body == "three-a"),
            "{io}: during the swap, the old tree or the new: {status} {body}"
        );
        std::thread::sleep(ROOT_RECHECK.saturating_sub(swapped.elapsed()));
        sees(&s, "three");
        assert_eq!(s.get("/only-two.mp4").0, 404, "{io}");

        // (c) a symlink deploy: the root's path becomes a symlink, then the
        // symlink is retargeted (a new link renamed over it)
        tree(&dir.path().join("rel4"), "four");
        tree(&dir.path().join("rel5"), "five");
        rename(&root, &dir.path().join("root.old3"));
        std::os::unix::fs::symlink("rel4", &root).unwrap();
        std::thread::sleep(ROOT_RECHECK);
        sees(&s, "four");
        std::os::unix::fs::symlink("rel5", dir.path().join("next")).unwrap();
        rename(&dir.path().join("next"), &root);
        std::thread::sleep(ROOT_RECHECK);
        sees(&s, "five");

        // while the root's path is missing the last tree is kept
        rename(&dir.path().join("rel5"), &dir.path().join("rel5.gone"));
        fs::remove_file(&root).unwrap();
        std::thread::sleep(ROOT_RECHECK);
        sees(&s, "five");

        let st = s.stats();
        assert_eq!(st["root_reopens"].as_u64(), Some(4), "{io}: {st}");
        assert_eq!(st["server_errors"].as_u64(), Some(0), "{io}: {st}");
        s.stop();
    }
}

#[test]
fn what_is_not_a_regular_file_is_refused_with_403() {
    // SAFETY: geteuid has no preconditions
    let is_root = unsafe { libc::geteuid() } == 0;
    for io in ["asap", "vanilla"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        tree(&root, "one");
        let _sock = std::os::unix::net::UnixListener::bind(root.join("sock.mp4")).unwrap();
        let fifo = std::ffi::CString::new(root.join("fifo.mp4").to_str().unwrap()).unwrap();
        // SAFETY: a live NUL-terminated path
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::os::unix::fs::symlink("sock.mp4", root.join("to-sock.mp4")).unwrap();
        // a symlink out of the root is 404 (the server does not tell what exists outside)
        std::os::unix::fs::symlink("/dev/null", root.join("null.mp4")).unwrap();
        let mut refused = vec!["/sock.mp4", "/fifo.mp4", "/to-sock.mp4", "/t1"];
        if is_root {
            // a character device (1, 3: what /dev/null is) inside the root, and a link to it
            let dev = std::ffi::CString::new(root.join("dev.mp4").to_str().unwrap()).unwrap();
            // SAFETY: a live NUL-terminated path
            let made =
                unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
            assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
            std::os::unix::fs::symlink("dev.mp4", root.join("to-dev.mp4")).unwrap();
            refused.extend(["/dev.mp4", "/to-dev.mp4"]);
        }
        let log = dir.path().join("access.log");
        let s = Serve::start(&root, io, Some(&log));
        for p in &refused {
            assert_eq!(s.get(p).0, 403, "{io} {p}");
        }
        assert_eq!(s.get("/null.mp4").0, 404, "{io}");
        assert_eq!(s.get("/a.mp4"), (200, "one-a".to_string()), "{io}");
        let st = s.stats();
        let n = refused.len() as u64 + 1;
        assert_eq!(st["refused"].as_u64(), Some(n), "{io}: {st}");
        assert_eq!(st["errors"].as_u64(), Some(n), "{io}: {st}");
        assert_eq!(st["server_errors"].as_u64(), Some(0), "{io}: {st}");
        assert_eq!(st["responses"]["error"].as_u64(), Some(n), "{io}: {st}");
        s.stop();
        // the access log: each refusal logged with its 403
        let text = fs::read_to_string(&log).unwrap();
        for p in &refused {
            let line = text
                .lines()
                .find(|l| l.split(' ').nth(3) == Some(*p))
                .unwrap_or_else(|| panic!("{io}: no line for {p} in\n{text}"));
            assert_eq!(line.split(' ').nth(6), Some("403"), "{io}: {line}");
        }
    }
}
