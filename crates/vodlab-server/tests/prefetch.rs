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

#[tokio::test]
async fn helpers_read_into_the_cache_and_count() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, vec![1u8; 3 << 20]).unwrap();
    let f = Arc::new(File::open(&p).unwrap());
    f.sync_all().unwrap(); // DONTNEED drops clean pages only
                           // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert!(!Prober::default().resident(&f, 0, 2 << 20));
    let h = Helpers::new(1);
    let report = h.prefetch(f.clone(), 0, 2 << 20).await.unwrap();
    assert_eq!(report.bytes, 2 << 20);
    assert!(report.duration > std::time::Duration::ZERO);
    assert!(Prober::default().resident(&f, 0, 2 << 20));
    let s = h.stats();
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].reads, s[0].bytes), (1, 2 << 20));
    h.shutdown();
}
