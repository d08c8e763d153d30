//! `vodlab merge`: the results of a run split over processes (`vodlab run
//! --shard I/N`) put back together exactly (docs/scale-out.md; the library
//! reads and merges them: [`vodlab_client::out::shard::dirs`]).

use std::io::Write;
use std::process::ExitCode;

pub use vodlab_client::out::shard::dirs::MergeSettings as MergeArgs;

/// `vodlab merge`: merges, prints the merged summary.
pub fn run(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let merged = vodlab_client::out::shard::dirs::merge_dirs(&a)?;
    let mut out = std::io::stdout().lock();
    out.write_all(merged.table().as_bytes())?;
    writeln!(
        out,
        "  results: {}",
        a.output.join("results.json").display()
    )?;
    if a.strict && !(merged.valid && merged.complete) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
