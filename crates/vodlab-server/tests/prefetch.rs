//! Page-cache probes and prefetch helpers on the real disk (not tmpfs).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;

use vodlab_server::prefetch::{Helpers, Prober};

#[test]
fn probe_sees_a_file_we_just_read() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, vec![1u8; 1 << 20]).unwrap();
    let f = File::open(&p).unwrap();
    let mut b = vec![0u8; 1 << 20];
    f.read_at(&mut b, 0).unwrap();
    let prober = Prober::default();
    assert!(prober.resident(&f, 0, 1 << 20));
    // evict and probe again
    f.sync_all().unwrap(); // DONTNEED drops clean pages only
                           // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert!(!prober.resident(&f, 0, 1 << 20));
}

/// Bytes this process had the block layer read (`/proc/self/io`).
fn disk_read_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("read_bytes: "))
        .expect("read_bytes in /proc/self/io")
        .trim()
        .parse()
        .unwrap()
}

/// A 2 MiB prefetch of an uncached 8 MiB file reads those 2 MiB and no
/// more: the helper's descriptor has the kernel's read-ahead off, so the
/// rest stays out of the page cache and the disk read what the helper
/// counted (before, with the request's descriptor and this VM's 8 MiB
/// read-ahead, the whole file came in).
#[tokio::test]
async fn helpers_read_into_the_cache_exactly_their_bytes_and_count() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, vec![1u8; 8 << 20]).unwrap();
    let f = Arc::new(File::open(&p).unwrap());
    f.sync_all().unwrap(); // DONTNEED drops clean pages only
                           // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert!(!Prober::default().resident(&f, 0, 2 << 20));
    let h = Helpers::new(1);
    let disk0 = disk_read_bytes();
    let report = h.prefetch(f.clone(), 0, 2 << 20, None).await.unwrap();
    let disk = disk_read_bytes() - disk0;
    assert_eq!(report.bytes, 2 << 20);
    assert!(report.duration > std::time::Duration::ZERO);
    assert!(Prober::default().resident(&f, 0, 2 << 20));
    for mib in 2..8 {
        assert!(
            !Prober::default().resident(&f, mib << 20, 4096),
            "MiB {mib} was read ahead"
        );
    }
    // the other test of this file reads only what it just wrote (cached)
    assert!(
        (2 << 20..=(2 << 20) + (64 << 10)).contains(&disk),
        "the disk read {disk} bytes for a 2 MiB prefetch (a temp dir on tmpfs reads none)"
    );
    let s = h.stats();
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].reads, s[0].bytes, s[0].readahead_fallbacks),
        (1, 2 << 20, 0)
    );
    h.shutdown();
}
