//! Request heads and targets: never panic, and a resolved path stays under the root.
#![no_main]
use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use vodlab_http::server::parse_head;
use vodlab_server::request::resolve_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(head)) = parse_head(data) {
        assert!(head.len <= data.len());
        if let Some(p) = resolve_target(Path::new("/srv/root"), &head.target) {
            assert!(p.starts_with("/srv/root"));
            assert!(!p.components().any(|c| c == Component::ParentDir));
        }
    }
});
