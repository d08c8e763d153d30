//! Workload construction: spec + seed -> catalog, sessions and statistics.
//!
//! Deterministic: the catalog and the sessions draw from two separate ChaCha8
//! streams of the seed, so changing the session count leaves the catalog as it
//! was. Nothing here does I/O; [`crate::output`] writes the result.

use rand::seq::{index, SliceRandom};
use serde::Serialize;

use crate::dist::WeightedIndex;
use crate::error::{Problems, SpecError};
use crate::limits;
use crate::script::{ByteRange, Request, Session, SessionHeader, Wait};
pub use crate::spec::size::size_problems;
use crate::spec::size::{draw_durations, rng, CATALOG_STREAM, SESSION_STREAM};
use crate::spec::{
    Ladder, Layout, ManifestSpec, Placement, Popularity, RepKind, RepresentationChoice, Selection,
    SessionModel, Spec, StartPosition,
};

/// One representation of the catalog's ladder, with derived sizes.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RepInfo {
    /// Name.
    pub name: String,
    /// Bit rate in kbit/s.
    pub bitrate_kbps: f64,
    /// Bytes of one request (`request_s` of content).
    pub request_bytes: u64,
    /// Bytes of one chunk file (chunked layout), else 0.
    pub chunk_bytes: u64,
    /// Picture size announced in manifests (`WIDTHxHEIGHT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// Video (omitted), audio or combined.
    #[serde(default, skip_serializing_if = "RepKind::is_video")]
    pub kind: RepKind,
}

impl RepInfo {
    /// Bit rate in bit/s, rounded.
    pub fn bitrate_bps(&self) -> u64 {
        (self.bitrate_kbps * 1000.0).round() as u64
    }
}

/// A title's copy in one representation.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TitleRep {
    /// Index into [`Catalog::representations`].
    pub rep: usize,
    /// Bytes of content (duration x bit rate).
    pub content_bytes: u64,
    /// Bytes on disk, after padding.
    pub stored_bytes: u64,
    /// Number of files (chunks, or 1).
    pub files: u32,
    /// Number of request-sized units covering the content.
    pub requests: u32,
}

/// One title.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Title {
    /// Title number: creation order on disk.
    pub id: u32,
    /// Name used in paths (`t00042`).
    pub name: String,
    /// Popularity rank, 1 = most popular.
    pub rank: u32,
    /// Duration in seconds (rounded to milliseconds).
    pub duration_s: f64,
    /// Representations the title has, in ladder order.
    pub representations: Vec<TitleRep>,
}

/// The catalog: every title, its representations, sizes and files.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Catalog {
    /// Storage layout.
    pub layout: Layout,
    /// Seconds of content per request.
    pub request_s: f64,
    /// Seconds per chunk file (chunked layout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_s: Option<f64>,
    /// Path of a file relative to the file-set root: `{title}`, `{rep}` and
    /// `{chunk:05}` (zero-padded chunk index) are replaced.
    pub path_format: String,
    /// The ladder.
    pub representations: Vec<RepInfo>,
    /// Titles in id (creation) order.
    pub titles: Vec<Title>,
    /// Manifests and init segments, when the spec asks for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<ManifestSpec>,
}

impl Catalog {
    /// Relative path of file `chunk` of `title` in representation `rep`.
    pub fn file_path(&self, title: &Title, rep: usize, chunk: u32) -> String {
        let r = &self.representations[rep].name;
        match self.layout {
            Layout::Chunked => format!("{}/{}/{:05}.m4s", title.name, r, chunk),
            Layout::Single => format!("{}/{}.mp4", title.name, r),
        }
    }

    /// Relative path of the initialization segment of `title` in
    /// representation `rep` (present when [`Catalog::manifests`] is set).
    pub fn init_path(&self, title: &Title, rep: usize) -> String {
        let r = &self.representations[rep].name;
        match self.layout {
            Layout::Chunked => format!("{}/{}/init.mp4", title.name, r),
            Layout::Single => format!("{}/{}.init.mp4", title.name, r),
        }
    }

    /// Every file with synthetic content: (relative path, size in bytes),
    /// titles in creation order; a representation's init segment (with
    /// manifests) comes before its media, as a packager writes them.
    pub fn files(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        let init = self.manifests.as_ref().map(|m| m.init_bytes);
        self.titles.iter().flat_map(move |t| {
            t.representations.iter().flat_map(move |tr| {
                let size = match self.layout {
                    Layout::Chunked => self.representations[tr.rep].chunk_bytes,
                    Layout::Single => tr.stored_bytes,
                };
                let init = init.map(|b| (self.init_path(t, tr.rep), b));
                init.into_iter()
                    .chain((0..tr.files).map(move |c| (self.file_path(t, tr.rep, c), size)))
            })
        })
    }

    /// The HTTP request for request unit `unit` of a title's representation.
    pub fn request(&self, title: &Title, tr: &TitleRep, unit: u32) -> (String, Option<ByteRange>) {
        let info = &self.representations[tr.rep];
        let start = unit as u64 * info.request_bytes;
        match self.layout {
            Layout::Chunked => {
                let per_chunk = info.chunk_bytes / info.request_bytes;
                let chunk = unit as u64 / per_chunk;
                let path = format!("/{}", self.file_path(title, tr.rep, chunk as u32));
                if per_chunk == 1 {
                    (path, None)
                } else {
                    let off = start - chunk * info.chunk_bytes;
                    let range = ByteRange {
                        start: off,
                        end: Some(off + info.request_bytes - 1),
                    };
                    (path, Some(range))
                }
            }
            Layout::Single => {
                let end = (start + info.request_bytes).min(tr.stored_bytes) - 1;
                let path = format!("/{}", self.file_path(title, tr.rep, 0));
                (
                    path,
                    Some(ByteRange {
                        start,
                        end: Some(end),
                    }),
                )
            }
        }
    }
}

/// A constructed session in compact form; [`Workload::session`] expands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenSession {
    /// Session id (generation order).
    pub id: u32,
    /// Client class index.
    pub class: u16,
    /// Title id.
    pub title: u32,
    /// Index into the title's `representations`.
    pub title_rep: u16,
    /// First request unit.
    pub start: u32,
    /// Number of requests.
    pub requests: u32,
}

/// A constructed workload.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The specification it was built from (overrides applied).
    pub spec: Spec,
    /// The catalog.
    pub catalog: Catalog,
    /// Sessions in id order.
    pub sessions: Vec<GenSession>,
    /// Summary statistics.
    pub stats: Stats,
}

fn units(seconds: f64, unit: f64) -> u32 {
    ((seconds / unit) - 1e-9).ceil().max(1.0) as u32
}

fn popularity_sampler(p: &Popularity, ranks: &[u32]) -> WeightedIndex {
    let w: Vec<f64> = match p {
        Popularity::Zipf { alpha } => (1..=ranks.len()).map(|r| (r as f64).powf(-alpha)).collect(),
        Popularity::Weights { weights } => ranks.iter().map(|&r| weights[r as usize - 1]).collect(),
        Popularity::Uniform => vec![1.0; ranks.len()],
    };
    WeightedIndex::new(w).unwrap_or_else(|| {
        // every weight in this subset is zero: fall back to uniform
        WeightedIndex::new(vec![1.0; ranks.len()]).expect("non-empty subset")
    })
}

/// Builds the catalog (no sessions) from a validated spec.
pub fn build_catalog(spec: &Spec) -> Catalog {
    let c = &spec.catalog;
    let n = c.titles as usize;
    let req_s = spec.sessions.request_s;
    let mut r = rng(spec.measurement.seed, CATALOG_STREAM);

    let reps: Vec<RepInfo> = c
        .representations
        .iter()
        .map(|rep| {
            let bytes_per_s = rep.bitrate_kbps * 1000.0 / 8.0;
            let request_bytes = (req_s * bytes_per_s).round().max(1.0) as u64;
            let chunk_bytes = match c.storage.chunk_s {
                Some(ch) => request_bytes * (ch / req_s).round() as u64,
                None => 0,
            };
            RepInfo {
                name: rep.name.clone(),
                bitrate_kbps: rep.bitrate_kbps,
                request_bytes,
                chunk_bytes,
                resolution: rep.resolution.clone(),
                kind: rep.kind,
            }
        })
        .collect();

    let durations = draw_durations(spec, &mut r);
    // the netflix model puts an offset table at the start of each file
    let table_entry = (spec.sessions.model == SessionModel::Netflix)
        .then(|| spec.sessions.netflix_spec().table_entry_bytes);

    // which ranks have which representation
    let mut has = vec![vec![false; c.representations.len()]; n];
    match c.ladder {
        Ladder::Nested => {
            for (ri, rep) in c.representations.iter().enumerate() {
                if rep.share >= 1.0 {
                    has.iter_mut().for_each(|h| h[ri] = true);
                } else {
                    let k = ((rep.share * n as f64).round() as usize).min(n);
                    for i in index::sample(&mut r, n, k) {
                        has[i][ri] = true;
                    }
                }
            }
        }
        Ladder::Partition => {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut r);
            let counts = largest_remainder(
                n,
                &c.representations
                    .iter()
                    .map(|r| r.share)
                    .collect::<Vec<_>>(),
            );
            let mut pos = 0;
            for (ri, k) in counts.into_iter().enumerate() {
                for &i in &order[pos..pos + k] {
                    has[i][ri] = true;
                }
                pos += k;
            }
        }
    }

    // title id (creation order) of each rank
    let mut id_of_rank: Vec<u32> = (0..n as u32).collect();
    if c.placement == Placement::Random {
        id_of_rank.shuffle(&mut r);
    }
    let width = (n.saturating_sub(1)).to_string().len().max(5);
    let mut titles: Vec<Option<Title>> = vec![None; n];
    for rank0 in 0..n {
        let id = id_of_rank[rank0];
        let dur = durations[rank0];
        let title_units = units(dur, req_s);
        let representations = reps
            .iter()
            .enumerate()
            .filter(|(ri, _)| has[rank0][*ri])
            .map(|(ri, info)| {
                let bytes_per_s = info.bitrate_kbps * 1000.0 / 8.0;
                let content_bytes = ((dur * bytes_per_s).round() as u64)
                    .max((title_units as u64 - 1) * info.request_bytes + 1);
                let pad_units = c
                    .storage
                    .pad_s
                    .map_or(1, |p| (p / req_s).round() as u32)
                    .max(1);
                let padded_units = title_units.div_ceil(pad_units) * pad_units;
                let (files, stored_bytes) = match c.storage.layout {
                    Layout::Chunked => {
                        let per_chunk = (info.chunk_bytes / info.request_bytes) as u32;
                        let files = padded_units.div_ceil(per_chunk);
                        (files, files as u64 * info.chunk_bytes)
                    }
                    Layout::Single => {
                        let stored = if c.storage.pad_s.is_some() {
                            padded_units as u64 * info.request_bytes
                        } else {
                            content_bytes
                        } + table_entry.map_or(0, |e| netflix::table_bytes(dur, e));
                        (1, stored)
                    }
                };
                TitleRep {
                    rep: ri,
                    content_bytes,
                    stored_bytes,
                    files,
                    requests: title_units,
                }
            })
            .collect();
        titles[id as usize] = Some(Title {
            id,
            name: format!("t{id:0width$}"),
            rank: rank0 as u32 + 1,
            duration_s: dur,
            representations,
        });
    }
    let path_format = match c.storage.layout {
        Layout::Chunked => "{title}/{rep}/{chunk:05}.m4s",
        Layout::Single => "{title}/{rep}.mp4",
    };
    Catalog {
        layout: c.storage.layout,
        request_s: req_s,
        chunk_s: c.storage.chunk_s,
        path_format: path_format.to_string(),
        representations: reps,
        titles: titles
            .into_iter()
            .map(|t| t.expect("every id assigned"))
            .collect(),
        manifests: c.manifests.clone(),
    }
}

/// Splits `n` items by `shares` (summing to 1) with the largest-remainder rule.
fn largest_remainder(n: usize, shares: &[f64]) -> Vec<usize> {
    let exact: Vec<f64> = shares.iter().map(|s| s * n as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = n - counts.iter().sum::<usize>().min(n);
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    for i in order.into_iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

/// Constructs the whole workload from a validated spec.
///
/// # Panics
///
/// When the sessions would make more than [`limits::MAX_REQUESTS`] requests
/// (or the spec was never checked): use [`try_construct`] for a spec from a
/// user.
pub fn construct(spec: &Spec) -> Workload {
    try_construct(spec, "spec").unwrap_or_else(|e| panic!("{e}"))
}

/// Constructs the whole workload from a spec, checking it first (`origin`
/// names it in errors): every value in bounds, the catalog within its size
/// limits (see [`size_problems`]), and the sessions' requests at most
/// [`limits::MAX_REQUESTS`] (counted while they are drawn, before anything
/// per request is allocated).
pub fn try_construct(spec: &Spec, origin: &str) -> Result<Workload, SpecError> {
    spec.check(origin)?;
    let catalog = build_catalog(spec);
    let s = &spec.sessions;
    let mut r = rng(spec.measurement.seed, SESSION_STREAM);
    let n = catalog.titles.len();

    // rank -> title id
    let mut by_rank = vec![0u32; n];
    for t in &catalog.titles {
        by_rank[t.rank as usize - 1] = t.id;
    }
    let title_has = |id: u32, rep: usize| {
        catalog.titles[id as usize]
            .representations
            .iter()
            .position(|tr| tr.rep == rep)
    };
    let nreps = catalog.representations.len();
    let global = popularity_sampler(
        &spec.catalog.popularity,
        &(1..=n as u32).collect::<Vec<_>>(),
    );
    let subsets: Vec<Option<(Vec<u32>, WeightedIndex)>> = (0..nreps)
        .map(|rep| {
            if s.selection != Selection::RepresentationFirst {
                return None;
            }
            let ranks: Vec<u32> = (1..=n as u32)
                .filter(|&rk| title_has(by_rank[rk as usize - 1], rep).is_some())
                .collect();
            if ranks.is_empty() {
                return None;
            }
            let w = popularity_sampler(&spec.catalog.popularity, &ranks);
            Some((ranks, w))
        })
        .collect();
    let classes =
        WeightedIndex::new(spec.clients.iter().map(|c| c.share)).expect("validated shares");
    let mix = |m: &std::collections::BTreeMap<String, f64>| {
        let (names, w): (Vec<usize>, Vec<f64>) = m
            .iter()
            .map(|(k, v)| (spec.representation_index(k).expect("validated"), *v))
            .unzip();
        (names, WeightedIndex::new(w).expect("validated mix"))
    };
    let global_mix = match &s.representation {
        RepresentationChoice::Mix { weights } => Some(mix(weights)),
        _ => None,
    };
    let class_mix: Vec<Option<(Vec<usize>, WeightedIndex)>> = spec
        .clients
        .iter()
        .map(|c| match &s.representation {
            RepresentationChoice::ClassMix { classes } => classes.get(&c.name).map(&mix),
            _ => None,
        })
        .collect();

    let mut sessions = Vec::with_capacity(s.count as usize);
    let mut total_requests = 0u64;
    let netflix = s.model == SessionModel::Netflix;
    for id in 0..s.count {
        let class = classes.sample(&mut r);
        let wanted = match &s.representation {
            RepresentationChoice::Fixed { name } => {
                spec.representation_index(name).expect("validated")
            }
            RepresentationChoice::Mix { .. } => {
                let (names, w) = global_mix.as_ref().expect("mix");
                names[w.sample(&mut r)]
            }
            RepresentationChoice::ClassMix { .. } => {
                let (names, w) = class_mix[class].as_ref().expect("validated class mix");
                names[w.sample(&mut r)]
            }
            RepresentationChoice::Rule { headroom } => {
                let down = spec.clients[class].down_kbps;
                if netflix {
                    rule_choice_of(&catalog.representations, down, *headroom, RepKind::Video)
                } else {
                    rule_choice(&catalog.representations, down, *headroom)
                }
            }
        };
        let (title, title_rep) = match subsets.get(wanted).and_then(|x| x.as_ref()) {
            Some((ranks, w)) => {
                let rank = ranks[w.sample(&mut r)];
                let id = by_rank[rank as usize - 1];
                (id, title_has(id, wanted).expect("subset has rep"))
            }
            None => {
                let id = by_rank[global.sample(&mut r)];
                (id, fallback(&catalog, id, wanted))
            }
        };
        let t = &catalog.titles[title as usize];
        let tr = &t.representations[title_rep];
        let frac = s.viewing_fraction.sample(&mut r);
        let start = match &s.start {
            StartPosition::Beginning => 0,
            StartPosition::Uniform => rand::Rng::random_range(&mut r, 0..tr.requests),
            StartPosition::Fraction { distribution } => {
                let f = distribution.sample(&mut r);
                ((f * tr.requests as f64).floor() as u32).min(tr.requests - 1)
            }
        };
        let want = ((frac * t.duration_s / s.request_s) - 1e-9).ceil().max(0.0) as u32;
        let mut count = want.max(s.min_requests).min(tr.requests - start).max(1);
        if netflix {
            let g = GenSession {
                id,
                class: class as u16,
                title,
                title_rep: title_rep as u16,
                start,
                requests: 0,
            };
            count = netflix::plan(spec, &catalog, &g).requests.len() as u32;
        }
        total_requests += count as u64;
        if total_requests > limits::MAX_REQUESTS {
            let mut problems = Problems::default();
            problems.push(
                "sessions.count",
                format!(
                    "the first {} of {} sessions already make {total_requests} requests, more than the limit of {}; lower sessions.count",
                    id + 1,
                    s.count,
                    limits::MAX_REQUESTS
                ),
            );
            return Err(SpecError::Invalid {
                file: origin.to_string(),
                problems,
            });
        }
        sessions.push(GenSession {
            id,
            class: class as u16,
            title,
            title_rep: title_rep as u16,
            start,
            requests: count,
        });
    }
    let mut stats = compute_stats(spec, &catalog, &sessions);
    if netflix {
        let n = netflix_stats::compute(spec, &catalog, &sessions);
        // the unit-based figures do not apply: fill in the plan's
        stats.mean_session_time_s = n.mean_session_s;
        stats.total_requested_gb = (n.bytes as f64 / (1u64 << 30) as f64 * 1e4).round() / 1e4;
        stats.netflix = Some(n);
    }
    Ok(Workload {
        spec: spec.clone(),
        catalog,
        sessions,
        stats,
    })
}

/// Highest representation within `headroom x down_kbps` (all when the link is
/// unlimited), else the lowest.
fn rule_choice(reps: &[RepInfo], down_kbps: f64, headroom: f64) -> usize {
    let mut order: Vec<usize> = (0..reps.len()).collect();
    order.sort_by(|&a, &b| reps[a].bitrate_kbps.total_cmp(&reps[b].bitrate_kbps));
    let fits = |i: &usize| down_kbps == 0.0 || reps[*i].bitrate_kbps <= headroom * down_kbps;
    order
        .iter()
        .rev()
        .find(|i| fits(i))
        .copied()
        .unwrap_or(order[0])
}

/// As [`rule_choice`], among the representations of one kind.
fn rule_choice_of(reps: &[RepInfo], down_kbps: f64, headroom: f64, kind: RepKind) -> usize {
    let mut order: Vec<usize> = (0..reps.len()).filter(|&i| reps[i].kind == kind).collect();
    order.sort_by(|&a, &b| reps[a].bitrate_kbps.total_cmp(&reps[b].bitrate_kbps));
    let fits = |i: &usize| down_kbps == 0.0 || reps[*i].bitrate_kbps <= headroom * down_kbps;
    order
        .iter()
        .rev()
        .find(|i| fits(i))
        .copied()
        .unwrap_or(order[0])
}

/// The title's copy of `wanted`, else its highest lower bit rate, else its lowest.
fn fallback(catalog: &Catalog, title: u32, wanted: usize) -> usize {
    let t = &catalog.titles[title as usize];
    if let Some(i) = t.representations.iter().position(|tr| tr.rep == wanted) {
        return i;
    }
    let rate = |i: usize| catalog.representations[t.representations[i].rep].bitrate_kbps;
    let limit = catalog.representations[wanted].bitrate_kbps;
    let below = (0..t.representations.len())
        .filter(|&i| rate(i) <= limit)
        .max_by(|&a, &b| rate(a).total_cmp(&rate(b)));
    below.unwrap_or_else(|| {
        (0..t.representations.len())
            .min_by(|&a, &b| rate(a).total_cmp(&rate(b)))
            .expect("title has a representation")
    })
}

impl Workload {
    /// Expands a compact session into its script form.
    pub fn session(&self, g: &GenSession) -> Session {
        if self.spec.sessions.model == SessionModel::Netflix {
            return self.netflix_session(g);
        }
        let t = &self.catalog.titles[g.title as usize];
        let tr = &t.representations[g.title_rep as usize];
        let info = &self.catalog.representations[tr.rep];
        let s = &self.spec.sessions;
        let pacing = s.pacing();
        let requests = (0..g.requests)
            .map(|k| {
                let (path, range) = self.catalog.request(t, tr, g.start + k);
                Request {
                    path,
                    range,
                    timeout_s: Some(s.timeout_s),
                    wait: if k >= s.buffering_requests && pacing > 0.0 {
                        Wait::Pacing(pacing)
                    } else {
                        Wait::None
                    },
                    ..Request::default()
                }
            })
            .collect();
        Session {
            header: SessionHeader {
                id: Some(g.id as u64),
                class: Some(self.spec.clients[g.class as usize].name.clone()),
                title: Some(t.name.clone()),
                rank: Some(t.rank),
                rep: Some(info.name.clone()),
                bitrate_bps: Some(info.bitrate_bps()),
                request_s: Some(s.request_s),
                ..SessionHeader::default()
            },
            requests,
        }
    }

    /// Shard (script file) of a session: sessions are dealt round-robin.
    pub fn shard_of(&self, g: &GenSession) -> u32 {
        g.id % self.stats.shards
    }
}

pub mod netflix;
mod netflix_stats;
mod stats;

pub use netflix_stats::NetflixStats;
use stats::compute_stats;
pub use stats::Stats;

#[cfg(test)]
mod tests;
