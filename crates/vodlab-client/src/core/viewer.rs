//! The viewer: a playout buffer driven by request completion times.
//!
//! Pure: given when each request's content became available, it computes the
//! start-up delay, the stalls and the stall time a player would have seen.
//! Each request carries `request_s` seconds of content; content is played in
//! order, so a request's content is playable once it and every earlier one
//! have arrived. Playback starts when the first `buffering` requests have
//! arrived (all of them when the session is shorter).
//!
//! Times come in as [`Duration`]s since the session started. The figures
//! stay f64 seconds: `request_s` is the script's own figure (`request_s=`),
//! [`ViewerStats`] is written to the results as seconds, and the playout
//! arithmetic runs on f64 seconds (the arrivals' `as_secs_f64`) as it always
//! has.

use std::time::Duration;

/// What a viewer experienced (f64 seconds: figures of the results).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ViewerStats {
    /// Seconds from session start to playback start; `None` if it never started.
    pub startup_s: Option<f64>,
    /// Number of times playback stopped for lack of content.
    pub stalls: u32,
    /// Seconds spent stalled after playback started.
    pub stall_s: f64,
    /// Seconds of content played (assuming the viewer watched what arrived).
    pub played_s: f64,
}

/// Computes viewer statistics. `arrivals[k]` is the completion time of
/// request `k` since the session started, or `None` if it never completed
/// (later requests are then unplayable). `failed_at` is when the session
/// ended early (a timeout), since it started, bounding the last stall.
pub fn play(
    arrivals: &[Option<Duration>],
    request_s: f64,
    buffering: usize,
    failed_at: Option<Duration>,
) -> ViewerStats {
    let failed_at = failed_at.map(|d| d.as_secs_f64());
    // time each request's content becomes playable (in-order prefix)
    let mut ready = Vec::with_capacity(arrivals.len());
    let mut latest = 0.0f64;
    for a in arrivals {
        match a {
            Some(t) => {
                latest = latest.max(t.as_secs_f64());
                ready.push(latest);
            }
            None => break,
        }
    }
    let need = buffering.max(1).min(arrivals.len());
    if ready.len() < need || need == 0 {
        return ViewerStats::default();
    }
    let start = ready[need - 1];
    let mut clock = start; // wall time at which the current position plays
    let mut stats = ViewerStats {
        startup_s: Some(start),
        ..Default::default()
    };
    for (k, &r) in ready.iter().enumerate() {
        if k > 0 && r > clock {
            stats.stalls += 1;
            stats.stall_s += r - clock;
            clock = r;
        }
        clock += request_s;
        stats.played_s += request_s;
    }
    if ready.len() < arrivals.len() {
        // the next request never came: the viewer stalled until the session ended
        if let Some(end) = failed_at {
            if end > clock {
                stats.stalls += 1;
                stats.stall_s += end - clock;
            }
        }
    }
    stats
}

/// Seconds of content in the playout buffer at `now` (since the session
/// started), by the same rules as [`play`]: content arrived and playable in
/// order, minus what has played since playback started (0 before it
/// starts). What a player reports as CMCD `bl` (f64 seconds: the figure
/// CMCD sends).
pub fn buffer_at(
    arrivals: &[Option<Duration>],
    request_s: f64,
    buffering: usize,
    now: Duration,
) -> f64 {
    let now_s = now.as_secs_f64();
    let mut ready = Vec::new();
    let mut latest = 0.0f64;
    for a in arrivals {
        match a.map(|t| t.as_secs_f64()) {
            Some(t) if t <= now_s => {
                latest = latest.max(t);
                ready.push(latest);
            }
            _ => break,
        }
    }
    let need = buffering.max(1).min(arrivals.len());
    if need == 0 || ready.len() < need {
        return ready.len() as f64 * request_s;
    }
    // play in order until now: segment k plays from max(clock, ready[k])
    let mut clock = ready[need - 1];
    let mut played = 0.0;
    for &r in &ready {
        let from = clock.max(r);
        if from >= now_s {
            break;
        }
        played += (now_s - from).min(request_s);
        clock = from + request_s;
    }
    (ready.len() as f64 * request_s - played).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `secs` after the session started (whole milliseconds).
    fn s(secs: f64) -> Duration {
        Duration::from_millis((secs * 1000.0).round() as u64)
    }

    /// An arrival `secs` after the session started.
    fn at(secs: f64) -> Option<Duration> {
        Some(s(secs))
    }

    #[test]
    fn buffer_level_fills_then_drains_while_playing() {
        let a = [at(1.0), at(2.0), at(3.0), None];
        // before start-up (3 buffering requests): what arrived
        assert_eq!(buffer_at(&a, 10.0, 3, s(2.5)), 20.0);
        // playback from 3 s: 30 s of content, 4 s played at 7 s
        assert!((buffer_at(&a, 10.0, 3, s(7.0)) - 26.0).abs() < 1e-9);
        // everything played by 40 s
        assert_eq!(buffer_at(&a, 10.0, 3, s(40.0)), 0.0);
    }

    #[test]
    fn no_stall_when_chunks_arrive_before_their_play_time() {
        // 3 buffering chunks at 0.5, 1.0, 1.5 s; paced chunks every 10 s arrive in 0.5 s
        let arr = [at(0.5), at(1.0), at(1.5), at(10.5), at(20.5)];
        let v = play(&arr, 10.0, 3, None);
        assert_eq!(v.startup_s, Some(1.5));
        assert_eq!(v.stalls, 0);
        assert_eq!(v.played_s, 50.0);
    }

    #[test]
    fn a_chunk_after_its_play_time_is_a_stall() {
        // playback starts at 1.5; chunk 3 plays at 31.5 but arrives at 35
        let arr = [at(0.5), at(1.0), at(1.5), at(35.0), at(36.0)];
        let v = play(&arr, 10.0, 3, None);
        assert_eq!(v.stalls, 1);
        assert!((v.stall_s - 3.5).abs() < 1e-9);
        // chunk 4 plays at 45 after the shift, arrived at 36: no second stall
    }

    #[test]
    fn out_of_order_arrivals_wait_for_the_prefix() {
        let arr = [at(2.0), at(1.0), at(3.0)];
        let v = play(&arr, 1.0, 1, None);
        assert_eq!(v.startup_s, Some(2.0));
        // chunk 1 ready at 2.0 (needs chunk 0), plays at 3.0: fine; chunk 2 at 3.0 plays at 4.0
        assert_eq!(v.stalls, 0);
    }

    #[test]
    fn a_failed_session_stalls_until_it_ends() {
        let arr = [at(0.5), at(1.0), at(1.5), None, None];
        let v = play(&arr, 10.0, 3, Some(s(40.0)));
        assert_eq!(v.stalls, 1);
        assert!((v.stall_s - 8.5).abs() < 1e-9); // ran dry at 31.5
        assert_eq!(play(&[None, None], 10.0, 3, Some(s(5.0))).startup_s, None);
    }

    #[test]
    fn short_sessions_start_when_all_arrived() {
        let v = play(&[at(0.2)], 10.0, 3, None);
        assert_eq!(v.startup_s, Some(0.2));
    }
}
