//! Range headers: never panic; resolved ranges lie inside the file, are
//! disjoint and ordered, never more than MAX_RANGES, never the file twice.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vodlab_server::range::{parse, resolve, Resolved, MAX_RANGES};

fuzz_target!(|input: (u32, &str)| {
    let (size, header) = (input.0 as u64, input.1);
    if let Some(specs) = parse(header) {
        match resolve(&specs, size) {
            Resolved::Single(a, b) => assert!(a <= b && b < size),
            Resolved::Multi(v) => {
                assert!(v.len() >= 2 && v.len() <= MAX_RANGES);
                for w in v.windows(2) {
                    assert!(w[0].1 + 1 < w[1].0);
                }
                assert!(v.iter().map(|(a, b)| b - a + 1).sum::<u64>() < size);
            }
            Resolved::Full | Resolved::Unsatisfiable => {}
        }
    }
});
