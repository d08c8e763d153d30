//! [`Spec::validate`]: every rule a specification must follow, reported
//! with its key path (the spec's types and parsing are in the parent).

use std::collections::BTreeSet;

use super::*;
use crate::error::Problems;
use crate::limits::{self, is_path_name, is_token_name};

impl Spec {
    /// Every problem with the specification, with key paths.
    pub fn validate(&self) -> Problems {
        let mut p = Problems::default();
        if !self.name.is_empty() && !is_path_name(&self.name) {
            p.push(
                "name",
                format!(
                    "{:?} must use only A-Z a-z 0-9 _ . -, not start with `.`, and have at most {} characters",
                    self.name,
                    limits::MAX_NAME_LEN
                ),
            );
        }
        let c = &self.catalog;
        if c.titles == 0 || c.titles > limits::MAX_TITLES {
            p.push(
                "catalog.titles",
                format!(
                    "must be between 1 and {}, got {}",
                    limits::MAX_TITLES,
                    c.titles
                ),
            );
        }
        match &c.popularity {
            Popularity::Zipf { alpha } => {
                if !alpha.is_finite() || *alpha < 0.0 {
                    p.push(
                        "catalog.popularity.alpha",
                        format!("alpha must be a finite number >= 0, got {alpha}"),
                    );
                } else if *alpha > limits::MAX_ZIPF_ALPHA {
                    p.push(
                        "catalog.popularity.alpha",
                        format!(
                            "alpha must be at most {}, got {alpha}",
                            limits::MAX_ZIPF_ALPHA
                        ),
                    );
                }
            }
            Popularity::Weights { weights } => {
                if weights.len() != c.titles as usize {
                    p.push(
                        "catalog.popularity.weights",
                        format!(
                            "has {} weights but catalog.titles is {}",
                            weights.len(),
                            c.titles
                        ),
                    );
                }
                for (i, w) in weights.iter().enumerate() {
                    if !w.is_finite() || *w < 0.0 {
                        p.push(
                            format!("catalog.popularity.weights[{i}]"),
                            format!("weight must be finite and >= 0, got {w}"),
                        );
                    }
                }
                if weights.iter().all(|w| *w <= 0.0) {
                    p.push("catalog.popularity.weights", "all weights are zero");
                }
            }
            Popularity::Uniform => {}
        }
        c.duration.validate("catalog.duration", &mut p);
        if c.duration.quantile(1.0) <= 0.0 {
            p.push("catalog.duration", "every title would have duration 0");
        }
        if c.median_duration_top > c.titles {
            p.push(
                "catalog.median_duration_top",
                format!(
                    "{} is more than the {} titles",
                    c.median_duration_top, c.titles
                ),
            );
        }
        self.validate_ladder(&mut p);
        self.validate_storage(&mut p);
        self.validate_sessions(&mut p);
        self.validate_clients(&mut p);
        let m = &self.measurement;
        if let Some(0) = m.shard_sessions {
            p.push(
                "measurement.shard_sessions",
                "must be at least 1 (or unset)",
            );
        } else if self.shard_count() > limits::MAX_SHARDS {
            p.push(
                "measurement.shard_sessions",
                format!(
                    "{} sessions in shards of {} make {} script files, more than the limit of {}",
                    self.sessions.count,
                    m.shard_sessions.unwrap_or(0),
                    self.shard_count(),
                    limits::MAX_SHARDS
                ),
            );
        }
        for (key, v) in [
            ("measurement.ramp_up_sessions", m.ramp_up_sessions),
            ("measurement.ramp_down_sessions", m.ramp_down_sessions),
        ] {
            if v > limits::MAX_SESSIONS {
                p.push(
                    key,
                    format!("must be at most {}, got {v}", limits::MAX_SESSIONS),
                );
            }
        }
        p
    }

    fn validate_ladder(&self, p: &mut Problems) {
        let reps = &self.catalog.representations;
        if reps.is_empty() {
            p.push(
                "catalog.representations",
                "needs at least one representation",
            );
            return;
        }
        if reps.len() > limits::MAX_REPRESENTATIONS {
            p.push(
                "catalog.representations",
                format!(
                    "has {} representations, more than the limit of {}",
                    reps.len(),
                    limits::MAX_REPRESENTATIONS
                ),
            );
        }
        let mut names = BTreeSet::new();
        for (i, r) in reps.iter().enumerate() {
            let at = format!("catalog.representations[{i}]");
            if !is_path_name(&r.name) {
                p.push(
                    format!("{at}.name"),
                    format!(
                        "{:?} must be 1 to {} characters from A-Z a-z 0-9 _ . - and not start with `.` (it becomes a path component)",
                        r.name,
                        limits::MAX_NAME_LEN
                    ),
                );
            }
            if !names.insert(r.name.as_str()) {
                p.push(
                    format!("{at}.name"),
                    format!("duplicate representation `{}`", r.name),
                );
            }
            if !(r.bitrate_kbps.is_finite()
                && r.bitrate_kbps > 0.0
                && r.bitrate_kbps <= limits::MAX_BITRATE_KBPS)
            {
                p.push(
                    format!("{at}.bitrate_kbps"),
                    format!(
                        "must be > 0 and at most {} (1 Gbit/s), got {}",
                        limits::MAX_BITRATE_KBPS,
                        r.bitrate_kbps
                    ),
                );
            }
            if !(r.share > 0.0 && r.share <= 1.0) {
                p.push(
                    format!("{at}.share"),
                    format!("must be in (0, 1], got {}", r.share),
                );
            }
            if let Some(res) = &r.resolution {
                if parse_resolution(res).is_none() {
                    p.push(
                        format!("{at}.resolution"),
                        format!(
                            "{res:?} is not WIDTHxHEIGHT with both in 1..=16384, e.g. \"1280x720\""
                        ),
                    );
                }
            }
        }
        if let Some(m) = &self.catalog.manifests {
            if !(1..=limits::MAX_INIT_BYTES).contains(&m.init_bytes) {
                p.push(
                    "catalog.manifests.init_bytes",
                    format!(
                        "must be 1 to {} bytes, got {}",
                        limits::MAX_INIT_BYTES,
                        m.init_bytes
                    ),
                );
            }
            if !m.dash && !m.hls {
                p.push(
                    "catalog.manifests",
                    "both dash and hls are false: remove [catalog.manifests] instead",
                );
            }
        }
        match self.catalog.ladder {
            Ladder::Nested => {
                if !reps.iter().any(|r| r.share == 1.0) {
                    p.push(
                        "catalog.representations",
                        "with ladder = \"nested\" at least one representation needs share = 1 so every title has one",
                    );
                }
            }
            Ladder::Partition => {
                let sum: f64 = reps.iter().map(|r| r.share).sum();
                if (sum - 1.0).abs() > SHARE_TOLERANCE {
                    p.push(
                        "catalog.representations",
                        format!("with ladder = \"partition\" shares must sum to 1 within 1e-6, got {sum}"),
                    );
                }
            }
        }
    }

    fn validate_storage(&self, p: &mut Problems) {
        let s = &self.catalog.storage;
        let req = self.sessions.request_s;
        match (s.layout, s.chunk_s) {
            (Layout::Chunked, None) => p.push(
                "catalog.storage.chunk_s",
                "layout = \"chunked\" needs chunk_s",
            ),
            (Layout::Single, Some(_)) => p.push(
                "catalog.storage.chunk_s",
                "layout = \"single\" stores one file per title; remove chunk_s",
            ),
            (Layout::Chunked, Some(c)) => {
                if !(c.is_finite() && c > 0.0 && c <= limits::MAX_CHUNK_S) {
                    p.push(
                        "catalog.storage.chunk_s",
                        format!("must be > 0 and at most {}, got {c}", limits::MAX_CHUNK_S),
                    );
                } else if req > 0.0 && !is_multiple(c, req) {
                    p.push(
                        "catalog.storage.chunk_s",
                        format!(
                            "chunk files of {c} s must hold a whole number of {req} s requests (sessions.request_s)"
                        ),
                    );
                }
            }
            (Layout::Single, None) => {}
        }
        if let Some(pad) = s.pad_s {
            if !(pad.is_finite() && pad > 0.0 && pad <= limits::MAX_SECONDS) {
                p.push(
                    "catalog.storage.pad_s",
                    format!("must be > 0 and at most {}, got {pad}", limits::MAX_SECONDS),
                );
            } else if req > 0.0 && !is_multiple(pad, req) {
                p.push(
                    "catalog.storage.pad_s",
                    format!("padding of {pad} s must be a whole number of {req} s requests"),
                );
            } else if let Some(c) = s.chunk_s {
                if c > 0.0 && !is_multiple(pad, c) {
                    p.push(
                        "catalog.storage.pad_s",
                        format!("padding of {pad} s must be a whole number of {c} s chunks"),
                    );
                }
            }
        }
    }

    fn validate_sessions(&self, p: &mut Problems) {
        let s = &self.sessions;
        if s.count == 0 || s.count > limits::MAX_SESSIONS {
            p.push(
                "sessions.count",
                format!(
                    "must be between 1 and {}, got {}",
                    limits::MAX_SESSIONS,
                    s.count
                ),
            );
        }
        s.viewing_fraction.validate("sessions.viewing_fraction", p);
        if s.viewing_fraction.quantile(1.0) > 1.0 + 1e-9 {
            p.push(
                "sessions.viewing_fraction",
                "a viewing fraction above 1 would request past the end of the title",
            );
        }
        if let StartPosition::Fraction { distribution } = &s.start {
            distribution.validate("sessions.start.distribution", p);
            if distribution.quantile(1.0) > 1.0 {
                p.push(
                    "sessions.start.distribution",
                    "start fractions must be <= 1",
                );
            }
        }
        if !(s.request_s.is_finite()
            && s.request_s >= limits::MIN_REQUEST_S
            && s.request_s <= limits::MAX_REQUEST_S)
        {
            p.push(
                "sessions.request_s",
                format!(
                    "must be between {} and {} seconds, got {}",
                    limits::MIN_REQUEST_S,
                    limits::MAX_REQUEST_S,
                    s.request_s
                ),
            );
        }
        if let Some(pacing) = s.pacing_s {
            if !(0.0..=limits::MAX_SECONDS).contains(&pacing) {
                p.push(
                    "sessions.pacing_s",
                    format!(
                        "must be >= 0 and at most {} seconds, got {pacing}",
                        limits::MAX_SECONDS
                    ),
                );
            }
        }
        if !(s.timeout_s.is_finite() && s.timeout_s > 0.0 && s.timeout_s <= limits::MAX_SECONDS) {
            p.push(
                "sessions.timeout_s",
                format!(
                    "must be > 0 and at most {} seconds, got {}",
                    limits::MAX_SECONDS,
                    s.timeout_s
                ),
            );
        }
        if s.min_requests == 0 {
            p.push("sessions.min_requests", "must be at least 1");
        }
        let has_rep = |name: &str| self.representation_index(name).is_some();
        let check_mix = |path: &str, mix: &BTreeMap<String, f64>, p: &mut Problems| {
            let mut sum = 0.0;
            for (name, w) in mix {
                if !has_rep(name) {
                    p.push(
                        format!("{path}.{name}"),
                        format!("unknown representation `{name}`"),
                    );
                }
                if !(w.is_finite() && *w >= 0.0) {
                    p.push(format!("{path}.{name}"), format!("must be >= 0, got {w}"));
                }
                sum += w;
            }
            if (sum - 1.0).abs() > SHARE_TOLERANCE {
                p.push(
                    path.to_string(),
                    format!("probabilities must sum to 1 within 1e-6, got {sum}"),
                );
            }
        };
        match &s.representation {
            RepresentationChoice::Fixed { name } => {
                if !has_rep(name) {
                    p.push(
                        "sessions.representation.name",
                        format!("unknown representation `{name}`"),
                    );
                }
            }
            RepresentationChoice::Mix { weights } => {
                check_mix("sessions.representation.weights", weights, p)
            }
            RepresentationChoice::ClassMix { classes } => {
                for (class, mix) in classes {
                    if !self.clients.iter().any(|c| &c.name == class) {
                        p.push(
                            format!("sessions.representation.classes.{class}"),
                            format!("unknown client class `{class}`"),
                        );
                    }
                    check_mix(&format!("sessions.representation.classes.{class}"), mix, p);
                }
                for c in &self.clients {
                    if !classes.contains_key(&c.name) {
                        p.push(
                            "sessions.representation.classes",
                            format!("no mix for client class `{}`", c.name),
                        );
                    }
                }
            }
            RepresentationChoice::Rule { headroom } => {
                if !(headroom.is_finite() && *headroom > 0.0 && *headroom <= limits::MAX_HEADROOM) {
                    p.push(
                        "sessions.representation.headroom",
                        format!(
                            "must be > 0 and at most {}, got {headroom}",
                            limits::MAX_HEADROOM
                        ),
                    );
                }
            }
        }
        self.validate_netflix(p);
    }

    /// The `netflix` session model's own rules (`sessions.model`,
    /// `[sessions.netflix]`) and what it needs of the catalog.
    fn validate_netflix(&self, p: &mut Problems) {
        let s = &self.sessions;
        if s.model != SessionModel::Netflix {
            if s.netflix.is_some() {
                p.push(
                    "sessions.netflix",
                    "only used with sessions.model = \"netflix\"",
                );
            }
            return;
        }
        let n = s.netflix_spec();
        n.validate(p);
        let c = &self.catalog;
        if c.storage.layout != Layout::Single {
            p.push(
                "catalog.storage.layout",
                "sessions.model = \"netflix\" needs one file per title and bit rate (layout = \"single\")",
            );
        }
        if c.manifests.is_some() {
            p.push(
                "catalog.manifests",
                "sessions.model = \"netflix\" requests byte ranges of single files; manifests are not written for it",
            );
        }
        for (i, r) in c.representations.iter().enumerate() {
            if r.share < 1.0 {
                p.push(
                    format!("catalog.representations[{i}].share"),
                    "sessions.model = \"netflix\" needs every representation on every title (share = 1)",
                );
            }
        }
        let count = |k: RepKind| c.representations.iter().filter(|r| r.kind == k).count();
        if count(RepKind::Video) == 0 {
            p.push(
                "catalog.representations",
                "sessions.model = \"netflix\" needs at least one video representation",
            );
        }
        if n.combined_share < 1.0 && count(RepKind::Audio) == 0 {
            p.push(
                "catalog.representations",
                "sessions.netflix.combined_share < 1 needs at least one audio representation (kind = \"audio\")",
            );
        }
        if n.combined_share > 0.0 && count(RepKind::Combined) == 0 {
            p.push(
                "catalog.representations",
                "sessions.netflix.combined_share > 0 needs at least one combined representation (kind = \"combined\")",
            );
        }
        let kind_of = |name: &str| {
            self.representation_index(name)
                .map(|i| c.representations[i].kind)
        };
        for name in n.audio.keys() {
            match kind_of(name) {
                Some(RepKind::Audio) => {}
                Some(k) => p.push(
                    format!("sessions.netflix.audio.{name}"),
                    format!("`{name}` is a {} representation, not audio", k.name()),
                ),
                None => p.push(
                    format!("sessions.netflix.audio.{name}"),
                    format!("unknown representation `{name}`"),
                ),
            }
        }
        if !n.audio.is_empty() && n.audio.values().sum::<f64>() <= 0.0 {
            p.push("sessions.netflix.audio", "weights are all zero");
        }
        let video_only = |path: String, name: &str, p: &mut Problems| {
            if let Some(k) = kind_of(name) {
                if k != RepKind::Video {
                    p.push(
                        path,
                        format!(
                            "the netflix model draws the stable video rate here; `{name}` is {}",
                            k.name()
                        ),
                    );
                }
            }
        };
        match &s.representation {
            RepresentationChoice::Fixed { name } => {
                video_only("sessions.representation.name".into(), name, p)
            }
            RepresentationChoice::Mix { weights } => {
                for name in weights.keys() {
                    video_only(format!("sessions.representation.weights.{name}"), name, p);
                }
            }
            RepresentationChoice::ClassMix { classes } => {
                for (class, mix) in classes {
                    for name in mix.keys() {
                        video_only(
                            format!("sessions.representation.classes.{class}.{name}"),
                            name,
                            p,
                        );
                    }
                }
            }
            RepresentationChoice::Rule { .. } => {}
        }
    }

    fn validate_clients(&self, p: &mut Problems) {
        if self.clients.is_empty() {
            p.push("clients", "needs at least one client class");
            return;
        }
        if self.clients.len() > limits::MAX_CLIENT_CLASSES {
            p.push(
                "clients",
                format!(
                    "has {} classes, more than the limit of {}",
                    self.clients.len(),
                    limits::MAX_CLIENT_CLASSES
                ),
            );
        }
        let mut names = BTreeSet::new();
        let mut sum = 0.0;
        for (i, c) in self.clients.iter().enumerate() {
            let at = format!("clients[{i}]");
            if !is_token_name(&c.name) {
                p.push(
                    format!("{at}.name"),
                    format!(
                        "{:?} must be 1 to {} printable ASCII characters without spaces, `=`, `#`, quotes or `\\` (it becomes script text)",
                        c.name,
                        limits::MAX_NAME_LEN
                    ),
                );
            }
            if !names.insert(c.name.as_str()) {
                p.push(
                    format!("{at}.name"),
                    format!("duplicate client class `{}`", c.name),
                );
            }
            if !(c.share.is_finite() && c.share >= 0.0) {
                p.push(
                    format!("{at}.share"),
                    format!("must be >= 0, got {}", c.share),
                );
            }
            for (key, v, max) in [
                ("down_kbps", c.down_kbps, limits::MAX_LINK_KBPS),
                ("up_kbps", c.up_kbps, limits::MAX_LINK_KBPS),
                ("delay_ms", c.delay_ms, limits::MAX_DELAY_MS),
            ] {
                if !(v.is_finite() && v >= 0.0 && v <= max) {
                    p.push(
                        format!("{at}.{key}"),
                        format!("must be >= 0 and at most {max}, got {v}"),
                    );
                }
            }
            sum += c.share;
        }
        if (sum - 1.0).abs() > SHARE_TOLERANCE {
            p.push(
                "clients",
                format!("shares must sum to 1 within 1e-6, got {sum}"),
            );
        }
    }
}

fn is_multiple(big: f64, small: f64) -> bool {
    let r = big / small;
    r >= 1.0 - 1e-9 && (r - r.round()).abs() < 1e-9
}

/// Parses a `WIDTHxHEIGHT` picture size, each side in 1..=16384.
pub fn parse_resolution(s: &str) -> Option<(u32, u32)> {
    let (w, h) = s.split_once('x')?;
    let side = |v: &str| -> Option<u32> {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v.parse().ok().filter(|n| (1..=16384).contains(n))
    };
    Some((side(w)?, side(h)?))
}
