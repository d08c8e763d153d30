//! `vodlab simulate`: run the client's own player core in virtual time
//! (the library runs both modes: [`vodlab_lab::simulate`] for `--player`,
//! [`vodlab_lab::tracesim`] for `--prefetch`, printed by
//! [`crate::simulate_prefetch`]).

use std::io::Write;
use std::process::ExitCode;

pub use vodlab_lab::simulate::SimulateArgs;

/// Runs `vodlab simulate`.
pub fn run(a: SimulateArgs) -> anyhow::Result<ExitCode> {
    if a.prefetch {
        if let Some(f) = &a.prefetch_args.replay_events {
            let alike = crate::simulate_prefetch::replay_events(&a.prefetch_args, f)?;
            return Ok(if alike {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        crate::simulate_prefetch::run(&a.prefetch_args)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = vodlab_lab::simulate::run_player(&a)?;
    let mut w = std::io::BufWriter::new(std::io::stdout().lock());
    r.write_lines(&mut w, a.summary_only)?;
    w.flush()?;
    if let Some(p) = &a.p1203 {
        r.write_p1203(p)?;
    }
    Ok(ExitCode::SUCCESS)
}
