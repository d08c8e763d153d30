//! `vodlab`: a laboratory for HTTP video-on-demand delivery.

use std::process::ExitCode;

mod analyze;
mod bench;
mod boxcmd;
mod capacity;
mod cli;
mod compare;
mod disk;
mod exit;
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
mod simulate_prefetch;

fn main() -> ExitCode {
    let args = <cli::Cli as clap::Parser>::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("vodlab: error: {}", error_text(&e));
            ExitCode::from(exit::status_of(&e))
        }
    }
}

/// `e` and its causes joined by ": ", as `{e:#}` prints them, but with a
/// cause left out when the text before it already holds it: many errors'
/// messages embed their source (`#[error("{path}: {source}")]`, or a context
/// formatted from the error it wraps) and also chain it, which `{e:#}` would
/// print twice.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if text.is_empty() {
            text = s;
        } else if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
    }
    text
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::error_text;
    use anyhow::Context;

    /// What `#[error("{path}: {source}")]` with a `source` field derives.
    #[derive(Debug)]
    struct Embeds {
        path: String,
        source: std::io::Error,
    }

    impl std::fmt::Display for Embeds {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Embeds {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    #[test]
    fn a_source_embedded_in_its_message_is_printed_once() {
        let io = not_found().to_string();
        let e = Err::<(), _>(Embeds {
            path: "x.json".into(),
            source: not_found(),
        })
        .context("reading x.json")
        .unwrap_err();
        // {:#} repeats it
        assert_eq!(format!("{e:#}").matches(&io).count(), 2);
        let t = error_text(&e);
        assert_eq!(t, format!("reading x.json: x.json: {io}"));
        assert_eq!(t.matches(&io).count(), 1);
    }

    #[test]
    fn causes_not_in_the_message_are_all_printed() {
        let e = Err::<(), _>(not_found())
            .context("reading x.json")
            .context("loading the workload")
            .unwrap_err();
        assert_eq!(error_text(&e), format!("{e:#}"));
        assert!(error_text(&e).ends_with(&not_found().to_string()));
    }
}
