//! Workload presets shipped inside the binary (`vodlab gen --list-presets`).

use crate::error::SpecError;
use crate::spec::Spec;

/// A named, built-in workload specification.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// Name passed to `--preset`.
    pub name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// The TOML source (also in `presets/` of the repository).
    pub source: &'static str,
}

/// Every preset, in the order `--list-presets` shows them.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "youtube-2011",
        summary: "thesis Table 3.2: 10,000 titles, Zipf 0.8, 419 kbit/s, 0.5 MB chunk files, 7,200 sessions",
        source: include_str!("../../../presets/youtube-2011.toml"),
    },
    Preset {
        name: "youtube-2011-2mb",
        summary: "as youtube-2011 with 2 MB (40 s) chunk files and 2 MB requests",
        source: include_str!("../../../presets/youtube-2011-2mb.toml"),
    },
    Preset {
        name: "youtube-2011-unchunked",
        summary: "as youtube-2011 with one file per title and 0.5 MB range requests",
        source: include_str!("../../../presets/youtube-2011-unchunked.toml"),
    },
    Preset {
        name: "youtube-2011-sd",
        summary: "thesis 4.4.2: 20,000 SD titles (419 kbit/s), one file per title, 12,000 sessions",
        source: include_str!("../../../presets/youtube-2011-sd.toml"),
    },
    Preset {
        name: "youtube-2011-hd",
        summary: "thesis 4.4.2: 8,000 HD titles (2,097 kbit/s), one file per title, 4,000 sessions",
        source: include_str!("../../../presets/youtube-2011-hd.toml"),
    },
    Preset {
        name: "youtube-2011-mixed",
        summary: "thesis 4.4.2: SD and HD titles on one disk, 50 % SD and 50 % HD sessions",
        source: include_str!("../../../presets/youtube-2011-mixed.toml"),
    },
    Preset {
        name: "cloudsuite-2016",
        summary: "CloudSuite 3 media streaming: 240p-720p ladder, 10 s range requests, Akamai 2015 mix",
        source: include_str!("../../../presets/cloudsuite-2016.toml"),
    },
    Preset {
        name: "dash-vod",
        summary: "DASH/HLS VOD for players: 6-rung ladder 235-5,800 kbit/s, 4 s segments, MPD + HLS per title",
        source: include_str!("../../../presets/dash-vod.toml"),
    },
    Preset {
        name: "netflix-2014",
        summary: "thesis ch. 5: Netflix 2014 catalog server, 5 audio/14 video/8 combined rates, phases, chunk and open-ended requests, parallel connections",
        source: include_str!("../../../presets/netflix-2014.toml"),
    },
];

/// The TOML source of a preset.
pub fn source(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|p| p.name == name).map(|p| p.source)
}

/// Parses a preset into a validated [`Spec`].
pub fn load(name: &str) -> Result<Spec, SpecError> {
    let src = source(name).ok_or_else(|| SpecError::UnknownPreset {
        name: name.to_string(),
        known: PRESETS
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    Spec::from_toml_str(src, &format!("preset:{name}"))
}
