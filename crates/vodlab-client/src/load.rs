//! Loading what `vodlab run` replays: a `vodlab gen` directory or one script.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use vodlab_workload::construct::Catalog;
use vodlab_workload::output::{read_manifest, read_script_file, read_workload_scripts, ReadError};
use vodlab_workload::script::{Session, Wait};
use vodlab_workload::Spec;

use crate::core::link::LinkSpec;

/// One client shard: the sessions one emulated client host replays, in order.
#[derive(Debug, Clone)]
pub struct Shard {
    /// Script file it came from.
    pub file: PathBuf,
    /// Sessions in start order.
    pub sessions: Vec<Session>,
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
}

impl LoadedWorkload {
    /// Loads a `vodlab gen` directory (all shards, client classes, ramps,
    /// catalog sizes) or a single script file (one shard, no classes).
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        if !path.is_dir() {
            let script = read_script_file(path)?;
            return Ok(Self {
                name: path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into()),
                shards: vec![Shard {
                    file: path.to_path_buf(),
                    sessions: script.sessions,
                }],
                ..Self::default()
            });
        }
        let manifest = read_manifest(path)?;
        let shards = read_workload_scripts(path)?
            .into_iter()
            .map(|(file, s)| Shard {
                file,
                sessions: s.sessions,
            })
            .collect::<Vec<_>>();
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
        let wanted: HashSet<&str> = shards
            .iter()
            .flat_map(|s| &s.sessions)
            .flat_map(|s| &s.requests)
            .map(|r| r.path.trim_start_matches('/'))
            .collect();
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
        })
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
                one.sessions.extend(s.sessions);
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
}
