//! `vodlab`: a laboratory for HTTP video-on-demand delivery.

use std::process::ExitCode;

mod analyze;
mod bench;
mod boxcmd;
mod capacity;
mod cli;
mod compare;
mod disk;
mod fileset;
mod gen;
mod k8s;
mod lab;
mod merge;
mod record;
mod report;
mod run;
mod script;
mod serve;
mod simulate;
mod simulate_disk;
mod simulate_prefetch;

fn main() -> ExitCode {
    let args = <cli::Cli as clap::Parser>::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("vodlab: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
