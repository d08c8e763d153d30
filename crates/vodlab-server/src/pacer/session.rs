//! One paced session's state: its slot grid, deficit, burst and playout
//! estimate (see the parent module for the algorithm).

use std::time::{Duration, Instant};

use super::Kind;

#[derive(Debug, Clone, Copy)]
pub(super) enum State {
    Queued(u64),
    Granted { bytes: u64, kind: Kind },
}

#[derive(Debug)]
pub(super) struct Session {
    pub(super) gen: u32,
    pub(super) state: State,
    /// Paced rate r (bytes/s).
    pub(super) rate: u64,
    /// Link rate this session reserves: r × the wire factor of its chunk.
    pub(super) reserved: u64,
    pub(super) bitrate: f64,
    pub(super) chunk: u64,
    pub(super) max_rate: Option<u64>,
    pub(super) start: Instant,
    /// Index of the next grid slot.
    pub(super) next_slot: u64,
    /// Bytes of the slots fired since the last paced release (0: none
    /// pending). A driver that wakes late finds several slots fired and
    /// releases them together, so a late wake-up costs one write, not one
    /// per slot, and the session stays on its grid.
    pub(super) paced_due: u64,
    /// Bytes the grid granted and the socket has not taken.
    pub(super) owed: u64,
    pub(super) owed_cap: u64,
    /// Burst bytes still to send.
    pub(super) burst_owed: u64,
    pub(super) sent: u64,
    pub(super) total: u64,
    /// Earliest time for the next release between slots.
    pub(super) next_extra: Instant,
    /// Counted in `Pacer::n_extra`.
    pub(super) extra_active: bool,
    /// Playout estimate: content played = played_base + (now − play_clock).
    pub(super) played_base: f64,
    pub(super) play_clock: Option<Instant>,
}

impl Session {
    pub(super) fn slot_time(&self, j: u64) -> Instant {
        self.start + Duration::from_secs_f64(j as f64 * self.chunk as f64 / self.rate as f64)
    }

    /// Seconds between catch-up releases: c / (r·s).
    pub(super) fn catch_up_gap(&self, speed: f64) -> Duration {
        Duration::from_secs_f64(self.chunk as f64 / (self.rate as f64 * speed))
    }

    pub(super) fn remaining(&self) -> u64 {
        self.total - self.sent
    }

    /// Fires every slot due at `now`.
    pub(super) fn fire_slots(&mut self, now: Instant) {
        if self.slot_time(self.next_slot) > now {
            return;
        }
        let elapsed = now.saturating_duration_since(self.start).as_secs_f64();
        let mut last = (elapsed * self.rate as f64 / self.chunk as f64).floor() as u64;
        // Float guard: the slot index whose time is the last one ≤ now.
        while last > self.next_slot && self.slot_time(last) > now {
            last -= 1;
        }
        while self.slot_time(last + 1) <= now {
            last += 1;
        }
        let fired = (last + 1).saturating_sub(self.next_slot);
        self.next_slot = last + 1;
        self.owed = self
            .owed
            .saturating_add(fired.saturating_mul(self.chunk))
            .min(self.owed_cap);
        self.paced_due = self
            .paced_due
            .saturating_add(fired.saturating_mul(self.chunk));
        self.clamp();
    }

    pub(super) fn clamp(&mut self) {
        let left = self.remaining();
        self.owed = self.owed.min(left);
        self.burst_owed = self.burst_owed.min(left - self.owed);
    }

    pub(super) fn wants_extra(&self) -> bool {
        self.owed > 0 || self.burst_owed > 0
    }

    pub(super) fn buffer(&mut self, now: Instant) -> f64 {
        let content = self.sent as f64 / self.bitrate;
        let Some(clock) = self.play_clock else {
            return content;
        };
        let played = self.played_base + now.saturating_duration_since(clock).as_secs_f64();
        if played > content {
            // Stalled: playout waits for data.
            self.played_base = content;
            self.play_clock = Some(now);
            return 0.0;
        }
        content - played
    }
}
