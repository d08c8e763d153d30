//! A synthetic `vodlab serve` access log for the speed benchmark
//! (`scripts/bench-analyze.sh`): many concurrent sessions reading files in
//! chains of 256 KiB–2 MiB requests with heavy-tailed chain lengths, lines in
//! completion order, as `vodlab serve --access-log` writes them (10 fields).
//!
//! `cargo run --release -p vodlab-analyze --example synth_log -- LINES [CONCURRENT] > big.log`
//!
//! Deterministic (a fixed xorshift seed), so two runs write the same file.

use std::io::{BufWriter, Write};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Session {
    id: u64,
    conn: u64,
    file: String,
    offset: u64,
    left: u64,
    chunk: u64,
    chains_left: u32,
}

const RATES: [&str; 6] = ["v235", "v560", "v1050", "v1750", "v3000", "v5800"];

fn new_chain(rng: &mut Rng, s: &mut Session) {
    let title = (1.0 / (rng.unit() + 1e-4)).min(20_000.0) as u64;
    s.file = format!("/t{:05}/{}.mp4", title, RATES[rng.below(6) as usize]);
    s.offset = if rng.below(4) == 0 {
        0
    } else {
        rng.below(2_000) * 262_144
    };
    // Pareto chain lengths in requests, c about 0.55
    s.left = ((1.0 / (rng.unit() + 1e-9)).powf(1.0 / 0.55) as u64).clamp(1, 5_000);
    s.chunk = 262_144 << rng.below(4);
}

fn new_session(rng: &mut Rng, id: u64, conn: &mut u64) -> Session {
    *conn += 1;
    let mut s = Session {
        id,
        conn: *conn,
        file: String::new(),
        offset: 0,
        left: 0,
        chunk: 0,
        chains_left: 1 + rng.below(8) as u32,
    };
    new_chain(rng, &mut s);
    s
}

fn main() {
    let mut args = std::env::args().skip(1);
    let lines: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: synth_log LINES [CONCURRENT]");
    let concurrent: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut next_id, mut conn) = (1u64, 0u64);
    let mut sessions: Vec<Session> = (0..concurrent)
        .map(|_| {
            next_id += 1;
            new_session(&mut rng, next_id, &mut conn)
        })
        .collect();
    // about 750 requests/s (the thesis's 65 million a day)
    let mut now = 1_795_248_000.0f64;
    let out = std::io::stdout().lock();
    let mut w = BufWriter::with_capacity(1 << 20, out);
    for _ in 0..lines {
        now += rng.unit() * 2.0 / 750.0;
        let k = rng.below(concurrent) as usize;
        let s = &mut sessions[k];
        let service_us = 500 + rng.below(400_000);
        let (status, length) = if rng.below(1_000) == 0 {
            (404, 0)
        } else {
            (206, s.chunk)
        };
        writeln!(
            w,
            "{now:.6} {} {} {} {} {length} {status} {length} {service_us} {}",
            s.conn,
            s.id,
            s.file,
            s.offset,
            if rng.below(3) == 0 { "miss" } else { "hit" }
        )
        .expect("write");
        s.offset += length;
        s.left = s.left.saturating_sub(1);
        if s.left == 0 {
            s.chains_left = s.chains_left.saturating_sub(1);
            if s.chains_left == 0 {
                next_id += 1;
                *s = new_session(&mut rng, next_id, &mut conn);
            } else {
                new_chain(&mut rng, s);
            }
        }
    }
    w.flush().expect("flush");
}
