//! Virtual time of the cores: a point is a [`Time`], a span a [`Duration`].
//!
//! A [`Time`] is the offset from the run's epoch, so the cores compute with
//! plain [`Duration`] arithmetic and their tests build times as
//! `Time::ZERO + Duration::from_millis(..)` with no clock at all. The I/O
//! edge ([`crate::io`]) holds one [`Clock`] per run (the run's epoch
//! `Instant`) and converts at the call: [`Clock::now`] or
//! [`Clock::time_of`] into a core, [`Clock::instant_of`] out of it for a
//! timer (`tokio::time::sleep_until`). `Instant` appears in the cores
//! nowhere but here.
//!
//! The API mirrors what the cores used of `std::time::Instant`: the same
//! names, and the same saturation (a point minus a later point is zero).

use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::{Duration, Instant};

/// A point of virtual time: the offset from the run's epoch (see the module
/// docs). `Time::ZERO` is the epoch; there is no time before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(Duration);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(Duration::ZERO);

    /// The point `offset` after the epoch.
    pub const fn from_offset(offset: Duration) -> Self {
        Time(offset)
    }

    /// How long after the epoch this point is.
    pub const fn offset(self) -> Duration {
        self.0
    }

    /// The span from `earlier` to this point, zero when `earlier` is later
    /// (as `Instant::duration_since` does today).
    pub fn duration_since(self, earlier: Time) -> Duration {
        self.saturating_duration_since(earlier)
    }

    /// The span from `earlier` to this point, zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Time) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The span from `earlier` to this point, `None` when `earlier` is later.
    pub fn checked_duration_since(self, earlier: Time) -> Option<Duration> {
        self.0.checked_sub(earlier.0)
    }

    /// `d` after this point, `None` when that overflows a [`Duration`].
    pub fn checked_add(self, d: Duration) -> Option<Time> {
        self.0.checked_add(d).map(Time)
    }

    /// `d` before this point, `None` when that is before the epoch.
    pub fn checked_sub(self, d: Duration) -> Option<Time> {
        self.0.checked_sub(d).map(Time)
    }
}

impl Add<Duration> for Time {
    type Output = Time;

    /// `d` after this point.
    ///
    /// # Panics
    /// When the result overflows (as `Instant + Duration` does); use
    /// [`Time::checked_add`] for inputs that may be absurd.
    fn add(self, d: Duration) -> Time {
        self.checked_add(d)
            .expect("overflow when adding a duration to a time")
    }
}

impl AddAssign<Duration> for Time {
    /// Moves this point `d` later (panics on overflow, like `+`).
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Time {
    type Output = Time;

    /// `d` before this point.
    ///
    /// # Panics
    /// When the result would be before the epoch (as `Instant - Duration`
    /// panics before its own origin); use [`Time::checked_sub`] otherwise.
    fn sub(self, d: Duration) -> Time {
        self.checked_sub(d)
            .expect("overflow when subtracting a duration from a time")
    }
}

impl SubAssign<Duration> for Time {
    /// Moves this point `d` earlier (panics before the epoch, like `-`).
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

impl Sub<Time> for Time {
    type Output = Duration;

    /// The span from `earlier` to this point, saturating to zero when
    /// `earlier` is later (std's `Instant - Instant` does the same).
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// The I/O edge's converter between `Instant`s and [`Time`]s: one per run,
/// holding the run's epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose [`Time::ZERO`] is `epoch`.
    pub fn new(epoch: Instant) -> Self {
        Self { epoch }
    }

    /// The `Instant` of [`Time::ZERO`].
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// The time now (reads `Instant::now()`).
    pub fn now(&self) -> Time {
        self.time_of(Instant::now())
    }

    /// The time of `at`; an instant before the epoch is [`Time::ZERO`].
    pub fn time_of(&self, at: Instant) -> Time {
        Time(at.saturating_duration_since(self.epoch))
    }

    /// The instant of `t`, for a timer (`tokio::time::sleep_until`). A time
    /// past what an `Instant` holds (hundreds of billions of years) comes
    /// back as a far future instant no earlier than any that it does hold.
    pub fn instant_of(&self, t: Time) -> Instant {
        // i64::MAX / 2 seconds: reachable from any epoch when `t` is not
        const FAR: Duration = Duration::from_secs(i64::MAX as u64 / 2);
        self.epoch
            .checked_add(t.0)
            .or_else(|| self.epoch.checked_add(FAR))
            .unwrap_or(self.epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Time {
        Time::ZERO + Duration::from_millis(n)
    }

    #[test]
    fn differences_saturate_to_zero() {
        let (a, b) = (ms(100), ms(250));
        assert_eq!(b - a, Duration::from_millis(150));
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(a.duration_since(b), Duration::ZERO);
        assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
        assert_eq!(a.checked_duration_since(b), None);
        assert_eq!(
            b.checked_duration_since(a),
            Some(Duration::from_millis(150))
        );
        assert_eq!(a.checked_sub(Duration::from_millis(101)), None);
        assert_eq!(a.checked_sub(Duration::from_millis(100)), Some(Time::ZERO));
        assert_eq!(
            Time::from_offset(Duration::MAX).checked_add(Duration::from_nanos(1)),
            None
        );
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn subtracting_past_the_epoch_panics() {
        let _ = ms(1) - Duration::from_millis(2);
    }

    #[test]
    fn times_order_by_offset() {
        let mut v = vec![ms(30), Time::ZERO, ms(10), ms(20)];
        v.sort();
        assert_eq!(v, vec![Time::ZERO, ms(10), ms(20), ms(30)]);
        assert_eq!(Time::default(), Time::ZERO);
        assert!(ms(10) < ms(10) + Duration::from_nanos(1));
        let mut t = ms(5);
        t += Duration::from_millis(5);
        assert_eq!(t, ms(10));
        t -= Duration::from_millis(10);
        assert_eq!(t, Time::ZERO);
        assert_eq!(ms(1500).offset(), Duration::from_millis(1500));
        assert_eq!(Time::from_offset(Duration::from_millis(7)), ms(7));
    }

    #[test]
    fn a_clock_round_trips_instants() {
        let epoch = Instant::now();
        let c = Clock::new(epoch);
        assert_eq!(c.epoch(), epoch);
        assert_eq!(c.time_of(epoch), Time::ZERO);
        let at = epoch + Duration::from_micros(1_234_567);
        let t = c.time_of(at);
        assert_eq!(t, ms(1234) + Duration::from_micros(567));
        assert_eq!(c.instant_of(t), at);
        assert_eq!(c.time_of(c.instant_of(ms(42))), ms(42));
        // before the epoch: the epoch
        if let Some(before) = epoch.checked_sub(Duration::from_secs(1)) {
            assert_eq!(c.time_of(before), Time::ZERO);
        }
        assert!(c.now() >= Time::ZERO);
        // past an Instant's range: still later than anything it holds
        let far = c.instant_of(Time::from_offset(Duration::MAX));
        assert!(far > c.instant_of(ms(1_000_000_000)));
    }
}
