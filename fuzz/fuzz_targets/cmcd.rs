//! CMCD and CMSD: arbitrary bytes fed to every parser (the four CMCD
//! headers, the CMCD query parameter, a whole request, CMSD-Static and
//! CMSD-Dynamic) never panic; what a lenient parser makes of them encodes
//! and parses back to the same value (`v=2` added for version-2 keys);
//! what a strict parser accepts is what the lenient one reads, and
//! round-trips strictly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vodlab_cmcd::cmsd::{CmsdDynamic, CmsdStatic};
use vodlab_cmcd::{Cmcd, Header};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();

    // one list
    let c = Cmcd::parse(text);
    assert_eq!(Cmcd::parse(&c.to_list()), c.clone().versioned());
    assert_eq!(Cmcd::try_parse(&c.to_list()), Ok(c.clone().versioned()));
    if let Ok(strict) = Cmcd::try_parse(text) {
        assert_eq!(strict, c);
    }

    // the four headers: the input's lines, in the order Object, Request,
    // Status, Session
    let lines: Vec<&str> = text.split('\n').collect();
    let header = |name: &str| {
        Header::ALL
            .iter()
            .position(|h| h.lower() == name)
            .and_then(|i| lines.get(i).copied())
    };
    let c = Cmcd::from_headers(header);
    let sent = c.clone().versioned();
    let encoded: Vec<(&str, String)> = c
        .to_headers()
        .into_iter()
        .map(|(h, v)| (h.lower(), v))
        .collect();
    let back = |name: &str| {
        encoded
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(Cmcd::from_headers(back), sent);
    assert_eq!(Cmcd::try_from_headers(back), Ok(sent.clone()));
    if let Ok(strict) = Cmcd::try_from_headers(header) {
        assert_eq!(strict, c);
    }

    // the query, and a whole request (the input as its target, its lines
    // as the headers)
    let c = Cmcd::from_query(text);
    assert_eq!(Cmcd::from_query(&c.to_query()), c.clone().versioned());
    if let Ok(strict) = Cmcd::try_from_query(text) {
        assert_eq!(strict, c);
    }
    let _ = Cmcd::from_request(text, header);

    // CMSD
    let s = CmsdStatic::parse(text);
    assert_eq!(CmsdStatic::parse(&s.encode()), s);
    assert_eq!(CmsdStatic::try_parse(&s.encode()), Ok(s.clone()));
    if let Ok(strict) = CmsdStatic::try_parse(text) {
        assert_eq!(strict, s);
    }
    let d = CmsdDynamic::parse(text);
    assert_eq!(CmsdDynamic::parse(&d.encode()), d);
    assert_eq!(CmsdDynamic::try_parse(&d.encode()), Ok(d.clone()));
    if let Ok(strict) = CmsdDynamic::try_parse(text) {
        assert_eq!(strict, d);
    }
});
