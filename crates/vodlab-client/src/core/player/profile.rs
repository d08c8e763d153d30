//! Player profiles (`vodlab run --player-profile`): a named set of player
//! settings and rule behaviour.
//!
//! - `sabre` (the default): the Sabre simulator's player with the rule of
//!   `--abr` and a fixed buffer capacity (`--max-buffer`).
//! - `dashjs`: dash.js 4.7.4 with its defaults ([`super::abr::dashjs`]):
//!   the start at the level for 1000 kbit/s, the DYNAMIC strategy with
//!   the insufficient-buffer and switch-history rules, the
//!   AbandonRequestsRule (the same segment refetched at the suggested
//!   level), the buffer target of 12 s (30 s at the top level), BOLA's
//!   pauses, fast switching (an up-switch refetches the buffered segments
//!   from 1.5 segments ahead of the playhead at the new level) and an init
//!   segment fetched at every change of level.
//! - `hlsjs`: hls.js 1.7.4 with its defaults ([`super::abr::hlsjs`]): the
//!   two-EWMA (3 s / 9 s) estimate from 500 kbit/s, the start level for it,
//!   the throughput rule at 0.95 of the estimate (0.7 to switch up) with
//!   the buffer's starvation budget, the emergency switch-down of a
//!   fragment loading too slowly, and a buffer target of
//!   `max(30 s, 60 MB / bit rate)` up to 600 s; an init segment once per
//!   level.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::PlayerError;

/// A player profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlayerProfile {
    /// Sabre's player with the configured rule and buffer.
    #[default]
    Sabre,
    /// dash.js 4.7.4 with its default settings.
    Dashjs,
    /// hls.js 1.7.4 with its default settings.
    Hlsjs,
}

impl PlayerProfile {
    /// Every profile.
    pub const ALL: [PlayerProfile; 3] = [
        PlayerProfile::Sabre,
        PlayerProfile::Dashjs,
        PlayerProfile::Hlsjs,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PlayerProfile::Sabre => "sabre",
            PlayerProfile::Dashjs => "dashjs",
            PlayerProfile::Hlsjs => "hlsjs",
        }
    }
}

impl fmt::Display for PlayerProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlayerProfile {
    type Err = PlayerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlayerProfile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| PlayerError::Invalid {
                key: "player_profile",
                why: format!("unknown profile {s:?} (sabre, dashjs, hlsjs)"),
            })
    }
}
