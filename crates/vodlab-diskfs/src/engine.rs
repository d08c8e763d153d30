//! Holding replies until the modelled drive has served their reads.
//!
//! [`Pending`] is the logic without a clock: a job is a set of drive
//! requests plus an action; the action is handed back once every request of
//! the job has completed at or before `now`. [`Engine`] drives a `Pending`
//! from the wall clock: callers submit from any thread (the FUSE threads),
//! and a timer thread sleeps until the model's next event and runs the
//! actions that became due, so no FUSE thread ever waits for the model and
//! concurrent reads sit in the model's queue together (where the elevator
//! sees them).
//!
//! Time: `now` is the wall time since the engine started. The model applies
//! time compression itself (model time = now × k; completions come back as
//! model time / k), so the engine replies at wall time = model completion
//! time / k.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vodlab_disk::{Disk, DiskError, DiskStats, MicrosHistogram, Request, Token};

/// A job waiting for the drive: requests still to complete, the latest
/// completion time so far (wall) and the action.
#[derive(Debug)]
struct Job<A> {
    left: usize,
    finished: Duration,
    action: A,
}

/// Jobs waiting for the drive, without a clock.
#[derive(Debug)]
pub struct Pending<A> {
    disk: Disk,
    jobs: HashMap<u64, Job<A>>,
    tokens: HashMap<Token, u64>,
    next_job: u64,
    late: MicrosHistogram,
}

impl<A> Pending<A> {
    /// No jobs, on this drive.
    pub fn new(disk: Disk) -> Pending<A> {
        Pending {
            disk,
            jobs: HashMap::new(),
            tokens: HashMap::new(),
            next_job: 0,
            late: MicrosHistogram::default(),
        }
    }

    /// How late each job's action was handed back after the drive had
    /// served its last request, in **model time** (wall lateness × k, as
    /// the drive's own figures): the time the emulation added to the
    /// drive's response (a timer woken late, reply bytes made after the
    /// drive finished). Small against the drive's response time while the
    /// machine keeps up with the time compression.
    pub fn late(&self) -> &MicrosHistogram {
        &self.late
    }

    /// The drive.
    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// Jobs not yet due.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when no job waits.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Submits the requests of one job at `now`. A job without requests is
    /// due at once (returned in `ready`). On a drive error nothing of the job
    /// stays queued and the action comes back with the error.
    pub fn submit(
        &mut self,
        now: Duration,
        reqs: &[Request],
        action: A,
        ready: &mut Vec<A>,
    ) -> Result<(), (DiskError, A)> {
        if reqs.is_empty() {
            ready.push(action);
            return Ok(());
        }
        // validate every request first so a job is queued whole or not at all
        let cap = self.disk.capacity();
        if let Some(r) = reqs
            .iter()
            .find(|r| r.len == 0 || r.offset.checked_add(r.len).is_none_or(|e| e > cap))
        {
            let e = DiskError::OutOfRange {
                offset: r.offset,
                len: r.len,
                capacity: cap,
            };
            return Err((e, action));
        }
        let id = self.next_job;
        self.next_job += 1;
        for r in reqs {
            match self.disk.submit(now, *r) {
                Ok(t) => {
                    self.tokens.insert(t, id);
                }
                Err(e) => {
                    // only a clock going backwards gets here; the requests
                    // already queued complete into a job that is gone
                    self.tokens.retain(|_, j| *j != id);
                    return Err((e, action));
                }
            }
        }
        self.jobs.insert(
            id,
            Job {
                left: reqs.len(),
                finished: Duration::ZERO,
                action,
            },
        );
        Ok(())
    }

    /// Moves the actions of every job complete at or before `now` into
    /// `ready`, in order of completion.
    pub fn due(&mut self, now: Duration, ready: &mut Vec<A>) -> Result<(), DiskError> {
        while let Some(c) = self.disk.poll_completion(now)? {
            let Some(id) = self.tokens.remove(&c.token) else {
                continue;
            };
            let done = match self.jobs.get_mut(&id) {
                Some(j) => {
                    j.left -= 1;
                    j.finished = j.finished.max(c.finished);
                    j.left == 0
                }
                None => false,
            };
            if done {
                let j = self.jobs.remove(&id).expect("job");
                let k = self.disk.options().time_compression;
                self.late
                    .record_ns(now.saturating_sub(j.finished).as_nanos() as f64 * k);
                ready.push(j.action);
            }
        }
        Ok(())
    }

    /// When to call [`Pending::due`] next (wall time since the epoch);
    /// `None` when the drive is idle.
    pub fn next_wake(&self) -> Option<Duration> {
        self.disk.next_event_time()
    }

    /// The drive's statistics as of `now`.
    pub fn stats(&mut self, now: Duration) -> Result<DiskStats, DiskError> {
        self.disk.advance_to(now)?;
        Ok(self.disk.stats())
    }
}

/// What the engine runs when a job is due: `Ok` once the drive has served
/// it, `Err` when the drive refused it.
pub type Action = Box<dyn FnOnce(Result<(), DiskError>) + Send>;

struct State {
    pending: Pending<Action>,
    /// When the timer thread plans to wake (None: waiting for a signal).
    timer_at: Option<Duration>,
    /// The timer thread waits for a signal with nothing to do (tests).
    parked: bool,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    epoch: Instant,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A [`Pending`] driven by the wall clock and a timer thread.
pub struct Engine {
    shared: Arc<Shared>,
    timer: Mutex<Option<JoinHandle<()>>>,
}

impl Engine {
    /// Starts the timer thread; wall time 0 is now.
    pub fn start(disk: Disk) -> std::io::Result<Engine> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: Pending::new(disk),
                timer_at: None,
                parked: false,
                shutdown: false,
            }),
            cv: Condvar::new(),
            epoch: Instant::now(),
        });
        let s = shared.clone();
        let timer = std::thread::Builder::new()
            .name("vodlab-disk-timer".into())
            .spawn(move || timer_loop(&s))?;
        Ok(Engine {
            shared,
            timer: Mutex::new(Some(timer)),
        })
    }

    /// Wall time since the engine started.
    pub fn now(&self) -> Duration {
        self.shared.epoch.elapsed()
    }

    /// Submits a job; `action` runs (on this thread or the timer's) once the
    /// drive has served every request of it.
    pub fn submit(&self, reqs: &[Request], action: Action) {
        self.submit_inner(reqs, action, true);
    }

    /// Submits a job like [`Engine::submit`] but leaves the timer asleep:
    /// the caller has work to do first (make the reply's bytes) and calls
    /// [`Engine::settle`] after it, which runs the job's action on the
    /// caller's thread if the drive has finished by then and wakes the
    /// timer only if not. When the drive is faster than the bytes (an SSD,
    /// `--zero-time`, high time compression) this saves the timer thread a
    /// wake-up and the reply a hand-over between threads. The model's
    /// times are unchanged: it is polled at the same wall times either way.
    pub fn submit_quiet(&self, reqs: &[Request], action: Action) {
        self.submit_inner(reqs, action, false);
    }

    /// Runs the actions of the jobs the drive has finished by now (on this
    /// thread) and makes sure the timer wakes for the next event.
    pub fn settle(&self) {
        let mut ready = Vec::new();
        {
            let mut g = self.shared.lock();
            let now = self.shared.epoch.elapsed();
            if let Err(e) = g.pending.due(now, &mut ready) {
                debug_assert!(false, "{e}");
            }
            self.wake_timer_if_needed(&g);
        }
        for a in ready {
            a(Ok(()));
        }
    }

    fn wake_timer_if_needed(&self, g: &State) {
        let next = g.pending.next_wake();
        if next.is_some() && g.timer_at.is_none_or(|t| next < Some(t)) {
            self.shared.cv.notify_one();
        }
    }

    fn submit_inner(&self, reqs: &[Request], action: Action, wake: bool) {
        let mut ready = Vec::new();
        let mut failed = None;
        {
            let mut g = self.shared.lock();
            // read the clock under the lock: `now` never goes backwards
            let now = self.shared.epoch.elapsed();
            if let Err((e, a)) = g.pending.submit(now, reqs, action, &mut ready) {
                failed = Some((e, a));
            }
            if let Err(e) = g.pending.due(now, &mut ready) {
                debug_assert!(false, "{e}");
            }
            if wake {
                self.wake_timer_if_needed(&g);
            }
        }
        for a in ready {
            a(Ok(()));
        }
        if let Some((e, a)) = failed {
            a(Err(e));
        }
    }

    /// How late replies were after the drive had served them, model time
    /// ([`Pending::late`]).
    pub fn late(&self) -> MicrosHistogram {
        self.shared.lock().pending.late().clone()
    }

    /// The drive's statistics now.
    pub fn stats(&self) -> DiskStats {
        let mut g = self.shared.lock();
        let now = self.shared.epoch.elapsed();
        g.pending
            .stats(now)
            .unwrap_or_else(|_| g.pending.disk().stats())
    }

    /// True while the timer thread waits for a signal with nothing to do.
    pub fn timer_parked(&self) -> bool {
        self.shared.lock().parked
    }

    /// Jobs waiting for the drive.
    pub fn waiting(&self) -> usize {
        self.shared.lock().pending.len()
    }

    /// Stops the timer thread. Jobs still waiting are dropped (a dropped
    /// FUSE reply answers the kernel with an error).
    pub fn stop(&self) {
        self.shared.lock().shutdown = true;
        self.shared.cv.notify_all();
        let t = self.timer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn timer_loop(s: &Shared) {
    // wake within a microsecond or so of the deadline: with time compression
    // a transfer lasts tens of µs and the default 50 µs slack would be seen
    // SAFETY: prctl on the calling thread with an integer argument
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut ready: Vec<Action> = Vec::new();
    let mut g = s.lock();
    loop {
        if g.shutdown {
            g.pending.jobs.clear();
            return;
        }
        let now = s.epoch.elapsed();
        if let Err(e) = g.pending.due(now, &mut ready) {
            debug_assert!(false, "{e}");
        }
        let next = g.pending.next_wake();
        g.timer_at = next;
        if !ready.is_empty() {
            drop(g);
            for a in ready.drain(..) {
                a(Ok(()));
            }
            g = s.lock();
            continue;
        }
        g = match next {
            None => {
                g.parked = true;
                let mut g = s.cv.wait(g).unwrap_or_else(|p| p.into_inner());
                g.parked = false;
                g
            }
            Some(t) if t > now => {
                s.cv.wait_timeout(g, t - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
            Some(_) => g,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vodlab_disk::{profile, DiskOptions, Scheduler};

    fn disk(name: &str, k: f64) -> Disk {
        let p = profile::builtin(name).unwrap();
        Disk::new(
            &p,
            DiskOptions {
                scheduler: Scheduler::CLook,
                time_compression: k,
                seed: 1,
                rotation: None,
            },
        )
        .unwrap()
    }

    /// The lateness figure is the time between the model's completion of
    /// a job's last request and the `due` call that hands the job back,
    /// × k: 0 when polled at the completion, 5 ms × k when polled 5 ms
    /// (wall) after it.
    #[test]
    fn a_reply_handed_back_after_the_drive_finished_is_counted_late_in_model_time() {
        for k in [1.0, 4.0] {
            let req = [Request::new(1 << 30, 64 << 10)];
            // polled at each of the model's events: handed back on time
            let mut on_time: Pending<u32> = Pending::new(disk("hitachi-5k3000", k));
            let mut ready = Vec::new();
            on_time.submit(Duration::ZERO, &req, 1, &mut ready).unwrap();
            let mut done = Duration::ZERO;
            while ready.is_empty() {
                done = on_time.next_wake().expect("busy");
                on_time.due(done, &mut ready).unwrap();
            }
            // the same drive polled 5 ms (wall) after that completion
            let mut late: Pending<u32> = Pending::new(disk("hitachi-5k3000", k));
            late.submit(Duration::ZERO, &req, 2, &mut ready).unwrap();
            late.due(done - Duration::from_micros(1), &mut ready)
                .unwrap();
            assert_eq!(ready, [1], "not due before the completion");
            late.due(done + Duration::from_millis(5), &mut ready)
                .unwrap();
            assert_eq!(ready, [1, 2]);
            // the histogram's floor is 1 µs; 3 significant digits
            let h = &on_time.late().0;
            assert_eq!((h.len(), h.max()), (1, 1), "on time at k = {k}");
            let h = &late.late().0;
            let want = (5_000.0 * k) as u64;
            assert_eq!(h.len(), 1);
            assert!(
                h.max().abs_diff(want) <= want / 500,
                "5 ms late at k = {k}: {} µs",
                h.max()
            );
        }
    }

    #[test]
    fn a_job_is_due_when_its_last_request_completes() {
        let mut p: Pending<u32> = Pending::new(disk("hitachi-5k3000", 1.0));
        let mut ready = Vec::new();
        let t0 = Duration::ZERO;
        let reqs = [
            Request::new(0, 1 << 20),
            Request::new(1 << 40, 1 << 20),
            Request::new(1 << 30, 16 << 10),
        ];
        p.submit(t0, &reqs, 7, &mut ready).unwrap();
        p.submit(t0, &[], 8, &mut ready).unwrap();
        assert_eq!(ready, [8], "a job without requests is due at once");
        ready.clear();
        p.due(t0, &mut ready).unwrap();
        assert!(ready.is_empty());
        // step through the model's events: the job is due exactly when the
        // third completion happens, not before
        let mut events = 0;
        while ready.is_empty() {
            let t = p.next_wake().expect("busy");
            events += 1;
            p.due(t, &mut ready).unwrap();
            assert!(events < 10);
        }
        assert_eq!(ready, [7]);
        assert!(p.is_empty());
        let s = p
            .stats(p.next_wake().unwrap_or(Duration::from_secs(1)))
            .unwrap();
        assert_eq!(s.reads, 3);
    }

    #[test]
    fn a_refused_job_comes_back_whole() {
        let mut p: Pending<&str> = Pending::new(disk("nvme", 1.0));
        let cap = p.disk().capacity();
        let mut ready = Vec::new();
        let r = p.submit(
            Duration::ZERO,
            &[Request::new(0, 4096), Request::new(cap, 4096)],
            "x",
            &mut ready,
        );
        let (e, a) = r.unwrap_err();
        assert_eq!(a, "x");
        assert!(matches!(e, DiskError::OutOfRange { .. }));
        assert_eq!(p.disk().stats().submitted, 0, "nothing was queued");
    }

    /// A drive on which a read takes (next to) no time.
    fn instant_disk() -> Disk {
        let p = vodlab_disk::Profile {
            name: "instant".into(),
            description: String::new(),
            mount_readahead_kib: 128,
            hdd: None,
            ssd: Some(vodlab_disk::SsdParams {
                capacity_bytes: 1 << 40,
                read_latency_us: 0.0,
                bandwidth_mb_s: 1e12,
                parallelism: 64,
            }),
        };
        Disk::new(&p, DiskOptions::default()).unwrap()
    }

    #[test]
    fn a_quiet_job_the_drive_has_finished_runs_on_the_settling_thread() {
        let e = Engine::start(instant_disk()).unwrap();
        // bounded polling until the timer thread has started and sleeps
        let deadline = Instant::now() + Duration::from_secs(10);
        while !e.timer_parked() && Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(e.timer_parked());
        let me = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        e.submit_quiet(
            &[Request::new(0, 1 << 20)],
            Box::new(move |r| tx.send((r.is_ok(), std::thread::current().id())).unwrap()),
        );
        // the read is served within a nanosecond of model time; make sure
        // the engine's clock has passed that (a spin of a few ns, and the
        // timer is asleep: submit_quiet did not wake it)
        let t = e.now();
        while e.now() < t + Duration::from_nanos(10) {}
        e.settle();
        // by the time settle returns the action has run, on this thread
        assert_eq!(rx.try_recv(), Ok((true, me)));
        assert_eq!(e.waiting(), 0);
        e.stop();
    }

    #[test]
    fn settle_wakes_the_timer_for_a_quiet_job_still_in_service() {
        // a 2 MB random read on the 5K3000: ~40 ms of model time, so settle
        // right after the submission finds it unfinished; the timer, woken
        // by settle (submit_quiet did not), must run it
        let e = Engine::start(disk("hitachi-5k3000", 1.0)).unwrap();
        let me = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        e.submit_quiet(
            &[Request::new(1 << 40, 2_000_000)],
            Box::new(move |r| tx.send((r.is_ok(), std::thread::current().id())).unwrap()),
        );
        e.settle();
        let (ok, who) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(ok);
        assert_ne!(who, me, "the timer thread ran it");
        e.stop();
    }

    #[test]
    fn the_engine_replies_after_the_modelled_time() {
        // a 2 MB random read on the 5K3000 takes ~40 ms of model time; at
        // k = 4 about 10 ms of wall time; the reply must not come earlier
        let e = Engine::start(disk("hitachi-5k3000", 4.0)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t0 = e.now();
        e.submit(
            &[Request::new(1 << 40, 2_000_000)],
            Box::new(move |r| tx.send(r.is_ok()).unwrap()),
        );
        assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
        let waited = e.now() - t0;
        let s = e.stats();
        let served_ns = s.service_us.0.max() as f64 * 1e3 / 4.0;
        assert!(
            waited.as_nanos() as f64 >= served_ns * 0.99,
            "replied after {waited:?}, the model served it in {served_ns} ns wall"
        );
        assert_eq!(e.waiting(), 0);
        e.stop();
    }
}
