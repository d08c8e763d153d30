//! The sans-IO cores of a viewer: every rule of a session and a player, with
//! `now` passed in and no sockets, tasks or clocks, so each is tested in
//! virtual time and the executors in [`crate::io`] only carry bytes and
//! timers for them.
//!
//! - [`driver`]: a scripted session (pacing, deadlines, connections, retries);
//!   [`slots`] its schedule of send slots, [`checks`] what a response must pass,
//!   [`exchange`] what one exchange produced.
//! - [`viewer`]: the playout buffer that turns completion times into start-up
//!   delay and stalls; [`delivery`] the per-request delivery meter.
//! - [`schedule`]: seeded open-loop session arrivals.
//! - [`link`]: the token bucket of an emulated access link, and
//!   [`link::datagrams`] its lossy datagram model (QUIC).
//! - [`player`]: closed-loop adaptive players (ABR rules, buffer, QoE), and
//!   [`cmcd`] the CMCD they send.
//! - [`time`]: virtual time, a [`time::Time`] for a point and a `Duration`
//!   for a span; the edge's [`time::Clock`] converts from and to `Instant`.

pub mod checks;
pub mod cmcd;
pub mod delivery;
pub mod driver;
pub mod exchange;
pub mod link;
pub mod player;
pub mod schedule;
pub mod slots;
pub mod time;
pub mod viewer;
