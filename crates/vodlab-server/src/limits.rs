//! The connection's defences against hostile clients, without I/O: what to
//! do with a request body ([`body_action`]), the deadline of a request head
//! ([`HeadTimer`]), and which connection to shed when the server is at its
//! connection cap ([`HeadQueue`]). Every function takes `now`; none reads a
//! clock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use vodlab_http::server::BodyFraming;

/// Largest request body read and discarded to keep a connection open; a
/// longer one (or a chunked one) gets its answer and the connection closes.
pub const MAX_DISCARD: u64 = 64 * 1024;

/// What happens to a request's body after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyAction {
    /// No body: the next bytes are the next request.
    Keep,
    /// Read and drop this many bytes before the next head.
    Discard(u64),
    /// Answer with `Connection: close` and close: the body's end is unknown
    /// (chunked), it is too long to drain, or the client waits for a
    /// `100 Continue` this server never sends (it accepts no bodies).
    Close,
}

/// What to do with a body of the given framing. `expect` is whether the
/// request carried an `Expect` field.
pub fn body_action(framing: BodyFraming, expect: bool) -> BodyAction {
    match framing {
        BodyFraming::None | BodyFraming::Length(0) => BodyAction::Keep,
        BodyFraming::Length(_) if expect => BodyAction::Close,
        BodyFraming::Length(n) if n <= MAX_DISCARD => BodyAction::Discard(n),
        BodyFraming::Length(_) | BodyFraming::Chunked => BodyAction::Close,
    }
}

/// The deadline of one request head. The header timeout runs from the
/// first byte of the head (from the accept for a connection's first
/// request) and is **not** restarted by later bytes: a client dribbling one
/// byte at a time gets the same time as one sending the head at once.
/// Before the first byte of a later request the idle (keep-alive) timeout
/// applies, from the end of the previous response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadTimer {
    waiting_since: Instant,
    head_since: Option<Instant>,
}

impl HeadTimer {
    /// A connection's first request: the head's clock starts at the accept.
    pub fn first(accepted: Instant) -> Self {
        Self {
            waiting_since: accepted,
            head_since: Some(accepted),
        }
    }

    /// A later request on a kept connection: idle until its first byte.
    pub fn next(now: Instant) -> Self {
        Self {
            waiting_since: now,
            head_since: None,
        }
    }

    /// Records that bytes of the head (or of a body being discarded) have
    /// arrived; only the first call counts.
    pub fn bytes_arrived(&mut self, now: Instant) {
        self.head_since.get_or_insert(now);
    }

    /// Whether a head has begun (its timeout is a counted header timeout).
    pub fn in_head(&self) -> bool {
        self.head_since.is_some()
    }

    /// When waiting ends: header timeout after the head began, else idle
    /// timeout after waiting began.
    pub fn deadline(&self, header_timeout: Duration, idle_timeout: Duration) -> Instant {
        match self.head_since {
            Some(t) => t + header_timeout,
            None => self.waiting_since + idle_timeout,
        }
    }
}

/// The connections now waiting for a request head (idle keep-alive ones
/// included), oldest first. At the connection cap the server sheds the
/// oldest of them to make room for a new connection: a connection that has
/// waited longest for a complete head is the likeliest to be a slowloris
/// one, and a connection busy with a response is never shed.
#[derive(Debug)]
pub struct HeadQueue<T> {
    next: u64,
    waiting: BTreeMap<u64, T>,
}

impl<T> Default for HeadQueue<T> {
    fn default() -> Self {
        Self {
            next: 0,
            waiting: BTreeMap::new(),
        }
    }
}

impl<T> HeadQueue<T> {
    /// A connection starts waiting for a head; returns its ticket.
    pub fn enter(&mut self, handle: T) -> u64 {
        let ticket = self.next;
        self.next += 1;
        self.waiting.insert(ticket, handle);
        ticket
    }

    /// The connection stopped waiting (its head is complete, or it closed).
    /// `false` when it had been shed meanwhile.
    pub fn leave(&mut self, ticket: u64) -> bool {
        self.waiting.remove(&ticket).is_some()
    }

    /// Removes and returns the connection that has waited longest.
    pub fn shed_oldest(&mut self) -> Option<T> {
        self.waiting.pop_first().map(|(_, h)| h)
    }

    /// Connections waiting now.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether none is waiting.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// This process's soft open files limit (RLIMIT_NOFILE) now, 0 when it
/// cannot be read.
pub fn nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit on a local struct
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    r.rlim_cur
}

/// Raises this process's soft open files limit (RLIMIT_NOFILE) to its hard
/// limit and returns the soft limit (0 when it cannot be read). The server
/// calls it at start, so its connections may use every descriptor the
/// process is allowed.
pub fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a local struct
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
            }
        }
    }
    r.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_drained_or_the_connection_closes() {
        use BodyFraming::*;
        assert_eq!(body_action(None, false), BodyAction::Keep);
        assert_eq!(body_action(Length(0), true), BodyAction::Keep);
        assert_eq!(body_action(Length(5), false), BodyAction::Discard(5));
        assert_eq!(
            body_action(Length(MAX_DISCARD), false),
            BodyAction::Discard(MAX_DISCARD)
        );
        assert_eq!(
            body_action(Length(MAX_DISCARD + 1), false),
            BodyAction::Close
        );
        assert_eq!(body_action(Length(5), true), BodyAction::Close);
        assert_eq!(body_action(Chunked, false), BodyAction::Close);
    }

    #[test]
    fn a_dribbled_byte_does_not_restart_the_header_timeout() {
        let t0 = Instant::now();
        let hdr = Duration::from_secs(10);
        let idle = Duration::from_secs(60);
        let mut t = HeadTimer::first(t0);
        assert!(t.in_head());
        assert_eq!(t.deadline(hdr, idle), t0 + hdr);
        for i in 1..20 {
            t.bytes_arrived(t0 + Duration::from_secs(i * 5));
            assert_eq!(t.deadline(hdr, idle), t0 + hdr, "byte {i}");
        }
        // a kept connection: idle until the first byte, then the head's deadline from it
        let mut k = HeadTimer::next(t0);
        assert!(!k.in_head());
        assert_eq!(k.deadline(hdr, idle), t0 + idle);
        let first = t0 + Duration::from_secs(30);
        k.bytes_arrived(first);
        k.bytes_arrived(first + Duration::from_secs(9));
        assert!(k.in_head());
        assert_eq!(k.deadline(hdr, idle), first + hdr);
    }

    #[test]
    fn the_oldest_waiting_connection_is_shed_first() {
        let mut q = HeadQueue::default();
        let a = q.enter("a");
        let b = q.enter("b");
        let c = q.enter("c");
        assert_eq!(q.len(), 3);
        // b's head completed: it is no longer sheddable
        assert!(q.leave(b));
        // a finished a response and waits again: now the newest
        assert!(q.leave(a));
        let a2 = q.enter("a");
        assert_eq!(q.shed_oldest(), Some("c"));
        assert!(!q.leave(c), "c was shed");
        assert_eq!(q.shed_oldest(), Some("a"));
        assert!(!q.leave(a2));
        assert!(q.is_empty());
        assert_eq!(q.shed_oldest(), None);
    }
}
