//! `vodlab report`: results into one self-contained HTML file with SVG
//! figures (the library renders it: [`vodlab_lab::report::render`]).

use std::path::PathBuf;
use std::process::ExitCode;

pub use vodlab_lab::report::ReportArgs;

/// Renders the inputs into a page (used by `report` and `bench`), naming
/// what is left out on stderr.
pub fn render(inputs: &[PathBuf], title: &str, max_dots: usize) -> anyhow::Result<String> {
    Ok(vodlab_lab::report::render(
        inputs,
        title,
        max_dots,
        &mut |w| eprintln!("{w}"),
    )?)
}

/// Runs `vodlab report`: renders the inputs and writes the page to `-o`
/// (report.html in the current directory by default).
pub fn run(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let html = render(&a.inputs, &a.title, a.max_dots)?;
    let out = &a.output;
    vodlab_client::out::atomic::write(out, html.as_bytes())?;
    println!("report: {} ({} KiB)", out.display(), html.len() / 1024);
    Ok(ExitCode::SUCCESS)
}
