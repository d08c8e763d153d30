//! The unsent bytes a connection's socket may queue in the kernel
//! (`TCP_NOTSENT_LOWAT`), raised for a connection whose peer has shown it
//! reads fast: docs/serve.md, "Kernel memory per slow reader".
//!
//! The low-water mark bounds what a stalled reader pins in the kernel, but
//! it also decides how often a response must wake the server to queue
//! more: Linux reports the socket writable again when half of it is left
//! unsent. A fixed 256 KiB is a second of video for a 2 Mbit/s viewer and
//! 50 µs of a loopback client, for whom a 1 MiB body then takes about ten
//! `sendfile` calls and wake-ups where one would do. So before each
//! response the server reads the connection's delivery rate
//! (`TCP_INFO`'s `tcpi_delivery_rate`, the kernel's own measurement of
//! the rate its peer acknowledged data at lately) and the rate the peer
//! actually read at since the connection's previous file response began
//! ([`ReadRate`]: bytes acknowledged over the time between), and sets the
//! mark to what the lower of the two drains in
//! [`defaults::NOTSENT_LOWAT_TIME`], never below the configured
//! `notsent_lowat` and never above `notsent_lowat_max`. The second rate
//! is there because the kernel's sample can be a burst: a reader that
//! drains its small receive buffer now and then gets each reopened window
//! acknowledged at loopback speed. Slow readers keep the configured bound;
//! a reader that was fast and then stalls pins at most
//! `notsent_lowat_max` until the send timeout.

use std::os::fd::RawFd;
use std::time::Instant;

use crate::config::defaults;

/// What the kernel's `TCP_INFO` says of a connection, the two fields the
/// server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpFacts {
    /// Bytes the peer's TCP has acknowledged (`tcpi_bytes_acked`).
    pub(crate) bytes_acked: u64,
    /// The most recent delivery rate sample, bytes per second
    /// (`tcpi_delivery_rate`; 0 before the first sample).
    pub(crate) delivery_rate: u64,
}

/// Reads `TCP_INFO` of a TCP socket; `None` when the kernel refuses or is
/// too old to report both fields.
pub(crate) fn tcp_facts(fd: RawFd) -> Option<TcpFacts> {
    // SAFETY: tcp_info is plain old data
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a live tcp_info and its size
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    // tcpi_delivery_rate comes after tcpi_bytes_acked
    let need = std::mem::offset_of!(libc::tcp_info, tcpi_delivery_rate) + 8;
    (r == 0 && len as usize >= need).then_some(TcpFacts {
        bytes_acked: info.tcpi_bytes_acked,
        delivery_rate: info.tcpi_delivery_rate,
    })
}

/// The rate a connection's peer read at between two of its file
/// responses: bytes acknowledged over the time between their starts (its
/// think time included, so a peer that pauses counts as slow).
#[derive(Debug, Default)]
pub(crate) struct ReadRate {
    last: Option<(Instant, u64)>,
}

impl ReadRate {
    /// Notes a response starting at `now` with `acked` bytes acknowledged
    /// so far; returns bytes per second since the previous one (`None` for
    /// the first).
    pub(crate) fn observe(&mut self, now: Instant, acked: u64) -> Option<u64> {
        let rate = self.last.and_then(|(t, a)| {
            let dt = now.saturating_duration_since(t).as_secs_f64();
            (dt > 0.0).then(|| (acked.saturating_sub(a) as f64 / dt) as u64)
        });
        self.last = Some((now, acked));
        rate
    }
}

/// The low-water mark for a connection whose peer reads at `rate` bytes
/// per second: what that rate drains in [`defaults::NOTSENT_LOWAT_TIME`],
/// rounded down to a power of two and held within `[floor, max]`. With the
/// 256 KiB floor the mark is first raised (to 512 KiB) at 128 MiB/s, about
/// 1.1 Gbit/s; the rounding keeps it from being reset on every response
/// while the rate stays within one factor of two (a rate at the edge of
/// one may still move it, one `setsockopt`). `floor` 0 (the kernel's own
/// default, no mark) stays 0.
pub(crate) fn rate_aware(rate: u64, floor: u64, max: u64) -> u64 {
    if floor == 0 || max <= floor {
        return floor;
    }
    let want = (rate as u128 * defaults::NOTSENT_LOWAT_TIME.as_micros() / 1_000_000)
        .min(u64::MAX as u128) as u64;
    if want <= floor {
        return floor;
    }
    let pow2 = 1u64 << (63 - want.leading_zeros());
    pow2.clamp(floor, max)
}

/// Sets `TCP_NOTSENT_LOWAT`: a write stops, and the socket reports not
/// writable, while more than `bytes` are queued but not yet sent. Best
/// effort: a failure leaves what was set before.
pub(crate) fn set(fd: RawFd, bytes: u64) {
    let v = bytes.min(i32::MAX as u64) as libc::c_int;
    // SAFETY: an open socket and a live option value of the right size
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn slow_and_unmeasured_readers_keep_the_floor() {
        // no sample yet, a 2 Mbit/s viewer, a 100 Mbit/s client
        for rate in [0, 250_000, 12_500_000] {
            assert_eq!(rate_aware(rate, 256 * K, 1 << 20), 256 * K, "{rate}");
        }
    }

    #[test]
    fn fast_readers_get_what_their_rate_drains_capped() {
        let t = defaults::NOTSENT_LOWAT_TIME.as_secs_f64();
        // a rate that drains exactly 512 KiB in the time
        let r512 = ((512 * K) as f64 / t).ceil() as u64;
        assert_eq!(rate_aware(r512, 256 * K, 1 << 20), 512 * K);
        // just below it: rounded down to the floor's power of two
        assert_eq!(rate_aware(r512 - 1000, 256 * K, 1 << 20), 256 * K);
        // loopback rates: the cap
        assert_eq!(rate_aware(5_000_000_000, 256 * K, 1 << 20), 1 << 20);
        assert_eq!(rate_aware(u64::MAX, 256 * K, 4 << 20), 4 << 20);
    }

    #[test]
    fn off_and_a_cap_at_or_below_the_floor_are_the_fixed_mark() {
        assert_eq!(rate_aware(5_000_000_000, 0, 1 << 20), 0);
        assert_eq!(rate_aware(5_000_000_000, 256 * K, 256 * K), 256 * K);
        assert_eq!(rate_aware(5_000_000_000, 256 * K, 64 * K), 256 * K);
    }

    #[test]
    fn the_read_rate_is_bytes_acknowledged_between_response_starts() {
        let t0 = Instant::now();
        let mut r = ReadRate::default();
        assert_eq!(r.observe(t0, 1000), None);
        // 1 MiB read in 2 ms
        let t1 = t0 + std::time::Duration::from_millis(2);
        assert_eq!(r.observe(t1, 1000 + (1 << 20)), Some(524_288_000));
        // then a 5 s pause before the next request: slow, whatever the kernel's last sample
        let t2 = t1 + std::time::Duration::from_secs(5);
        let got = r.observe(t2, 1000 + (2 << 20)).unwrap();
        assert_eq!(got, (1 << 20) / 5);
        assert_eq!(rate_aware(got, 256 * K, 1 << 20), 256 * K);
        // a clock that did not move gives no rate
        assert_eq!(r.observe(t2, 1000 + (3 << 20)), None);
    }

    #[test]
    fn a_floor_that_is_not_a_power_of_two_is_kept() {
        let t = defaults::NOTSENT_LOWAT_TIME.as_secs_f64();
        let r = ((700 * K) as f64 / t) as u64;
        // 700 KiB rounds down to 512 KiB, below the 600 KiB floor
        assert_eq!(rate_aware(r, 600 * K, 4 << 20), 600 * K);
    }
}
