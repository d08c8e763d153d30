//! The one way vodlab writes a result file (`results.json`, `summary.txt`,
//! `metrics.json`, `checkpoint.json`, `capacity.json`, `compare.json`):
//! the bytes go to a temporary file beside the target (`.NAME.tmp`, same
//! directory, so the same file system), which is synced, renamed over the
//! target, and then the directory is synced. A reader sees the old file or
//! the new one, whole, never a part; a write that fails before the rename
//! (no space left on the device, a read-only directory) leaves the old
//! file as it was and removes the temporary one; after the directory's
//! sync the new file survives a power cut (docs/results.md).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The step of [`write`] that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Creating, writing or syncing the temporary file: the target is
    /// untouched.
    Write,
    /// Renaming the temporary file over the target: the target is
    /// untouched.
    Replace,
    /// Syncing the directory after the rename: the new file is in place
    /// but may not survive a power cut.
    SyncDir,
}

/// Why a result file could not be written: the file, the step and the OS
/// error.
#[derive(Debug, thiserror::Error)]
#[error("{} {}: {source}; {}", self.verb(), path.display(), self.consequence())]
pub struct AtomicWriteError {
    /// The file that was to be written (the target, not the temporary
    /// file).
    pub path: PathBuf,
    /// Which step failed.
    pub step: Step,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl AtomicWriteError {
    /// True when the device is full (ENOSPC, or EDQUOT: a quota).
    pub fn is_no_space(&self) -> bool {
        matches!(
            self.source.raw_os_error(),
            Some(libc::ENOSPC) | Some(libc::EDQUOT)
        )
    }

    /// True when the target still holds what it held before the write
    /// (or is still absent).
    pub fn target_unchanged(&self) -> bool {
        self.step != Step::SyncDir
    }

    fn verb(&self) -> &'static str {
        match self.step {
            Step::Write => "writing",
            Step::Replace => "replacing",
            Step::SyncDir => "syncing the directory of",
        }
    }

    fn consequence(&self) -> String {
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if self.target_unchanged() {
            format!("{name} is unchanged (the previous one, if any, is still there, whole)")
        } else {
            format!("the new {name} is in place but may not survive a power cut")
        }
    }
}

/// The temporary file [`write`] uses for `path`: `.NAME.tmp` in the same
/// directory.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tmp"))
}

/// Writes `bytes` to `path` atomically and durably: temporary file in the
/// same directory, `fsync`, rename over `path`, `fsync` of the directory.
/// On an error before the rename the temporary file is removed and `path`
/// is as it was. A symbolic link is followed (the file it names is
/// replaced, not the link); a path that is neither a regular file nor
/// absent (`/dev/stdout`, a FIFO) is written in place, as it cannot be
/// replaced.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => {
            return File::create(path)
                .and_then(|mut f| f.write_all(bytes))
                .map_err(|source| AtomicWriteError {
                    path: path.to_path_buf(),
                    step: Step::Write,
                    source,
                });
        }
        _ => {}
    }
    let real = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).ok(),
        _ => None,
    };
    write_with(real.as_deref().unwrap_or(path), bytes, |from, to| {
        std::fs::rename(from, to)
    })
}

/// [`write`] with the rename given (the tests make it fail).
fn write_with(
    path: &Path,
    bytes: &[u8],
    rename: impl FnOnce(&Path, &Path) -> io::Result<()>,
) -> Result<(), AtomicWriteError> {
    let fail = |step, source| AtomicWriteError {
        path: path.to_path_buf(),
        step,
        source,
    };
    if path.file_name().is_none() {
        return Err(fail(
            Step::Write,
            io::Error::new(io::ErrorKind::InvalidInput, "not a file name"),
        ));
    }
    let tmp = temp_path(path);
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(Step::Write, e));
    }
    if let Err(e) = rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(Step::Replace, e));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| fail(Step::SyncDir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_then_replaces_and_leaves_no_temporary_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("results.json");
        write(&p, b"one").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        write(&p, b"two, longer").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two, longer");
        assert_eq!(names(t.path()), ["results.json"]);
    }

    #[test]
    fn a_failed_rename_leaves_the_old_file_and_no_temporary_one() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("results.json");
        std::fs::write(&p, b"the old results").unwrap();
        let e = write_with(&p, b"new", |_, _| {
            Err(io::Error::from_raw_os_error(libc::EXDEV))
        })
        .unwrap_err();
        assert_eq!(e.step, Step::Replace);
        assert!(e.target_unchanged());
        assert_eq!(std::fs::read(&p).unwrap(), b"the old results");
        assert_eq!(names(t.path()), ["results.json"]);
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("replacing {}: ", p.display())),
            "{text}"
        );
        assert!(
            text.contains(&io::Error::from_raw_os_error(libc::EXDEV).to_string()),
            "{text}"
        );
        assert!(text.contains("results.json is unchanged"), "{text}");
    }

    #[test]
    fn a_real_rename_onto_a_directory_fails_and_keeps_it() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("compare.json");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), b"kept").unwrap();
        let e = write(&p, b"{}").unwrap_err();
        assert_eq!(e.step, Step::Replace);
        assert_eq!(e.source.raw_os_error(), Some(libc::EISDIR));
        assert_eq!(std::fs::read(p.join("inside")).unwrap(), b"kept");
        assert_eq!(names(t.path()), ["compare.json"]);
    }

    #[test]
    fn a_temporary_file_that_cannot_be_made_leaves_the_old_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("capacity.json");
        std::fs::write(&p, b"old").unwrap();
        // something already holds the temporary name and is no file
        std::fs::create_dir(temp_path(&p)).unwrap();
        std::fs::write(temp_path(&p).join("x"), b"").unwrap();
        let e = write(&p, b"new").unwrap_err();
        assert_eq!(e.step, Step::Write);
        assert!(!e.is_no_space());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert!(e
            .to_string()
            .starts_with(&format!("writing {}: ", p.display())));
    }

    #[test]
    fn a_missing_directory_is_named() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("gone").join("results.json");
        let e = write(&p, b"x").unwrap_err();
        assert_eq!(e.path, p);
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains(&p.display().to_string()));
    }

    #[test]
    fn no_space_is_recognised_and_worded_by_the_os() {
        let e = AtomicWriteError {
            path: "/out/results.json".into(),
            step: Step::Write,
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert!(e.is_no_space());
        let text = e.to_string();
        assert!(
            text.to_lowercase().contains("no space left on device"),
            "{text}"
        );
        assert!(text.starts_with("writing /out/results.json: "), "{text}");
        let e = AtomicWriteError {
            step: Step::SyncDir,
            ..e
        };
        assert!(!e.target_unchanged());
        assert!(e.to_string().contains("may not survive a power cut"));
    }

    #[test]
    fn a_symbolic_link_is_followed_and_kept() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("real")).unwrap();
        let real = t.path().join("real").join("results.json");
        std::fs::write(&real, b"old").unwrap();
        let link = t.path().join("results.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        assert_eq!(names(&t.path().join("real")), ["results.json"]);
    }

    #[test]
    fn a_device_is_written_in_place() {
        // /dev/null cannot be replaced (and must not be): written as is
        write(Path::new("/dev/null"), b"discarded").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    #[test]
    fn a_path_without_a_file_name_is_refused() {
        let e = write(Path::new(""), b"x").unwrap_err();
        assert_eq!(e.source.kind(), io::ErrorKind::InvalidInput);
    }
}
