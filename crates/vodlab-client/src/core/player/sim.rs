//! A virtual-time executor: one [`Player`] over a bandwidth trace.
//!
//! The network is Sabre's model (`NetworkModel` in `src/sabre.py` at
//! `09b03bb`): a trace of periods `{duration_ms, bandwidth_kbps,
//! latency_ms}` looped forever; each request first spends one period's
//! latency (an unused fraction carries into the next period at that
//! period's latency), then its bits drain at the bandwidth in force. While
//! abandonment is possible the transfer advances in steps of at least
//! 12 000 bits *and* 50 ms (the latency counts toward the first 50 ms) and
//! the player is told the progress after each step. The clock keeps
//! running through full-buffer waits.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    Action, Event, Movie, Player, PlayerConfig, PlayerError, QoeSummary, SegmentRecord, Timing,
};

/// One period of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Period {
    /// Length, ms.
    pub duration_ms: f64,
    /// Bandwidth, kbit/s (0: nothing moves).
    pub bandwidth_kbps: f64,
    /// Latency of a request that starts in this period, ms.
    pub latency_ms: f64,
}

/// A bandwidth trace (Sabre's network JSON: a list of periods).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Trace {
    /// The periods, played in order and looped.
    pub periods: Vec<Period>,
}

impl Trace {
    /// Parses and validates a Sabre trace JSON document.
    pub fn from_json(text: &str) -> Result<Self, PlayerError> {
        let t: Trace = serde_json::from_str(text).map_err(|e| PlayerError::Parse {
            what: "trace",
            detail: e.to_string(),
        })?;
        t.validate()?;
        Ok(t)
    }

    /// Checks the trace; errors name the key.
    pub fn validate(&self) -> Result<(), PlayerError> {
        let bad = |key: &'static str, why: String| Err(PlayerError::Invalid { key, why });
        if self.periods.is_empty() {
            return bad("trace", "has no period".into());
        }
        for (i, p) in self.periods.iter().enumerate() {
            if !(p.duration_ms.is_finite() && p.duration_ms > 0.0) {
                return bad("duration_ms", format!("period {i}: must be positive"));
            }
            if !(p.bandwidth_kbps.is_finite() && p.bandwidth_kbps >= 0.0) {
                return bad("bandwidth_kbps", format!("period {i}: must be ≥ 0"));
            }
            if !(p.latency_ms.is_finite() && p.latency_ms >= 0.0) {
                return bad("latency_ms", format!("period {i}: must be ≥ 0"));
            }
        }
        if self.periods.iter().all(|p| p.bandwidth_kbps == 0.0) {
            return bad(
                "bandwidth_kbps",
                "every period is 0: nothing would arrive".into(),
            );
        }
        Ok(())
    }

    /// The trace with every bandwidth multiplied by `m` (Sabre's
    /// `--network-multiplier`).
    pub fn scaled(&self, m: f64) -> Self {
        Self {
            periods: self
                .periods
                .iter()
                .map(|p| Period {
                    bandwidth_kbps: p.bandwidth_kbps * m,
                    ..*p
                })
                .collect(),
        }
    }
}

/// Bits a progress step waits for at least.
pub const MIN_PROGRESS_BITS: f64 = 12_000.0;
/// Time a progress step waits for at least, ms.
pub const MIN_PROGRESS_MS: f64 = 50.0;

/// The network: a position in a looped trace and a clock.
#[derive(Debug, Clone)]
pub struct Network<'t> {
    trace: &'t [Period],
    index: usize,
    time_to_next: f64,
    /// The clock, ms.
    pub now: f64,
}

impl<'t> Network<'t> {
    /// At the start of `trace`, clock 0.
    pub fn new(trace: &'t Trace) -> Self {
        Self {
            trace: &trace.periods,
            index: 0,
            time_to_next: trace.periods[0].duration_ms,
            now: 0.0,
        }
    }

    fn p(&self) -> Period {
        self.trace[self.index]
    }

    fn next_period(&mut self) {
        self.index = (self.index + 1) % self.trace.len();
        self.time_to_next = self.trace[self.index].duration_ms;
    }

    /// Lets `time` ms pass.
    pub fn delay(&mut self, mut time: f64) {
        while time > self.time_to_next {
            time -= self.time_to_next;
            self.now += self.time_to_next;
            self.next_period();
        }
        self.time_to_next -= time;
        self.now += time;
    }

    /// One request's latency; returns its duration, ms.
    pub fn latency(&mut self) -> f64 {
        let mut units = 1.0;
        let mut total = 0.0;
        while units > 0.0 {
            let lat = self.p().latency_ms;
            let time = units * lat;
            if time <= self.time_to_next {
                total += time;
                self.now += time;
                self.time_to_next -= time;
                units = 0.0;
            } else {
                total += self.time_to_next;
                self.now += self.time_to_next;
                units -= self.time_to_next / lat;
                self.next_period();
            }
        }
        total
    }

    /// Downloads `size` bits without stopping; returns the time, ms.
    pub fn download(&mut self, mut size: f64) -> f64 {
        let mut total = 0.0;
        while size > 0.0 {
            let bw = self.p().bandwidth_kbps;
            if size <= self.time_to_next * bw {
                let time = size / bw;
                total += time;
                self.now += time;
                self.time_to_next -= time;
                size = 0.0;
            } else {
                total += self.time_to_next;
                self.now += self.time_to_next;
                size -= self.time_to_next * bw;
                self.next_period();
            }
        }
        total
    }

    /// Downloads until `min_size` bits and `min_time` ms have passed or
    /// `size` bits arrived; returns (bits, ms).
    pub fn download_step(
        &mut self,
        mut size: f64,
        mut min_size: f64,
        mut min_time: f64,
    ) -> (f64, f64) {
        let (mut tot_bits, mut tot_time) = (0.0, 0.0);
        while size > 0.0 && (min_size > 0.0 || min_time > 0.0) {
            let bw = self.p().bandwidth_kbps;
            let (bits, time);
            if bw > 0.0 {
                let min_bits = min_size.max(min_time * bw);
                let bits_to_next = self.time_to_next * bw;
                if size <= min_bits && size <= bits_to_next {
                    bits = size;
                    time = bits / bw;
                    self.time_to_next -= time;
                    self.now += time;
                } else if min_bits <= bits_to_next {
                    bits = min_bits;
                    time = bits / bw;
                    min_size = 0.0;
                    min_time = 0.0;
                    self.time_to_next -= time;
                    self.now += time;
                } else {
                    bits = bits_to_next;
                    time = self.time_to_next;
                    self.now += time;
                    self.next_period();
                }
            } else {
                bits = 0.0;
                if min_size > 0.0 || min_time > self.time_to_next {
                    time = self.time_to_next;
                    self.now += time;
                    self.next_period();
                } else {
                    time = min_time;
                    self.time_to_next -= time;
                    self.now += time;
                }
            }
            tot_bits += bits;
            tot_time += time;
            size -= bits;
            min_size -= bits;
            min_time -= time;
        }
        (tot_bits, tot_time)
    }
}

/// What a simulated session produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimOutcome {
    /// Completed downloads, in play order.
    pub segments: Vec<SegmentRecord>,
    /// Abandoned attempts, in order.
    pub abandoned: Vec<SegmentRecord>,
    /// The session's QoE.
    pub qoe: QoeSummary,
}

/// Runs one player of `movie` with `cfg` over `trace` in virtual time.
pub fn simulate(
    movie: Arc<Movie>,
    trace: &Trace,
    cfg: PlayerConfig,
) -> Result<SimOutcome, PlayerError> {
    let player = run_player(movie, trace, cfg)?;
    Ok(SimOutcome {
        segments: player.records().to_vec(),
        abandoned: player.abandoned().to_vec(),
        qoe: player.qoe(),
    })
}

/// Runs one player to the end of the movie and returns it (records, QoE,
/// P.1203 input).
pub fn run_player(
    movie: Arc<Movie>,
    trace: &Trace,
    cfg: PlayerConfig,
) -> Result<Player, PlayerError> {
    trace.validate()?;
    let abandon = cfg.abandon;
    let mut player = Player::new(movie, cfg)?;
    let mut net = Network::new(trace);
    loop {
        let Some(action) = player.poll_action(net.now) else {
            // Only a wait not yet over can leave nothing to do; the
            // executor is the only source of events, so this is a bug.
            unreachable!("a simulated player is never idle without a timer")
        };
        match action {
            Action::Done { .. } => break,
            Action::WaitUntil { wait_ms, .. } => net.delay(wait_ms),
            Action::Abandon { .. } => {}
            Action::Fetch { index, bits, .. } => {
                let latency = net.latency();
                if !abandon || index == 0 {
                    let time = latency + net.download(bits);
                    let timing = Some(Timing {
                        elapsed_ms: time,
                        ttfb_ms: latency,
                    });
                    player.handle(net.now, Event::Completed { timing });
                    continue;
                }
                let mut total = latency;
                let mut got = 0.0;
                let mut min_time = MIN_PROGRESS_MS - total;
                let mut abandoned = false;
                while got < bits {
                    let (b, t) = net.download_step(bits - got, MIN_PROGRESS_BITS, min_time);
                    total += t;
                    got += b;
                    if got < bits {
                        let timing = Some(Timing {
                            elapsed_ms: total,
                            ttfb_ms: latency,
                        });
                        player.handle(
                            net.now,
                            Event::Progress {
                                received_bits: got,
                                timing,
                            },
                        );
                        if let Some(a) = player.poll_action(net.now) {
                            debug_assert!(matches!(a, Action::Abandon { .. }));
                            abandoned = true;
                            break;
                        }
                    }
                    min_time = MIN_PROGRESS_MS;
                }
                if !abandoned {
                    let timing = Some(Timing {
                        elapsed_ms: total,
                        ttfb_ms: latency,
                    });
                    player.handle(net.now, Event::Completed { timing });
                }
            }
        }
    }
    Ok(player)
}
