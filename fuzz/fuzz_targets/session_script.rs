//! Session scripts: never panic; what parses writes back and re-parses to the same model.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vodlab_workload::script::{parse_script, write_vodlab};

fuzz_target!(|text: &str| {
    if let Ok(script) = parse_script(text) {
        let again = parse_script(&write_vodlab(&script)).expect("written scripts parse");
        assert_eq!(again, script);
    }
});
