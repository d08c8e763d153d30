//! The summary statistics of a constructed workload ([`Stats`], written as
//! `stats.json`), computed from its catalog and sessions.

use serde::Serialize;

use super::*;

/// Summary statistics of a constructed workload (thesis Table 3.3 and more).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Stats {
    /// Sessions.
    pub sessions: u64,
    /// Titles in the catalog.
    pub titles: u64,
    /// Titles requested by at least one session.
    pub unique_titles: u64,
    /// Percent of requested titles requested by exactly one session.
    pub single_session_titles_pct: f64,
    /// Mean sessions per requested title.
    pub mean_views_per_title: f64,
    /// Mean title duration over the catalog, seconds.
    pub mean_title_duration_s: f64,
    /// Median title duration over the catalog, seconds.
    pub median_title_duration_s: f64,
    /// Mean content size of a title (over titles and their representations), MiB.
    pub mean_title_size_mb: f64,
    /// Bytes on disk of the whole file set, GiB.
    pub catalog_size_gb: f64,
    /// Number of files with synthetic content in the file set (media and
    /// init segments; manifests are not counted).
    pub catalog_files: u64,
    /// Mean session time (requests x request_s), seconds.
    pub mean_session_time_s: f64,
    /// Mean requests per session.
    pub requests_per_session: f64,
    /// Distinct request units (title, representation, position) requested.
    pub unique_chunks: u64,
    /// All requests.
    pub total_chunks: u64,
    /// Request units requested exactly once.
    pub chunks_viewed_once: u64,
    /// Bytes requested by all sessions, GiB.
    pub total_requested_gb: f64,
    /// Seconds of content per request.
    pub request_s: f64,
    /// Sessions per representation, in ladder order.
    pub sessions_per_representation: Vec<(String, u64)>,
    /// Requests per representation, in ladder order (absent for the
    /// `netflix` session model, whose sessions switch representations, and
    /// in workloads written before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests_per_representation: Vec<(String, u64)>,
    /// Bytes requested per representation, in ladder order (absent where
    /// `requests_per_representation` is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bytes_per_representation: Vec<(String, u64)>,
    /// Sessions per client class, in spec order.
    pub sessions_per_class: Vec<(String, u64)>,
    /// Number of shards (session-script files).
    pub shards: u32,
    /// Sessions measured after excluding each shard's ramp-up and ramp-down.
    pub measured_sessions: u64,
    /// Chapter-5 figures, for workloads of the `netflix` session model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netflix: Option<super::NetflixStats>,
}

pub(super) fn compute_stats(spec: &Spec, catalog: &Catalog, sessions: &[GenSession]) -> Stats {
    let n = catalog.titles.len();
    // flat per-unit view counts
    let mut offset = Vec::with_capacity(n);
    let mut total_units = 0usize;
    for t in &catalog.titles {
        let mut o = Vec::with_capacity(t.representations.len());
        for tr in &t.representations {
            o.push(total_units);
            total_units += tr.requests as usize;
        }
        offset.push(o);
    }
    let mut unit_views = vec![0u32; total_units];
    let mut title_views = vec![0u32; n];
    let mut per_rep = vec![0u64; catalog.representations.len()];
    let mut rep_requests = vec![0u64; catalog.representations.len()];
    let mut rep_bytes = vec![0u64; catalog.representations.len()];
    let mut per_class = vec![0u64; spec.clients.len()];
    let mut total_requests = 0u64;
    let mut total_bytes = 0u64;
    let netflix = spec.sessions.model == crate::spec::SessionModel::Netflix;
    for s in sessions {
        let t = &catalog.titles[s.title as usize];
        let tr = &t.representations[s.title_rep as usize];
        title_views[s.title as usize] += 1;
        per_rep[tr.rep] += 1;
        per_class[s.class as usize] += 1;
        total_requests += s.requests as u64;
        rep_requests[tr.rep] += s.requests as u64;
        if netflix {
            // a netflix session is not a run of request units: its figures
            // come from its plan (NetflixStats), filled in by the caller
            continue;
        }
        let base = offset[s.title as usize][s.title_rep as usize];
        for u in s.start..s.start + s.requests {
            unit_views[base + u as usize] += 1;
            let (_, range) = catalog.request(t, tr, u);
            let bytes = range
                .and_then(|g| g.len())
                .unwrap_or(catalog.representations[tr.rep].request_bytes);
            total_bytes += bytes;
            rep_bytes[tr.rep] += bytes;
        }
    }
    let unique_titles = title_views.iter().filter(|&&v| v > 0).count() as u64;
    let single = title_views.iter().filter(|&&v| v == 1).count() as u64;
    let mut durations: Vec<f64> = catalog.titles.iter().map(|t| t.duration_s).collect();
    durations.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        durations[n / 2]
    } else {
        (durations[n / 2 - 1] + durations[n / 2]) / 2.0
    };
    let (mut copies, mut content, mut stored, mut files) = (0u64, 0u64, 0u64, 0u64);
    for t in &catalog.titles {
        for tr in &t.representations {
            copies += 1;
            content += tr.content_bytes;
            stored += tr.stored_bytes;
            files += tr.files as u64;
            if let Some(m) = &catalog.manifests {
                // the representation's init segment
                stored += m.init_bytes;
                files += 1;
            }
        }
    }
    let shards = spec.shard_count();
    let m = &spec.measurement;
    let mut measured = 0u64;
    for k in 0..shards {
        let in_shard = (sessions.len() as u64 + (shards - 1 - k) as u64) / shards as u64;
        measured += in_shard.saturating_sub((m.ramp_up_sessions + m.ramp_down_sessions) as u64);
    }
    let ns = sessions.len().max(1) as f64;
    let mib = 1024.0 * 1024.0;
    let gib = mib * 1024.0;
    Stats {
        sessions: sessions.len() as u64,
        titles: n as u64,
        unique_titles,
        single_session_titles_pct: round(100.0 * single as f64 / unique_titles.max(1) as f64, 3),
        mean_views_per_title: round(sessions.len() as f64 / unique_titles.max(1) as f64, 4),
        mean_title_duration_s: round(durations.iter().sum::<f64>() / n as f64, 3),
        median_title_duration_s: round(median, 3),
        mean_title_size_mb: round(content as f64 / copies as f64 / mib, 4),
        catalog_size_gb: round(stored as f64 / gib, 4),
        catalog_files: files,
        mean_session_time_s: round(total_requests as f64 * spec.sessions.request_s / ns, 3),
        requests_per_session: round(total_requests as f64 / ns, 4),
        unique_chunks: unit_views.iter().filter(|&&v| v > 0).count() as u64,
        total_chunks: total_requests,
        chunks_viewed_once: unit_views.iter().filter(|&&v| v == 1).count() as u64,
        total_requested_gb: round(total_bytes as f64 / gib, 4),
        request_s: spec.sessions.request_s,
        sessions_per_representation: catalog
            .representations
            .iter()
            .zip(per_rep)
            .map(|(r, c)| (r.name.clone(), c))
            .collect(),
        // a netflix session switches representations: its requests are not
        // its stable representation's
        requests_per_representation: if netflix {
            Vec::new()
        } else {
            named(catalog, rep_requests)
        },
        bytes_per_representation: if netflix {
            Vec::new()
        } else {
            named(catalog, rep_bytes)
        },
        sessions_per_class: spec
            .clients
            .iter()
            .zip(per_class)
            .map(|(c, k)| (c.name.clone(), k))
            .collect(),
        shards,
        measured_sessions: measured,
        netflix: None,
    }
}

/// Per-representation counts with the representations' names.
fn named(catalog: &Catalog, counts: Vec<u64>) -> Vec<(String, u64)> {
    catalog
        .representations
        .iter()
        .zip(counts)
        .map(|(r, c)| (r.name.clone(), c))
        .collect()
}

fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}
