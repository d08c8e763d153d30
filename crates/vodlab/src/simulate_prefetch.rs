//! `vodlab simulate --prefetch`: chapter 5's trace-driven comparison of
//! prefetch policies (docs/simulate.md); the library reads the flags and
//! runs it ([`vodlab_lab::tracesim`]), this prints its progress and table.

use std::io::Write;
use std::path::Path;

pub use vodlab_lab::tracesim::PrefetchSimArgs;
use vodlab_lab::tracesim::{self, TraceObserver};

/// Progress of a long trace on stderr.
struct Progress;

impl TraceObserver for Progress {
    fn lines_read(&mut self, lines: u64) {
        eprintln!("vodlab simulate: {lines} lines read");
    }
    fn simulating(&mut self, chains: usize, policies: usize) {
        if chains > 1_000_000 {
            eprintln!("vodlab simulate: {chains} chains; running {policies} policies");
        }
    }
}

/// `--replay-events FILE --policy SPEC`: replays a live server's events
/// (see [`vodlab_prefetch::events`]); true when every decision was alike.
pub fn replay_events(a: &PrefetchSimArgs, file: &Path) -> anyhow::Result<bool> {
    let spec = a.replay_policy()?;
    let (n, r) = tracesim::replay_events(file, &spec)?;
    let text = tracesim::replay_text(&file.display().to_string(), n, &spec, &r);
    std::io::stdout().lock().write_all(text.as_bytes())?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        vodlab_client::out::atomic::write(
            &dir.join("replay.json"),
            (serde_json::to_string_pretty(&r)? + "\n").as_bytes(),
        )?;
    }
    Ok(r.mismatches.is_empty())
}

/// Runs the prefetch mode; returns the rows printed.
pub fn run(a: &PrefetchSimArgs) -> anyhow::Result<Vec<tracesim::Row>> {
    let s = a.settings()?;
    let run = tracesim::run(&s, &mut Progress)?;
    std::io::stdout()
        .lock()
        .write_all(run.table(&s).as_bytes())?;
    if let Some(dir) = &a.out {
        tracesim::write_results(dir, &run.rows)?;
    }
    Ok(run.rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use vodlab_server::PolicySpec;

    #[derive(Parser)]
    struct Sim {
        #[command(flatten)]
        a: PrefetchSimArgs,
    }

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        a: crate::serve::ServeArgs,
    }

    /// The bytes `vodlab simulate --prefetch --policy fixed:SIZE` runs.
    fn simulated(size: &str) -> u64 {
        let sim = Sim::try_parse_from(["simulate", "--policy", &format!("fixed:{size}")])
            .expect("simulate flags");
        let p = sim.a.plan().expect("plan");
        assert_eq!(p.len(), 1);
        p[0].size
    }

    /// The bytes `vodlab serve --prefetch SIZE` and `--prefetch-policy
    /// fixed:SIZE` prefetch.
    fn served(size: &str) -> (u64, u64) {
        let fixed = |args: &[&str]| {
            let s = Serve::try_parse_from(["serve", "--root", "/srv"].iter().chain(args))
                .expect("serve flags");
            match s.a.config().expect("config").prefetch_policy {
                PolicySpec::Fixed(n) => n,
                p => panic!("{p}"),
            }
        };
        (
            fixed(&["--prefetch", size]),
            fixed(&["--prefetch-policy", &format!("fixed:{size}")]),
        )
    }

    #[test]
    fn serve_and_simulate_read_a_fixed_size_as_the_same_bytes() {
        for (size, bytes) in [
            ("4M", 4 << 20),
            ("4MiB", 4 << 20),
            ("4MB", 4_000_000),
            ("1.5M", 3 << 19),
            ("256k", 256 << 10),
            ("256kB", 256_000),
            ("65536", 65536),
        ] {
            assert_eq!(simulated(size), bytes, "simulate fixed:{size}");
            assert_eq!(served(size), (bytes, bytes), "serve fixed:{size}");
        }
    }
}
