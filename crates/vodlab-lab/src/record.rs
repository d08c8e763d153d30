//! `vodlab record`: a real player (dash.js or hls.js in headless Chromium)
//! plays a real-media file set through Chromium's network emulation or a
//! kernel-shaped link (`--netns`, a `vodlab lab` client host); what it
//! requested becomes a vodlab session script and an h2load timing script,
//! with the player's own metrics beside them (docs/record.md).
//!
//! The browser side is `scripts/record/record.cjs` (embedded here), run by
//! node with puppeteer-core, dash.js and hls.js from the npm cache that
//! `scripts/install-test-deps.sh` fills (`~/.cache/vodlab-record`, or
//! `$VODLAB_RECORD_DIR`). [`run`] starts `vodlab serve` (unless --target),
//! runs the script, and turns its JSON into the outputs; the conversion
//! ([`convert`]) is pure and unit-tested.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use thiserror::Error;
use vodlab_workload::script::{export_h2load, write_vodlab, Script};

use crate::servers::TlsFiles;

pub mod convert;
pub mod local;

pub use convert::{parse_range, recorded, session, title_of, RawRecording, RawRequest, Recorded};
pub use local::{first_manifest, is_private, parse_target, record_dir, start_serve, Serve};

/// The browser side, written next to the outputs while it runs.
const RECORD_JS: &str = include_str!("../../../scripts/record/record.cjs");
/// A title's MPD file name (`vodlab_manifest::MPD_NAME`).
const MPD_NAME: &str = "manifest.mpd";
/// A title's HLS multivariant playlist.
const MASTER_NAME: &str = "master.m3u8";

/// The player `vodlab record` drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum RecordPlayer {
    /// dash.js 4.7.4 playing `/{title}/manifest.mpd`.
    Dash,
    /// hls.js 1.7.4 playing `/{title}/master.m3u8`.
    Hls,
}

impl RecordPlayer {
    /// The manifest file name of a title.
    pub fn manifest_name(self) -> &'static str {
        match self {
            RecordPlayer::Dash => MPD_NAME,
            RecordPlayer::Hls => MASTER_NAME,
        }
    }
    /// The player's script under `node_modules`.
    pub fn script(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dashjs/dist/dash.all.min.js",
            RecordPlayer::Hls => "hls.js/dist/hls.min.js",
        }
    }
    /// The npm package (pinned version) the script comes from.
    pub fn package(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dashjs@4.7.4",
            RecordPlayer::Hls => "hls.js@1.7.4",
        }
    }
    /// File name of the player's metrics.
    pub fn metrics_file(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dashjs-metrics.json",
            RecordPlayer::Hls => "hlsjs-metrics.json",
        }
    }
    /// The player's name (`dash`, `hls`).
    pub fn name(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dash",
            RecordPlayer::Hls => "hls",
        }
    }
}

/// How dash.js sends its CMCD (`vodlab record --cmcd`; dash.js's
/// `streaming.cmcd.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum RecordCmcd {
    /// One `CMCD` query parameter appended to each request's URL (dash.js's
    /// default mode).
    Query,
    /// The `CMCD-Object`, `-Request`, `-Status` and `-Session` headers.
    Header,
}

impl RecordCmcd {
    /// dash.js's name of the mode (`query`, `header`).
    pub fn name(self) -> &'static str {
        match self {
            RecordCmcd::Query => "query",
            RecordCmcd::Header => "header",
        }
    }
}

/// `vodlab record` arguments.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RecordArgs {
    /// Root of a real-media file set (`vodlab fileset create --media real`),
    /// served by a `vodlab serve` started on a free loopback port.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "DIR", required_unless_present = "target")
    )]
    pub root: Option<PathBuf>,
    /// Play from this server (`http://HOST:PORT`) instead of starting
    /// `vodlab serve`: loopback only, or with --netns also a private IPv4
    /// address (a `vodlab lab` server, 10.77.0.1).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "URL", conflicts_with = "root")
    )]
    pub target: Option<String>,
    /// The player: dash (dash.js, an MPD) or hls (hls.js, a multivariant
    /// playlist).
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value = "dash"))]
    pub player: RecordPlayer,
    /// Path of the manifest to play (default: the first title's
    /// `/{title}/manifest.mpd`, or `/{title}/master.m3u8` with --player hls,
    /// under --root).
    #[cfg_attr(feature = "cli", arg(long, alias = "mpd", value_name = "PATH"))]
    pub manifest: Option<String>,
    /// Player settings as a JSON object: given to dash.js's
    /// `updateSettings` (e.g. '{"streaming":{"buffer":{"stableBufferTime":20}}}')
    /// or merged into hls.js's config (e.g. '{"maxBufferLength":20}');
    /// default: the player's own defaults.
    #[cfg_attr(feature = "cli", arg(long, value_name = "JSON"))]
    pub player_settings: Option<String>,
    /// Turn on dash.js's own CMCD (CTA-5004 version 1; its
    /// `streaming.cmcd` settings: `enabled`, `mode`, `sid`
    /// `vodlab-record-{unix ms}`, `cid` the title): `query` (a bare
    /// `--cmcd`; dash.js's default) appends `?CMCD=...` to each request,
    /// `header` sends the `CMCD-*` headers. The recording keeps each
    /// request's CMCD as sent (the query in its path, the headers in
    /// `cmcd_headers`), the script replays it, and `vodlab serve`'s access
    /// log (`access.log` under --out) shows it parsed. Default: off.
    /// `--player dash` only (docs/record.md "CMCD").
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            value_enum,
            value_name = "query|header",
            num_args = 0..=1,
            default_missing_value = "query"
        )
    )]
    pub cmcd: Option<RecordCmcd>,
    /// Run the browser in this network namespace (`ip netns exec`), e.g. a
    /// `vodlab lab` client host `vl-NAME-c0`, so that it reaches --target
    /// over the lab's kernel-shaped link; give no --down-kbps/--latency-ms
    /// to leave Chromium's own emulation off. Needs root and --target.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", requires = "target"))]
    pub netns: Option<String>,
    /// Play over HTTP/3: `vodlab serve` (with --root) gets a certificate of
    /// a CA made in `OUT/tls` and `--h3`, and Chromium is forced onto QUIC
    /// for its origin (`--origin-to-force-quic-on`, the certificate trusted
    /// by its key's pin, `--ignore-certificate-errors-spki-list`). Each
    /// request's protocol, as Chromium reports it, is in requests.json.
    #[cfg_attr(feature = "cli", arg(long, conflicts_with = "target"))]
    pub h3: bool,
    /// How long to play (from page load) before the recording stops (a
    /// bare number is seconds: 30, 90s, 2m; `--seconds` is an older name).
    #[cfg_attr(feature = "cli", arg(long = "duration", alias = "seconds", default_value_t = 30.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub seconds: f64,
    /// Emulated downlink, kbit/s (Chromium's Network.emulateNetworkConditions,
    /// per request; 0 = not limited; all three 0 = no emulation).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.0))]
    pub down_kbps: f64,
    /// Emulated uplink, kbit/s (default: as --down-kbps).
    #[cfg_attr(feature = "cli", arg(long))]
    pub up_kbps: Option<f64>,
    /// Emulated latency added to every request, ms.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.0))]
    pub latency_ms: f64,
    /// Chromium binary.
    #[cfg_attr(feature = "cli", arg(long, default_value = "/usr/bin/chromium"))]
    pub chromium: PathBuf,
    /// node binary.
    #[cfg_attr(feature = "cli", arg(long, default_value = "node"))]
    pub node: PathBuf,
    /// Directory holding node_modules with dashjs, hls.js and puppeteer-core
    /// (default: $VODLAB_RECORD_DIR or ~/.cache/vodlab-record).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR"))]
    pub record_dir: Option<PathBuf>,
    /// Output directory: recording.vsl, recording.h2load.txt, requests.json,
    /// dashjs-metrics.json (hlsjs-metrics.json with --player hls), raw.json,
    /// and with --root the server's serve.log, access.log and
    /// serve-stats.json (its statistics at its end).
    /// (`--output` is an older name.)
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: PathBuf,
}

/// Why a recording could not be made.
#[derive(Debug, Error)]
pub enum RecordError {
    /// A flag out of range, a missing program or module, a player that
    /// failed (the message says which).
    #[error("{0}")]
    Invalid(String),
    /// A file or program could not be read, written or started; `what`
    /// says which and how.
    #[error("{what}")]
    Io {
        /// The step and the path.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An I/O error of a step with nothing to add.
    #[error(transparent)]
    RawIo(#[from] std::io::Error),
    /// The browser side's output is not the JSON it writes.
    #[error("{what}")]
    Parse {
        /// The file.
        what: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// An output could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RecordError {
    let what = what.into();
    move |source| RecordError::Io { what, source }
}

/// Hears what a recording finds on its way.
pub trait RecordObserver {
    /// `root` has no media record: not a real-media set, the browser may
    /// not play it.
    fn not_real_media(&mut self, _root: &Path) {}
}

/// An observer that hears nothing.
impl RecordObserver for () {}

/// What a recording made (its files are written).
#[derive(Debug)]
pub struct Recording {
    /// The output directory.
    pub output: PathBuf,
    /// The player that played.
    pub player: RecordPlayer,
    /// The requests to the server, in issue order.
    pub requests: Vec<Recorded>,
    /// The browser side's output.
    pub raw: RawRecording,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

impl Recording {
    /// One line: requests, media segments, failures, bytes, the segment
    /// download rate, and the player's switches, stalls and errors.
    pub fn summary(&self) -> String {
        let (rec, raw) = (&self.requests, &self.raw);
        let media: Vec<&Recorded> = rec
            .iter()
            .filter(|r| r.path.split('?').next().unwrap_or("").ends_with(".m4s"))
            .collect();
        let bytes: u64 = rec.iter().filter_map(|r| r.bytes).sum();
        let rate = mean(media.iter().filter_map(|r| {
            let (b, d) = (r.bytes? as f64, r.duration_ms?);
            (d > 0.0 && b > 10_000.0).then(|| b * 8.0 / d)
        }));
        let n = |k: &str| raw.metrics[k].as_array().map_or(0, |v| v.len());
        let errors = n("errors");
        let cmcd = rec.iter().filter(|r| r.has_cmcd()).count();
        format!(
            "{}: {} requests ({} media segments, {} failed or cancelled{}), {:.1} MiB; segment download rate {} kbit/s; {}: {} rendition switches, {} stalls, {} errors ({})",
            self.output.display(),
            rec.len(),
            media.len(),
            rec.iter().filter(|r| r.failed.is_some()).count(),
            if cmcd > 0 {
                format!(", {cmcd} with CMCD")
            } else {
                String::new()
            },
            bytes as f64 / 1048576.0,
            rate.map_or("-".into(), |r| format!("{r:.0}")),
            raw.metrics["player"].as_str().unwrap_or(self.player.name()),
            n("switches"),
            n("stalls"),
            errors,
            raw.chromium
        )
    }
}

/// Runs `vodlab record`: serve (the program `vodlab`, unless a target is
/// given), play, record, convert; the outputs are written under
/// `a.output`.
pub fn run(
    a: &RecordArgs,
    vodlab: &Path,
    obs: &mut impl RecordObserver,
) -> Result<Recording, RecordError> {
    let bad = |m: String| Err(RecordError::Invalid(m));
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        return bad(format!(
            "--duration/--seconds {}: expected more than 0 and at most 3600 s (1h)",
            a.seconds
        ));
    }
    for (k, v) in [
        ("--down-kbps", a.down_kbps),
        ("--up-kbps", a.up_kbps.unwrap_or(0.0)),
        ("--latency-ms", a.latency_ms),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return bad(format!("{k} {v}: expected a number >= 0"));
        }
    }
    let settings: Option<serde_json::Value> = match &a.player_settings {
        None => None,
        Some(t) => match serde_json::from_str(t) {
            Ok(v @ serde_json::Value::Object(_)) => Some(v),
            Ok(_) => return bad("--player-settings: expected a JSON object".into()),
            Err(e) => return bad(format!("--player-settings: not JSON: {e}")),
        },
    };
    if a.cmcd.is_some() && a.player != RecordPlayer::Dash {
        return bad("--cmcd: dash.js's CMCD only (--player dash); hls.js's is not wired up".into());
    }
    // a target is checked before anything is looked for or started
    let target = a
        .target
        .as_deref()
        .map(|t| parse_target(t, a.netns.is_some()))
        .transpose()?;
    if let Some(ns) = &a.netns {
        if ns.is_empty() || ns.contains('/') || !Path::new("/run/netns").join(ns).exists() {
            return bad(format!("--netns {ns}: no such network namespace (ip netns list; vodlab lab up makes vl-NAME-c0..)"));
        }
    }
    let dir = record_dir(a.record_dir.as_deref());
    let modules = dir.join("node_modules");
    let player_js = modules.join(a.player.script());
    if !player_js.is_file() || !modules.join("puppeteer-core/package.json").is_file() {
        let what = match a.player {
            RecordPlayer::Dash => "dashjs",
            RecordPlayer::Hls => "hls.js",
        };
        return bad(format!(
            "{}: {what} and puppeteer-core are not installed there; run scripts/install-test-deps.sh (npm install --prefix {} {} puppeteer-core@24)",
            modules.display(),
            dir.display(),
            a.player.package()
        ));
    }
    if !a.chromium.is_file() {
        return bad(format!(
            "{}: no Chromium there (Debian: apt-get install chromium; or --chromium PATH)",
            a.chromium.display()
        ));
    }
    if a.h3 && (a.target.is_some() || a.root.is_none()) {
        return bad("--h3 needs --root (the vodlab serve it starts speaks HTTP/3)".into());
    }
    std::fs::create_dir_all(&a.output).map_err(io(format!("creating {}", a.output.display())))?;
    // over h3: the server's certificate and the pin Chromium trusts it by
    let tls = if a.h3 {
        let (files, pin) = TlsFiles::generate_pinned(&a.output.join("tls"))
            .map_err(|e| RecordError::Invalid(format!("--h3: {e}")))?;
        Some((files, pin))
    } else {
        None
    };
    let (_serve, origin) = match (&a.root, target) {
        (_, Some((origin, _))) => (None, origin),
        (Some(root), None) => {
            if !vodlab_fileset::media::is_real(root) {
                obs.not_real_media(root);
            }
            let (s, addr) = start_serve(vodlab, root, &a.output, tls.as_ref().map(|t| &t.0))?;
            let scheme = if a.h3 { "https" } else { "http" };
            (Some(s), format!("{scheme}://{addr}"))
        }
        (None, None) => return bad("give --root DIR or --target URL".into()),
    };
    let quic = tls.as_ref().map(|(_, pin)| {
        serde_json::json!({
            "origin": origin.trim_start_matches("https://"),
            "spki": pin,
        })
    });
    let mpd = match (&a.manifest, &a.root) {
        (Some(m), _) => format!("/{}", m.trim_start_matches('/')),
        (None, Some(root)) => first_manifest(root, a.player.manifest_name())?,
        (None, None) => return bad("--target needs --manifest PATH".into()),
    };
    let cmcd = a.cmcd.map(|m| {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        serde_json::json!({
            "mode": m.name(),
            "sid": format!("vodlab-record-{ms}"),
            "cid": title_of(&mpd),
        })
    });
    let raw_path = a.output.join("raw.json");
    let _ = std::fs::remove_file(&raw_path);
    let js = a.output.join(".record.cjs");
    std::fs::write(&js, RECORD_JS)?;
    let cfg = serde_json::json!({
        "chromium": a.chromium,
        "origin": origin,
        "manifest": mpd,
        "player": a.player.name(),
        "player_js": player_js,
        "settings": settings,
        "cmcd": cmcd,
        "seconds": a.seconds,
        "down_kbps": a.down_kbps,
        "up_kbps": a.up_kbps.unwrap_or(a.down_kbps),
        "latency_ms": a.latency_ms,
        "quic": quic,
        "out": raw_path,
        // Chromium refuses to run as root with its sandbox
        "no_sandbox": unsafe { libc::geteuid() } == 0,
    });
    let cfg_path = a.output.join(".record-config.json");
    std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg)?)?;
    let mut cmd = match &a.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&a.node);
            c
        }
        None => Command::new(&a.node),
    };
    let status = cmd
        .arg(&js)
        .arg(&cfg_path)
        .env("NODE_PATH", &modules)
        .stdin(Stdio::null())
        .status()
        .map_err(io(format!("starting {}", a.node.display())))?;
    let _ = std::fs::remove_file(&js);
    let _ = std::fs::remove_file(&cfg_path);
    if !status.success() {
        return bad(format!(
            "the browser side failed ({status}); its message is above"
        ));
    }
    let emulated = a.down_kbps > 0.0 || a.latency_ms > 0.0 || a.up_kbps.is_some_and(|u| u > 0.0);
    let raw: RawRecording = serde_json::from_slice(
        &std::fs::read(&raw_path).map_err(io(format!("reading {}", raw_path.display())))?,
    )
    .map_err(|source| RecordError::Parse {
        what: format!("parsing {}", raw_path.display()),
        source,
    })?;
    let rec = recorded(&raw, &origin);
    if rec.is_empty() {
        return bad(format!(
            "the player made no request to {origin} (console: {:?})",
            raw.console
        ));
    }
    let sess = session(&rec, title_of(&mpd));
    let script = Script {
        sessions: vec![sess.clone()],
    };
    std::fs::write(a.output.join("recording.vsl"), write_vodlab(&script))?;
    std::fs::write(
        a.output.join("recording.h2load.txt"),
        export_h2load(&sess).0,
    )?;
    std::fs::write(
        a.output.join("requests.json"),
        serde_json::to_vec_pretty(&serde_json::json!({
            "origin": origin,
            "manifest": mpd,
            "player": raw.metrics.get("player").cloned().unwrap_or(a.player.name().into()),
            "player_settings": settings,
            "cmcd": cmcd,
            "chromium": raw.chromium,
            "netns": a.netns,
            "h3": a.h3,
            "emulation": if emulated {
                serde_json::json!({
                    "kind": "chromium Network.emulateNetworkConditions (per request, not TCP)",
                    "down_kbps": a.down_kbps,
                    "up_kbps": a.up_kbps.unwrap_or(a.down_kbps),
                    "latency_ms": a.latency_ms,
                })
            } else {
                serde_json::json!({"kind": "none (the host's or --netns's own link)"})
            },
            "requests": rec,
        }))?,
    )?;
    std::fs::write(
        a.output.join(a.player.metrics_file()),
        serde_json::to_vec_pretty(&raw.metrics)?,
    )?;
    Ok(Recording {
        output: a.output.clone(),
        player: a.player,
        requests: rec,
        raw,
    })
}
