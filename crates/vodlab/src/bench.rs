//! `vodlab bench`: the whole method in one command. Builds a small workload,
//! writes its file set to a temporary directory, starts the embedded
//! reference server, runs a short capacity search against it, prints the
//! answer and writes the HTML report. The work is [`vodlab_lab::bench`]'s;
//! this module renders the report, prints and maps the exit status.

use std::path::Path;
use std::process::ExitCode;

use vodlab_lab::bench::{bench_answer, decide, prepare_disk, run_cached, settings_json, Kind};
use vodlab_lab::capacity_run::table;

use crate::capacity::{self, Printer};

pub use vodlab_lab::bench::BenchArgs;

/// Writes `out/report.html` of the results in `out`.
fn report(out: &Path) -> anyhow::Result<()> {
    let html = crate::report::render(&[out.to_path_buf()], "vodlab bench", 20_000)?;
    vodlab_client::out::atomic::write(&out.join("report.html"), html.as_bytes())?;
    Ok(())
}

pub fn run(mut a: BenchArgs) -> anyhow::Result<ExitCode> {
    // bench's own defaults where the user gave none
    let given =
        |flag: &str| std::env::args().any(|x| x == flag || x.starts_with(&format!("{flag}=")));
    if a.search.print_settings {
        println!("{}", settings_json(&a.search, &given));
        return Ok(ExitCode::SUCCESS);
    }
    let mut printer = Printer::new("  ", &a.search);
    let exe = std::env::current_exe()?;
    if decide(&mut a, &given, &mut printer)? == Kind::Disk {
        let mut d = prepare_disk(a, &given, &exe, &mut printer)?;
        let code = crate::compare::run(d.compare.take().expect("a comparison"))?;
        let file = vodlab_lab::CompareFile::read(&d.out.join("compare.json"))?;
        report(&d.out)?;
        println!("{}", d.answer(&file));
        println!(
            "  {:.0} s; results: {}\n  report:  {}",
            d.started.elapsed().as_secs_f64(),
            d.out.join("compare.json").display(),
            d.out.join("report.html").display()
        );
        return Ok(code);
    }
    let done = run_cached(&a, &exe, capacity::interrupter(), &mut printer)?;
    report(&done.out)?;
    print!("{}", table(&done.file));
    println!("{}", bench_answer(&done.file, &a));
    println!(
        "  results: {}\n  report:  {}",
        done.out.join("capacity.json").display(),
        done.out.join("report.html").display()
    );
    let breaches = crate::exit::judge("bench", &a.search.fail_on, &done.file)?;
    if let Some(e) = done.stopped {
        eprintln!("vodlab bench: stopped early: {e}");
        return Ok(ExitCode::from(capacity::stopped_early_status()));
    }
    Ok(crate::exit::of_breaches(&breaches))
}
