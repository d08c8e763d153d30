//! Chain detection [T1502–T1504]: a chain is a contiguous run of requests of
//! one session to one file. A request joins a chain when it starts at the
//! byte after the chain's end (or ends at the byte before its start: arrival
//! order does not matter) and the two neighbouring requests arrived within
//! the window of each other; a request that bridges two chains merges them,
//! so the chains come out as long as possible.
//!
//! Streaming: requests come in log order, which is completion order, so a
//! request may be logged long after it arrived. A chain is closed once the
//! log has moved `window + reorder` seconds past its last arrival; until
//! then it can still grow at either end.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::{Form, Request};

/// A map keyed by session and file keys, which are already hashes
/// ([`crate::key`]): FxHash (`rustc-hash`) instead of SipHash, which costs
/// more than the rest of a request's bookkeeping.
pub(crate) type KeyMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// A finished chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// Session key.
    pub session: u64,
    /// File key.
    pub file: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes (sum of the requests' bytes).
    pub bytes: u64,
    /// Requests in it.
    pub requests: u32,
    /// Arrival of its first-arriving request, seconds.
    pub start_s: f64,
    /// Completion of its last-completing request, seconds.
    pub end_s: f64,
    /// Form of the request at its first byte (the thesis's chain type).
    pub form: Form,
    /// Nominal bit rate of the file, when known.
    pub bitrate_kbps: Option<f64>,
}

impl Chain {
    /// Duration, seconds.
    pub fn duration_s(&self) -> f64 {
        (self.end_s - self.start_s).max(0.0)
    }

    /// Nominal title time the chain covers (bytes ÷ bit rate), seconds.
    pub fn title_time_s(&self) -> Option<f64> {
        self.bitrate_kbps
            .filter(|b| *b > 0.0)
            .map(|b| self.bytes as f64 * 8.0 / (b * 1000.0))
    }
}

#[derive(Debug, Clone)]
struct Open {
    chain: Chain,
    /// Byte after the chain's last byte.
    next: u64,
    /// Arrival of the request holding the first byte.
    head_arrival: f64,
    /// Arrival of the request holding the last byte.
    tail_arrival: f64,
    /// Latest arrival of any request in it.
    last_arrival: f64,
}

/// Per (session, file) state: open chains and the Table 5.3 concurrency.
#[derive(Debug, Default)]
struct FileState {
    open: Vec<Open>,
    /// Requests per arrival second, recent seconds only.
    seconds: Vec<(i64, u32)>,
    max_parallel: u32,
    last_arrival: f64,
}

impl FileState {
    fn new() -> Self {
        FileState {
            open: Vec::new(),
            seconds: Vec::new(),
            max_parallel: 0,
            last_arrival: f64::NEG_INFINITY,
        }
    }
}

/// What a (session, file) pair left when it was closed: Table 5.3's value
/// for this visit. A session may come back to a file after the pair was
/// closed; the analyzer keeps the largest value per session and file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileDone {
    /// Session key.
    pub session: u64,
    /// File key.
    pub file: u64,
    /// Most requests to the file arriving within one second.
    pub max_parallel: u32,
}

/// Streaming chain detector.
#[derive(Debug)]
pub struct ChainDetector {
    window_s: f64,
    reorder_s: f64,
    files: KeyMap<(u64, u64), FileState>,
    /// One entry per (session, file) pair: the second of its latest arrival
    /// when queued; a pair is looked at again once the log has moved
    /// `window + reorder` past it, so no request walks every open pair.
    expiry: BinaryHeap<Reverse<(i64, u64, u64)>>,
    open_chains: usize,
    peak_open_chains: usize,
}

impl ChainDetector {
    /// A detector joining requests that arrive within `window_s` of their
    /// neighbour, accepting log lines up to `reorder_s` out of arrival order.
    pub fn new(window_s: f64, reorder_s: f64) -> Self {
        ChainDetector {
            window_s,
            reorder_s,
            files: HashMap::default(),
            expiry: BinaryHeap::new(),
            open_chains: 0,
            peak_open_chains: 0,
        }
    }

    /// Chains open now.
    pub fn open_chains(&self) -> usize {
        self.open_chains
    }

    /// Most chains open at once so far (the memory the detector needed).
    pub fn peak_open_chains(&self) -> usize {
        self.peak_open_chains
    }

    /// Adds a request; chains and (session, file) pairs that can no longer
    /// grow are appended to `done` and `files_done`. `now_s` is the log's
    /// time (the request's completion, for completion-ordered logs).
    pub fn push(
        &mut self,
        r: &Request,
        now_s: f64,
        done: &mut Vec<Chain>,
        files_done: &mut Vec<FileDone>,
    ) {
        let st = self.files.entry((r.session, r.file)).or_insert_with(|| {
            let sec = r.start_s.floor() as i64;
            self.expiry.push(Reverse((sec, r.session, r.file)));
            FileState::new()
        });
        st.last_arrival = st.last_arrival.max(r.start_s);
        // Table 5.3: requests to this file arriving in the same second; only
        // the second just counted can raise the maximum
        let sec = r.start_s.floor() as i64;
        // `seconds` is kept sorted; arrivals come nearly in order, so the
        // search from the back stops at once
        let here = match st.seconds.iter().rposition(|(s, _)| *s <= sec) {
            Some(p) if st.seconds[p].0 == sec => {
                st.seconds[p].1 += 1;
                st.seconds[p].1
            }
            p => {
                st.seconds.insert(p.map_or(0, |p| p + 1), (sec, 1));
                // a second older than `reorder` can no longer be counted
                // (this request's own second never is): drop them in
                // batches, once the oldest is 32 s past the horizon
                let horizon = (r.start_s - self.reorder_s).floor() as i64;
                if st.seconds.len() >= 16 && st.seconds[0].0 < horizon - 32 {
                    let k = st.seconds.partition_point(|(s, _)| *s < horizon);
                    st.seconds.drain(..k);
                }
                1
            }
        };
        st.max_parallel = st.max_parallel.max(here);

        if r.bytes > 0 {
            let end = r.offset + r.bytes;
            let w = self.window_s;
            let before = st
                .open
                .iter()
                .position(|o| o.next == r.offset && (r.start_s - o.tail_arrival).abs() <= w);
            let after = st
                .open
                .iter()
                .position(|o| o.chain.offset == end && (o.head_arrival - r.start_s).abs() <= w);
            match (before, after) {
                (Some(b), Some(a)) if a != b => {
                    // r bridges two chains: b + r + a
                    let tail = st.open.swap_remove(a);
                    let b = if b == st.open.len() { a } else { b };
                    let o = &mut st.open[b];
                    append(o, r);
                    o.chain.bytes += tail.chain.bytes;
                    o.chain.requests += tail.chain.requests;
                    o.chain.start_s = o.chain.start_s.min(tail.chain.start_s);
                    o.chain.end_s = o.chain.end_s.max(tail.chain.end_s);
                    o.next = tail.next;
                    o.tail_arrival = tail.tail_arrival;
                    o.last_arrival = o.last_arrival.max(tail.last_arrival);
                    self.open_chains -= 1;
                }
                (Some(b), _) => append(&mut st.open[b], r),
                (None, Some(a)) => {
                    let o = &mut st.open[a];
                    o.chain.offset = r.offset;
                    o.chain.bytes += r.bytes;
                    o.chain.requests += 1;
                    o.chain.form = r.form;
                    o.chain.start_s = o.chain.start_s.min(r.start_s);
                    o.chain.end_s = o.chain.end_s.max(r.end_s);
                    o.head_arrival = r.start_s;
                    o.last_arrival = o.last_arrival.max(r.start_s);
                }
                (None, None) => {
                    st.open.push(Open {
                        chain: Chain {
                            session: r.session,
                            file: r.file,
                            offset: r.offset,
                            bytes: r.bytes,
                            requests: 1,
                            start_s: r.start_s,
                            end_s: r.end_s,
                            form: r.form,
                            bitrate_kbps: r.bitrate_kbps,
                        },
                        next: end,
                        head_arrival: r.start_s,
                        tail_arrival: r.start_s,
                        last_arrival: r.start_s,
                    });
                    self.open_chains += 1;
                    self.peak_open_chains = self.peak_open_chains.max(self.open_chains);
                }
            }
        }
        self.expire(now_s - self.window_s - self.reorder_s, done, files_done);
    }

    /// Closes the chains whose last arrival is before `before_s` of the
    /// pairs queued before it, and the pairs with nothing left open; a pair
    /// still in use is queued again at its latest arrival.
    fn expire(&mut self, before_s: f64, done: &mut Vec<Chain>, files_done: &mut Vec<FileDone>) {
        while let Some(&Reverse((sec, session, file))) = self.expiry.peek() {
            // every arrival in second `sec` is before `sec + 1`
            if (sec + 1) as f64 > before_s {
                break;
            }
            self.expiry.pop();
            let Some(st) = self.files.get_mut(&(session, file)) else {
                continue;
            };
            let mut closed = 0;
            st.open.retain(|o| {
                if o.last_arrival < before_s {
                    done.push(o.chain.clone());
                    closed += 1;
                    false
                } else {
                    true
                }
            });
            self.open_chains -= closed;
            if st.open.is_empty() && st.last_arrival < before_s {
                files_done.push(FileDone {
                    session,
                    file,
                    max_parallel: st.max_parallel,
                });
                self.files.remove(&(session, file));
            } else {
                // last_arrival >= before_s > sec, so this terminates
                let again = (st.last_arrival.floor() as i64).max(sec + 1);
                self.expiry.push(Reverse((again, session, file)));
            }
        }
    }

    /// Closes every chain whose last arrival is before `before_s`, and every
    /// (session, file) pair with nothing left open.
    fn sweep(&mut self, before_s: f64, done: &mut Vec<Chain>, files_done: &mut Vec<FileDone>) {
        let mut closed = 0;
        self.files.retain(|&(session, file), st| {
            st.open.retain(|o| {
                if o.last_arrival < before_s {
                    done.push(o.chain.clone());
                    closed += 1;
                    false
                } else {
                    true
                }
            });
            if st.open.is_empty() && st.last_arrival < before_s {
                files_done.push(FileDone {
                    session,
                    file,
                    max_parallel: st.max_parallel,
                });
                false
            } else {
                true
            }
        });
        self.open_chains -= closed;
    }

    /// Closes everything (end of the log).
    pub fn finish(&mut self, done: &mut Vec<Chain>, files_done: &mut Vec<FileDone>) {
        self.sweep(f64::INFINITY, done, files_done);
        self.expiry.clear();
    }
}

fn append(o: &mut Open, r: &Request) {
    o.chain.bytes += r.bytes;
    o.chain.requests += 1;
    o.chain.start_s = o.chain.start_s.min(r.start_s);
    o.chain.end_s = o.chain.end_s.max(r.end_s);
    o.next = r.offset + r.bytes;
    o.tail_arrival = r.start_s;
    o.last_arrival = o.last_arrival.max(r.start_s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: f64, session: u64, file: u64, offset: u64, bytes: u64) -> Request {
        Request {
            start_s: t,
            end_s: t + 0.1,
            session,
            file,
            conn: None,
            offset,
            bytes,
            form: Form::Chunk,
            bitrate_kbps: None,
        }
    }

    fn chains(reqs: &[Request]) -> Vec<Chain> {
        let mut d = ChainDetector::new(40.0, 300.0);
        let (mut out, mut files) = (Vec::new(), Vec::new());
        for r in reqs {
            d.push(r, r.end_s, &mut out, &mut files);
        }
        d.finish(&mut out, &mut files);
        out.sort_by_key(|c| (c.session, c.file, c.offset));
        out
    }

    #[test]
    fn adjacent_requests_in_order_form_one_chain() {
        let c = chains(&[
            req(0.0, 1, 1, 0, 100),
            req(5.0, 1, 1, 100, 100),
            req(30.0, 1, 1, 200, 50),
        ]);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].offset, c[0].bytes, c[0].requests), (0, 250, 3));
        assert!((c[0].duration_s() - 30.1).abs() < 1e-9);
    }

    #[test]
    fn out_of_order_adjacent_requests_within_the_window_merge() {
        // the later part arrives first, then the part before it
        let c = chains(&[req(0.0, 1, 1, 100, 100), req(3.0, 1, 1, 0, 100)]);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].offset, c[0].bytes), (0, 200));
    }

    #[test]
    fn interleaved_parallel_requests_merge_through_a_bridge() {
        // three parallel connections: C, A, then B bridging A and C
        let c = chains(&[
            req(1.0, 1, 1, 200, 100),
            req(1.2, 1, 1, 0, 100),
            req(1.4, 1, 1, 100, 100),
        ]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].offset, c[0].bytes, c[0].requests), (0, 300, 3));
    }

    #[test]
    fn a_gap_over_the_window_splits() {
        let c = chains(&[req(0.0, 1, 1, 0, 100), req(40.5, 1, 1, 100, 100)]);
        assert_eq!(c.len(), 2);
        // exactly at the window still joins
        let c = chains(&[req(0.0, 1, 1, 0, 100), req(40.0, 1, 1, 100, 100)]);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn another_file_or_session_splits_and_a_hole_splits() {
        let c = chains(&[
            req(0.0, 1, 1, 0, 100),
            req(1.0, 1, 2, 100, 100),
            req(2.0, 2, 1, 100, 100),
        ]);
        assert_eq!(c.len(), 3);
        let c = chains(&[req(0.0, 1, 1, 0, 100), req(1.0, 1, 1, 101, 100)]);
        assert_eq!(c.len(), 2, "one byte missing between them");
    }

    #[test]
    fn chains_close_as_the_log_moves_on_and_memory_stays_bounded() {
        let mut d = ChainDetector::new(40.0, 60.0);
        let (mut out, mut files) = (Vec::new(), Vec::new());
        // 10,000 sessions one after another, each one chain of 5 requests
        for s in 0..10_000u64 {
            for k in 0..5u64 {
                let t = s as f64 * 10.0 + k as f64;
                d.push(&req(t, s, 7, k * 1000, 1000), t + 0.1, &mut out, &mut files);
            }
        }
        d.finish(&mut out, &mut files);
        assert_eq!(out.len(), 10_000);
        assert!(out.iter().all(|c| c.requests == 5 && c.bytes == 5000));
        // at most (window + reorder) / 10 s sessions' chains open at once
        assert!(d.peak_open_chains() <= 12, "{}", d.peak_open_chains());
        assert_eq!(files.len(), 10_000);
    }

    #[test]
    fn parallel_requests_logged_out_of_arrival_order_count_in_their_second() {
        let mut d = ChainDetector::new(40.0, 300.0);
        let (mut out, mut files) = (Vec::new(), Vec::new());
        // second 12 gets three arrivals, one logged after an arrival in 11
        for (t, off) in [
            (10.1, 0),
            (12.1, 100),
            (11.5, 200),
            (12.5, 300),
            (12.7, 400),
        ] {
            d.push(&req(t, 1, 1, off, 100), t + 1.0, &mut out, &mut files);
        }
        // and 200 seconds of one request a second after it
        for k in 0..200u64 {
            let t = 13.0 + k as f64;
            d.push(&req(t, 1, 1, 500 + 100 * k, 100), t, &mut out, &mut files);
        }
        d.finish(&mut out, &mut files);
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].max_parallel, 3);
    }

    #[test]
    fn parallel_requests_in_one_second_are_counted_per_file() {
        let mut d = ChainDetector::new(40.0, 300.0);
        let (mut out, mut files) = (Vec::new(), Vec::new());
        for (t, off) in [(0.1, 0), (0.2, 100), (0.9, 200), (2.5, 300)] {
            d.push(&req(t, 1, 1, off, 100), t, &mut out, &mut files);
        }
        d.push(&req(0.5, 1, 2, 0, 100), 0.5, &mut out, &mut files);
        d.finish(&mut out, &mut files);
        let mut m: Vec<u32> = files.iter().map(|f| f.max_parallel).collect();
        m.sort();
        assert_eq!(m, vec![1, 3]);
    }
}
