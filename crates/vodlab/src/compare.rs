//! `vodlab compare`: one workload, several servers, each in the same box and
//! from a cold cache; a capacity search per server plus the sequential-read
//! bound, and the thesis's comparison table (docs/experiments.md). A row is
//! a server or a configuration of `vodlab serve` (`vodlab-asap:fixed:2M`),
//! and every server listens for the comparison's `--protocol`. The work is
//! [`vodlab_lab::compare::Compare`]'s; this module prints.

use std::process::ExitCode;

use vodlab_lab::compare::{breaches, Compare, CompareObserver};

use crate::capacity::Printer;

pub use vodlab_lab::compare::CompareArgs;

impl CompareObserver for Printer {
    fn server(&mut self, label: &str) {
        self.label = format!("  {label:<15} ");
    }
}

pub fn run(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let cmp = Compare::check(a)?;
    let a = cmp.args();
    let (_, catalog) = crate::fileset::load(&a.workload)?;
    let rules = a.search.fail_on.clone();
    let mut printer = Printer::new("", &a.search);
    let exe = std::env::current_exe()?;
    let done = cmp.run(&catalog, &exe, &crate::capacity::interrupter, &mut printer)?;
    print!("{}", done.text);
    println!("  results: {}", done.out.join("compare.json").display());
    // --fail-on over each server's row that ran
    let breaches = breaches(&done.file, &rules)?;
    crate::exit::announce("compare", &breaches);
    Ok(crate::exit::of_breaches(&breaches))
}
