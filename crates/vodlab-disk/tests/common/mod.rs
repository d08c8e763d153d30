//! Helpers shared by the model tests: drive a `Disk` synchronously in
//! virtual time.
#![allow(dead_code)]

use std::time::Duration;

use vodlab_disk::{Completion, Disk, Request};

/// Submits `req` at `now` and advances virtual time until it completes;
/// returns its completion (nothing else may be outstanding).
pub fn read_sync(disk: &mut Disk, now: Duration, req: Request) -> Completion {
    let token = disk.submit(now, req).expect("valid request");
    let mut t = now;
    loop {
        while let Some(c) = disk.poll_completion(t).expect("time moves forward") {
            if c.token == token {
                return c;
            }
        }
        t = disk
            .next_event_time()
            .expect("something outstanding")
            .max(t);
    }
}

/// Runs every submitted request to completion, returning completions in
/// completion order, starting at `now`.
pub fn drain(disk: &mut Disk, now: Duration) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut t = now;
    loop {
        while let Some(c) = disk.poll_completion(t).expect("time moves forward") {
            out.push(c);
        }
        match disk.next_event_time() {
            Some(n) => t = n.max(t),
            None => return out,
        }
    }
}
