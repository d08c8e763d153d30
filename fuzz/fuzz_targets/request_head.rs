//! Request heads and targets: never panic; a head `check_request` accepts
//! obeys the RFC 9112 framing rules it enforces (one Host on HTTP/1.1, no
//! Content-Length with Transfer-Encoding, one length, origin-form target);
//! and a resolved path stays under the root.
#![no_main]
use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use vodlab_http::server::{check_request, origin_form, parse_head, BodyFraming};
use vodlab_server::request::resolve_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(mut head)) = parse_head(data) {
        assert!(head.len <= data.len());
        let count = |name: &str| head.headers.iter().filter(|(k, _)| k == name).count();
        let (hosts, lengths, codings) = (
            count("host"),
            count("content-length"),
            count("transfer-encoding"),
        );
        let sent = head.target.clone();
        if let Ok(framing) = check_request(&mut head) {
            assert!(hosts <= 1 && (hosts == 1 || !head.http11), "{hosts} Host fields accepted");
            assert!(lengths == 0 || codings == 0, "Content-Length with Transfer-Encoding");
            match framing {
                BodyFraming::Chunked => assert!(head.http11 && codings == 1),
                BodyFraming::Length(_) => assert!(lengths >= 1 && codings == 0),
                BodyFraming::None => assert!(lengths == 0 && codings == 0),
            }
            // absolute form is rewritten, anything else kept as sent
            match origin_form(&sent) {
                Some(o) => assert_eq!(head.target, o),
                None => assert_eq!(head.target, sent),
            }
            assert!(origin_form(&head.target).is_none());
        }
        if let Some(p) = resolve_target(Path::new("/srv/root"), &head.target) {
            assert!(p.starts_with("/srv/root"));
            assert!(!p.components().any(|c| c == Component::ParentDir));
        }
    }
});
