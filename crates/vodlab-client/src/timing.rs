//! h2load timing scripts in: `--timing-script-file` files (one request a
//! line, `offset_ms<TAB>URI`, offsets from the client's start) replayed by
//! `vodlab run --timing-script FILE --clients N --stagger MS`: every client
//! runs the same script, client `i` starting `i × MS` after the first.
//!
//! A script becomes one session whose requests are paced at the offsets'
//! differences ([`Wait::Pacing`]); `vodlab script export --to h2load`
//! writes the same format, and the two round-trip exactly for sessions of
//! paced requests. Unlike h2load, a client sends a request only once the
//! previous response is complete (a player's behaviour); with
//! `--late-pacing burst` a late request catches up with the script's
//! offsets.

use std::path::Path;

use vodlab_workload::script::{Request, Session, Wait};

use crate::core::schedule::Arrivals;
use crate::load::{LoadedWorkload, Shard};

/// Why a timing script was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TimingError {
    /// A line is malformed.
    #[error("line {line}: {reason}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// No request line.
    #[error("no request lines")]
    Empty,
}

/// Largest offset accepted, ms (a week).
const MAX_OFFSET_MS: f64 = 7.0 * 86_400_000.0;

/// The path of a script URI: an absolute URI loses its scheme and
/// authority (the run's `--target` is the server), a path is kept.
fn path_of(uri: &str) -> Option<String> {
    if uri.starts_with('/') {
        return Some(uri.to_string());
    }
    let rest = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("https://"))?;
    Some(match rest.find('/') {
        Some(i) => rest[i..].to_string(),
        None => "/".to_string(),
    })
}

/// Parses a timing script into one session (blank lines and `#` comments
/// are skipped). Offsets must not decrease.
pub fn parse(text: &str) -> Result<Session, TimingError> {
    let mut requests: Vec<Request> = Vec::new();
    let mut last: Option<f64> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let bad = |reason: String| TimingError::Line { line, reason };
        let l = raw.trim_end_matches('\r');
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        let Some((off, uri)) = l.split_once('\t') else {
            return Err(bad("expected `offset_ms<TAB>URI`".into()));
        };
        let off: f64 = off
            .trim()
            .parse()
            .map_err(|_| bad(format!("offset `{}` is not a number of ms", off.trim())))?;
        if !(off.is_finite() && (0.0..=MAX_OFFSET_MS).contains(&off)) {
            return Err(bad(format!(
                "offset {off} ms is outside 0..={MAX_OFFSET_MS}"
            )));
        }
        if let Some(prev) = last {
            if off < prev {
                return Err(bad(format!(
                    "offset {off} ms is before the previous line's {prev} ms"
                )));
            }
        }
        let uri = uri.trim();
        let path = path_of(uri).ok_or_else(|| {
            bad(format!(
                "`{uri}` is neither a path (/...) nor an http(s):// URI"
            ))
        })?;
        let mut r = Request::get(path);
        if let Some(prev) = last {
            r.wait = Wait::Pacing((off - prev) / 1000.0);
        }
        requests.push(r);
        last = Some(off);
    }
    if requests.is_empty() {
        return Err(TimingError::Empty);
    }
    Ok(Session {
        header: Default::default(),
        requests,
    })
}

/// The workload of `clients` copies of the script's session (ids 0..N),
/// and their arrivals: one every `stagger_ms` from the run's start (all at
/// once for 0: 1 µs apart).
pub fn workload(
    file: &Path,
    session: &Session,
    clients: usize,
    stagger_ms: f64,
) -> (LoadedWorkload, Arrivals) {
    let sessions = (0..clients as u64)
        .map(|id| {
            let mut s = session.clone();
            s.header.id = Some(id);
            s
        })
        .collect();
    let work = LoadedWorkload {
        name: file
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into()),
        shards: vec![Shard {
            file: file.to_path_buf(),
            sessions,
            streamed: Vec::new(),
        }],
        ..LoadedWorkload::default()
    };
    let rate = 1000.0 / stagger_ms.max(0.001);
    (work, Arrivals::Constant { rate })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vodlab_workload::script::export_h2load;

    #[test]
    fn offsets_become_pacing_and_uris_paths() {
        let s = parse("0\thttps://bbc.example/a/init.mp4\n# audio\n\n3840.5\t/a/1.m4s\n7681\thttp://h:8080/a/2.m4s\n").unwrap();
        let paths: Vec<&str> = s.requests.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/a/init.mp4", "/a/1.m4s", "/a/2.m4s"]);
        assert_eq!(s.requests[0].wait, Wait::None);
        assert_eq!(s.requests[1].wait, Wait::Pacing(3.8405));
        assert_eq!(s.requests[2].wait, Wait::Pacing(3.8405));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("0\t/a\n10 /b\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: expected `offset_ms<TAB>URI`");
        let e = parse("0\t/a\nten\t/b\n").unwrap_err().to_string();
        assert!(e.starts_with("line 2:") && e.contains("ten"), "{e}");
        let e = parse("5\t/a\n4\t/b\n").unwrap_err().to_string();
        assert!(e.starts_with("line 2:") && e.contains("before"), "{e}");
        let e = parse("0\tftp://x/a\n").unwrap_err().to_string();
        assert!(e.starts_with("line 1:"), "{e}");
        assert_eq!(parse("# nothing\n").unwrap_err(), TimingError::Empty);
    }

    #[test]
    fn export_and_import_round_trip() {
        let text = "0.000\t/v/init.mp4\n0.000\t/a/init.mp4\n3840.000\t/v/1.m4s\n3840.000\t/a/1.m4s\n7680.000\t/v/2.m4s\n";
        let s = parse(text).unwrap();
        let (again, report) = export_h2load(&s);
        assert_eq!(again, text);
        assert!(
            report.notes.iter().all(|(k, _)| k.contains("back-to-back")),
            "{report}"
        );
        assert_eq!(parse(&again).unwrap(), s);
    }

    #[test]
    fn clients_are_copies_staggered_evenly() {
        let s = parse("0\t/a\n100\t/b\n").unwrap();
        let (w, arr) = workload(Path::new("t.txt"), &s, 3, 250.0);
        assert_eq!(w.session_count(), 3);
        let ids: Vec<_> = w.shards[0].sessions.iter().map(|s| s.header.id).collect();
        assert_eq!(ids, [Some(0), Some(1), Some(2)]);
        let offs: Vec<f64> = arr.offsets(1).take(3).map(|d| d.as_secs_f64()).collect();
        assert_eq!(offs, [0.0, 0.25, 0.5]);
    }
}
