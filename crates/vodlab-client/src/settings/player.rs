//! `--player` and the closed-loop players' flags of `vodlab run`.

use std::path::Path;
use std::time::Duration;

use super::{flag, SettingsError};
use crate::core::cmcd::CmcdMode;
use crate::core::player::{AbrRule, PlayerConfig, PlayerProfile};
use crate::player_run::{PlayerKind, PlayerRun};

/// Closed-loop players (`--player`): each session fetches its title's
/// manifest and picks renditions with an ABR rule instead of replaying its
/// script (docs/run.md "Closed-loop players").
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct PlayerSettings {
    /// Run every session as a closed-loop player reading `dash`
    /// (`/{title}/manifest.mpd`) or `hls` (`/{title}/master.m3u8`)
    /// manifests: arrivals, titles, client classes and viewing times come
    /// from the workload, renditions from the ABR rule.
    #[cfg_attr(feature = "cli", arg(long, value_name = "dash|hls", conflicts_with_all = ["timing_script", "requests_csv"]))]
    pub player: Option<PlayerKind>,
    /// ABR rule of the players: throughput, bola, bba, dynamic, bolae,
    /// dynamicdash (docs/abr.md).
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value = "dynamic",
            value_name = "RULE",
            requires = "player"
        )
    )]
    pub abr: AbrRule,
    /// The players' profile: `sabre` (Sabre's player with `--abr` and
    /// `--max-buffer`) or `dashjs` (dash.js 4.7.4 with its defaults: start
    /// at the level for 1000 kbit/s, DYNAMIC throughput/BOLA switching at
    /// 12 s / 6 s of buffer, the insufficient-buffer, switch-history and
    /// abandon-requests rules, a 12 s buffer target (30 s at the top
    /// level), fast switching and an init segment at every change of
    /// level; docs/run.md "Player profiles") or `hlsjs` (hls.js 1.7.4 with
    /// its defaults: two EWMAs of 3 s and 9 s from 500 kbit/s, the start
    /// level for that estimate, 0.95 of the estimate to stay or go down and
    /// 0.7 to go up within the buffer's starvation budget, the emergency
    /// switch-down of a fragment loading too slowly (an abort goes to level
    /// 0), a buffer target of max(30 s, 60 MB / bit rate) up to 600 s, an
    /// init segment once per level). E.g. `--player dash --player-profile
    /// dashjs`, `--player hls --player-profile hlsjs`.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value = "sabre",
            value_name = "sabre|dashjs|hlsjs",
            requires = "player",
            conflicts_with_all = ["abr", "max_buffer"]
        )
    )]
    pub player_profile: PlayerProfile,
    /// Player buffer capacity, seconds (docs/abr.md; Sabre's 25 s).
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = 25.0,
            value_name = "DURATION",
            value_parser = vodlab_units::seconds_arg,
            requires = "player"
        )
    )]
    pub max_buffer: f64,
    /// Never abandon a segment download.
    #[cfg_attr(feature = "cli", arg(long, requires = "player"))]
    pub no_abandon: bool,
    /// Play at most this many segments per session (default: the
    /// session's viewing time).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", requires = "player"))]
    pub max_segments: Option<usize>,
    /// A player's request (manifest or segment) taking longer than this
    /// ends its session, seconds.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = 30.0,
            value_name = "DURATION",
            value_parser = vodlab_units::seconds_arg,
            requires = "player"
        )
    )]
    pub player_timeout: f64,
    /// Write each player session's ITU-T P.1203 mode-0 input to
    /// `OUTPUT/p1203/{session}.json`.
    #[cfg_attr(feature = "cli", arg(long, requires = "player"))]
    pub p1203: bool,
    /// Keep the rendition timeline (every segment's request time, download
    /// time, rendition and buffer level after; every rebuffer) of the N
    /// sessions with the smallest ids in `players.timelines` of
    /// results.json and in the report; 0: none (docs/run.md "Rendition
    /// timelines"). E.g. `--player-timelines 20`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", default_value_t = crate::player_run::DEFAULT_TIMELINES, requires = "player"))]
    pub player_timelines: usize,
    /// How the players send CMCD (CTA-5004, docs/cmcd.md "What vodlab
    /// does"): `header` in the `CMCD-Object`, `-Request`, `-Session` and
    /// `-Status` headers, `query` as one percent-encoded `CMCD` query
    /// parameter appended to each request's URL, `off` not at all
    /// (`--no-cmcd` also turns it off). The keys come from the player's
    /// own state: br, tb, d, ot, bl, dl, mtp, nor, nrr, su, bs, sf, st,
    /// sid, cid, pr (when not 1), rtp (with --cmcd-rtp) and version 2's pb
    /// and the previous response's ttfb, ttlb and rc (then `v=2`). E.g.
    /// `--player dash --cmcd query` sends `GET
    /// /t1/720p/00002.m4s?CMCD=bl%3D8000%2Cbr%3D2500%2C...`.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = CmcdMode::Header,
            value_name = "header|query|off",
            requires = "player",
            conflicts_with = "no_cmcd"
        )
    )]
    pub cmcd: CmcdMode,
    /// Players also send `rtp`, the requested maximum throughput (the
    /// player side of Sammy; `vodlab serve` caps its pacing by it): `rtp =
    /// MULT × br` kbit/s rounded up to 100 kbit/s (CTA-5004's steps) on
    /// every init and media request, `br` being the requested rendition's
    /// bit rate. The simplest rule: a fixed multiple of the rendition's
    /// rate, whatever the buffer (dash.js scales by a safety factor, 5 by
    /// default). E.g. `--cmcd-rtp 5` sends `rtp=10500` with `br=2095`. Off
    /// by default.
    #[cfg_attr(feature = "cli", arg(long, value_name = "MULT", requires = "player"))]
    pub cmcd_rtp: Option<f64>,
    /// Players honour the server's CMSD (CTA-5006; `vodlab serve --cmsd`):
    /// each response's `CMSD-Dynamic` `mb` (the last hop's that sends one)
    /// caps the bit rate of the player's next choices at the highest
    /// rendition at or below it (the lowest when none is) until a response
    /// without `mb` lifts it; a segment response's `etp` (the server's
    /// estimated throughput) is mixed into that download's throughput
    /// sample by --cmsd-etp-weight, as dash.js's `etpWeightRatio` does
    /// (docs/cmcd.md). Off by default.
    #[cfg_attr(feature = "cli", arg(long, requires = "player"))]
    pub honour_cmsd: bool,
    /// With --honour-cmsd, the weight W of the server's `etp` in each
    /// throughput sample: `measured × (1 − W) + etp × W` (dash.js's
    /// `streaming.cmsd.abr.etpWeightRatio`); 0 to 1, 0 leaves the estimate
    /// as measured. E.g. `--honour-cmsd --cmsd-etp-weight 1` takes the
    /// server's figure alone.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            value_name = "W",
            default_value_t = 0.5,
            requires = "honour_cmsd"
        )
    )]
    pub cmsd_etp_weight: f64,
}

impl PlayerSettings {
    /// The players' settings, or `None` without `--player`; with
    /// `--p1203`, makes `out_dir/p1203`.
    pub fn config(&self, out_dir: &Path) -> Result<Option<PlayerRun>, SettingsError> {
        let Some(kind) = self.player else {
            return Ok(None);
        };
        if !(self.max_buffer.is_finite() && (1.0..=3600.0).contains(&self.max_buffer)) {
            return Err(flag(format!(
                "--max-buffer must be between 1 and 3600 seconds, got {}",
                self.max_buffer
            )));
        }
        if !(self.player_timeout.is_finite() && (0.1..=3600.0).contains(&self.player_timeout)) {
            return Err(flag(format!(
                "--player-timeout must be between 0.1 and 3600 seconds, got {}",
                self.player_timeout
            )));
        }
        if !(self.cmsd_etp_weight.is_finite() && (0.0..=1.0).contains(&self.cmsd_etp_weight)) {
            return Err(flag(format!(
                "--cmsd-etp-weight must be between 0 and 1, got {}",
                self.cmsd_etp_weight
            )));
        }
        // the server's etp counts only when its CMSD is honoured
        let etp_weight = if self.honour_cmsd {
            self.cmsd_etp_weight
        } else {
            0.0
        };
        let cfg = match self.player_profile {
            PlayerProfile::Sabre => PlayerConfig {
                abr: self.abr,
                max_buffer_ms: self.max_buffer * 1000.0,
                abandon: !self.no_abandon,
                etp_weight,
                ..Default::default()
            },
            PlayerProfile::Dashjs => PlayerConfig {
                abandon: !self.no_abandon,
                etp_weight,
                ..PlayerConfig::dashjs()
            },
            // hls.js 1.7.4 does not read CMSD: no etp in its estimate
            PlayerProfile::Hlsjs => PlayerConfig {
                abandon: !self.no_abandon,
                ..PlayerConfig::hlsjs()
            },
        };
        let mut run = PlayerRun::new(kind, cfg);
        run.max_segments = self.max_segments;
        run.request_timeout = Duration::from_secs_f64(self.player_timeout);
        run.timelines = self.player_timelines;
        run.cmcd = self.cmcd;
        run.cmcd_rtp = self.cmcd_rtp;
        run.honour_cmsd = self.honour_cmsd;
        if self.p1203 {
            let d = out_dir.join("p1203");
            std::fs::create_dir_all(&d).map_err(|source| SettingsError::Create {
                path: d.clone(),
                source,
            })?;
            run.p1203_dir = Some(d);
        }
        run.validate().map_err(flag)?;
        Ok(Some(run))
    }
}
