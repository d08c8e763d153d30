use super::*;
use std::io::Read;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

fn cstr(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.to_str().unwrap()).unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions
    unsafe { libc::geteuid() == 0 }
}

/// The status `open_file` answers `name` with (200 when it opens).
fn status(root: &Root, dir: &Path, name: &str) -> u16 {
    match root.open_file(&dir.join(name)) {
        Ok(_) => 200,
        Err(e) => e.status(),
    }
}

/// The content of `name` opened under `root` (its error's status when it does not open).
fn content(root: &Root, dir: &Path, name: &str) -> Result<String, u16> {
    let (mut f, _) = root.open_file(&dir.join(name)).map_err(|e| e.status())?;
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    Ok(s)
}

#[test]
fn open_errors_keep_their_status() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.mp4"), b"hello").unwrap();
    std::fs::create_dir(d.path().join("dir")).unwrap();
    let root = Root::open(d.path()).unwrap();
    let (_, m) = root.open_file(&d.path().join("a.mp4")).unwrap();
    assert_eq!(
        (m.size, m.kind, m.content_type),
        (5, FileKind::Regular, "video/mp4")
    );
    assert!(m.mtime.is_some());
    for fallback in [false, true] {
        root.no_openat2.store(fallback, Ordering::Relaxed);
        assert_eq!(status(&root, d.path(), "a.mp4"), 200, "{fallback}");
        assert_eq!(status(&root, d.path(), "dir"), 403, "{fallback}");
        assert_eq!(status(&root, d.path(), ""), 403, "the root itself");
        assert_eq!(status(&root, d.path(), "missing"), 404);
        assert_eq!(status(&root, d.path(), "a.mp4/x"), 404);
    }
    root.no_openat2.store(false, Ordering::Relaxed);
    // unreadable: 403, unless we are root (who reads anything)
    let p = d.path().join("secret.mp4");
    std::fs::write(&p, b"x").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    if !is_root() {
        assert_eq!(root.open_file(&p).unwrap_err().status(), 403);
    }
}

#[test]
fn what_is_not_a_regular_file_is_refused_with_403() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::write(dir.join("a.mp4"), b"hello").unwrap();
    // a socket: opening it is ENXIO
    let _sock = std::os::unix::net::UnixListener::bind(dir.join("sock.mp4")).unwrap();
    // a FIFO without a writer: opened at once (O_NONBLOCK), then refused
    // SAFETY: a live NUL-terminated path
    assert_eq!(
        unsafe { libc::mkfifo(cstr(&dir.join("fifo.mp4")).as_ptr(), 0o644) },
        0
    );
    symlink("sock.mp4", dir.join("to-sock.mp4")).unwrap();
    symlink("fifo.mp4", dir.join("to-fifo.mp4")).unwrap();
    // a symlink out of the root (absolute, or up and out) is 404 however
    // it ends: the server does not tell what exists outside its root
    symlink("/dev/null", dir.join("null.mp4")).unwrap();
    let ups = "../".repeat(dir.components().count() + 1) + "dev/null";
    symlink(ups, dir.join("up-null.mp4")).unwrap();
    let mut refused = vec!["sock.mp4", "fifo.mp4", "to-sock.mp4", "to-fifo.mp4"];
    if is_root() {
        // character devices: /dev/null's (1, 3), which opens, and one whose
        // driver does not exist (major 240, local use: ENXIO or ENODEV)
        for (name, major) in [("null-dev.mp4", 1), ("nodriver.mp4", 240)] {
            let mode = libc::S_IFCHR | 0o666;
            // SAFETY: a live NUL-terminated path
            let r = unsafe {
                libc::mknod(
                    cstr(&dir.join(name)).as_ptr(),
                    mode,
                    libc::makedev(major, 3),
                )
            };
            assert_eq!(r, 0, "mknod: {}", io::Error::last_os_error());
        }
        symlink("null-dev.mp4", dir.join("to-dev.mp4")).unwrap();
        refused.extend(["null-dev.mp4", "nodriver.mp4", "to-dev.mp4"]);
    }
    let root = Root::open(dir).unwrap();
    for fallback in [false, true] {
        root.no_openat2.store(fallback, Ordering::Relaxed);
        for name in &refused {
            let t = std::time::Instant::now();
            let e = root.open_file(&dir.join(name)).unwrap_err();
            assert!(
                matches!(e, ServeError::NotRegular),
                "{name} {fallback}: {e:?}"
            );
            assert!(!e.is_server_side(), "{name}");
            assert!(t.elapsed() < Duration::from_secs(1), "{name} blocked");
        }
        for name in ["null.mp4", "up-null.mp4"] {
            assert_eq!(status(&root, dir, name), 404, "{name} {fallback}");
        }
    }
    root.no_openat2.store(false, Ordering::Relaxed);
    // an error `from_open` cannot explain (a driver's EIO) on what is not
    // a regular file is a refusal too, found without opening it; on a
    // regular file it stays the server's error (500)
    let held = root.held.current();
    let eio = || io::Error::from_raw_os_error(libc::EIO);
    let r = root.refusal(&held, &dir.join("fifo.mp4"), eio());
    assert!(matches!(r, ServeError::NotRegular), "{r:?}");
    let r = root.refusal(&held, &dir.join("a.mp4"), eio());
    assert_eq!(r.status(), 500);
    let r = root.refusal(&held, &dir.join("null.mp4"), eio());
    assert_eq!(r.status(), 500, "outside the root: not looked at");
}

/// `dir/name` filled with `a.mp4` whose content is `tag`, and `only-TAG.mp4`.
fn tree(dir: &Path, tag: &str) -> PathBuf {
    let p = dir.join(tag);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("a.mp4"), tag).unwrap();
    std::fs::write(p.join(format!("only-{tag}.mp4")), tag).unwrap();
    p
}

#[test]
fn a_replaced_root_is_opened_again() {
    let d = tempfile::tempdir().unwrap();
    let top = d.path();
    let path = top.join("root");
    std::fs::rename(tree(top, "one"), &path).unwrap();
    // never due: only a missing file looks the path up
    let root = Root::open_rechecking(&path, Duration::from_secs(3600)).unwrap();
    assert_eq!(content(&root, &path, "a.mp4"), Ok("one".into()));
    // removed and re-created: the first request finds it
    std::fs::remove_dir_all(&path).unwrap();
    std::fs::rename(tree(top, "two"), &path).unwrap();
    assert_eq!(content(&root, &path, "a.mp4"), Ok("two".into()));
    assert_eq!(root.reopens(), 1);
    // renamed over: the old tree is whole, so it is served until a look-up
    std::fs::rename(&path, top.join("two.old")).unwrap();
    std::fs::rename(tree(top, "three"), &path).unwrap();
    assert_eq!(content(&root, &path, "a.mp4"), Ok("two".into()));
    // ... which a file only the new tree has causes
    assert_eq!(content(&root, &path, "only-three.mp4"), Ok("three".into()));
    assert_eq!(content(&root, &path, "a.mp4"), Ok("three".into()));
    assert_eq!(root.reopens(), 2);
    // a missing file in an unchanged root looks up and keeps it
    assert_eq!(content(&root, &path, "only-two.mp4"), Err(404));
    assert_eq!(root.reopens(), 2);

    // looked up at every request (interval 0): a rename is seen at once
    let root = Root::open_rechecking(&path, Duration::ZERO).unwrap();
    std::fs::rename(&path, top.join("three.old")).unwrap();
    std::fs::rename(tree(top, "four"), &path).unwrap();
    assert_eq!(content(&root, &path, "a.mp4"), Ok("four".into()));
    // the path gone, or naming a file: the root held stays
    std::fs::rename(&path, top.join("four.old")).unwrap();
    assert_eq!(content(&root, &path, "a.mp4"), Ok("four".into()));
    std::fs::write(&path, b"not a directory").unwrap();
    assert_eq!(content(&root, &path, "a.mp4"), Ok("four".into()));
    assert_eq!(content(&root, &path, "missing.mp4"), Err(404));
    assert_eq!(root.reopens(), 1);
    std::fs::remove_file(&path).unwrap();
    symlink("five", &path).unwrap();
    tree(top, "five");
    assert_eq!(content(&root, &path, "a.mp4"), Ok("five".into()));
    assert_eq!(root.reopens(), 2);
}

#[test]
fn a_request_racing_swaps_gets_one_tree_and_never_leaves_it() {
    let d = tempfile::tempdir().unwrap();
    let top = d.path().to_path_buf();
    std::fs::write(top.join("secret.mp4"), b"outside").unwrap();
    for tag in ["a", "b"] {
        let t = tree(&top, tag);
        symlink("../secret.mp4", t.join("up.mp4")).unwrap();
        symlink(top.join("secret.mp4"), t.join("abs.mp4")).unwrap();
    }
    let path = top.join("root");
    symlink("a", &path).unwrap();
    let root = Root::open_rechecking(&path, Duration::ZERO).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    // opens that found tree a, tree b
    let seen = [AtomicU64::new(0), AtomicU64::new(0)];
    let swaps = 300;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    match content(&root, &path, "a.mp4").as_deref() {
                        Ok("a") => seen[0].fetch_add(1, Ordering::Relaxed),
                        Ok("b") => seen[1].fetch_add(1, Ordering::Relaxed),
                        other => panic!("a.mp4 during a swap: {other:?}"),
                    };
                    for esc in ["up.mp4", "abs.mp4"] {
                        assert_eq!(content(&root, &path, esc), Err(404), "{esc}");
                    }
                }
            });
        }
        // at least `swaps` swaps, and on until both trees were served often
        let t0 = std::time::Instant::now();
        let mut i = 0;
        while i < swaps || seen.iter().any(|n| n.load(Ordering::Relaxed) < 50) {
            assert!(t0.elapsed() < Duration::from_secs(20), "readers: {seen:?}");
            // retarget atomically: a new link renamed over the old
            let next = top.join("next");
            symlink(if i % 2 == 0 { "b" } else { "a" }, &next).unwrap();
            std::fs::rename(&next, &path).unwrap();
            std::thread::sleep(Duration::from_micros(200));
            i += 1;
        }
        done.store(true, Ordering::Relaxed);
    });
    assert!(root.reopens() > 0);
}

/// The periodic look-up's schedule in virtual time: a root renamed over is
/// served from its old tree until the interval (less a coarse tick) has
/// passed since the last look-up, and from the new one from then on.
#[test]
fn a_renamed_root_is_seen_at_the_first_request_after_the_interval() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    std::fs::write(b.join("new.mp4"), b"new").unwrap();
    let every = Duration::from_millis(100);
    let held = super::held::Held::open(&a, every).unwrap();
    let t0 = 1_000_000u64; // µs of the coarse clock
    let first = held.current_at(t0); // the first request looks up at once
                                     // the swap: b renamed over a
    std::fs::remove_dir(&a).unwrap();
    std::fs::rename(&b, &a).unwrap();
    let due = t0 + every.as_micros() as u64 - super::held::COARSE_TICK_US;
    let before = held.current_at(due - 1);
    assert!(
        Arc::ptr_eq(&first, &before),
        "looked up before its interval"
    );
    assert_eq!(held.reopens(), 0);
    let after = held.current_at(due);
    assert!(
        !Arc::ptr_eq(&first, &after),
        "not looked up at its interval"
    );
    assert_eq!(held.reopens(), 1);
    // and the next look-up is a whole interval (less a tick) later again
    let again = held.current_at(due + 1);
    assert!(Arc::ptr_eq(&after, &again));
}
