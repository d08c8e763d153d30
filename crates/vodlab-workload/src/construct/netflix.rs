//! The `netflix` session model (thesis chapter 5, section 5.5): a session's
//! events become phases, phases become chains, chains become requests.
//!
//! A session is planned from its own random stream (the workload seed and
//! the session id), so [`Workload::session`] can expand it again lazily and
//! get the same requests. Times are nominal, in milliseconds from the
//! session's start: when a client that behaves as the thesis describes would
//! send each request, and how long the server would be sending it.
//!
//! The plan, in the thesis's terms:
//! - **first transient phase**: offset-table reads (offset 0) of the audio
//!   file and of every probed video file, then a short probe chain at the
//!   start position in each of a few rates below the stable one [T1579,
//!   T1635];
//! - **stable phase**: one long chain in the stable rate from the start
//!   position, filling at `fill_factor` x the bit rate until `buffer_s` of
//!   content is ahead of playback, then pacing at 1x [T1454, T1594–T1600];
//!   audio beside it in short bursts (one chain each);
//! - **successor transient phases** at bit-rate changes: a few probes near
//!   the stable rate, then a new stable chain at the next rate (up / down /
//!   same by `rate_steps` [T1639]) from the playback position;
//! - **pauses**: no request for `pause_s` (an inactive phase, >= 40 s);
//!   playback then resumes where the buffer ended (a new chain, adjacent in
//!   offset, > 40 s later: the thesis's definition of a pause [T1434]).
//!
//! Every request to a file is part of a burst of at most the file's
//! parallel degree (drawn per session and file from `parallel`, Table 5.3),
//! bursts to one file at least a second apart, so the most requests to the
//! file within one second is that degree.

use std::collections::BTreeMap;

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::dist::{Distribution, WeightedIndex};
use crate::spec::{NetflixSpec, RepKind};

const NETFLIX_STREAM: u64 = 3;

/// Shortest content a watching session plays, seconds: at 5x filling it
/// takes over 40 s to download, so the session has a stable phase.
const MIN_WATCH_S: f64 = 240.0;

/// Longest time between two bursts of one chunk chain, seconds: "the
/// longest commonly occurring gap due to pacing is 32 seconds", which is why
/// the thesis joins adjacent requests received within 40 s [T1504]. Without
/// the cap a chain of large requests (combined files take `audio_chunk_s`,
/// 8-16 s) in bursts of 4-6 paced at 1x had bursts 40-96 s apart: the plan
/// counted the transfer as filling the gap, a replay fetches each burst at
/// once, and its log showed short chains and inactive phases instead.
const MAX_PACING_GAP_S: f64 = 32.0;

/// What kind of session the plan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetflixSessionKind {
    /// One transient phase only (< 40 s).
    Browse,
    /// A few transient phases, no stable phase.
    Skim,
    /// Transient, stable, successor and inactive phases.
    Watch,
}

/// One planned request of a `netflix` session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// Nominal send time, ms from the session's start.
    pub t_ms: u64,
    /// Nominal transfer time, ms.
    pub dur_ms: u64,
    /// Index into the title's `representations`.
    pub file: u16,
    /// First byte.
    pub offset: u64,
    /// Bytes (the range's length, or `stop_after` for an open-ended request).
    pub bytes: u64,
    /// Open-ended (`range=A-` with `stop_after=bytes`).
    pub open: bool,
    /// The generator's chain number within the session.
    pub chain: u32,
}

/// A planned session: its requests in send order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Kind of session.
    pub kind: NetflixSessionKind,
    /// Requests sorted by send time (stable: a burst keeps its order).
    pub requests: Vec<Planned>,
    /// Index of the stable video (or combined) rate the session starts with.
    pub first_rate: u16,
}

/// Per-session random stream.
fn session_rng(seed: u64, id: u32) -> ChaCha8Rng {
    let mut r =
        ChaCha8Rng::seed_from_u64(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    r.set_stream(NETFLIX_STREAM);
    r
}

/// Bytes of the offset table at the start of a file of `duration_s`
/// (one `entry_bytes` entry per 2 s segment).
pub fn table_bytes(duration_s: f64, entry_bytes: u64) -> u64 {
    ((duration_s / 2.0).ceil().max(1.0) as u64) * entry_bytes
}

struct Planner<'a> {
    n: &'a NetflixSpec,
    title: &'a Title,
    catalog: &'a Catalog,
    r: ChaCha8Rng,
    parallel: WeightedIndex,
    out: Vec<Planned>,
    degree: BTreeMap<u16, u32>,
    next_free: BTreeMap<u16, u64>,
    table_read: Vec<bool>,
    chains: u32,
    table: u64,
}

fn ms(s: f64) -> u64 {
    (s * 1000.0).round().max(0.0) as u64
}

impl Planner<'_> {
    fn rate(&self, file: u16) -> f64 {
        let tr = &self.title.representations[file as usize];
        self.catalog.representations[tr.rep].bitrate_kbps
    }

    fn bytes_per_s(&self, file: u16) -> f64 {
        self.rate(file) * 125.0
    }

    /// Byte offset of title position `pos_s` in `file`.
    fn offset(&self, file: u16, pos_s: f64) -> u64 {
        let tr = &self.title.representations[file as usize];
        let pos = pos_s.clamp(0.0, self.title.duration_s);
        (self.table + (pos * self.bytes_per_s(file)).round() as u64).min(tr.stored_bytes)
    }

    fn degree(&mut self, file: u16) -> u32 {
        if let Some(k) = self.degree.get(&file) {
            return *k;
        }
        let k = self.parallel.sample(&mut self.r) as u32 + 1;
        self.degree.insert(file, k);
        k
    }

    fn new_chain(&mut self) -> u32 {
        self.chains += 1;
        self.chains - 1
    }

    /// Time (ms) of a burst to `file` no earlier than `t_ms` and at least a
    /// second after the previous burst to it.
    fn slot(&mut self, file: u16, t_ms: u64) -> u64 {
        let t = t_ms.max(self.next_free.get(&file).copied().unwrap_or(0));
        self.next_free.insert(file, t + 1000);
        t
    }

    fn push(&mut self, p: Planned) {
        if p.bytes > 0 {
            self.out.push(p);
        }
    }

    /// The offset-table read of `file` at offset 0, once per session.
    fn table_read(&mut self, file: u16, t_ms: u64, open: bool) {
        if self.table_read[file as usize] {
            return;
        }
        self.table_read[file as usize] = true;
        let size = self.title.representations[file as usize].stored_bytes;
        let bytes = if open && self.r.random::<f64>() < self.n.open_table_exact_share {
            self.n.open_table_bytes
        } else {
            self.n.table_read_bytes.sample(&mut self.r).round().max(1.0) as u64
        }
        .min(size);
        let t = self.slot(file, t_ms);
        let chain = self.new_chain();
        self.push(Planned {
            t_ms: t,
            dur_ms: 50 + bytes / 5_000,
            file,
            offset: 0,
            bytes,
            open,
            chain,
        });
    }

    /// A chunk chain: bursts of the file's degree of `req_s` requests from
    /// `pos_s` for `content_s` seconds of title, each burst `interval`
    /// after the previous (at least 1 s), transfers at `speed` x real time.
    /// Returns (time after the last burst, position reached).
    #[allow(clippy::too_many_arguments)]
    fn chunk_run(
        &mut self,
        file: u16,
        t_ms: u64,
        pos_s: f64,
        content_s: f64,
        req_s: f64,
        speed: f64,
        chain: u32,
    ) -> (u64, f64) {
        let k = self.degree(file);
        // bursts no further apart than the thesis's longest pacing gap
        let req_s = req_s.min(MAX_PACING_GAP_S * speed / k as f64);
        let end = (pos_s + content_s).min(self.title.duration_s);
        let mut pos = pos_s;
        let mut t = t_ms;
        while pos < end - 1e-6 {
            let burst = self.slot(file, t);
            let mut n = 0;
            while n < k && pos < end - 1e-6 {
                let next = (pos + req_s).min(end);
                let (a, b) = (self.offset(file, pos), self.offset(file, next));
                self.push(Planned {
                    t_ms: burst,
                    dur_ms: ms((next - pos) * k as f64 / speed).max(1),
                    file,
                    offset: a,
                    bytes: b - a,
                    open: false,
                    chain,
                });
                pos = next;
                n += 1;
            }
            t = burst + ms((k as f64 * req_s / speed).max(1.0));
        }
        (t, pos)
    }

    /// One open-ended request of `content_s` from `pos_s`, read at `speed` x.
    fn open_read(
        &mut self,
        file: u16,
        t_ms: u64,
        pos_s: f64,
        content_s: f64,
        speed: f64,
    ) -> (u64, f64) {
        let end = (pos_s + content_s).min(self.title.duration_s);
        let (a, b) = (self.offset(file, pos_s), self.offset(file, end));
        let t = self.slot(file, t_ms);
        let dur = ms((end - pos_s) / speed).max(1);
        let chain = self.new_chain();
        self.push(Planned {
            t_ms: t,
            dur_ms: dur,
            file,
            offset: a,
            bytes: b - a,
            open: true,
            chain,
        });
        (t + dur, end)
    }

    /// A transient phase at `t_ms`, position `pos_s`: offset-table reads of
    /// unread files, then a short probe chain in each of `probes`.
    fn transient(&mut self, t_ms: u64, pos_s: f64, probes: &[u16], open: bool, req_s: f64) -> u64 {
        let mut end = t_ms;
        let mut next = t_ms;
        for (i, &f) in probes.iter().enumerate() {
            // probes 400 ms apart, or each after the previous one ends
            let t = if self.n.sequential_probes {
                next
            } else {
                t_ms + 400 * i as u64
            };
            self.table_read(f, t, open);
            let content = self.n.probe_s.sample(&mut self.r);
            let start = t + 1000;
            // probes are chunk requests whatever the session's form (open-ended
            // sessions read the offset table open-ended and play open-ended),
            // at least one full burst of the file's degree
            let k = self.degree(f) as f64;
            let rs = req_s.min(content / k);
            let chain = self.new_chain();
            let e = self
                .chunk_run(f, start, pos_s, content, rs, self.n.fill_factor, chain)
                .0;
            end = end.max(e);
            next = e + 400;
        }
        end
    }
}

fn draw(d: &Distribution, r: &mut ChaCha8Rng) -> f64 {
    d.sample(r)
}

/// Plans session `g` of a workload whose spec uses the `netflix` model.
pub fn plan(spec: &Spec, catalog: &Catalog, g: &GenSession) -> Plan {
    let n = spec.sessions.netflix_spec();
    let title = &catalog.titles[g.title as usize];
    let r = session_rng(spec.measurement.seed, g.id);
    let parallel = WeightedIndex::new(n.parallel.iter().copied()).expect("validated weights");
    let mut p = Planner {
        n: &n,
        title,
        catalog,
        r,
        parallel,
        out: Vec::new(),
        degree: BTreeMap::new(),
        next_free: BTreeMap::new(),
        table_read: vec![false; title.representations.len()],
        chains: 0,
        table: table_bytes(title.duration_s, n.table_entry_bytes),
    };
    // the title's files by kind, ascending bit rate
    let by_kind = |k: RepKind| {
        let mut v: Vec<u16> = (0..title.representations.len() as u16)
            .filter(|&i| {
                spec.catalog.representations[title.representations[i as usize].rep].kind == k
            })
            .collect();
        v.sort_by(|&a, &b| p.rate(a).total_cmp(&p.rate(b)));
        v
    };
    let video = by_kind(RepKind::Video);
    let audio = by_kind(RepKind::Audio);
    let combined_files = by_kind(RepKind::Combined);
    let u: f64 = p.r.random();
    let kind = if u < n.browse_share {
        NetflixSessionKind::Browse
    } else if u < n.browse_share + n.skim_share {
        NetflixSessionKind::Skim
    } else {
        NetflixSessionKind::Watch
    };
    let combined =
        !combined_files.is_empty() && (audio.is_empty() || p.r.random::<f64>() < n.combined_share);
    // the stable ladder and the first stable rate (g.title_rep is the drawn video rate)
    let wanted = p.rate(g.title_rep);
    let ladder = if combined { combined_files } else { video };
    let mut rung = ladder
        .iter()
        .rposition(|&f| p.rate(f) <= wanted + 1e-9)
        .unwrap_or(0);
    let first_rate = ladder[rung];
    // the highest rung a rate change may reach
    let top = if n.cap_at_first_rate {
        rung
    } else {
        ladder.len() - 1
    };
    let form_share = if combined {
        n.open_share.combined
    } else {
        n.open_share.video
    };
    let open = p.r.random::<f64>() < form_share;
    let audio_open = p.r.random::<f64>() < n.open_share.audio;
    let audio_file = if combined || audio.is_empty() {
        None
    } else if n.audio.is_empty() {
        Some(audio[p.r.random_range(0..audio.len())])
    } else {
        let names: Vec<(&String, f64)> = n.audio.iter().map(|(k, v)| (k, *v)).collect();
        let w = WeightedIndex::new(names.iter().map(|x| x.1)).expect("validated audio mix");
        let name = names[w.sample(&mut p.r)].0;
        let ri = spec.representation_index(name).expect("validated");
        audio
            .iter()
            .copied()
            .find(|&f| title.representations[f as usize].rep == ri)
            .or(Some(audio[0]))
    };
    let req_s = draw(
        if combined {
            &n.audio_chunk_s
        } else {
            &n.chunk_s
        },
        &mut p.r,
    );
    let audio_req_s = draw(&n.audio_chunk_s, &mut p.r);
    let dur = title.duration_s;
    let start_pos = (g.start as f64 * catalog.request_s).min((dur - 1.0).max(0.0));

    // probe set of a first transient: `probe_rates` rungs below the stable one, and it
    let probes_below = |p: &mut Planner, rung: usize, count: f64| -> Vec<u16> {
        let k = (count.round() as usize).min(rung);
        let mut v: Vec<u16> = ladder[rung - k..rung].to_vec();
        v.push(ladder[rung]);
        let _ = p;
        v
    };

    // audio state
    let mut audio_pos = start_pos;
    // a skimming session's audio: one fast burst of audio_chain_s from `pos`
    let audio_burst = |p: &mut Planner, t: u64, pos: f64| {
        let Some(af) = audio_file else { return };
        let a = draw(&n.audio_chain_s, &mut p.r);
        if audio_open {
            p.open_read(af, t, pos, a, n.audio_speed);
        } else {
            let chain = p.new_chain();
            p.chunk_run(af, t, pos, a, audio_req_s, n.audio_speed, chain);
        }
    };
    // a watching session's audio: one paced chain from `pos` (audio_open_s
    // open-ended, audio_chain_s of chunk requests) at audio_pace x, no
    // further than `cap` (the next pause or the end of viewing, so a pause
    // stays a time without requests); returns the new audio position
    let audio_chain_at = |p: &mut Planner, t: u64, pos: f64, cap: f64| -> f64 {
        let Some(af) = audio_file else { return pos };
        let a = draw(
            if audio_open {
                &n.audio_open_s
            } else {
                &n.audio_chain_s
            },
            &mut p.r,
        )
        .min(cap - pos);
        if a < 1.0 {
            return pos;
        }
        if audio_open {
            p.open_read(af, t, pos, a, n.audio_pace).1
        } else {
            let chain = p.new_chain();
            let pace = n.audio_chunk_pace.unwrap_or(n.audio_pace);
            p.chunk_run(af, t, pos, a, audio_req_s, pace, chain).1
        }
    };

    match kind {
        NetflixSessionKind::Browse | NetflixSessionKind::Skim => {
            let phases = if kind == NetflixSessionKind::Browse {
                1
            } else {
                draw(&n.skim_phases, &mut p.r).round().max(1.0) as u32
            };
            let mut t = 0u64;
            let mut pos = start_pos;
            for i in 0..phases {
                if let Some(af) = audio_file {
                    p.table_read(af, t, audio_open);
                }
                let count = draw(&n.probe_rates, &mut p.r);
                let probes = probes_below(&mut p, rung, count);
                let mut end = p.transient(t + 200, pos, &probes, open, req_s);
                if kind == NetflixSessionKind::Browse {
                    // browsing: probes repeat at the same rates until browse_s
                    let until = t + ms(draw(&n.browse_s, &mut p.r));
                    let mut q = pos;
                    while end < until {
                        q += n.probe_s.quantile(0.5);
                        end = p.transient(end + 500, q, &probes, open, req_s);
                    }
                } else {
                    audio_burst(&mut p, t + 1000, pos);
                }
                if kind == NetflixSessionKind::Browse {
                    // a browsing player fetches a little audio with its probes
                    if let Some(af) = audio_file {
                        let a = 4.0 * draw(&n.probe_s, &mut p.r);
                        if audio_open {
                            p.open_read(af, t + 1000, pos, a, n.audio_speed);
                        } else {
                            let chain = p.new_chain();
                            p.chunk_run(af, t + 1000, pos, a, audio_req_s, n.audio_speed, chain);
                        }
                    }
                }
                if i + 1 < phases {
                    t = end + ms(draw(&n.skim_gap_s, &mut p.r));
                    pos = p.r.random_range(0.0..dur.max(1.0) * 0.95);
                }
            }
        }
        NetflixSessionKind::Watch => {
            let frac = spec.sessions.viewing_fraction.sample(&mut p.r);
            // a watching session plays at least MIN_WATCH_S (so its stable
            // phase outlasts the filling and is a long chain)
            let view_end = (start_pos + (frac * dur).max(MIN_WATCH_S)).min(dur);
            // first transient phase
            if let Some(af) = audio_file {
                p.table_read(af, 0, audio_open);
            }
            let count = draw(&n.probe_rates, &mut p.r);
            let probes = probes_below(&mut p, rung, count);
            let mut t = p.transient(200, start_pos, &probes, open, req_s);
            let mut play = start_pos;
            let mut play_t = t; // wall time at which `play` is the playback position
            let mut dl = start_pos; // downloaded position of the current chain
            let mut chain = None::<u32>;
            let buffer = draw(&n.buffer_s, &mut p.r);
            let mut filling = true;
            let per_s_rc = n.rate_changes_per_hour / 3600.0;
            let per_s_pause = n.pauses_per_hour / 3600.0;
            let next_event = |r: &mut ChaCha8Rng| -> (f64, bool) {
                // playback seconds until the next event, and whether it is a pause
                let total = per_s_rc + per_s_pause;
                if total <= 0.0 {
                    return (f64::INFINITY, false);
                }
                let x: f64 = r.random::<f64>().max(1e-12);
                (-x.ln() / total, r.random::<f64>() < per_s_pause / total)
            };
            let (mut ev_in, mut ev_pause) = next_event(&mut p.r);
            let mut ev_at = play + ev_in;
            // audio goes no further than the next pause or the end of viewing
            let audio_cap = |ev_at: f64, ev_pause: bool| {
                if ev_pause {
                    ev_at.min(view_end)
                } else {
                    view_end
                }
            };
            audio_pos = audio_chain_at(&mut p, 1000, audio_pos, audio_cap(ev_at, ev_pause));
            loop {
                let f = ladder[rung];
                let now_play = play + t.saturating_sub(play_t) as f64 / 1000.0;
                // event due?
                if now_play >= ev_at && now_play < view_end {
                    if ev_pause {
                        // pause: playback stops; nothing is requested
                        let pause = draw(&n.pause_s, &mut p.r);
                        play = now_play;
                        t += ms(pause);
                        play_t = t;
                        chain = None; // resumes adjacent, > 40 s later: a new chain
                    } else {
                        // successor transient: probes near the rate, then the next rate
                        let u: f64 = p.r.random();
                        let s = &n.rate_steps;
                        let new_rung = if u < s.up {
                            (rung + 1).min(top.max(rung))
                        } else if u < s.up + s.down {
                            rung.saturating_sub(1)
                        } else {
                            rung
                        };
                        let m = draw(&n.successor_probe_rates, &mut p.r).round() as usize;
                        let mut probes: Vec<u16> = Vec::new();
                        for d in 1..=m {
                            let cand = if d % 2 == 1 {
                                rung.checked_sub(d.div_ceil(2))
                            } else {
                                Some(rung + d / 2).filter(|&x| x < ladder.len())
                            };
                            if let Some(c) = cand {
                                if c != new_rung {
                                    probes.push(ladder[c]);
                                }
                            }
                        }
                        play = now_play;
                        play_t = t;
                        t = p.transient(t, play, &probes, open, req_s).max(t);
                        if new_rung != rung {
                            // a new rate: the buffer is flushed and the new
                            // chain starts at the playback position, filling
                            rung = new_rung;
                            dl = play + t.saturating_sub(play_t) as f64 / 1000.0;
                            chain = None;
                            filling = true;
                        }
                    }
                    let (a, b) = next_event(&mut p.r);
                    ev_in = a;
                    ev_pause = b;
                    ev_at = (play + t.saturating_sub(play_t) as f64 / 1000.0) + ev_in;
                    continue;
                }
                if dl >= view_end - 1e-6 {
                    break;
                }
                // audio running low?
                if audio_file.is_some() && audio_pos < view_end && audio_pos - now_play < 30.0 {
                    // after a pause playback may have passed the audio fetched
                    audio_pos = audio_pos.max(now_play);
                    audio_pos = audio_chain_at(&mut p, t, audio_pos, audio_cap(ev_at, ev_pause));
                }
                let f_now = ladder[rung];
                debug_assert_eq!(f, f_now);
                if !p.table_read[f as usize] {
                    p.table_read(f, t, open);
                    t += 1000;
                }
                if dl - now_play >= buffer {
                    filling = false;
                }
                let speed = if filling { n.fill_factor } else { 1.0 };
                if open {
                    let o = draw(
                        if combined {
                            &n.open_combined_s
                        } else {
                            &n.open_s
                        },
                        &mut p.r,
                    );
                    let o = if filling {
                        o.min(buffer.max(2.0 * n.fill_factor))
                    } else {
                        o
                    }
                    .min(view_end - dl);
                    // one open-ended read is paced by TCP flow control: it
                    // fills at fill_factor x until `buffer` s are ahead of
                    // playback, and the rest of it arrives at 1x
                    let speed = if filling && n.fill_factor > 1.0 {
                        let ahead = (dl - now_play).max(0.0);
                        let fill_s = ((buffer - ahead) / (n.fill_factor - 1.0)).max(0.0);
                        let fill_content = fill_s * n.fill_factor;
                        if o > fill_content {
                            filling = false;
                            o / (fill_s + (o - fill_content))
                        } else {
                            speed
                        }
                    } else {
                        speed
                    };
                    let (te, pos) = p.open_read(f, t, dl, o, speed);
                    // the next read restarts at the segment the client stopped in
                    dl = ((pos / 2.0).floor() * 2.0).max(dl + 1.0).min(pos);
                    if pos >= view_end - 1e-6 {
                        dl = pos;
                    }
                    t = te;
                } else {
                    let c = match chain {
                        Some(c) => c,
                        None => {
                            let c = p.new_chain();
                            chain = Some(c);
                            c
                        }
                    };
                    let k = p.degree(f) as f64;
                    // filling: bigger requests so one burst a second reaches fill_factor x
                    let rs = if filling {
                        req_s.max(n.fill_factor / k)
                    } else {
                        req_s
                    };
                    let (te, pos) =
                        p.chunk_run(f, t, dl, (rs * k).min(view_end - dl), rs, speed.max(1.0), c);
                    dl = pos;
                    t = te;
                }
            }
        }
    }
    let mut requests = p.out;
    requests.sort_by_key(|q| q.t_ms);
    Plan {
        kind,
        requests,
        first_rate,
    }
}

impl Workload {
    /// The nominal plan of a session of the `netflix` model (`None` for
    /// other models): every request with its send time and transfer time.
    pub fn netflix_plan(&self, g: &GenSession) -> Option<Plan> {
        (self.spec.sessions.model == SessionModel::Netflix)
            .then(|| plan(&self.spec, &self.catalog, g))
    }

    pub(super) fn netflix_session(&self, g: &GenSession) -> Session {
        let plan = plan(&self.spec, &self.catalog, g);
        let t = &self.catalog.titles[g.title as usize];
        let first = &self.catalog.representations[t.representations[plan.first_rate as usize].rep];
        let timeout = self.spec.sessions.timeout_s;
        let mut requests = Vec::with_capacity(plan.requests.len());
        let mut head_ms = 0u64;
        let mut in_burst = 0u32;
        // connections: each file of the title has its own group of 8
        // (file index mod 8), a burst's k requests to a file take the
        // group's first k; so an open-ended read in flight on one file's
        // connection never holds up another file's requests on the same one
        let mut used = [false; limits::MAX_CONNECTIONS_PER_SESSION as usize];
        // a detached read holds its connection until its planned end, so no
        // later request queues behind it there
        let mut held = [0u64; limits::MAX_CONNECTIONS_PER_SESSION as usize];
        for (i, q) in plan.requests.iter().enumerate() {
            let tr = &t.representations[q.file as usize];
            let path = format!("/{}", self.catalog.file_path(t, tr.rep, 0));
            let burst =
                i > 0 && q.t_ms == head_ms && in_burst < limits::MAX_CONNECTIONS_PER_SESSION;
            let wait = if burst || i == 0 {
                Wait::None
            } else {
                Wait::Pacing((q.t_ms - head_ms) as f64 / 1000.0)
            };
            if burst {
                in_burst += 1;
            } else {
                in_burst = 1;
                head_ms = q.t_ms;
                used = [false; limits::MAX_CONNECTIONS_PER_SESSION as usize];
            }
            let group = (q.file as usize % 8) * 8;
            // the group's first free connection not held by a detached
            // read, else its first free one
            let order = || (0..used.len()).map(|j| (group + j) % used.len());
            let conn = order()
                .find(|&c| !used[c] && held[c] <= q.t_ms)
                .or_else(|| order().find(|&c| !used[c]))
                .expect("at most 64 requests in a burst");
            used[conn] = true;
            // a read still running when a later burst is due in the plan
            // (paced audio beside video): the session must not wait for it
            let end = q.t_ms + q.dur_ms;
            let detach = plan.requests[i + 1..]
                .iter()
                .find(|r| r.t_ms > q.t_ms)
                .is_some_and(|r| r.t_ms < end);
            if detach {
                held[conn] = end;
            }
            let (range, stop_after) = if q.open {
                (
                    ByteRange {
                        start: q.offset,
                        end: None,
                    },
                    Some(q.bytes),
                )
            } else {
                (
                    ByteRange {
                        start: q.offset,
                        end: Some(q.offset + q.bytes - 1),
                    },
                    None,
                )
            };
            requests.push(Request {
                path,
                range: Some(range),
                // the session's timeout beyond the request's nominal
                // transfer: a paced open-ended read lasts minutes
                timeout_s: Some(timeout + q.dur_ms as f64 / 1000.0),
                wait,
                burst,
                conn: conn as u32,
                stop_after,
                // every request is read at its nominal rate (fill or play
                // speed), so the server sends it for as long as the plan
                // says: a burst paced at 1x lasts until the next one, and a
                // chain ends in a log where it ends in the plan (read at
                // once, the last burst before a pause ended up to 32 s early
                // in the round trip's logs: inactive time +12 % on seed 3)
                read_kbps: Some((q.bytes * 8).div_ceil(q.dur_ms.max(1)).max(1)),
                detach,
                ..Request::default()
            });
        }
        Session {
            header: SessionHeader {
                id: Some(g.id as u64),
                class: Some(self.spec.clients[g.class as usize].name.clone()),
                title: Some(t.name.clone()),
                rank: Some(t.rank),
                rep: Some(first.name.clone()),
                bitrate_bps: Some(first.bitrate_bps()),
                ..SessionHeader::default()
            },
            requests,
        }
    }
}
