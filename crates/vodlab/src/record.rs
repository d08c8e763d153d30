//! `vodlab record`: a real player (dash.js or hls.js in headless Chromium)
//! plays a real-media file set through Chromium's network emulation or a
//! kernel-shaped link (`--netns`, a `vodlab lab` client host); what it
//! requested becomes a vodlab session script and an h2load timing script,
//! with the player's own metrics beside them (docs/record.md).
//!
//! The browser side is `scripts/record/record.cjs` (embedded here), run by
//! node with puppeteer-core, dash.js and hls.js from the npm cache that
//! `scripts/install-test-deps.sh` fills (`~/.cache/vodlab-record`, or
//! `$VODLAB_RECORD_DIR`). This file starts `vodlab serve` (unless --target),
//! runs the script, and turns its JSON into the outputs; the conversion is
//! pure and unit-tested.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::{Deserialize, Serialize};
use vodlab_workload::script::{
    export_h2load, write_vodlab, ByteRange, Request, Script, Session, SessionHeader, Wait,
};

/// The browser side, written next to the outputs while it runs.
const RECORD_JS: &str = include_str!("../../../scripts/record/record.cjs");
/// A title's MPD file name (`vodlab_manifest::MPD_NAME`).
const MPD_NAME: &str = "manifest.mpd";
/// A title's HLS multivariant playlist.
const MASTER_NAME: &str = "master.m3u8";

/// The player `vodlab record` drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordPlayer {
    /// dash.js 4.7.4 playing `/{title}/manifest.mpd`.
    Dash,
    /// hls.js 1.7.4 playing `/{title}/master.m3u8`.
    Hls,
}

impl RecordPlayer {
    /// The manifest file name of a title.
    fn manifest_name(self) -> &'static str {
        match self {
            RecordPlayer::Dash => MPD_NAME,
            RecordPlayer::Hls => MASTER_NAME,
        }
    }
    /// The player's script under `node_modules`.
    fn script(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dashjs/dist/dash.all.min.js",
            RecordPlayer::Hls => "hls.js/dist/hls.min.js",
        }
    }
    /// The npm package (pinned version) the script comes from.
    fn package(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dashjs@4.7.4",
            RecordPlayer::Hls => "hls.js@1.7.4",
        }
    }
    /// File name of the player's metrics.
    fn metrics_file(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dashjs-metrics.json",
            RecordPlayer::Hls => "hlsjs-metrics.json",
        }
    }
    fn name(self) -> &'static str {
        match self {
            RecordPlayer::Dash => "dash",
            RecordPlayer::Hls => "hls",
        }
    }
}
/// Per-request timeout written into the session script, seconds.
const TIMEOUT_S: f64 = 30.0;

/// `vodlab record` arguments.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Root of a real-media file set (`vodlab fileset create --media real`),
    /// served by a `vodlab serve` started on a free loopback port.
    #[arg(long, value_name = "DIR", required_unless_present = "target")]
    pub root: Option<PathBuf>,
    /// Play from this server (`http://HOST:PORT`) instead of starting
    /// `vodlab serve`: loopback only, or with --netns also a private IPv4
    /// address (a `vodlab lab` server, 10.77.0.1).
    #[arg(long, value_name = "URL", conflicts_with = "root")]
    pub target: Option<String>,
    /// The player: dash (dash.js, an MPD) or hls (hls.js, a multivariant
    /// playlist).
    #[arg(long, value_enum, default_value = "dash")]
    pub player: RecordPlayer,
    /// Path of the manifest to play (default: the first title's
    /// `/{title}/manifest.mpd`, or `/{title}/master.m3u8` with --player hls,
    /// under --root).
    #[arg(long, alias = "mpd", value_name = "PATH")]
    pub manifest: Option<String>,
    /// Player settings as a JSON object: given to dash.js's
    /// `updateSettings` (e.g. '{"streaming":{"buffer":{"stableBufferTime":20}}}')
    /// or merged into hls.js's config (e.g. '{"maxBufferLength":20}');
    /// default: the player's own defaults.
    #[arg(long, value_name = "JSON")]
    pub player_settings: Option<String>,
    /// Run the browser in this network namespace (`ip netns exec`), e.g. a
    /// `vodlab lab` client host `vl-NAME-c0`, so that it reaches --target
    /// over the lab's kernel-shaped link; give no --down-kbps/--latency-ms
    /// to leave Chromium's own emulation off. Needs root and --target.
    #[arg(long, value_name = "NAME", requires = "target")]
    pub netns: Option<String>,
    /// How long to play (from page load) before the recording stops (a
    /// bare number is seconds: 30, 90s, 2m; `--seconds` is an older name).
    #[arg(long = "duration", alias = "seconds", default_value_t = 30.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub seconds: f64,
    /// Emulated downlink, kbit/s (Chromium's Network.emulateNetworkConditions,
    /// per request; 0 = not limited; all three 0 = no emulation).
    #[arg(long, default_value_t = 0.0)]
    pub down_kbps: f64,
    /// Emulated uplink, kbit/s (default: as --down-kbps).
    #[arg(long)]
    pub up_kbps: Option<f64>,
    /// Emulated latency added to every request, ms.
    #[arg(long, default_value_t = 0.0)]
    pub latency_ms: f64,
    /// Chromium binary.
    #[arg(long, default_value = "/usr/bin/chromium")]
    pub chromium: PathBuf,
    /// node binary.
    #[arg(long, default_value = "node")]
    pub node: PathBuf,
    /// Directory holding node_modules with dashjs, hls.js and puppeteer-core
    /// (default: $VODLAB_RECORD_DIR or ~/.cache/vodlab-record).
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<PathBuf>,
    /// Output directory: recording.vsl, recording.h2load.txt, requests.json,
    /// dashjs-metrics.json (hlsjs-metrics.json with --player hls), raw.json.
    /// (`--output` is an older name.)
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub output: PathBuf,
}

/// One request as the browser script reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct RawRequest {
    /// Absolute URL.
    pub url: String,
    /// `Range` header value, when sent.
    #[serde(default)]
    pub range: Option<String>,
    /// DevTools monotonic time the request was issued, seconds.
    pub t_s: f64,
    /// HTTP status.
    #[serde(default)]
    pub status: Option<u16>,
    /// Body bytes received.
    #[serde(default)]
    pub body_bytes: Option<u64>,
    /// DevTools time the load finished or failed, seconds.
    #[serde(default)]
    pub end_s: Option<f64>,
    /// Failure text (a cancelled request: dash.js abandoned it).
    #[serde(default)]
    pub failed: Option<String>,
}

/// What the browser script writes.
#[derive(Debug, Clone, Deserialize)]
pub struct RawRecording {
    /// Chromium's version string.
    pub chromium: String,
    /// Requests in issue order.
    pub requests: Vec<RawRequest>,
    /// The player's metrics (switches, stalls, buffer levels, errors).
    pub metrics: serde_json::Value,
    /// Console messages of the page.
    #[serde(default)]
    pub console: Vec<String>,
}

/// One recorded request, relative to the first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// URL path (and query) on the server.
    pub path: String,
    /// Byte range asked for.
    pub range: Option<(u64, Option<u64>)>,
    /// Issue time after the first request, ms (rounded to µs).
    pub offset_ms: f64,
    /// Issue to last byte (or failure), ms.
    pub duration_ms: Option<f64>,
    /// Body bytes received.
    pub bytes: Option<u64>,
    /// HTTP status.
    pub status: Option<u16>,
    /// Failure (e.g. cancelled by the player).
    pub failed: Option<String>,
}

/// Parses a `Range` header value `bytes=A-B` or `bytes=A-`.
pub fn parse_range(v: &str) -> Option<(u64, Option<u64>)> {
    let (a, b) = v.trim().strip_prefix("bytes=")?.split_once('-')?;
    let a = a.trim().parse().ok()?;
    let b = b.trim();
    if b.is_empty() {
        Some((a, None))
    } else {
        let b: u64 = b.parse().ok()?;
        (b >= a).then_some((a, Some(b)))
    }
}

/// The requests to `origin` (`http://HOST:PORT`) in issue order, timed from
/// the first; requests elsewhere are left out.
pub fn recorded(raw: &RawRecording, origin: &str) -> Vec<Recorded> {
    let mut reqs: Vec<&RawRequest> = raw
        .requests
        .iter()
        .filter(|r| r.url.starts_with(origin))
        .collect();
    reqs.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let Some(t0) = reqs.first().map(|r| r.t_s) else {
        return Vec::new();
    };
    let us = |s: f64| (s * 1e6).round() / 1e3;
    reqs.iter()
        .map(|r| {
            let path = &r.url[origin.len()..];
            Recorded {
                path: if path.starts_with('/') {
                    path.to_string()
                } else {
                    format!("/{path}")
                },
                range: r.range.as_deref().and_then(parse_range),
                offset_ms: us(r.t_s - t0),
                duration_ms: r.end_s.map(|e| us(e - r.t_s)),
                bytes: r.body_bytes,
                status: r.status,
                failed: r.failed.clone(),
            }
        })
        .collect()
}

/// One vodlab session replaying `rec`: each request paced at its recorded
/// offset after the previous one (`pacing=`), with its recorded range.
pub fn session(rec: &[Recorded], title: Option<&str>) -> Session {
    let requests = rec
        .iter()
        .enumerate()
        .map(|(i, r)| Request {
            path: r.path.clone(),
            range: r.range.map(|(start, end)| ByteRange { start, end }),
            timeout_s: Some(TIMEOUT_S),
            wait: if i == 0 {
                Wait::None
            } else {
                // from the offsets, so rounding never accumulates
                Wait::Pacing(
                    (((r.offset_ms * 1e3).round() - (rec[i - 1].offset_ms * 1e3).round()) / 1e6)
                        .max(0.0),
                )
            },
            ..Request::get(r.path.clone())
        })
        .collect();
    Session {
        header: SessionHeader {
            id: Some(0),
            title: title.map(str::to_string),
            ..Default::default()
        },
        requests,
    }
}

/// The title of an MPD path `/{title}/manifest.mpd`.
fn title_of(mpd: &str) -> Option<&str> {
    let mut parts = mpd.trim_start_matches('/').split('/');
    let t = parts.next()?;
    parts.next().map(|_| t)
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => v.is_loopback(),
        IpAddr::V6(v) => v.is_loopback() || v.to_ipv4_mapped().is_some_and(|m| m.is_loopback()),
    }
}

/// A private IPv4 address (RFC 1918), as a `vodlab lab` host has.
fn is_private(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v) if v.is_private())
}

/// `http://HOST:PORT` → (origin as given without a trailing `/`, address);
/// loopback only, or also private addresses when the browser runs in a
/// network namespace (`in_netns`).
fn parse_target(t: &str, in_netns: bool) -> anyhow::Result<(String, SocketAddr)> {
    let origin = t.trim_end_matches('/');
    let Some(hostport) = origin.strip_prefix("http://") else {
        bail!("--target {t}: expected http://HOST:PORT");
    };
    if hostport.contains('/') {
        bail!("--target {t}: expected http://HOST:PORT without a path");
    }
    let addr = hostport
        .to_socket_addrs()
        .with_context(|| format!("--target {t}: cannot resolve"))?
        .next()
        .with_context(|| format!("--target {t}: no address"))?;
    if !(is_loopback(addr.ip()) || in_netns && is_private(addr.ip())) {
        bail!(
            "--target {t} resolves to {}, not a loopback address{}: record plays from this machine only",
            addr.ip(),
            if in_netns {
                " nor a private one"
            } else {
                " (a lab's private address needs --netns)"
            }
        );
    }
    Ok((origin.to_string(), addr))
}

/// The first title directory (sorted) under `root` with a manifest `name`.
fn first_manifest(root: &Path, name: &str) -> anyhow::Result<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(name).is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    dirs.sort();
    match dirs.first() {
        Some(d) => Ok(format!("/{d}/{name}")),
        None => bail!(
            "{}: no {{title}}/{name} (create the set with `vodlab fileset create --media real`)",
            root.display(),
        ),
    }
}

/// A `vodlab serve` child, killed (by its own PID) on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_serve(root: &Path, out: &Path) -> anyhow::Result<(Serve, SocketAddr)> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let log = std::fs::File::create(out.join("serve.log"))?;
    let child = Command::new(std::env::current_exe()?)
        .args(["serve", "--root"])
        .arg(root)
        .args(["--listen", &addr.to_string(), "--io", "vanilla"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting vodlab serve")?;
    let mut serve = Serve(child);
    let t = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Some(st) = serve.0.try_wait()? {
            bail!(
                "vodlab serve exited ({st}) before listening; see {}",
                out.join("serve.log").display()
            );
        }
        if t.elapsed() > Duration::from_secs(15) {
            bail!("vodlab serve did not listen on {addr} within 15 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((serve, addr))
}

fn record_dir(a: &RecordArgs) -> PathBuf {
    a.record_dir
        .clone()
        .or_else(|| std::env::var_os("VODLAB_RECORD_DIR").map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/vodlab-record")
        })
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// Runs `vodlab record`: serve, play, record, convert.
pub fn run(a: RecordArgs) -> anyhow::Result<ExitCode> {
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        bail!(
            "--duration/--seconds {}: expected more than 0 and at most 3600 s (1h)",
            a.seconds
        );
    }
    for (k, v) in [
        ("--down-kbps", a.down_kbps),
        ("--up-kbps", a.up_kbps.unwrap_or(0.0)),
        ("--latency-ms", a.latency_ms),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            bail!("{k} {v}: expected a number >= 0");
        }
    }
    let settings: Option<serde_json::Value> = match &a.player_settings {
        None => None,
        Some(t) => match serde_json::from_str(t) {
            Ok(v @ serde_json::Value::Object(_)) => Some(v),
            Ok(_) => bail!("--player-settings: expected a JSON object"),
            Err(e) => bail!("--player-settings: not JSON: {e}"),
        },
    };
    // a target is checked before anything is looked for or started
    let target = a
        .target
        .as_deref()
        .map(|t| parse_target(t, a.netns.is_some()))
        .transpose()?;
    if let Some(ns) = &a.netns {
        if ns.is_empty() || ns.contains('/') || !Path::new("/run/netns").join(ns).exists() {
            bail!("--netns {ns}: no such network namespace (ip netns list; vodlab lab up makes vl-NAME-c0..)");
        }
    }
    let dir = record_dir(&a);
    let modules = dir.join("node_modules");
    let player_js = modules.join(a.player.script());
    if !player_js.is_file() || !modules.join("puppeteer-core/package.json").is_file() {
        let what = match a.player {
            RecordPlayer::Dash => "dashjs",
            RecordPlayer::Hls => "hls.js",
        };
        bail!(
            "{}: {what} and puppeteer-core are not installed there; run scripts/install-test-deps.sh (npm install --prefix {} {} puppeteer-core@24)",
            modules.display(),
            dir.display(),
            a.player.package()
        );
    }
    if !a.chromium.is_file() {
        bail!(
            "{}: no Chromium there (Debian: apt-get install chromium; or --chromium PATH)",
            a.chromium.display()
        );
    }
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    let (_serve, origin) = match (&a.root, target) {
        (_, Some((origin, _))) => (None, origin),
        (Some(root), None) => {
            if !vodlab_fileset::media::is_real(root) {
                eprintln!(
                    "vodlab record: {} has no {}: not a real-media set, the browser may not play it",
                    root.display(),
                    vodlab_fileset::media::MEDIA_FILE
                );
            }
            let (s, addr) = start_serve(root, &a.output)?;
            (Some(s), format!("http://{addr}"))
        }
        (None, None) => bail!("give --root DIR or --target URL"),
    };
    let mpd = match (&a.manifest, &a.root) {
        (Some(m), _) => format!("/{}", m.trim_start_matches('/')),
        (None, Some(root)) => first_manifest(root, a.player.manifest_name())?,
        (None, None) => bail!("--target needs --manifest PATH"),
    };
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
        "seconds": a.seconds,
        "down_kbps": a.down_kbps,
        "up_kbps": a.up_kbps.unwrap_or(a.down_kbps),
        "latency_ms": a.latency_ms,
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
        .with_context(|| format!("starting {}", a.node.display()))?;
    let _ = std::fs::remove_file(&js);
    let _ = std::fs::remove_file(&cfg_path);
    if !status.success() {
        bail!("the browser side failed ({status}); its message is above");
    }
    let emulated = a.down_kbps > 0.0 || a.latency_ms > 0.0 || a.up_kbps.is_some_and(|u| u > 0.0);
    let raw: RawRecording = serde_json::from_slice(
        &std::fs::read(&raw_path).with_context(|| format!("reading {}", raw_path.display()))?,
    )
    .with_context(|| format!("parsing {}", raw_path.display()))?;
    let rec = recorded(&raw, &origin);
    if rec.is_empty() {
        bail!(
            "the player made no request to {origin} (console: {:?})",
            raw.console
        );
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
            "chromium": raw.chromium,
            "netns": a.netns,
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
    // summary
    let media: Vec<&Recorded> = rec.iter().filter(|r| r.path.ends_with(".m4s")).collect();
    let bytes: u64 = rec.iter().filter_map(|r| r.bytes).sum();
    let rate = mean(media.iter().filter_map(|r| {
        let (b, d) = (r.bytes? as f64, r.duration_ms?);
        (d > 0.0 && b > 10_000.0).then(|| b * 8.0 / d)
    }));
    let n = |k: &str| raw.metrics[k].as_array().map_or(0, |v| v.len());
    let errors = n("errors");
    println!(
        "{}: {} requests ({} media segments, {} failed or cancelled), {:.1} MiB; segment download rate {} kbit/s; {}: {} rendition switches, {} stalls, {} errors ({})",
        a.output.display(),
        rec.len(),
        media.len(),
        rec.iter().filter(|r| r.failed.is_some()).count(),
        bytes as f64 / 1048576.0,
        rate.map_or("-".into(), |r| format!("{r:.0}")),
        raw.metrics["player"].as_str().unwrap_or(a.player.name()),
        n("switches"),
        n("stalls"),
        errors,
        raw.chromium
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vodlab_workload::script::parse_script;

    fn raw(reqs: &[(&str, Option<&str>, f64)]) -> RawRecording {
        RawRecording {
            chromium: "test".into(),
            requests: reqs
                .iter()
                .map(|(u, r, t)| RawRequest {
                    url: u.to_string(),
                    range: r.map(str::to_string),
                    t_s: *t,
                    status: Some(200),
                    body_bytes: Some(1000),
                    end_s: Some(t + 0.5),
                    failed: None,
                })
                .collect(),
            metrics: serde_json::json!({}),
            console: vec![],
        }
    }

    #[test]
    fn ranges_parse_or_are_refused() {
        assert_eq!(parse_range("bytes=0-99"), Some((0, Some(99))));
        assert_eq!(parse_range("bytes=100-"), Some((100, None)));
        assert_eq!(parse_range("bytes=9-3"), None);
        assert_eq!(parse_range("items=0-1"), None);
        assert_eq!(parse_range("bytes=a-1"), None);
    }

    #[test]
    fn requests_become_a_paced_script_at_their_offsets() {
        let o = "http://127.0.0.1:9";
        // out of order, one elsewhere
        let r = raw(&[
            ("http://127.0.0.1:9/t/v/00000.m4s", None, 100.25),
            ("http://127.0.0.1:9/t/manifest.mpd", None, 100.0),
            (
                "http://127.0.0.1:9/t/a/00000.m4s",
                Some("bytes=10-19"),
                100.2504,
            ),
            ("http://example.invalid/x", None, 100.1),
            ("http://127.0.0.1:9/t/v/00001.m4s", None, 104.0),
        ]);
        let rec = recorded(&r, o);
        let paths: Vec<&str> = rec.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/t/manifest.mpd",
                "/t/v/00000.m4s",
                "/t/a/00000.m4s",
                "/t/v/00001.m4s"
            ]
        );
        assert_eq!(rec[2].range, Some((10, Some(19))));
        assert!((rec[3].offset_ms - 4000.0).abs() < 1e-9);
        assert_eq!(rec[0].duration_ms, Some(500.0));
        let s = session(&rec, title_of("/t/manifest.mpd"));
        assert_eq!(s.header.title.as_deref(), Some("t"));
        // written and read back: the pacing sums give back every offset
        let text = write_vodlab(&Script {
            sessions: vec![s.clone()],
        });
        let back = parse_script(&text).unwrap();
        let mut t = 0.0;
        for (i, q) in back.sessions[0].requests.iter().enumerate() {
            if let Wait::Pacing(p) = q.wait {
                t += p * 1e3;
            }
            assert!((t - rec[i].offset_ms).abs() < 1e-6, "{i}: {t} {text}");
            assert_eq!(q.path, rec[i].path);
        }
        assert_eq!(
            back.sessions[0].requests[2].range,
            Some(ByteRange {
                start: 10,
                end: Some(19)
            })
        );
        // h2load: one line a request at the offsets
        let h2 = export_h2load(&s).0;
        let offs: Vec<f64> = h2
            .lines()
            .map(|l| l.split('\t').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(offs.len(), 4);
        assert!((offs[1] - 250.0).abs() < 1e-3 && (offs[3] - 4000.0).abs() < 1e-3);
    }

    #[test]
    fn targets_are_loopback_only() {
        assert!(parse_target("http://127.0.0.1:8080", false).is_ok());
        assert!(parse_target("http://[::1]:8080/", false).is_ok());
        assert!(parse_target("https://127.0.0.1:8080", false).is_err());
        assert!(parse_target("http://127.0.0.1:8080/x", false).is_err());
        let e = parse_target("http://192.0.2.1:80", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a loopback"), "{e}");
        // a lab's server: only from inside a namespace
        let e = parse_target("http://10.77.0.1:8080", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs --netns"), "{e}");
        assert!(parse_target("http://10.77.0.1:8080", true).is_ok());
        let e = parse_target("http://192.0.2.1:80", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nor a private"), "{e}");
    }
}
