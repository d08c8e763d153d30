//! `vodlab gen`: the settings and the work are the library's
//! ([`vodlab_workload::gen`]); this lists presets, times and prints.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

pub use vodlab_workload::gen::GenArgs;
use vodlab_workload::gen::{generate, spec, stats_table, unmeasured_shards};
use vodlab_workload::presets;

pub fn run(a: GenArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if a.list_presets {
        for p in presets::PRESETS {
            writeln!(out, "{:<24} {}", p.name, p.summary)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = &a.show_preset {
        presets::load(name)?;
        out.write_all(presets::source(name).expect("checked").as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    if a.check {
        let (spec, _) = spec(&a)?;
        writeln!(
            out,
            "workload {} (seed {}) is valid: {} sessions of {} titles in {} script file(s) of up to {} sessions",
            spec.name,
            spec.measurement.seed,
            spec.sessions.count,
            spec.catalog.titles,
            spec.shard_count(),
            spec.sessions.count.div_ceil(spec.shard_count())
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let g = generate(&a)?;
    let elapsed = started.elapsed();
    if let Some((per_shard, ramp)) = unmeasured_shards(&g.spec) {
        eprintln!(
            "vodlab: warning: each shard has about {per_shard} sessions but ramp-up + ramp-down exclude {ramp}: \
             no session would be measured; use --scale instead of --sessions, or fewer --shards"
        );
    }
    if a.json {
        serde_json::to_writer_pretty(&mut out, &g.workload.stats)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "workload {} (seed {}) written to {} in {:.0} ms: {} script file(s)",
        g.spec.name,
        g.spec.measurement.seed,
        a.output.as_ref().expect("clap requires -o").display(),
        elapsed.as_secs_f64() * 1000.0,
        g.manifest.shards.len()
    )?;
    write!(out, "{}", stats_table(&g.workload.stats))?;
    if let Some(m) = &g.workload.catalog.manifests {
        let kinds: Vec<&str> = [(m.dash, "a DASH MPD"), (m.hls, "HLS playlists")]
            .iter()
            .filter(|k| k.0)
            .map(|k| k.1)
            .collect();
        writeln!(
            out,
            "  streaming manifests: {} per title and a {} B init segment per representation, written by `vodlab fileset create` (docs/formats.md)",
            kinds.join(" and "),
            m.init_bytes
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
