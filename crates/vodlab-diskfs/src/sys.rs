//! The system side of a mount: stale mounts, the mount's block-device
//! identity and its read-ahead (`/sys/class/bdi/MAJOR:MINOR/read_ahead_kb`).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The helper Debian's `fuse3` package installs.
pub const FUSERMOUNT: &str = "fusermount3";

/// True when `path` is the mount point of a FUSE file system whose daemon
/// is gone: the kernel answers `ENOTCONN` ("Transport endpoint is not
/// connected").
/// `stat` alone may be answered from the attributes the kernel cached, so
/// the directory is opened too (which always asks the daemon).
pub fn is_stale(path: &Path) -> bool {
    let enotconn = |e: &io::Error| e.raw_os_error() == Some(libc::ENOTCONN);
    matches!(std::fs::metadata(path), Err(e) if enotconn(&e))
        || matches!(std::fs::read_dir(path), Err(e) if enotconn(&e))
}

/// If `path` is a stale FUSE mount, detaches it (`fusermount3 -u -z`, then
/// `umount -l` as root if that fails) and returns true.
pub fn clean_stale(path: &Path) -> io::Result<bool> {
    if !is_stale(path) {
        return Ok(false);
    }
    let out = Command::new(FUSERMOUNT)
        .args(["-u", "-z", "--"])
        .arg(path)
        .output();
    let ok = matches!(&out, Ok(o) if o.status.success());
    if !ok {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(io::Error::other)?;
        // SAFETY: umount2 with a valid C string
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
            let e = io::Error::last_os_error();
            let why = match out {
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(x) => format!("cannot run {FUSERMOUNT}: {x}"),
            };
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "{}: stale mount; {FUSERMOUNT} -u -z: {why}; umount: {e}",
                    path.display()
                ),
            ));
        }
    }
    if is_stale(path) {
        return Err(io::Error::other(format!(
            "{}: still a stale mount after {FUSERMOUNT} -u -z",
            path.display()
        )));
    }
    Ok(true)
}

/// Unmounts the FUSE file system at `path`: `umount2` (root), else
/// `fusermount3 -u`; if it is busy, detaches it lazily (`-z`).
pub fn unmount(path: &Path) -> io::Result<()> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    for flags in [0, libc::MNT_DETACH] {
        // SAFETY: umount2 with a valid C string
        if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) {
            return Ok(()); // not mounted (any more)
        }
        if e.raw_os_error() == Some(libc::EPERM) {
            break;
        }
    }
    let out = Command::new(FUSERMOUNT)
        .args(["-u", "-z", "--"])
        .arg(path)
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{FUSERMOUNT} -u -z {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// True when `path` is a mount point (its device differs from its parent's,
/// or it is `/`).
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    let m = std::fs::metadata(path)?;
    let canon = path.canonicalize()?;
    match canon.parent() {
        None => Ok(true),
        Some(p) => Ok(std::fs::metadata(p)?.dev() != m.dev()),
    }
}

/// `MAJOR:MINOR` of the file system mounted at `path`, the name of its
/// backing-device-info directory under `/sys/class/bdi`.
pub fn bdi_name(path: &Path) -> io::Result<String> {
    let dev = std::fs::metadata(path)?.dev();
    Ok(format!("{}:{}", libc::major(dev), libc::minor(dev)))
}

/// The `read_ahead_kb` file of the mount at `path`.
pub fn readahead_file(path: &Path) -> io::Result<PathBuf> {
    Ok(Path::new("/sys/class/bdi")
        .join(bdi_name(path)?)
        .join("read_ahead_kb"))
}

/// Sets the mount's read-ahead to `kib` and returns the value read back.
pub fn set_readahead(path: &Path, kib: u32) -> io::Result<u32> {
    let f = readahead_file(path)?;
    std::fs::write(&f, format!("{kib}\n"))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
    read_readahead(path)
}

/// The mount's read-ahead, KiB.
pub fn read_readahead(path: &Path) -> io::Result<u32> {
    let f = readahead_file(path)?;
    let t = std::fs::read_to_string(&f)?;
    t.trim()
        .parse()
        .map_err(|e| io::Error::other(format!("{}: {e}", f.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinary_directory_is_neither_stale_nor_a_mount_point() {
        let d = tempfile::tempdir().unwrap();
        assert!(!is_stale(d.path()));
        assert!(!clean_stale(d.path()).unwrap());
        assert!(!is_mount_point(d.path()).unwrap());
        assert!(is_mount_point(Path::new("/")).unwrap());
        let name = bdi_name(d.path()).unwrap();
        assert!(name.contains(':'), "{name}");
    }
}
