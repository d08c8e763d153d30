//! Tests of `hwbox.rs`.

use super::*;

#[test]
fn sizes() {
    assert_eq!(parse_size("512M"), Ok(512 << 20));
    assert_eq!(parse_size("1.5g"), Ok(3 << 29));
    assert_eq!(parse_size("4096"), Ok(4096));
    assert!(parse_size("12Q").is_err());
    assert!(parse_size("lots").is_err());
}

#[test]
fn profiles_are_known() {
    assert_eq!(profile("hdd-5400").unwrap().read_iops, 40);
    assert!(profile("floppy")
        .unwrap_err()
        .to_string()
        .contains("hdd-7200"));
    for p in PROFILES {
        assert!(p.read_bps > 0 && p.read_iops > 0 && !p.source.is_empty());
    }
}

/// Setup, limits read back, a throttled read in the box, usage counters,
/// teardown (cgroups gone, read-ahead restored). Needs root and cgroups;
/// without them it asserts the error says so.
#[test]
fn box_lifecycle() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let spec = |dev| BoxSpec {
        name: format!("vodlab-test-{}", std::process::id()),
        mem_bytes: Some(64 << 20),
        device: Some(dev),
        read_bps: Some(4 << 20),
        read_iops: Some(1000),
        readahead_kb: Some(128),
    };
    if !is_root() {
        let e = HwBox::create(spec(Dev { major: 8, minor: 0 })).unwrap_err();
        assert!(matches!(e, BoxError::NotRoot), "{e}");
        eprintln!("box_lifecycle: not root; only the refusal was checked");
        return;
    }
    let dev = match Dev::of_path(dir.path()) {
        Ok(d) => d,
        Err(e) => panic!("the test directory must be on a block device: {e}"),
    };
    let ra_before = fs::read_to_string(dev.readahead_file()).unwrap();
    let mut b = HwBox::create(spec(dev)).expect("box");
    let dirs = b.dirs().to_vec();
    assert!(dirs.iter().all(|d| d.exists()));
    assert_eq!(
        fs::read_to_string(dev.readahead_file()).unwrap().trim(),
        "128"
    );
    // 12 MiB through a 4 MiB/s throttle: about 3 s (the first bytes may
    // pass before the throttle's budget runs out, so assert > 2 s)
    let f = dir.path().join("data");
    fs::write(&f, vec![7u8; 12 << 20]).unwrap();
    let c = CString::new(f.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: plain syscalls on a file we own
    unsafe {
        let fd = libc::open(c.as_ptr(), libc::O_RDONLY);
        libc::fsync(fd);
        libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
        libc::close(fd);
    }
    let t = Instant::now();
    let mut cmd = Command::new("cat");
    cmd.arg(&f).stdout(std::process::Stdio::null());
    let st = b.command(&mut cmd).status().unwrap();
    assert!(st.success());
    let secs = t.elapsed().as_secs_f64();
    let u = b.usage().unwrap();
    assert!(u.read_bytes >= 11 << 20, "box read {} bytes", u.read_bytes);
    assert!(u.read_ios > 0);
    assert!(secs > 2.0, "12 MiB at 4 MiB/s took only {secs:.2} s");
    assert!(u.memory_peak_bytes.is_none_or(|p| p <= 64 << 20));
    // a long-lived process is killed on teardown
    let mut sleeper = Command::new("sleep");
    sleeper.arg("60");
    let mut child = b.command(&mut sleeper).spawn().unwrap();
    assert_eq!(b.pids().unwrap(), vec![child.id()]);
    b.teardown().unwrap();
    assert!(!child.wait().unwrap().success());
    assert!(dirs.iter().all(|d| !d.exists()), "cgroups removed");
    assert_eq!(fs::read_to_string(dev.readahead_file()).unwrap(), ra_before);
}

#[test]
fn non_block_paths_are_refused() {
    if Path::new("/dev/shm").exists() {
        let e = Dev::of_path(Path::new("/dev/shm")).unwrap_err();
        assert!(e.to_string().contains("not on a block device"), "{e}");
    }
}
