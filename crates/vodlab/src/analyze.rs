//! `vodlab analyze`: sessions, chains and phases from access logs (thesis
//! chapter 5; docs/analyze.md); the library streams the logs
//! ([`vodlab_analyze::logs`]), this prints.

use std::process::ExitCode;

pub use vodlab_analyze::logs::AnalyzeArgs;
use vodlab_analyze::logs::AnalyzeObserver;

/// Unreadable lines on stderr.
struct Stderr;

impl AnalyzeObserver for Stderr {
    fn unreadable(&mut self, message: &str) {
        eprintln!("{message}");
    }
}

/// Runs `vodlab analyze`.
pub fn run(a: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    if a.print_nginx_format {
        println!("{}", vodlab_analyze::parse::NGINX_LOG_FORMAT);
        return Ok(ExitCode::SUCCESS);
    }
    let r = vodlab_analyze::logs::run(&a, &mut Stderr)?;
    print!("{}", r.text);
    if let Some(dir) = &a.output {
        r.write(dir)?;
    }
    Ok(ExitCode::SUCCESS)
}
