//! `vodlab record`: a real player in headless Chromium plays a file set;
//! what it requested becomes a session script (the library records it:
//! [`vodlab_lab::record`]; docs/record.md).

use std::path::Path;
use std::process::ExitCode;

pub use vodlab_lab::record::RecordArgs;
use vodlab_lab::record::RecordObserver;

/// Warnings on stderr.
struct Warn;

impl RecordObserver for Warn {
    fn not_real_media(&mut self, root: &Path) {
        eprintln!(
            "vodlab record: {} has no {}: not a real-media set, the browser may not play it",
            root.display(),
            vodlab_fileset::media::MEDIA_FILE
        );
    }
}

/// Runs `vodlab record`: serve, play, record, convert; prints a summary.
pub fn run(a: RecordArgs) -> anyhow::Result<ExitCode> {
    let rec = vodlab_lab::record::run(&a, &std::env::current_exe()?, &mut Warn)?;
    println!("{}", rec.summary());
    Ok(ExitCode::SUCCESS)
}
