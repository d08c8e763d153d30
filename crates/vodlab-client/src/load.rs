//! Loading what `vodlab run` replays: a `vodlab gen` directory or one script.
//!
//! A script is read once, a line at a time, when the run loads it; each
//! session keeps its header and its place in the file ([`SessionSpan`]),
//! not its requests, which are read again when the session starts
//! ([`LoadedWorkload::session`]). A process so holds the requests of the
//! sessions running now, not of the whole workload: with
//! `--client-processes 7`, each process used to hold all 100,000 sessions'
//! scripts (~3 KiB each) to run a seventh of them.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::BufReader;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use vodlab_workload::construct::Catalog;
use vodlab_workload::output::{read_manifest, ReadError};
use vodlab_workload::script::{
    parse_script_bytes, parse_script_stream, Session, SessionSpan, StreamError, Wait,
};
use vodlab_workload::{Spec, TimeCompression};

use crate::core::link::LinkSpec;

/// A script file a workload's sessions are read from, open for the run (a
/// file removed during the run stays readable; one rewritten is detected).
#[derive(Debug)]
pub struct ScriptSource {
    /// Its path.
    pub path: PathBuf,
    file: File,
}

/// Where a streamed session's requests are: its script file and span.
#[derive(Debug, Clone)]
pub struct Streamed {
    /// The file.
    pub source: Arc<ScriptSource>,
    /// The session's bytes in it.
    pub span: SessionSpan,
}

/// One client shard: the sessions one emulated client host replays, in order.
#[derive(Debug, Clone)]
pub struct Shard {
    /// Script file it came from.
    pub file: PathBuf,
    /// Sessions in start order. A streamed session holds its header only
    /// (no requests); [`LoadedWorkload::session`] gives the whole session.
    pub sessions: Vec<Session>,
    /// Where each session's requests are, one per session, when the shard
    /// was read from a file; empty when every session is held whole.
    pub streamed: Vec<Streamed>,
}

impl Shard {
    /// A shard whose sessions are held whole (built in memory).
    pub fn held(file: PathBuf, sessions: Vec<Session>) -> Self {
        Self {
            file,
            sessions,
            streamed: Vec::new(),
        }
    }
}

/// Everything a run needs from the workload.
#[derive(Debug, Clone, Default)]
pub struct LoadedWorkload {
    /// Name (from the manifest, or the script file name).
    pub name: String,
    /// Shards.
    pub shards: Vec<Shard>,
    /// Access link of each client class.
    pub classes: BTreeMap<String, LinkSpec>,
    /// Sessions per shard excluded at the start.
    pub ramp_up: usize,
    /// Sessions per shard excluded at the end.
    pub ramp_down: usize,
    /// Size of each whole file the scripts request, when a catalog is known.
    pub file_sizes: HashMap<String, u64>,
    /// Seed of the file set's content (a `vodlab gen` workload's seed), for
    /// byte checks against a file set written by `vodlab fileset create`.
    pub content_seed: Option<u64>,
    /// The time compression applied ([`Self::compress`]), also to the
    /// sessions read when they start.
    pub compression: Option<TimeCompression>,
}

/// Why a workload could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading a script or manifest failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The spec or catalog of a workload directory is unreadable.
    #[error("{path}: {reason}")]
    Invalid {
        /// File.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A streamed session's bytes are no longer the session loaded.
    #[error("{path}: the session at bytes {offset}..{end} is not the one loaded when the run started ({reason}); was the script rewritten during the run?")]
    Changed {
        /// Script file.
        path: PathBuf,
        /// First byte of the session.
        offset: u64,
        /// End of the session.
        end: u64,
        /// What differs.
        reason: String,
    },
}

/// Reads the script at `path` a line at a time: each session's header and
/// span, and the paths its requests name (into `paths`).
fn stream_file(path: &Path, paths: &mut HashSet<String>) -> Result<Shard, LoadError> {
    let io = |source| {
        LoadError::Read(ReadError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    let file = File::open(path).map_err(io)?;
    let source = Arc::new(ScriptSource {
        path: path.to_path_buf(),
        file: file.try_clone().map_err(io)?,
    });
    let mut sessions = Vec::new();
    let mut streamed = Vec::new();
    parse_script_stream(BufReader::with_capacity(256 * 1024, file), |s, span| {
        for r in &s.requests {
            if !paths.contains(&r.path) {
                paths.insert(r.path.clone());
            }
        }
        sessions.push(Session {
            header: s.header,
            requests: Vec::new(),
        });
        streamed.push(Streamed {
            source: source.clone(),
            span,
        });
    })
    .map_err(|e| match e {
        StreamError::Io(source) => io(source),
        StreamError::Parse(e) => {
            LoadError::Read(ReadError::Parse(e.in_file(path.display().to_string())))
        }
    })?;
    sessions.shrink_to_fit();
    streamed.shrink_to_fit();
    Ok(Shard {
        file: path.to_path_buf(),
        sessions,
        streamed,
    })
}

impl LoadedWorkload {
    /// Loads a `vodlab gen` directory (all shards, client classes, ramps,
    /// catalog sizes) or a single script file (one shard, no classes). The
    /// scripts are streamed: see the module documentation.
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let mut paths = HashSet::new();
        if !path.is_dir() {
            let shard = stream_file(path, &mut paths)?;
            return Ok(Self {
                name: path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into()),
                shards: vec![shard],
                ..Self::default()
            });
        }
        let manifest = read_manifest(path)?;
        let shards = manifest
            .shards
            .iter()
            .map(|s| stream_file(&path.join(&s.file), &mut paths))
            .collect::<Result<Vec<_>, _>>()?;
        let spec_path = path.join("spec.toml");
        let spec = Spec::from_file(&spec_path).map_err(|e| LoadError::Invalid {
            path: spec_path.clone(),
            reason: e.to_string(),
        })?;
        let classes = spec
            .clients
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    LinkSpec {
                        down_bps: c.down_kbps * 1000.0,
                        up_bps: c.up_kbps * 1000.0,
                        delay: Duration::from_secs_f64(c.delay_ms / 1000.0),
                    },
                )
            })
            .collect();
        let cat_path = path.join("catalog.json");
        let text = std::fs::read(&cat_path).map_err(|e| LoadError::Invalid {
            path: cat_path.clone(),
            reason: e.to_string(),
        })?;
        let catalog: Catalog = serde_json::from_slice(&text).map_err(|e| LoadError::Invalid {
            path: cat_path.clone(),
            reason: e.to_string(),
        })?;
        let wanted: HashSet<&str> = paths.iter().map(|p| p.trim_start_matches('/')).collect();
        let file_sizes = catalog
            .files()
            .filter(|(p, _)| wanted.contains(p.as_str()))
            .map(|(p, n)| (format!("/{p}"), n))
            .collect();
        Ok(Self {
            name: manifest.name,
            shards,
            classes,
            ramp_up: manifest.ramp_up_sessions as usize,
            ramp_down: manifest.ramp_down_sessions as usize,
            file_sizes,
            content_seed: Some(manifest.seed),
            compression: None,
        })
    }

    /// Every session, whole, shard by shard in order ([`Self::session`]
    /// of each): what a reader of the scripts' requests iterates, since
    /// [`Shard::sessions`] of a streamed shard holds headers only.
    pub fn whole_sessions(&self) -> impl Iterator<Item = Result<Cow<'_, Session>, LoadError>> {
        self.shards
            .iter()
            .enumerate()
            .flat_map(move |(k, s)| (0..s.sessions.len()).map(move |i| self.session(k, i)))
    }

    /// Session `i` of shard `k`, whole: the one held, or a streamed one read
    /// again from its script (and compressed as the workload was). An error
    /// when the file no longer holds the session loaded.
    pub fn session(&self, k: usize, i: usize) -> Result<Cow<'_, Session>, LoadError> {
        let shard = &self.shards[k];
        let held = &shard.sessions[i];
        let Some(st) = shard.streamed.get(i) else {
            return Ok(Cow::Borrowed(held));
        };
        let changed = |reason: String| LoadError::Changed {
            path: st.source.path.clone(),
            offset: st.span.offset,
            end: st.span.offset + st.span.len,
            reason,
        };
        let mut buf = vec![0; st.span.len as usize];
        st.source
            .file
            .read_exact_at(&mut buf, st.span.offset)
            .map_err(|e| changed(e.to_string()))?;
        let mut script = parse_script_bytes(&buf).map_err(|e| changed(e.to_string()))?;
        if script.sessions.len() != 1 {
            return Err(changed(format!(
                "{} sessions there, not one",
                script.sessions.len()
            )));
        }
        let mut s = script.sessions.pop().expect("one session");
        if let Some(tc) = self.compression {
            s = tc.session(&s);
        }
        if s.header != held.header {
            return Err(changed(format!(
                "its header is {:?}, not {:?}",
                s.header, held.header
            )));
        }
        Ok(Cow::Owned(s))
    }

    /// Total sessions.
    pub fn session_count(&self) -> usize {
        self.shards.iter().map(|s| s.sessions.len()).sum()
    }

    /// Puts every script shard's sessions into the first, in shard order:
    /// one arrival process for the whole workload (`run
    /// --one-arrival-process`, a point of `vodlab capacity`).
    pub fn one_arrival_process(&mut self) {
        if self.shards.len() > 1 {
            let mut shards = std::mem::take(&mut self.shards).into_iter();
            let mut one = shards.next().expect("more than one shard");
            for s in shards {
                // streamed and held shards mixed: all held would need a read
                // of every session; a workload's shards are read alike
                assert_eq!(
                    one.streamed.is_empty(),
                    s.streamed.is_empty(),
                    "one arrival process over streamed and held shards"
                );
                one.sessions.extend(s.sessions);
                one.streamed.extend(s.streamed);
            }
            self.shards = vec![one];
        }
    }

    /// The workload replayed `tc` times faster: every session compressed
    /// ([`vodlab_workload::TimeCompression::session`]: pacing, think times
    /// and deadlines / k, bit rates × k) and every client link's rates × k,
    /// delay / k.
    pub fn compress(&mut self, tc: vodlab_workload::TimeCompression) {
        if tc.is_none() {
            return;
        }
        // streamed sessions are compressed when read: see `session`
        debug_assert!(self.compression.is_none(), "a workload is compressed once");
        self.compression = Some(tc);
        for shard in &mut self.shards {
            for s in &mut shard.sessions {
                *s = tc.session(s);
            }
        }
        for link in self.classes.values_mut() {
            link.down_bps = tc.rate(link.down_bps);
            link.up_bps = tc.rate(link.up_bps);
            link.delay = tc.duration(link.delay);
        }
    }

    /// True when session `i` of a shard of `n` sessions is measured.
    pub fn is_measured(&self, i: usize, n: usize) -> bool {
        i >= self.ramp_up && i + self.ramp_down < n
    }
}

/// Playout parameters of a session: seconds per request (from its header)
/// and the number of leading requests sent back to back (the buffer fill).
pub fn playout(s: &Session) -> Option<(f64, usize)> {
    let request_s = s.header.request_s?;
    let buffering = s
        .requests
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, r)| !r.burst && r.wait != Wait::None)
        .map_or(s.requests.len(), |(i, _)| i);
    Some((request_s, buffering))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vodlab_workload::script::parse_script;

    #[test]
    fn buffering_is_the_unpaced_prefix() {
        let s = parse_script("#@session request_s=10\n/a\n/b\n/c\n/d pacing=10\n/e pacing=10\n")
            .unwrap();
        assert_eq!(playout(&s.sessions[0]), Some((10.0, 3)));
        let s = parse_script("/a\n").unwrap();
        assert_eq!(playout(&s.sessions[0]), None);
    }

    #[test]
    fn ramp_exclusion_counts_the_right_sessions() {
        let w = LoadedWorkload {
            ramp_up: 200,
            ramp_down: 100,
            ..Default::default()
        };
        let measured: Vec<usize> = (0..600).filter(|&i| w.is_measured(i, 600)).collect();
        assert_eq!(measured.len(), 300);
        assert_eq!(measured[0], 200);
        assert_eq!(*measured.last().unwrap(), 499);
        assert_eq!((0..250).filter(|&i| w.is_measured(i, 250)).count(), 0);
    }

    /// A script file written to a fresh directory.
    fn script_file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.vsl");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    const TEXT: &str = "# a comment\n#@session id=4 class=a request_s=2\n/a range=0-9\n/b pacing=2\n\n#@session id=5\n/c think=1.5\n    /d\n/e\n";

    #[test]
    fn a_streamed_session_is_read_back_whole_and_compressed_like_the_rest() {
        let (_d, p) = script_file(TEXT);
        let whole = parse_script(TEXT).unwrap().sessions;
        let mut w = LoadedWorkload::open(&p).unwrap();
        assert_eq!(w.session_count(), 2);
        // held: headers only; read: the sessions as parsed whole
        assert!(w.shards[0].sessions.iter().all(|s| s.requests.is_empty()));
        for (i, want) in whole.iter().enumerate() {
            assert_eq!(&*w.session(0, i).unwrap(), want);
        }
        let tc = vodlab_workload::TimeCompression::new(4.0).unwrap();
        w.compress(tc);
        for (i, want) in whole.iter().enumerate() {
            assert_eq!(*w.session(0, i).unwrap(), tc.session(want));
        }
    }

    #[test]
    fn a_script_rewritten_during_the_run_is_said_not_misread() {
        let (_d, p) = script_file(TEXT);
        let w = LoadedWorkload::open(&p).unwrap();
        // same length, another id: the header no longer matches
        std::fs::write(&p, TEXT.replace("id=5", "id=6")).unwrap();
        let e = w.session(0, 1).unwrap_err().to_string();
        assert!(
            e.contains("not the one loaded") && e.contains("s.vsl"),
            "{e}"
        );
        // cut short: the bytes are gone
        std::fs::write(&p, "").unwrap();
        assert!(w.session(0, 0).is_err());
    }
}
