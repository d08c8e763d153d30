//! One closed-loop player session's task (`vodlab run --player`): the
//! [`Player`] core executed over the run's transport, on one logical
//! connection, with the session's client-class link. The settings, the
//! manifest → movie step and the QoE aggregate are in
//! [`crate::player_run`].
//!
//! `now` given to the player is ms since the session started. Progress is
//! told at every read (the player spaces its abandonment checks as Sabre
//! does, [`crate::player_run::LIVE_ABANDON_CHECK_MS`]); an abandonment
//! drops the exchange in flight: with HTTP/1.1 the connection is closed
//! (the next request opens one), with HTTP/2 the dropped stream is reset
//! and the connection kept.

use crate::core::cmcd::{next_request, CmcdMode, CmcdSession, PlayerReport, Response};
use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;
use vodlab_cmcd::{ObjectType, StreamingFormat};

use tokio::sync::mpsc;
use vodlab_manifest::{hls_presentation, parse_master, parse_media, parse_mpd, Presentation};
use vodlab_workload::script::Session;

use super::collect::session_id;
use super::{Ctx, Report, BATCH};
use crate::core::delivery::{DeliveryOut, Playback};
use crate::core::exchange::{ErrorKind, Failure};
use crate::core::link::LinkSpec;
use crate::core::player::{Action, Event, Player, PlayerProfile};
use crate::core::viewer::ViewerStats;
use crate::io::http::{Outgoing, SHAPED_READ_INTERVAL};
use crate::io::transport::{Conn, SessionTransport};
use crate::out::metrics::{RequestSample, SampleDone, SessionSample};
use crate::player_run::{
    absolutize, movie_of, segments_for, Parsed, PlayerRun, PlayerSessionError as E,
    PlayerSessionOutcome, PresentationCache, TimelineRecorder, MAX_MANIFEST_BYTES, MAX_VARIANTS,
};

/// How a GET ended when it did not fail.
enum Got {
    /// The whole response: status and body bytes.
    Done(u16),
    /// The player abandoned it.
    Abandoned,
}

/// The session's connection and its request accounting.
struct Io<'a> {
    ctx: &'a Ctx,
    run: &'a PlayerRun,
    transport: SessionTransport<'a>,
    link: LinkSpec,
    conn: Option<Conn>,
    id: u64,
    tx: &'a mpsc::UnboundedSender<Report>,
    shard: u32,
    index: u32,
    requests: u32,
    samples: Vec<RequestSample>,
    /// How CMCD is sent (`--cmcd`; off with `--no-cmcd`).
    mode: CmcdMode,
    /// What CMCD remembers between requests (`bs`, the previous response).
    cmcd: CmcdSession,
    /// The title (`cid`).
    title: Option<String>,
    /// The server's CMSD `mb`, kbit/s, as of the last response that
    /// carried `CMSD-Dynamic` (`--honour-cmsd`; [`cmsd_cap`]).
    cmsd_mb: Option<u64>,
    /// The server's CMSD `etp`, kbit/s, of the last response
    /// (`--honour-cmsd`; [`cmsd_etp`]): none when it carried none.
    cmsd_etp: Option<u64>,
}

/// The bit-rate cap a response's `CMSD-Dynamic` value sets: the `mb` of
/// the last hop that sends one (the hop nearest the player), `None` (no
/// cap) when no hop does.
fn cmsd_cap(dynamic: &str) -> Option<u64> {
    vodlab_cmcd::cmsd::CmsdDynamic::parse(dynamic)
        .hops
        .iter()
        .rev()
        .find_map(|h| h.mb)
}

/// The server's estimated throughput a response's `CMSD-Dynamic` value
/// gives: the `etp` of the last hop that sends one (the hop nearest the
/// player), `None` when no hop does.
fn cmsd_etp(dynamic: &str) -> Option<u64> {
    vodlab_cmcd::cmsd::CmsdDynamic::parse(dynamic)
        .hops
        .iter()
        .rev()
        .find_map(|h| h.etp)
}

/// A request's target and CMCD: the path (with `?CMCD=...` in query mode)
/// and the header lines (header mode).
struct Target {
    path: String,
    headers: Vec<String>,
}

impl Io<'_> {
    fn flush(&mut self) {
        if !self.samples.is_empty() {
            let _ = self.tx.send(Report::Requests {
                shard: self.shard,
                index: self.index,
                samples: std::mem::take(&mut self.samples),
                delivery: DeliveryOut::default(),
            });
        }
    }

    fn record(&mut self, sent: Instant, out: Result<(u64, u16, Instant, u64), ErrorKind>) {
        let ctx = self.ctx;
        let outcome = out.map(|(bytes, status, done, ttfb_us)| SampleDone {
            done_us: ctx.us(done),
            response_us: done.saturating_duration_since(sent).as_micros() as u64,
            ttfb_us,
            from_schedule_us: done.saturating_duration_since(sent).as_micros() as u64,
            bytes,
            status,
            playback: Playback::NoBitRate,
        });
        if let Ok(d) = &outcome {
            ctx.live.requests.fetch_add(1, Ordering::Relaxed);
            ctx.live.bytes.fetch_add(d.bytes, Ordering::Relaxed);
        }
        self.samples.push(RequestSample {
            request: self.requests,
            scheduled_s: ctx.secs(sent),
            sent_s: ctx.secs(sent),
            send_lateness_us: None,
            outcome,
        });
        self.requests = self.requests.saturating_add(1);
        if self.samples.len() >= BATCH {
            self.flush();
        }
    }

    /// Awaits `f` while polling the session's HTTP/2 connections.
    async fn drive<T>(transport: &SessionTransport<'_>, f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        poll_fn(|cx| {
            let _ = transport.poll_drivers(cx);
            f.as_mut().poll(cx)
        })
        .await
    }

    /// GETs `path` (a byte range of it), giving body bytes to `sink` and
    /// each read to `arrived`, which returns true to abandon. A reused
    /// connection the server had closed is reopened once.
    async fn get(
        &mut self,
        path: &str,
        range: Option<(u64, u64)>,
        headers: &[String],
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
        arrived: &mut (dyn FnMut(Instant, u64) -> bool + Send),
    ) -> Result<Got, E> {
        let range_text = range.map(|(a, b)| format!("bytes={a}-{b}"));
        let out = Outgoing {
            method: "GET",
            path,
            range: range_text.as_deref(),
            headers,
            body: None,
            session: self.id,
            http10: false,
        };
        let failed = |f: Failure| E::Transfer {
            path: path.to_string(),
            kind: f.kind,
            detail: f.detail,
        };
        for attempt in 0..2 {
            let mut c = match self.conn.take() {
                Some(c) => c,
                None => {
                    let r =
                        Self::drive(&self.transport, self.transport.connect(0, &self.link)).await;
                    match r {
                        Ok((mut c, opened)) => {
                            if opened.new_connection {
                                let _ = self.tx.send(Report::Opened(opened));
                            }
                            if let Conn::H1(h) = &mut c {
                                // a few reads per segment, not one per bucket chunk
                                // (a receive buffer left small only costs reads)
                                let _ = h.batch_reads_tcp(
                                    SHAPED_READ_INTERVAL,
                                    self.ctx.cfg.kernel_down,
                                );
                            }
                            c
                        }
                        Err(f) => return Err(failed(f)),
                    }
                }
            };
            let sent = Instant::now();
            let abandon = AtomicBool::new(false);
            let mut got_bytes = false;
            let mut last = sent;
            let mut on_read = |at: Instant, n: u64| {
                got_bytes = true;
                last = at;
                if arrived(at, n) {
                    abandon.store(true, Ordering::Relaxed);
                }
            };
            let r = {
                let ex = self.transport.exchange(&mut c, &out, sink, &mut on_read);
                let ex = tokio::time::timeout(self.run.request_timeout, ex);
                let mut ex = std::pin::pin!(ex);
                let transport = &self.transport;
                poll_fn(|cx| {
                    let _ = transport.poll_drivers(cx);
                    match ex.as_mut().poll(cx) {
                        Poll::Ready(r) => Poll::Ready(Some(r)),
                        Poll::Pending if abandon.load(Ordering::Relaxed) => Poll::Ready(None),
                        Poll::Pending => Poll::Pending,
                    }
                })
                .await
            };
            let done = Instant::now();
            match r {
                None => {
                    // dropped mid-response: an HTTP/1.1 connection is unusable,
                    // an HTTP/2 or HTTP/3 stream was reset and its connection stays
                    if matches!(c, Conn::H2(_) | Conn::H3(_)) {
                        self.conn = Some(c);
                    }
                    self.cmcd.response(None);
                    self.record(sent, Err(ErrorKind::Other));
                    return Ok(Got::Abandoned);
                }
                Some(Err(_elapsed)) => {
                    self.cmcd.response(None);
                    self.record(sent, Err(ErrorKind::Timeout));
                    return Err(E::Transfer {
                        path: path.to_string(),
                        kind: ErrorKind::Timeout,
                        detail: format!("no complete response in {:?}", self.run.request_timeout),
                    });
                }
                Some(Ok(Err(f))) => {
                    if f.retryable && !got_bytes && attempt == 0 {
                        continue;
                    }
                    self.cmcd.response(None);
                    self.record(sent, Err(f.kind));
                    return Err(failed(f));
                }
                Some(Ok(Ok(resp))) => {
                    if resp.keep_alive {
                        self.conn = Some(c);
                    }
                    if let Some(d) = resp.cmsd_dynamic.as_deref() {
                        // a response without the header leaves the cap as it was
                        self.cmsd_mb = cmsd_cap(d);
                    }
                    // etp is of this response only
                    self.cmsd_etp = resp.cmsd_dynamic.as_deref().and_then(cmsd_etp);
                    let ttfb = resp.ttfb.as_micros() as u64;
                    let end = done.max(last);
                    self.record(sent, Ok((resp.body_bytes, resp.status, end, ttfb)));
                    if abandon.load(Ordering::Relaxed) {
                        // the last read completed it, but the player had
                        // already given it up
                        self.cmcd.response(None);
                        return Ok(Got::Abandoned);
                    }
                    // measured here, at the edge; reported with the next request
                    self.cmcd.response(Some(Response {
                        ttfb_ms: resp.ttfb.as_secs_f64() * 1e3,
                        ttlb_ms: end.saturating_duration_since(sent).as_secs_f64() * 1e3,
                        status: resp.status,
                    }));
                    return Ok(Got::Done(resp.status));
                }
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// The target and CMCD of a request for `path` leaving now, while the
    /// player's stall time so far is `rebuffer_ms`: `report` with this
    /// session's format, id, title, `rtp` rule, starvation since its last
    /// request and previous response, as headers or in the query
    /// (`--cmcd`), or none (`--cmcd off`, `--no-cmcd`).
    fn target(&mut self, path: &str, mut report: PlayerReport, rebuffer_ms: f64) -> Target {
        let (starved, previous) = self.cmcd.request(rebuffer_ms);
        report.starved = starved;
        report.previous = previous;
        report.format = match self.run.kind {
            crate::player_run::PlayerKind::Dash => StreamingFormat::Dash,
            crate::player_run::PlayerKind::Hls => StreamingFormat::Hls,
        };
        report.session = self.id;
        report.content_id.clone_from(&self.title);
        report.rtp_multiplier = self.run.cmcd_rtp;
        match self.mode {
            CmcdMode::Header => Target {
                path: path.to_string(),
                headers: report.headers(),
            },
            CmcdMode::Query => Target {
                path: report.with_query(path),
                headers: Vec::new(),
            },
            CmcdMode::Off => Target {
                path: path.to_string(),
                headers: Vec::new(),
            },
        }
    }

    /// GETs a manifest or playlist body (at most [`MAX_MANIFEST_BYTES`]).
    async fn text(&mut self, path: &str) -> Result<String, E> {
        let mut body = Vec::new();
        let mut too_big = false;
        let mut sink = |_: u64, d: &[u8]| {
            if body.len() + d.len() <= MAX_MANIFEST_BYTES {
                body.extend_from_slice(d);
            } else {
                too_big = true;
            }
        };
        // before the player exists: starting up, nothing buffered or stalled
        let report = PlayerReport {
            object: ObjectType::Manifest,
            startup: true,
            ..PlayerReport::default()
        };
        let t = self.target(path, report, 0.0);
        let got = self
            .get(&t.path, None, &t.headers, &mut sink, &mut |_, _| false)
            .await?;
        let status = match got {
            Got::Done(s) => s,
            Got::Abandoned => 0,
        };
        if status != 200 {
            return Err(E::ManifestStatus {
                path: path.to_string(),
                status,
            });
        }
        if too_big {
            return Err(E::ManifestBody {
                path: path.to_string(),
                why: format!("larger than {MAX_MANIFEST_BYTES} bytes"),
            });
        }
        String::from_utf8(body).map_err(|_| E::ManifestBody {
            path: path.to_string(),
            why: "not UTF-8".into(),
        })
    }

    /// Fetches and parses the title's manifest (and HLS media playlists),
    /// sharing the parsed form with sessions that got the same texts.
    async fn presentation(
        &mut self,
        title: &str,
        cache: &PresentationCache,
    ) -> Result<(String, Arc<Parsed>), E> {
        let path = self.run.kind.manifest_path(title);
        let bad = |p: &str, source| E::Manifest {
            path: p.to_string(),
            source,
        };
        let text = self.text(&path).await?;
        match self.run.kind {
            crate::player_run::PlayerKind::Dash => {
                let key = PresentationCache::key([path.as_str(), text.as_str()]);
                let p = cache.get_or_try(key, || {
                    let mut p = parse_mpd(&text).map_err(|e| bad(&path, e))?;
                    absolutize(&mut p, std::slice::from_ref(&path));
                    parsed(&path, p)
                })?;
                Ok((path, p))
            }
            crate::player_run::PlayerKind::Hls => {
                let variants = parse_master(&text).map_err(|e| bad(&path, e))?;
                if variants.len() > MAX_VARIANTS {
                    return Err(E::ManifestBody {
                        path,
                        why: format!("more than {MAX_VARIANTS} variants"),
                    });
                }
                let mut paths = Vec::with_capacity(variants.len());
                let mut texts = Vec::with_capacity(variants.len());
                for v in &variants {
                    let p = vodlab_manifest::resolve(&path, &v.uri);
                    texts.push(self.text(&p).await?);
                    paths.push(p);
                }
                let key = PresentationCache::key(
                    std::iter::once(text.as_str())
                        .chain(paths.iter().map(String::as_str))
                        .chain(texts.iter().map(String::as_str)),
                );
                let p = cache.get_or_try(key, || {
                    let media = texts
                        .iter()
                        .zip(&paths)
                        .map(|(t, p)| parse_media(t).map_err(|e| bad(p, e)))
                        .collect::<Result<Vec<_>, E>>()?;
                    let mut pres =
                        hls_presentation(&variants, &media).map_err(|e| bad(&path, e))?;
                    // levels are in variant order, as are the paths
                    absolutize(&mut pres, &paths);
                    parsed(&path, pres)
                })?;
                Ok((path, p))
            }
        }
    }
}

/// The title of a parsed manifest: its whole movie.
fn parsed(path: &str, presentation: Presentation) -> Result<Parsed, E> {
    let movie = movie_of(&presentation, usize::MAX).map_err(|source| E::Movie {
        path: path.to_string(),
        source,
    })?;
    Ok(Parsed {
        presentation,
        movie: Arc::new(movie),
    })
}

pub(super) async fn run_player_session(
    ctx: Arc<Ctx>,
    shard: usize,
    index: usize,
    tx: mpsc::UnboundedSender<Report>,
) {
    let Some(run) = ctx.cfg.player.as_ref() else {
        return;
    };
    let Some(shared) = ctx.players.as_ref() else {
        return;
    };
    let work = ctx.work.clone();
    let whole = match work.session(shard, index) {
        Ok(w) => w,
        Err(e) => return super::session::unreadable(&ctx, shard, index, &e, &tx),
    };
    // a player needs its script's header and request count, not the
    // requests: it keeps only those for its life (a 20-request script is
    // ~4 KiB, a fifth of a player)
    let requests = whole.requests.len();
    let slim = Session {
        header: whole.header.clone(),
        requests: Vec::new(),
    };
    drop(whole);
    let session: &Session = &slim;
    let class = session.header.class.as_deref().unwrap_or("default");
    let link = if ctx.cfg.shaping {
        work.classes.get(class).copied().unwrap_or_default()
    } else {
        LinkSpec::default()
    };
    let start = Instant::now();
    ctx.live.session_started();
    let mut io = Io {
        ctx: &ctx,
        run,
        transport: ctx
            .connector
            .session(1)
            .for_session(ctx.cfg.seed, shard, index),
        link,
        conn: None,
        id: session_id(session, shard, index),
        tx: &tx,
        shard: shard as u32,
        index: index as u32,
        requests: 0,
        samples: Vec::new(),
        mode: if ctx.cfg.cmcd {
            run.cmcd
        } else {
            CmcdMode::Off
        },
        cmcd: CmcdSession::new(),
        title: session.header.title.clone(),
        cmsd_mb: None,
        cmsd_etp: None,
    };
    let mut outcome = PlayerSessionOutcome {
        class: class.to_string(),
        manifest_ms: 0.0,
        qoe: None,
        bitrates_kbps: Vec::new(),
        error: None,
    };
    let mut p1203 = None;
    // the rendition timeline, for the sampled sessions only
    let id = session_id(session, shard, index);
    let mut timeline = shared
        .sampled(id, || {
            work.shards.iter().enumerate().flat_map(|(k, s)| {
                s.sessions
                    .iter()
                    .enumerate()
                    .map(move |(i, x)| session_id(x, k, i))
            })
        })
        .then(|| {
            let title = session.header.title.as_deref().unwrap_or("");
            TimelineRecorder::new(id, class, title)
        });
    if let Err(e) = play(
        &mut io,
        (session, requests),
        start,
        &shared.cache,
        &mut outcome,
        &mut p1203,
        &mut timeline,
    )
    .await
    {
        outcome.error = Some(e);
    }
    io.flush();
    for f in io.transport.quic_figures() {
        let _ = tx.send(Report::Quic(f));
    }
    if let Some(c) = io.transport.link_counts() {
        let _ = tx.send(Report::QuicLink(c));
    }
    let end = Instant::now();
    drop(io);
    let mut agg = shared.lock();
    if let (Some(dir), Some(v)) = (&run.p1203_dir, p1203) {
        let id = session_id(session, shard, index);
        let f = dir.join(format!("{id}.json"));
        let ok = serde_json::to_vec_pretty(&v)
            .ok()
            .is_some_and(|b| std::fs::write(f, b).is_ok());
        if !ok {
            agg.p1203_write_failed();
        }
    }
    agg.add(&outcome);
    if let Some(t) = timeline {
        agg.add_timeline(t.finish(&outcome));
    }
    drop(agg);
    ctx.live.active.fetch_sub(1, Ordering::Relaxed);
    if outcome.error.is_some() {
        ctx.live.failed.fetch_add(1, Ordering::Relaxed);
    } else {
        ctx.live.completed.fetch_add(1, Ordering::Relaxed);
    }
    let viewer = outcome.qoe.as_ref().map(|q| ViewerStats {
        startup_s: Some((outcome.manifest_ms + q.startup_delay_ms) / 1000.0),
        stalls: q.rebuffer_count,
        stall_s: q.rebuffer_ms / 1000.0,
        played_s: q.time_per_level_ms.iter().sum::<f64>() / 1000.0,
    });
    let _ = tx.send(Report::Session {
        shard: shard as u32,
        index: index as u32,
        sample: SessionSample {
            start_s: ctx.secs(start),
            end_s: ctx.secs(end),
            failure: outcome.error.as_ref().map(E::kind),
            skipped: 0,
            viewer,
            reconnects: 0,
            server_closes: 0,
        },
    });
}

/// Fetches the manifest, then runs the player to its end.
/// `script`: the session's header (its requests dropped) and how many
/// requests its script has.
async fn play(
    io: &mut Io<'_>,
    script: (&Session, usize),
    start: Instant,
    cache: &PresentationCache,
    outcome: &mut PlayerSessionOutcome,
    p1203: &mut Option<serde_json::Value>,
    timeline: &mut Option<TimelineRecorder>,
) -> Result<(), E> {
    let (session, requests) = script;
    let title = session.header.title.as_deref().ok_or(E::NoTitle)?;
    // the fetches are boxed: they live on the heap only while they run, not
    // in every waiting player's task (whose future was 12.6 KB with them
    // inline, most of a player's memory)
    let (mpath, parsed) = Box::pin(io.presentation(title, cache)).await?;
    let pres = &parsed.presentation;
    outcome.manifest_ms = start.elapsed().as_secs_f64() * 1e3;
    // the player sees the whole title, as a real one reads the whole
    // manifest; the viewer leaves once its viewing time has arrived
    let mut n = segments_for(requests, session.header.request_s, pres.segment_s);
    if let Some(cap) = io.run.max_segments {
        n = n.min(cap);
    }
    outcome.bitrates_kbps = parsed.movie.bitrates_kbps.clone();
    let mut config = io.run.config.clone();
    // a sampled session's player keeps its records for the timeline
    config.keep_records |= timeline.is_some();
    let segment_ms = parsed.movie.segment_duration_ms;
    let mut player = Player::new(parsed.movie.clone(), config).map_err(|source| E::Movie {
        path: mpath.clone(),
        source,
    })?;
    let ms = |t: Instant| t.saturating_duration_since(start).as_secs_f64() * 1e3;
    let mut init_done = vec![false; pres.levels.len()];
    // dash.js fetches the init segment again at every change of level
    let init_each_switch = io.run.config.profile == PlayerProfile::Dashjs;
    let mut last_init: Option<usize> = None;
    let rates = parsed.movie.bitrates_kbps.clone();
    let top_kbps = rates.iter().copied().reduce(f64::max);
    // what the player's request for `url` tells the server (CMCD), from its
    // state at `now` (session-wide keys filled by `Io::target`), and the
    // player's stall time so far; `next`: the object after it (the next
    // segment of the same rendition)
    let report = |player: &Player,
                  now: f64,
                  object: ObjectType,
                  quality: usize,
                  url: &str,
                  next: Option<&vodlab_manifest::SegmentRef>| {
        let state = player.state_at(now);
        let (nor, nrr) = next.map_or((None, None), |n| {
            next_request(url, (n.url.as_str(), n.range))
        });
        let r = PlayerReport {
            object,
            br_kbps: rates.get(quality).copied(),
            top_kbps,
            duration_ms: (object == ObjectType::Video).then_some(segment_ms),
            buffer_ms: Some(state.buffer_ms),
            measured_kbps: player.throughput_estimate(),
            startup: !state.playing,
            // Sabre's player plays at real time
            playback_rate: 1.0,
            next_object: nor,
            next_range: nrr,
            playhead_kbps: state.playhead.and_then(|q| rates.get(q).copied()),
            ..PlayerReport::default()
        };
        (r, state.rebuffer_ms)
    };
    let result = loop {
        let now = Instant::now();
        if io.run.honour_cmsd {
            // the server's word as of its last response (the manifest's included)
            player.cap_bitrate(io.cmsd_mb.map(|k| k as f64));
        }
        let Some(action) = player.poll_action(ms(now)) else {
            match player.poll_timeout() {
                Some(t) => {
                    let at = start + std::time::Duration::from_secs_f64(t.max(0.0) / 1e3);
                    // a waiting player reports now and holds no samples
                    io.flush();
                    Io::drive(&io.transport, tokio::time::sleep_until(at.into())).await;
                    continue;
                }
                // nothing in flight and nothing to wait for: cannot happen
                // with the executor below; never spin
                None => {
                    debug_assert!(false, "player stalled");
                    break Err(E::Transfer {
                        path: mpath.clone(),
                        kind: ErrorKind::Other,
                        detail: "the player stalled (executor bug)".into(),
                    });
                }
            }
        };
        match action {
            Action::Fetch { index, quality, .. } => {
                let level = &pres.levels[quality];
                if !init_done[quality] || (init_each_switch && last_init != Some(quality)) {
                    last_init = Some(quality);
                    if let Some(init) = &level.init {
                        // after the init segment: the media segment
                        let next = level.segments.get(index);
                        let (r, stalled) = report(
                            &player,
                            ms(Instant::now()),
                            ObjectType::Init,
                            quality,
                            &init.url,
                            next,
                        );
                        let t = io.target(&init.url, r, stalled);
                        let got = Box::pin(io.get(
                            &t.path,
                            init.range,
                            &t.headers,
                            &mut |_, _| {},
                            &mut |_, _| false,
                        ))
                        .await;
                        match got {
                            Ok(Got::Done(s)) if s == 200 || s == 206 => {}
                            Ok(Got::Done(status)) => {
                                let e = E::SegmentStatus {
                                    path: init.url.clone(),
                                    status,
                                };
                                player.handle(ms(Instant::now()), fail(&e));
                                break Err(e);
                            }
                            Ok(Got::Abandoned) => {}
                            Err(e) => {
                                player.handle(ms(Instant::now()), fail(&e));
                                break Err(e);
                            }
                        }
                        // the segment's request leaves now
                        player.handle(ms(Instant::now()), Event::Sent);
                    }
                    init_done[quality] = true;
                }
                let seg = &level.segments[index];
                let next = level.segments.get(index + 1);
                let (r, stalled) = report(
                    &player,
                    ms(Instant::now()),
                    ObjectType::Video,
                    quality,
                    &seg.url,
                    next,
                );
                let t = io.target(&seg.url, r, stalled);
                let mut received = 0u64;
                let mut gave_up = false;
                let mut on_read = |at: Instant, n: u64| {
                    if gave_up {
                        // reads of the same poll after the abandonment: the
                        // player has moved on and must not be polled again
                        return true;
                    }
                    received += n;
                    let t = ms(at);
                    player.handle(
                        t,
                        Event::Progress {
                            received_bits: received as f64 * 8.0,
                            timing: None,
                        },
                    );
                    // the abandonment is decided on this read, taken here
                    gave_up = matches!(player.poll_action(t), Some(Action::Abandon { .. }));
                    gave_up
                };
                let got =
                    Box::pin(io.get(&t.path, seg.range, &t.headers, &mut |_, _| {}, &mut on_read))
                        .await;
                let now = ms(Instant::now());
                match got {
                    Ok(Got::Done(s)) if s == 200 || s == 206 => {
                        if io.run.honour_cmsd {
                            // mixed into this download's throughput sample
                            // by --cmsd-etp-weight (PlayerConfig::etp_weight)
                            player.report_server_etp(io.cmsd_etp.map(|k| k as f64));
                        }
                        player.handle(now, Event::Completed { timing: None });
                        if let (Some(t), Some(r)) = (timeline.as_mut(), player.records().last()) {
                            t.segment(r, player.buffer_ms(), segment_ms);
                        }
                        if player.played().len() >= n {
                            // the viewer's last segment arrived: it plays
                            // what it holds and leaves
                            player.leave(now);
                            break Ok(());
                        }
                    }
                    Ok(Got::Done(status)) => {
                        let e = E::SegmentStatus {
                            path: seg.url.clone(),
                            status,
                        };
                        player.handle(now, fail(&e));
                        break Err(e);
                    }
                    // the player already moved on
                    Ok(Got::Abandoned) => {}
                    Err(e) => {
                        player.handle(now, fail(&e));
                        break Err(e);
                    }
                }
            }
            // abandonments are taken in the read callback; one here would
            // be for no download in flight
            Action::Abandon { .. } => {}
            Action::WaitUntil { until, .. } => {
                let at = start + std::time::Duration::from_secs_f64(until.max(0.0) / 1e3);
                io.flush();
                Io::drive(&io.transport, tokio::time::sleep_until(at.into())).await;
            }
            Action::Done { .. } => break Ok(()),
        }
    };
    outcome.qoe = Some(player.qoe());
    if let Some(t) = timeline.as_mut() {
        t.player_end(
            player.abandoned(),
            player.stalls(),
            player.playback_start_ms(),
        );
    }
    if io.run.p1203_dir.is_some() && result.is_ok() {
        let opts = crate::core::player::qoe::P1203Options {
            stream_id: io.id,
            ..Default::default()
        };
        *p1203 = Some(player.p1203_input(&opts));
    }
    result
}

fn fail(e: &E) -> Event {
    Event::Failed {
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{cmsd_cap, cmsd_etp};

    /// What every live player holds for its whole life besides its task's
    /// future (pinned in `engine.rs`): the player core and the session's
    /// I/O state with its HTTP/1.1 connection, inline in that future; the
    /// core's vectors (ladder-sized, segment-sized) on the heap. The movie
    /// and the parsed manifest are one `Arc` per title. docs/benchmarks.md
    /// ("Players") has the attribution.
    #[test]
    fn a_live_players_parts_stay_small() {
        use crate::core::player::{AbrRule, Movie, Player, PlayerConfig};
        use std::mem::size_of;
        use std::sync::Arc;
        let player = size_of::<Player>();
        let io = size_of::<super::Io<'static>>();
        let h1 = size_of::<crate::io::http::Connection<tokio::net::TcpStream>>();
        let conn = size_of::<crate::io::transport::Conn>();
        // the bench's player after 20 segments: its heap besides the struct
        let movie = Arc::new(Movie::constant(
            4_000.0,
            &[50.0, 75.0, 100.0, 150.0, 200.0],
            20,
        ));
        let cfg = PlayerConfig {
            abr: AbrRule::Dynamic,
            max_buffer_ms: 8_000.0,
            keep_records: false,
            ..PlayerConfig::default()
        };
        let mut p = Player::new(movie, cfg).unwrap();
        let mut now = 0.0;
        while let Some(a) = p.poll_action(now) {
            match a {
                crate::core::player::Action::Fetch { .. } => {
                    now += 1_000.0;
                    p.handle(now, crate::core::player::Event::Completed { timing: None });
                }
                crate::core::player::Action::WaitUntil { until, .. } => now = until,
                crate::core::player::Action::Done { .. } => break,
                crate::core::player::Action::Abandon { .. } => {}
            }
        }
        let heap = p.memory_bytes() - player;
        eprintln!(
            "Player {player} B (+{heap} B heap), Io {io} B, Connection {h1} B, Conn {conn} B"
        );
        assert!(player <= 1280, "Player is {player} bytes");
        assert!(heap <= 512, "a lean player's heap is {heap} bytes");
        assert!(io <= 800, "Io is {io} bytes");
        assert!(h1 <= 320, "Connection is {h1} bytes");
    }

    #[test]
    fn the_cap_and_the_etp_are_the_nearest_hops() {
        assert_eq!(cmsd_cap("\"vodlab\";etp=900;mb=1500;rd=2"), Some(1500));
        assert_eq!(cmsd_cap("\"origin\";mb=3000,\"edge\";mb=800"), Some(800));
        assert_eq!(cmsd_cap("\"origin\";mb=3000,\"edge\";etp=5"), Some(3000));
        assert_eq!(cmsd_cap("\"vodlab\";etp=900;rd=2"), None);
        assert_eq!(cmsd_cap("garbage;;"), None);
        // etp: the nearest hop's that sends one
        assert_eq!(cmsd_etp("\"vodlab\";etp=900;mb=1500;rd=2"), Some(900));
        assert_eq!(cmsd_etp("\"origin\";etp=9000,\"edge\";etp=700"), Some(700));
        assert_eq!(cmsd_etp("\"origin\";etp=9000,\"edge\";mb=5"), Some(9000));
        assert_eq!(cmsd_etp("\"vodlab\";mb=1500"), None);
    }
}
